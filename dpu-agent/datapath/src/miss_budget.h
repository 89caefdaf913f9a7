// The slow-path budget of one worker (EngineConfig::miss_budget and
// miss_cycle_share): which flow-cache misses may run the slow path, and how
// many packets the lcore loop takes from a port (Engine::rxBurstSize).
//
// A miss runs the whole logical pipeline (about twenty times a hit's cost),
// so one pod sending new 5-tuples at line rate would otherwise take the lcore
// from every established flow on it. Two bounds, checked per miss:
//  - a count: at most `miss_budget` slow-path runs per poll iteration, split
//    evenly over the ports that missed in the previous iteration (a port that
//    starts missing is counted from the next one on), so a flooding port
//    leaves the others their part. It bounds how long one iteration's misses
//    hold up everything else.
//  - cycles: while the worker forwards other traffic (a flow hit in this
//    iteration or the previous one), misses may use at most
//    `miss_cycle_share` percent of its cycles. Each iteration with hits
//    earns the share of its length as credit, and misses are charged what
//    they cost: each slow-path run at once (the cycle counter around it),
//    and at the end of the iteration whatever more it took than its hits
//    alone would have (cycles per hit, as the cheaper iterations without
//    misses show), and the next kSpill iterations likewise (not the time
//    the worker slept when idle: awake()). The run itself is not half of
//    it: receiving, parsing and looking up the missed packet (run or
//    dropped), sending what the run decided, and refetching what the slow
//    path evicted from the caches cost as much again. A run may
//    start while the credit is not negative, so the share is overrun by at
//    most one iteration's misses, paid back before the next run. When
//    nothing else is forwarded, misses may use the whole core: the setup
//    rate of a node with no established traffic is bounded by the count.
// A miss over either bound is dropped (MissBudget, and per port).
//
// Dropping late still costs the receive, parse and lookup, which alone cost
// an established flow more than its share. So a port whose packets are mostly
// misses (an average over its last polls) is polled with smaller bursts, or
// skipped, sized so that what the budget must drop of a burst stays below what
// it forwards: the rest waits in the NIC's ring and, when that is full, is
// dropped by the NIC (imissed), not by the lcore. A port that stops flooding
// gets its full bursts back within a few polls; a port whose packets are
// mostly hits is never held back (its excess misses are dropped as above).
//
// Only the owning lcore reads or writes it: no atomics, no allocation.
#pragma once

#include <algorithm>
#include <cstdint>

#include "port_limit.h"

namespace dpu::datapath {

class MissBudget {
 public:
  static constexpr uint16_t kFullBurst = 32;
  // Passed to endIteration when needsTime() said the time is not needed.
  static constexpr uint64_t kNoTime = UINT64_MAX;
  // Credit carried from one iteration to the next: at most what this many
  // runs cost (or what the last iteration earned, if more: a long iteration,
  // e.g. an idle worker's sleep, is not cut short), and debt at most as much.
  static constexpr int64_t kCarriedRuns = 4;
  // Iterations after one with misses whose excess is theirs too (the hits
  // refetching what the slow path evicted).
  static constexpr uint8_t kSpill = 2;
  // An iteration without misses is timed (to learn what a hit costs) at
  // least once in this many, even when nothing else needs the time.
  static constexpr uint32_t kLearnEvery = 64;

  // `count`: slow-path runs per iteration; `share_percent`: 1..100, 100 = no cycle bound.
  void configure(uint32_t count, uint32_t share_percent);

  enum class Admission : uint8_t {
    kDrop,      // over the budget: drop the packet
    kRun,       // run the slow path (nothing else waits: not timed)
    kRunTimed,  // run it, and charge() what it cost
  };
  // A miss on `port`; `hits` is the worker's flow-hit counter now.
  Admission admit(uint16_t port, uint64_t hits) {
    Port& p = ports_[port];
    ++p.missed;
    ++misses_;
    if (p.iteration != iteration_) {
      p.iteration = iteration_;
      p.used = 0;
      ++ports_missing_;
    }
    if (left_ == 0 || p.used >= share_) return Admission::kDrop;
    const bool bound = cycle_bound_ && contended(hits);
    if (bound && credit_ < 0) return Admission::kDrop;
    --left_;
    ++p.used;
    ++runs_;
    return bound ? Admission::kRunTimed : Admission::kRun;
  }

  // What a kRunTimed run cost, in cycles of the engine's cycle source (the
  // run itself; endIteration charges the rest).
  void charge(uint64_t cycles) {
    charged_ += cycles;
    debit(cycles);
  }

  // Packets the loop should take from `port` now (kFullBurst: no limit).
  // `rx_packets` is the port's receive counter on this worker (what the
  // earlier polls took), `hits` as for admit.
  uint16_t burst(uint16_t port, uint64_t rx_packets, uint64_t hits);

  // Whether endIteration needs the cycle counter: not while there was no
  // miss in this iteration or the last kSpill and the credit is full (the
  // common case on a worker without new flows), but for two iterations in
  // kLearnEvery, so the cost of a hit stays known.
  bool needsTime() const {
    return misses_ > 0 || spill_ > 0 || credit_ < cap_ || iteration_ % kLearnEvery < 2;
  }
  // The end of a poll iteration: `now` from the cycle source (or kNoTime),
  // `hits` the flow-hit counter.
  void endIteration(uint64_t now, uint64_t hits);
  // The worker slept after endIteration (an idle iteration: idle_sleep_us).
  // Whether the next iteration is timed, and then `now` where its length
  // starts: the sleep is no miss's cost (charged as a spilled miss's
  // excess, it put a worker with a trickle of new connections in debt, and
  // the next one's first packet was dropped), nor credit earned.
  bool timed() const { return start_known_; }
  void awake(uint64_t now) {
    if (start_known_) start_ = now;
  }

  // For tests and the bench.
  int64_t credit() const { return credit_; }
  uint64_t runCost() const { return cost_; }  // all in, average
  uint64_t hitCost() const { return per_hit_x256_ >> 8; }
  // The port's miss ratio over its last polls, in 1/65536.
  uint32_t missRatio(uint16_t port) const { return ports_[port].ratio; }

 private:
  static constexpr uint32_t kOne = 1u << 16;  // ratios and the share are fixed point, 16 bits of fraction

  bool contended(uint64_t hits) const { return busy_last_ || hits != hits_at_start_; }
  void debit(uint64_t cycles) {
    credit_ -= static_cast<int64_t>(std::min<uint64_t>(cycles, INT64_MAX / 4));
    const int64_t floor = -kCarriedRuns * static_cast<int64_t>(cost_);
    if (credit_ < floor) credit_ = floor;
  }

  struct Port {
    uint32_t iteration = 0;  // `used` counts for this iteration only: a stale stamp reads as zero
    uint32_t used = 0;       // runs this iteration
    uint32_t missed = 0;     // misses since the last burst() (admitted or not)
    uint32_t ratio = 0;      // misses per packet taken, averaged over the polls (1/65536)
    uint64_t rx_seen = 0;    // the receive counter at the last burst()
  };

  // The count.
  uint32_t count_ = 32;
  uint32_t left_ = 32;
  uint32_t share_ = 32;           // runs one port may make this iteration
  uint32_t sharing_ = 1;          // ports that missed in the previous iteration (at least 1)
  uint32_t ports_missing_ = 0;    // ports that missed this iteration
  uint32_t iteration_ = 1;
  // The cycles.
  bool cycle_bound_ = true;       // share below 100 %
  uint32_t share_q16_ = 0;        // the share, 1/65536 of the cycles
  int64_t credit_ = 0;            // cycles misses may still use (negative: debt)
  int64_t cap_ = 0;               // most credit carried to the next iteration
  uint64_t cost_ = 0;             // average cycles a run is charged, all in (0: none measured yet)
  uint64_t per_hit_x256_ = 0;     // cycles per hit of iterations without misses, x256 (0: unknown)
  uint64_t start_ = 0;            // the cycle counter at the last timed endIteration
  bool start_known_ = false;      // false: the last endIteration was untimed
  uint32_t misses_ = 0;           // misses this iteration, run or dropped
  uint32_t runs_ = 0;             // runs this iteration
  uint64_t charged_ = 0;          // what they were charged so far
  uint8_t spill_ = 0;             // iterations left whose excess the last misses are charged
  bool busy_last_ = false;        // the previous iteration hit a flow
  uint64_t hits_at_start_ = 0;    // the flow-hit counter when this iteration began
  Port ports_[kMaxPorts];
};

}  // namespace dpu::datapath
