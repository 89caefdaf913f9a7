// Session affinity by client IP (a Service's sessionAffinity: ClientIP): the
// backend a client's last connection to a frontend went to, and when it was
// last used, so that its next connection within the timeout goes there too.
// Once the timeout passes, the entry no longer counts and the next
// connection is balanced like any other (kube-proxy's behaviour, which the
// upstream affinity-timeout e2e case checks).
//
// Bounded and preallocated: 4-way buckets; recording into a full bucket
// replaces its least recently used entry (affinity is a preference: losing
// one costs a client its stickiness, never a connection). Any thread; each
// bucket stripe has its spinlock, held for a few dozen instructions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

namespace dpu::conntrack {

class Affinity {
 public:
  explicit Affinity(uint32_t capacity);
  ~Affinity();
  Affinity(const Affinity&) = delete;
  Affinity& operator=(const Affinity&) = delete;

  struct Target {
    std::array<uint8_t, 16> ip{};
    uint16_t port = 0;
  };
  // The backend recorded for (frontend, client), used within `timeout_ms` of now_ms.
  bool find(uint64_t frontend, const std::array<uint8_t, 16>& client, uint64_t now_ms, uint32_t timeout_ms,
            Target& out) const;
  // Records (or refreshes) the client's backend.
  void record(uint64_t frontend, const std::array<uint8_t, 16>& client, const Target& target, uint64_t now_ms);
  uint32_t capacity() const { return buckets_ * kWays; }

 private:
  static constexpr uint32_t kWays = 4;
  struct Entry;
  struct Bucket;
  uint32_t bucketOf(uint64_t frontend, const std::array<uint8_t, 16>& client) const;

  uint32_t buckets_;
  std::unique_ptr<Bucket[]> table_;
};

}  // namespace dpu::conntrack
