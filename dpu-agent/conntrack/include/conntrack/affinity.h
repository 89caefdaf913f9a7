// Session affinity by client IP (a Service's sessionAffinity: ClientIP): the
// backend a client's last connection to a frontend went to, and when it was
// last used, so that its next connection within the timeout goes there too.
// Once the timeout passes, the entry no longer counts and the next
// connection is balanced like any other (kube-proxy's behaviour, which the
// upstream affinity-timeout e2e case checks).
//
// Bounded and preallocated: 4-way buckets; recording into a full bucket
// replaces its least recently used entry (affinity is a preference: losing
// one costs a client its stickiness, never a connection). Any thread; the
// buckets are guarded by striped spinlocks, held for a few dozen
// instructions.
//
// Restarts: opened on a file (openPersistent), the entries live there
// (common/persistent_pages.h) and the next process of the same boot takes
// them over, so a client keeps its backend across a dataplane restart — its
// next connection, and a mid-stream packet of a connection the affinity
// placed, which the restarted dataplane picks up loose (conntrack.h). The
// locks are the process's own, never in the file.
//
// The bucket hash is keyed (common/keyed_hash.h), so that no sender can pick
// client addresses that share one bucket and evict the clients there; a
// persistent table keeps its seed in its file, with the entries it placed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/keyed_hash.h"
#include "common/persistent_pages.h"
#include "common/result.h"
#include "common/zeroed_pages.h"

namespace dpu::conntrack {

class Affinity {
 public:
  explicit Affinity(uint32_t capacity);
  // The table in the file `path`; adopted() when it took over a previous
  // process's entries. A file this boot wrote for another capacity is read
  // first and its entries carried over (resizedFrom()). The error names the
  // file and what failed.
  static Result<std::unique_ptr<Affinity>> openPersistent(uint32_t capacity, const std::string& path);
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
  bool adopted() const { return persist_ != nullptr && persist_->adopted(); }
  // Carried over from a table of another capacity: that capacity (0: none),
  // and how many clients' entries came over.
  uint32_t resizedFrom() const { return resized_from_; }
  uint32_t carriedOver() const { return carried_over_; }
  std::string persistNote() const { return persist_ != nullptr ? persist_->freshReason() : std::string(); }
  // The bucket (of capacity() / 4) that (frontend, client) lives in, as this
  // table's keyed hash puts it; for tests.
  uint32_t bucketIndex(uint64_t frontend, const std::array<uint8_t, 16>& client) const;

 private:
  static constexpr uint32_t kWays = 4;
  static constexpr uint32_t kStripes = 1024;
  struct Entry;
  struct Bucket;
  struct Stripe;
  Affinity(uint32_t capacity, std::unique_ptr<PersistentPages> persist);
  static uint32_t bucketCount(uint32_t capacity);
  uint32_t bucketOf(uint64_t frontend, const std::array<uint8_t, 16>& client) const;
  Stripe& stripeOf(uint32_t bucket) const;

  uint32_t buckets_;
  HashKeys keys_{};  // the bucket hash's; a persistent table's seed is in its file
  std::unique_ptr<PersistentPages> persist_;
  ZeroedArray<Bucket> table_mem_;
  Bucket* table_ = nullptr;
  std::unique_ptr<Stripe[]> stripes_;
  uint32_t resized_from_ = 0;
  uint32_t carried_over_ = 0;
};

}  // namespace dpu::conntrack
