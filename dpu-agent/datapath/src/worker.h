// WorkerContext: everything one lcore owns, in one cache-aligned object:
// its flow cache, counters, per-port tx buffers, the ring of new flows for
// offload and its RCU quiescent-state counter. Only that lcore writes it,
// except `offload` (written by the control thread, read by the lcore's
// aging sweep) and `quiescent_epoch` (read by the control thread).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "conntrack/conntrack.h"
#include "counters.h"
#include "flow_cache.h"
#include "miss_budget.h"
#include "north_south.h"
#include "overlay/geneve.h"
#include "overlay/parse.h"

struct rte_mbuf;

namespace dpu::datapath {

class EspSlot;        // ipsec_sas.h
struct NatPeer;       // snapshot.h
struct SnapBackend;   // snapshot.h
struct SnapFrontend;  // snapshot.h

inline constexpr unsigned kBurst = 32;
static_assert(MissBudget::kFullBurst == kBurst);

// Single producer (the lcore), single consumer (the control thread).
class SpscRing {
 public:
  explicit SpscRing(uint32_t size) {
    uint64_t n = 1;
    while (n < size) n <<= 1;
    mask_ = n - 1;
    slots_ = std::make_unique<uint64_t[]>(n);
  }
  bool push(uint64_t v) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ >= mask_ + 1) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ >= mask_ + 1) return false;
    }
    slots_[head & mask_] = v;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  bool pop(uint64_t& v) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    v = slots_[tail & mask_];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

 private:
  uint64_t mask_;
  std::unique_ptr<uint64_t[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
  alignas(64) std::atomic<uint64_t> tail_{0};
};

// Offload bookkeeping of one flow cache slot (control thread).
struct OffloadSlot {
  enum State : uint8_t { kNone, kInHw, kSoftware };
  uint32_t flow_id = 0;       // the flow this describes; stale when the entry's id differs
  uint8_t state = kNone;
  uint8_t reserved = 0;
  uint16_t reason = 0;        // index into the engine's refusal texts (kSoftware)
  uint32_t hw_used_ms = 0;    // last time hardware counters moved (read by the lcore's sweep)
  uint32_t hw_packets_lo = 0; // low bits of the last hardware packet count
  uint64_t handle = 0;
};
static_assert(sizeof(OffloadSlot) == 24);

// A packet between receive and the actions.
struct PacketContext {
  rte_mbuf* mbuf;
  uint64_t hash;
  uint32_t slot;      // the entry the lookup checks first (flow_cache.h: prefetchSlot, prefetchMatches)
  CompactKey ckey;    // what the flow cache compares (flow_cache.h)
  overlay::ParsedPacket parsed;
  overlay::FlowKey key;
  TunnelProbe probe;  // tunnel fields of the match
  uint16_t rx_port;
  uint8_t decap_len;
  // The key has no compact form: `key` is written and compared on a hit.
  bool long_key;
  // `parsed` and `key` are complete; otherwise the hit path's fast parse
  // filled only l3, l3_offset and l3_end (and `key` only for a long key),
  // and EngineImpl::completeParse fills the rest before the slow path or an
  // ICMP reply reads them.
  bool parsed_full;
};

// A packet in the fast lane (a port other than the uplink; worker_parse.h's
// laneParse took it): everything its hit needs, in one cache line.
struct alignas(64) LanePacket {
  rte_mbuf* mbuf;
  uint64_t hash;
  CompactKey key;
  uint32_t slot;    // the entry the lookup checks first (prefetched)
  uint16_t ip_len;  // the IPv4 total length: the header is at 14, the packet ends at 14 + ip_len
  uint16_t reserved;
};
static_assert(sizeof(LanePacket) == 64);

// Five cache lines, packets first: queueing a packet is one scaled store.
struct alignas(64) TxBuffer {
  rte_mbuf* packets[kBurst];
  uint32_t bytes = 0;  // of the queued packets, summed as they are queued
  uint16_t count = 0;
};
static_assert(sizeof(TxBuffer) == 320);

class alignas(64) WorkerContext {
 public:
  WorkerContext(unsigned index, uint32_t entries, uint32_t offload_queue, bool offload)
      : index_(index), table(entries), offload_ring(offload ? offload_queue : 1) {
    if (offload) this->offload.assign(table.capacity(), OffloadSlot{});
  }
  unsigned index() const { return index_; }

  unsigned index_;
  FlowTable table;
  WorkerCounters counters;
  TxBuffer tx[kMaxPorts];
  uint64_t tx_pending[kPortWords] = {};  // bitset: ports with buffered packets
  uint64_t now_ms = 0;
  uint32_t sweep_cursor = 0;
  uint64_t last_sweep_ms = 0;
  uint64_t quiescent_calls = 0;
  uint64_t hits = 0;  // flow hits in the current burst
  MissBudget miss;    // read and written on the miss path only
  // The connection the last slow path tracked (services.cpp), for the flow it installs.
  conntrack::Hit ct_hit;
  bool ct_hit_valid = false;
  // The slow path translated an ICMP error in place (services.cpp): whatever
  // it decides is for this packet only, never cached (the flow key is the
  // packet before translation).
  bool related = false;
  // The slow path tracks the connection for NetworkPolicy (policy.cpp): the
  // flow it installs is noted in the entry (ct_hit), as a translated one's.
  bool policy_tracked = false;
  // The inbound SA the last ESP packet was looked up to (espReceive), with
  // the snapshot it came from: the next packet of the burst from the same
  // peer and SPI skips the hash lookup. Forgotten at every quiescent point,
  // before which that snapshot cannot be retired.
  struct LastInboundSa {
    const void* snap = nullptr;
    std::array<uint8_t, 16> peer{};
    uint32_t spi = 0;
    bool v6 = false;
    EspSlot* slot = nullptr;
    NatPeer* nat = nullptr;
  } last_inbound_sa;
  // The backend prefetchNextConnection picked for the burst's next packet, a
  // new connection to a service (next_pick), and, once that packet's miss
  // begins, for this one (pick): serviceStage takes it rather than hash the
  // same tuple again. With the snapshot they point into, forgotten at every
  // quiescent point as last_inbound_sa is.
  struct Pick {
    const void* snap = nullptr;
    const SnapFrontend* frontend = nullptr;
    conntrack::Tuple tuple;
    const SnapBackend* backend = nullptr;
  } pick, next_pick;
  // Scratch space reused per packet (their constructors zero hundreds of bytes).
  overlay::GeneveHeaders geneve;
  FlowRecord candidate;
  // A flow applied without being cached (no free action record).
  FlowEntry uncached;
  FlowActions uncached_actions;
  PacketContext burst[kBurst];
  uint16_t burst_n = 0;  // packets in burst[] and lane[] (runBurst's current part)
  LanePacket lane[kBurst];
  SpscRing offload_ring;
  std::vector<OffloadSlot> offload;  // per flow cache slot; empty without an offload backend
  alignas(64) std::atomic<uint64_t> quiescent_epoch{0};
  NorthSouthWorker north_south;      // its learning ring and ARP rate limits (north_south.h)
};

}  // namespace dpu::datapath
