// The per-lcore flow cache: an exact-match table of flows, 8-way set
// associative. A bucket header (half a cache line) holds the 8 signatures, so
// a lookup reads one header and then only the entry whose signature matches;
// replacement in a full bucket evicts the least recently used way (as DPDK's
// rte_hash signatures and OVS's EMC do, plus LRU). The last-used time lives in
// the entry's hit line, which a hit writes anyway (statistics): the headers
// stay clean, and with many flows a hit dirties one line, not two.
//
// Owned by one lcore, which alone inserts, updates and removes. The control
// thread reads entries concurrently (dump-flows, offload) with seqlock-style
// consistency: flow_id is 0 while an entry is being written and a new, never
// reused, id afterwards (release); a reader that sees the same non-zero id
// before and after copying the entry has a consistent copy.
#pragma once

#include <array>
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "overlay/flow_key.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpu::datapath {

// What the compiled actions do, in order: decap (done before the lookup),
// drop, dec_ttl, set MACs, NAT/ESP hooks, encap (with the MTU check), output.
namespace op {
inline constexpr uint16_t kDrop = 1 << 0;
inline constexpr uint16_t kDecap = 1 << 1;
inline constexpr uint16_t kDecTtl = 1 << 2;
inline constexpr uint16_t kSetEthSrc = 1 << 3;
inline constexpr uint16_t kSetEthDst = 1 << 4;
inline constexpr uint16_t kEncap = 1 << 5;
inline constexpr uint16_t kOutput = 1 << 6;
inline constexpr uint16_t kNat = 1 << 7;  // hook for the services issue: no-op until it fills it
inline constexpr uint16_t kEsp = 1 << 8;  // hook for the IPsec issue: no-op until it fills it
}  // namespace op

// The tunnel part of a packet's match (zero family: not tunnelled).
struct TunnelProbe {
  std::array<uint8_t, 16> remote;
  uint16_t ingress;
  uint16_t egress;
  uint8_t family;
};

// One cached flow: the match (flow key + tunnel metadata), its compiled
// actions, what it depends on, and its statistics, in two cache lines (128
// bytes, so that a hit's two lines are an aligned pair): the key; everything
// a hit reads and writes. The rest of the tunnel match and the install time
// are in the flow's FlowExtra, in a side array (read on a hit only for
// tunnelled packets).
struct alignas(64) FlowEntry {
  // --- line 0 ---
  overlay::FlowKey key;            // in_port = DPDK port, tunnel_id = VNI for decapsulated packets
  // --- line 1 ---
  uint32_t flow_id;                // seqlock and identity; 0 = being written or empty
  uint32_t stamp;                  // snapshot stamp the deps were last checked against
  uint32_t dep_in;                 // dependency ids (snapshot.h); kDepNode when unused
  uint32_t dep_out;
  uint32_t used_ms;                // engine clock at the last hit, ms (wraps; compared by difference)
  uint16_t ops;                    // op::*
  uint16_t out_port;
  uint16_t mtu;                    // encap: largest inner IP packet
  uint16_t encap_sport;            // outer UDP source port (from the inner flow hash)
  uint16_t encap_ingress;          // OVN ingress key (the source port's key)
  uint8_t drop_reason;             // DropReason when ops has kDrop
  uint8_t encap_subnet;            // index of the remote subnet in the node dep_out
  overlay::MacAddress set_src;
  overlay::MacAddress set_dst;
  uint8_t tun_family;              // 0 (not tunnelled), 4 or 6
  uint8_t decap_len;               // outer header bytes stripped (for offload's raw decap)
  uint16_t reserved;
  uint64_t packets;
  uint64_t bytes;

  // The 64-byte key compared inline (a libc memcmp call costs more than the
  // compare): four 16-byte XORs folded into one test with SSE2, else eight words.
  static bool keyEqual(const overlay::FlowKey& a, const overlay::FlowKey& b) {
    const auto* pa = reinterpret_cast<const unsigned char*>(&a);
    const auto* pb = reinterpret_cast<const unsigned char*>(&b);
#if defined(__SSE2__)
    auto x = [pa, pb](unsigned i) {
      return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pa + i)),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + i)));
    };
    const __m128i d = _mm_or_si128(_mm_or_si128(x(0), x(16)), _mm_or_si128(x(32), x(48)));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) == 0xffff;
#endif
    uint64_t diff = 0;
    for (unsigned i = 0; i < sizeof(overlay::FlowKey); i += 8) {
      uint64_t x, y;
      std::memcpy(&x, pa + i, 8);
      std::memcpy(&y, pb + i, 8);
      diff |= x ^ y;
    }
    return diff == 0;
  }
};
static_assert(sizeof(FlowEntry) == 128, "a cached flow's hit path is two cache lines");
static_assert(offsetof(FlowEntry, bytes) + sizeof(uint64_t) == 128, "the hit path's fields share line 1");
static_assert(offsetof(FlowEntry, used_ms) >= 64, "the last-used time is in the hit line");

// The part of a cached flow a hit on a plain packet never reads.
struct alignas(32) FlowExtra {
  std::array<uint8_t, 16> tun_remote;  // outer source; IPv4 in the first 4 bytes
  uint16_t tun_ingress;            // OVN option keys as received
  uint16_t tun_egress;
  uint32_t created_s;              // seconds of the engine clock at install

  bool matchesTunnel(const TunnelProbe& probe) const {
    return tun_remote == probe.remote && tun_ingress == probe.ingress && tun_egress == probe.egress;
  }
};
static_assert(sizeof(FlowExtra) == 32, "two per cache line");

// A whole cached flow: what the slow path fills and the control thread reads
// (FlowTable::read), with every field under its own name.
struct FlowRecord : FlowEntry, FlowExtra {};

struct alignas(32) FlowBucket {
  static constexpr unsigned kWays = 8;
  uint32_t sig[kWays];   // 0 = empty way
};
static_assert(sizeof(FlowBucket) == 32, "two buckets per cache line");

class FlowTable {
 public:
  // `entries` rounded up to a power of two, at least one bucket.
  explicit FlowTable(uint32_t entries);

  uint32_t capacity() const { return mask_ + 1; }
  uint32_t bucketCount() const { return (mask_ + 1) / FlowBucket::kWays; }
  static uint32_t signature(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }
  uint32_t bucketOf(uint64_t hash) const { return static_cast<uint32_t>(hash) & bucket_mask_; }

  FlowBucket& bucket(uint32_t b) { return buckets_[b]; }
  const FlowBucket& bucket(uint32_t b) const { return buckets_[b]; }
  FlowEntry& entry(uint32_t index) { return entries_[index]; }
  const FlowEntry& entry(uint32_t index) const { return entries_[index]; }
  FlowExtra& extra(uint32_t index) { return extras_[index]; }
  // Writes a claimed slot's entry and extra from the slow path's record.
  void write(uint32_t index, const FlowRecord& r) {
    std::memcpy(static_cast<void*>(&entries_[index]), static_cast<const FlowEntry*>(&r), sizeof(FlowEntry));
    std::memcpy(static_cast<void*>(&extras_[index]), static_cast<const FlowExtra*>(&r), sizeof(FlowExtra));
  }
  // A flow's preferred way in its bucket, from the hash: claim() uses it when
  // free (most of the time below full load), so the entry can be prefetched
  // together with the bucket, not after it (one memory latency, not two).
  static unsigned preferredWay(uint64_t hash) { return static_cast<unsigned>(hash >> 61); }
  // `tunnel`: the match reads the flow's FlowExtra too.
  void prefetchBucket(uint64_t hash, bool tunnel) const {
    const uint32_t b = bucketOf(hash);
    __builtin_prefetch(&buckets_[b]);
    const uint32_t index = b * FlowBucket::kWays + preferredWay(hash);
    const char* e = reinterpret_cast<const char*>(&entries_[index]);
    __builtin_prefetch(e);
    __builtin_prefetch(e + 64, 1);
    if (tunnel) __builtin_prefetch(&extras_[index]);
  }
  // After prefetchBucket: the entries whose signature matches, other than the preferred way.
  void prefetchEntries(uint64_t hash, bool tunnel) const {
    const uint32_t b = bucketOf(hash);
    const uint32_t sig = signature(hash);
    // The preferred way is already on its way (prefetchBucket), and when it
    // holds the signature the flow is almost surely there: no mask to build.
    const unsigned preferred = preferredWay(hash);
    if (buckets_[b].sig[preferred] == sig) return;
    for (uint32_t m = matchMask(buckets_[b], sig) & ~(1u << preferred); m != 0; m &= m - 1) {
      const uint32_t index = b * FlowBucket::kWays + __builtin_ctz(m);
      const char* e = reinterpret_cast<const char*>(&entries_[index]);
      __builtin_prefetch(e);
      __builtin_prefetch(e + 64, 1);
      if (tunnel) __builtin_prefetch(&extras_[index]);
    }
  }

  // Bit w set: way w of the bucket holds signature `sig`. Eight compares in
  // two SSE2 instructions instead of a loop of eight branches (hit path).
  static uint32_t matchMask(const FlowBucket& bk, uint32_t sig) {
#if defined(__SSE2__)
    const __m128i s = _mm_set1_epi32(static_cast<int>(sig));
    const __m128i lo = _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(bk.sig)), s);
    const __m128i hi = _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(bk.sig + 4)), s);
    return static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(lo))) |
           static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(hi))) << 4;
#else
    uint32_t m = 0;
    for (unsigned w = 0; w < FlowBucket::kWays; ++w) m |= uint32_t{bk.sig[w] == sig} << w;
    return m;
#endif
  }

  // Index of the matching entry, or UINT32_MAX.
  uint32_t lookup(uint64_t hash, const overlay::FlowKey& key, const TunnelProbe& probe) const {
    const uint32_t b = bucketOf(hash);
    const uint32_t sig = signature(hash);
    // The preferred way first: where claim() put most flows.
    const unsigned preferred = preferredWay(hash);
    const uint32_t first = b * FlowBucket::kWays + preferred;
    if (buckets_[b].sig[preferred] == sig && matches(first, key, probe)) [[likely]] return first;
    for (uint32_t m = matchMask(buckets_[b], sig) & ~(1u << preferred); m != 0; m &= m - 1) {
      const uint32_t index = b * FlowBucket::kWays + static_cast<uint32_t>(__builtin_ctz(m));
      if (matches(index, key, probe)) return index;
    }
    return UINT32_MAX;
  }
  bool matches(uint32_t index, const overlay::FlowKey& key, const TunnelProbe& probe) const {
    const FlowEntry& e = entries_[index];
    return FlowEntry::keyEqual(e.key, key) && e.tun_family == probe.family &&
           (e.tun_family == 0 || extras_[index].matchesTunnel(probe));
  }

  // A way for a new flow in the hash's bucket: an empty one, else the least
  // recently used (`evicted` set). The way is marked empty and its entry's
  // flow_id cleared (release) so readers skip it while it is written.
  uint32_t claim(uint64_t hash, uint32_t now_ms, bool& evicted);
  // Publishes a written entry: last-used time and new flow id, then the signature.
  void publish(uint32_t index, uint64_t hash, uint32_t now_ms);
  // A hit's last-used time (single writer: the lcore; read by dump-flows).
  static void touch(FlowEntry& e, uint32_t now_ms) { __atomic_store_n(&e.used_ms, now_ms, __ATOMIC_RELAXED); }
  void remove(uint32_t index);

  static uint32_t loadFlowId(const FlowEntry& e) { return __atomic_load_n(&e.flow_id, __ATOMIC_ACQUIRE); }
  // A consistent copy (entry and extra) for a reader on another thread; false
  // if the entry is empty or changed meanwhile.
  bool read(uint32_t index, FlowRecord& out) const;

 private:
  uint32_t mask_;
  uint32_t bucket_mask_;
  uint32_t next_flow_id_ = 0;
  // Allocated with transparent huge pages where the kernel allows (madvise):
  // a large table is otherwise a TLB miss per lookup.
  struct Unmap {
    size_t bytes;
    void operator()(void* p) const;
  };
  std::unique_ptr<FlowBucket, Unmap> buckets_mem_;
  std::unique_ptr<FlowEntry, Unmap> entries_mem_;
  std::unique_ptr<FlowExtra, Unmap> extras_mem_;
  FlowBucket* buckets_ = nullptr;
  FlowEntry* entries_ = nullptr;
  FlowExtra* extras_ = nullptr;
};

}  // namespace dpu::datapath
