// Client-IP affinity (affinity.h): set-associative, least recently used out.
#include "conntrack/affinity.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace dpu::conntrack {

struct Affinity::Entry {
  uint64_t frontend = 0;
  std::array<uint8_t, 16> client{};
  Target target;
  uint64_t used_ms = 0;
  bool used = false;
};

struct Affinity::Bucket {
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  Entry ways[kWays];
  void acquire() const {
    while (const_cast<std::atomic_flag&>(lock).test_and_set(std::memory_order_acquire)) {
    }
  }
  void release() const { const_cast<std::atomic_flag&>(lock).clear(std::memory_order_release); }
};

Affinity::Affinity(uint32_t capacity)
    : buckets_(std::bit_ceil(std::max<uint32_t>(capacity / kWays, 1))), table_(std::make_unique<Bucket[]>(buckets_)) {}

Affinity::~Affinity() = default;

uint32_t Affinity::bucketOf(uint64_t frontend, const std::array<uint8_t, 16>& client) const {
  uint64_t a, b;
  std::memcpy(&a, client.data(), 8);
  std::memcpy(&b, client.data() + 8, 8);
  uint64_t h = (frontend ^ a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full) * 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<uint32_t>(h) & (buckets_ - 1);
}

bool Affinity::find(uint64_t frontend, const std::array<uint8_t, 16>& client, uint64_t now_ms, uint32_t timeout_ms,
                    Target& out) const {
  const Bucket& bk = table_[bucketOf(frontend, client)];
  bk.acquire();
  bool found = false;
  for (const Entry& e : bk.ways) {
    if (e.used && e.frontend == frontend && e.client == client && now_ms <= e.used_ms + timeout_ms) {
      out = e.target;
      found = true;
      break;
    }
  }
  bk.release();
  return found;
}

void Affinity::record(uint64_t frontend, const std::array<uint8_t, 16>& client, const Target& target,
                      uint64_t now_ms) {
  Bucket& bk = table_[bucketOf(frontend, client)];
  bk.acquire();
  Entry* slot = nullptr;
  for (Entry& e : bk.ways) {
    if (e.used && e.frontend == frontend && e.client == client) {
      slot = &e;
      break;
    }
  }
  if (slot == nullptr) {
    slot = &bk.ways[0];
    for (Entry& e : bk.ways) {
      if (!e.used) {
        slot = &e;
        break;
      }
      if (e.used_ms < slot->used_ms) slot = &e;
    }
  }
  slot->frontend = frontend;
  slot->client = client;
  slot->target = target;
  slot->used_ms = now_ms;
  slot->used = true;
  bk.release();
}

}  // namespace dpu::conntrack
