// Client-IP affinity (affinity.h): set-associative, least recently used out.
#include "conntrack/affinity.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "open_resizing.h"

namespace dpu::conntrack {

// Zero bytes are an empty entry: the table is zero pages (or a file's holes).
struct Affinity::Entry {
  uint64_t frontend = 0;
  std::array<uint8_t, 16> client{};
  Target target;
  uint64_t used_ms = 0;  // the engine's monotonic clock: comparable across processes of one boot
  bool used = false;
};

struct Affinity::Bucket {
  Entry ways[kWays];
};

struct Affinity::Stripe {
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  char pad[64 - sizeof(std::atomic_flag)];
  void acquire() {
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  void release() { lock.clear(std::memory_order_release); }
};

uint32_t Affinity::bucketCount(uint32_t capacity) { return std::bit_ceil(std::max<uint32_t>(capacity / kWays, 1)); }

Affinity::Affinity(uint32_t capacity) : Affinity(capacity, nullptr) {}

Affinity::Affinity(uint32_t capacity, std::unique_ptr<PersistentPages> persist)
    : buckets_(bucketCount(capacity)), persist_(std::move(persist)), stripes_(std::make_unique<Stripe[]>(kStripes)) {
  static_assert(std::is_trivially_copyable_v<Bucket>, "buckets live in a file across processes");
  uint64_t seed = 0;
  if (persist_ != nullptr) {
    table_ = reinterpret_cast<Bucket*>(persist_->data());
    // The entries stay where their process's keys put them: the keys' seed
    // lives in the file with them (header word 0), drawn when it is fresh.
    std::atomic<uint64_t>& stored = persist_->word(0);
    seed = persist_->adopted() ? stored.load() : 0;
    if (seed == 0) {
      seed = HashKeys::randomSeed() | 1;
      stored.store(seed);
    }
  } else {
    table_mem_ = zeroedArray<Bucket>(buckets_);
    table_ = table_mem_.get();
    seed = HashKeys::randomSeed();
  }
  keys_ = HashKeys::fromSeed(seed);
}

Result<std::unique_ptr<Affinity>> Affinity::openPersistent(uint32_t capacity, const std::string& path) {
  constexpr uint64_t kFormat = 2;  // 2: the bucket hash is keyed, its seed in header word 0
  auto layoutOf = [](uint32_t buckets) { return kFormat << 56 | uint64_t{sizeof(Bucket)} << 40 | buckets; };
  auto open = [&layoutOf](uint64_t buckets, const std::string& file) -> Result<std::unique_ptr<Affinity>> {
    const auto n = static_cast<uint32_t>(buckets);
    auto pages = PersistentPages::open(file, layoutOf(n), sizeof(Bucket) * n);
    if (!pages) return std::move(pages).takeError();
    return std::unique_ptr<Affinity>(new Affinity(n * kWays, std::make_unique<PersistentPages>(std::move(*pages))));
  };
  auto carry = [](Affinity& old, Affinity& fresh) {
    fresh.resized_from_ = old.capacity();
    std::vector<Entry> entries;
    for (uint32_t b = 0; b < old.buckets_; ++b) {
      for (const Entry& e : old.table_[b].ways) {
        if (e.used) entries.push_back(e);
      }
    }
    // Least recently used first: where a bucket of the new table overflows,
    // the clients used last stay.
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used_ms < b.used_ms; });
    for (const Entry& e : entries) fresh.record(e.frontend, e.client, e.target, e.used_ms);
    for (uint32_t b = 0; b < fresh.buckets_; ++b) {
      for (const Entry& e : fresh.table_[b].ways) fresh.carried_over_ += e.used ? 1 : 0;
    }
  };
  const uint32_t buckets = bucketCount(capacity);
  return detail::openResizing<Affinity>(path, layoutOf(buckets), 40, buckets, open, carry);
}

Affinity::~Affinity() = default;

// Keyed (common/keyed_hash.h): a sender of many client addresses (an IPv6
// prefix holds plenty) cannot choose ones that share a bucket and push
// other clients' entries out.
uint32_t Affinity::bucketOf(uint64_t frontend, const std::array<uint8_t, 16>& client) const {
  uint64_t a, b;
  std::memcpy(&a, client.data(), 8);
  std::memcpy(&b, client.data() + 8, 8);
  const uint64_t x = mum(a ^ keys_.word[0], b ^ keys_.word[1]);
  return static_cast<uint32_t>(mum(x ^ keys_.word[2], frontend ^ keys_.seed)) & (buckets_ - 1);
}

uint32_t Affinity::bucketIndex(uint64_t frontend, const std::array<uint8_t, 16>& client) const {
  return bucketOf(frontend, client);
}

Affinity::Stripe& Affinity::stripeOf(uint32_t bucket) const { return stripes_[bucket & (kStripes - 1)]; }

bool Affinity::find(uint64_t frontend, const std::array<uint8_t, 16>& client, uint64_t now_ms, uint32_t timeout_ms,
                    Target& out) const {
  const uint32_t b = bucketOf(frontend, client);
  const Bucket& bk = table_[b];
  Stripe& stripe = stripeOf(b);
  stripe.acquire();
  bool found = false;
  for (const Entry& e : bk.ways) {
    if (e.used && e.frontend == frontend && e.client == client && now_ms <= e.used_ms + timeout_ms) {
      out = e.target;
      found = true;
      break;
    }
  }
  stripe.release();
  return found;
}

void Affinity::record(uint64_t frontend, const std::array<uint8_t, 16>& client, const Target& target,
                      uint64_t now_ms) {
  const uint32_t b = bucketOf(frontend, client);
  Bucket& bk = table_[b];
  Stripe& stripe = stripeOf(b);
  stripe.acquire();
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
  stripe.release();
}

}  // namespace dpu::conntrack
