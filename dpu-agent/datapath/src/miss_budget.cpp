// The slow-path budget (miss_budget.h) and the engine's question the lcore
// loop asks before each receive burst (Engine::rxBurstSize).
#include "miss_budget.h"

#include "engine_impl.h"

namespace dpu::datapath {

static_assert(kRxBurst == kBurst, "the loop's receive burst is the engine's");

void MissBudget::configure(uint32_t count, uint32_t share_percent) {
  count_ = count;
  left_ = count;
  share_ = count;
  cycle_bound_ = share_percent < 100;
  share_q16_ = static_cast<uint32_t>((uint64_t{share_percent} << 16) / 100);
}

uint16_t MissBudget::burst(uint16_t port, uint64_t rx_packets, uint64_t hits) {
  Port& p = ports_[port];
  const uint64_t got = rx_packets - p.rx_seen;
  p.rx_seen = rx_packets;
  if (got > 0) {
    // What the packets taken since the last question were: a quarter of the
    // new observation, so a port that starts or stops flooding moves past
    // one half within three polls.
    const uint64_t missed = std::min<uint64_t>(p.missed, got);
    const auto observed = static_cast<uint32_t>((missed << 16) / got);
    p.ratio = (3 * p.ratio + observed) / 4;
    p.missed = 0;
  }
  if (p.ratio <= kOne / 2) return kFullBurst;
  // The runs this port may still make now, in 1/65536.
  const uint32_t used = p.iteration == iteration_ ? p.used : 0;
  uint64_t allowed = uint64_t{std::min(left_, share_ > used ? share_ - used : 0)} << 16;
  if (cycle_bound_ && cost_ > 0 && contended(hits)) {
    const int64_t mine = credit_ / static_cast<int64_t>(sharing_);
    // A run may start while the credit is not negative: one more than it covers.
    const uint64_t runs =
        mine < 0 ? 0 : static_cast<uint64_t>((static_cast<unsigned __int128>(mine) << 16) / cost_) + kOne;
    allowed = std::min(allowed, runs);
  }
  // q packets bring about q*r misses. With q*(2r - 1) <= allowed, those the
  // budget must drop (q*r - allowed) are no more than those it forwards
  // (q*(1 - r)): the lcore never spends more receiving packets to drop them
  // than it forwards from that port.
  const uint64_t q = allowed / (2 * uint64_t{p.ratio} - kOne);
  return q >= kFullBurst ? kFullBurst : static_cast<uint16_t>(q);
}

void MissBudget::endIteration(uint64_t now, uint64_t hits) {
  const uint64_t hit_count = hits - hits_at_start_;
  const bool busy = hit_count > 0;
  hits_at_start_ = hits;
  if (now != kNoTime) {
    const bool known = start_known_;
    const uint64_t length = known ? now - start_ : 0;
    start_ = now;
    start_known_ = true;
    if (known && (misses_ > 0 || spill_ > 0)) {
      // Misses in this iteration or one of the last kSpill: what it took
      // beyond its hits is theirs, less what the runs were charged already.
      const uint64_t hits_alone =
          static_cast<uint64_t>((static_cast<unsigned __int128>(per_hit_x256_) * hit_count) >> 8);
      const uint64_t excess = length > hits_alone ? length - hits_alone : 0;
      const uint64_t extra = excess > charged_ ? excess - charged_ : 0;
      if (runs_ > 0) {
        // The average, so that one iteration the lcore was preempted in does
        // not set it: a sample counts for at most 16 times the average.
        uint64_t sample = (charged_ + extra) / runs_;
        if (cost_ != 0) sample = std::min(sample, cost_ * 16);
        if (sample != 0) cost_ = cost_ == 0 ? sample : (cost_ * 7 + sample) / 8;
      }
      debit(extra);
    } else if (known && busy) {
      // Hits only: what a hit costs, all in (the iteration's fixed costs
      // spread over its hits). Quick to fall and slow to rise, so it follows
      // the cheaper iterations: those the slow path's evictions still slow
      // down are not the hits' cost.
      const uint64_t sample = (std::min<uint64_t>(length, uint64_t{1} << 48) << 8) / hit_count;
      if (per_hit_x256_ == 0) {
        per_hit_x256_ = sample;
      } else if (sample < per_hit_x256_) {
        per_hit_x256_ -= (per_hit_x256_ - sample) / 4;
      } else {
        per_hit_x256_ += (std::min(sample, per_hit_x256_ * 2) - per_hit_x256_) / 32;
      }
    } else if (runs_ > 0) {
      // The iteration's length is unknown: the runs' own cost is all there is.
      const uint64_t sample = charged_ / runs_;
      if (sample != 0) cost_ = cost_ == 0 ? sample : (cost_ * 7 + std::min(sample, cost_ * 16)) / 8;
    }
    const auto earned = static_cast<int64_t>((std::min<uint64_t>(length, uint64_t{1} << 46) * share_q16_) >> 16);
    cap_ = std::max(kCarriedRuns * static_cast<int64_t>(cost_), earned);
    // Misses were free in an iteration without hits: the credit is full.
    credit_ = busy ? std::min(credit_ + earned, cap_) : cap_;
  } else {
    // Untimed (no miss in this iteration or the last, the credit full): the
    // next iteration's length is unknown, and earns nothing.
    start_known_ = false;
  }
  busy_last_ = busy;
  spill_ = misses_ > 0 ? kSpill : spill_ > 0 ? spill_ - 1 : 0;
  misses_ = 0;
  runs_ = 0;
  charged_ = 0;
  sharing_ = ports_missing_ > 1 ? ports_missing_ : 1;
  left_ = count_;
  share_ = count_ / sharing_ > 0 ? count_ / sharing_ : 1;
  ports_missing_ = 0;
  ++iteration_;
}

void EngineImpl::awake(WorkerContext& w) {
  if (w.miss.timed()) w.miss.awake(cycles());
}

uint16_t EngineImpl::rxBurstSize(WorkerContext& w, uint16_t rx_port) {
  if (rx_port >= kMaxPorts) return kBurst;
  const uint16_t n = w.miss.burst(rx_port, readCounter(w.counters.ports[rx_port].rx_packets),
                                  readCounter(w.counters.events[static_cast<size_t>(Event::kFlowHit)]));
  if (n < kBurst) {
    bump(w.counters.ports[rx_port].miss_throttled);
    bump(w.counters.events[static_cast<size_t>(Event::kMissThrottled)]);
  }
  return n;
}

}  // namespace dpu::datapath
