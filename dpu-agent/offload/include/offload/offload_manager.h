// OffloadManager: where each datapath flow runs — in the eswitch or in
// software — and why. The engine offers every new flow; the manager validates
// and installs it through one OffloadBackend, keeps it in software with the
// reason when the device (or the table's capacity) refuses, removes it when the
// flow goes, and turns the hardware's absolute counters into deltas the engine
// adds to the flow's software statistics.
//
// Flows are named by the engine's FlowId, a small dense number (its flow-cache
// slot): the manager keeps one 32-byte record per id in a vector indexed by it,
// so its bookkeeping is kBookkeepingBytesPerFlow per flow and no allocation per
// offer. Refusal reasons are interned: every flow refused for the same reason
// shares one string.
//
// States:   offer ──▶ kPending ──validate+install──▶ kInHw
//                         └──refused / table full──▶ kSoftware (+ reason)
//           withdraw: kInHw ──remove ok──▶ forgotten (kNone)
//                         └──remove failed──▶ kRemoving, retried by pollCounters()
// kPending lasts only inside offer() with a synchronous backend; an async
// (template) backend would leave flows pending until its completion arrives.
//
// Restart, make before break (offload.h, Restart; inherited_rules.h, which
// the engine shares): beginResync() takes over the rules a previous dataplane
// left in the eswitch (backend.inherited()).
// Until endResync(), a flow offered that equals one of them adopts that rule
// — nothing is installed or removed, so its traffic never leaves the eswitch;
// one with the same match and other actions gets its new rule installed first
// and the old one removed after (kept in software instead, the old rule is
// removed at once: it forwards the old way); endResync() then removes the
// inherited rules the new model did not offer again. So at every step a flow
// the new model keeps has a rule in the eswitch, and a rule goes only once
// its replacement (in hardware or in software) is in place. Inherited rules
// count against the capacity until they are adopted or removed.
//
// Thread contract: one control thread (the engine's maintain()); not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "flow/flow.h"
#include "offload/inherited_rules.h"
#include "offload/offload.h"

namespace dpu::offload {

using FlowId = uint32_t;

enum class OffloadState : uint8_t { kNone, kPending, kInHw, kSoftware, kRemoving };

// "none", "pending", "in_hw", "software", "removing".
const char* offloadStateName(OffloadState state);

struct OffloadManagerConfig {
  // Flows the manager puts in hardware at most (0: the backend's max_flows,
  // or unlimited when that is 0 too). The smaller of the two applies.
  uint32_t max_hw_flows = 0;
  // FlowIds must be below this; it bounds the record vector (32 B per id).
  uint32_t max_flow_id = 1u << 24;
};

// Hardware traffic since the previous report for one flow.
struct CounterDelta {
  FlowId id = 0;
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint32_t idle_seconds = 0;  // from AGE, when the backend reports it
};

struct FlowOffloadStatus {
  OffloadState state = OffloadState::kNone;
  std::string_view reason;  // kSoftware: why; valid until the manager is destroyed
  // kInHw: what the hardware counted up to the last poll (already reported
  // as deltas), and the idle time it reported then (AGE; 0 when unknown).
  uint64_t hw_packets = 0;
  uint64_t hw_bytes = 0;
  uint32_t idle_seconds = 0;
};

struct OffloadStats {
  uint32_t in_hw = 0;
  uint32_t software = 0;
  uint32_t removing = 0;
  uint32_t capacity = 0;       // 0 = unlimited
  uint64_t installed = 0;      // successful installs, ever
  uint64_t refused = 0;        // offers kept in software, ever
  uint64_t remove_errors = 0;
  uint64_t query_errors = 0;
};

class OffloadManager {
 public:
  explicit OffloadManager(OffloadBackend& backend, OffloadManagerConfig config = {});
  ~OffloadManager();  // removes every rule still in hardware
  OffloadManager(const OffloadManager&) = delete;
  OffloadManager& operator=(const OffloadManager&) = delete;

  // Offers a flow under `id`: validate, then install, or software with the
  // reason. Returns the state it ends in (kInHw or kSoftware). An id that is in
  // hardware or being removed must be withdrawn first (error, nothing changes);
  // an id in software is offered again (e.g. after capacity freed up).
  Result<OffloadState> offer(FlowId id, const flow::FlowSpec& flow);

  // The flow is gone: remove its rule and forget it. Returns the traffic the
  // hardware counted since the last poll, so no packet is lost from the flow's
  // statistics. An unknown id is an error. A failed removal leaves the flow in
  // kRemoving (its rule may still forward; pollCounters() retries) and is an error.
  Result<CounterDelta> withdraw(FlowId id);

  // Reads the counters of up to `budget` flows in hardware (round robin across
  // calls) and returns the non-zero deltas since the previous read; retries
  // pending removals first. Call it every few hundred milliseconds.
  std::vector<CounterDelta> pollCounters(size_t budget = SIZE_MAX);

  // Restart (above): takes the backend's inherited rules; returns how many.
  size_t beginResync();
  using ResyncResult = offload::ResyncResult;
  // The new model has been offered: removes the inherited rules it did not
  // re-create. Returns what the resync did.
  ResyncResult endResync();
  bool resyncing() const { return inherited_.active(); }

  FlowOffloadStatus status(FlowId id) const;
  // For dump-flows (proto FlowEntry.offload_status): "offloaded" (with close
  // punt rules "offloaded+punt:fin,syn,rst"),
  // "software: <reason>", "removing", "pending" or "" for an unknown id.
  std::string describe(FlowId id) const;
  OffloadStats stats() const;
  Capabilities capabilities() const { return caps_; }

  // Per-flow bookkeeping (the record; interned reasons are shared).
  static constexpr size_t kBookkeepingBytesPerFlow = 32;

 private:
  struct Record {
    uint64_t handle = 0;       // the backend's handle (kInHw, kRemoving)
    uint64_t seen_packets = 0;  // hardware counters already reported
    uint64_t seen_bytes = 0;
    uint32_t idle_seconds = 0;
    uint16_t reason = 0;       // kSoftware: index into reasons_
    OffloadState state = OffloadState::kNone;
    uint8_t punt_flags = 0;    // kInHw: the TCP flags its close punt rules send to software
  };
  static_assert(sizeof(Record) == kBookkeepingBytesPerFlow, "keep the per-flow record at 32 bytes");

  Record* find(FlowId id);
  // Validate and install `flow` for the pending record `r`, or software with the reason.
  void install(Record& r, const flow::FlowSpec& flow);
  const Record* find(FlowId id) const;
  uint16_t intern(const std::string& reason);
  void toSoftware(Record& r, const std::string& reason);
  // Reads the hardware counters: the delta since `seen` and the absolute
  // values (the caller commits them to `seen` when the delta is reported).
  bool readDelta(FlowId id, const Record& r, CounterDelta& delta, HwCounters& absolute);
  uint32_t capacity() const;

  OffloadBackend& backend_;
  OffloadManagerConfig config_;
  InheritedRules inherited_;                              // a restart's rules (beginResync .. endResync)
  uint32_t resync_remove_errors_ = 0;                     // of them, counted in stats_ already (offer)
  Capabilities caps_;
  std::vector<Record> records_;
  std::vector<std::string> reasons_;
  std::unordered_map<std::string, uint16_t> reason_index_;
  std::vector<FlowId> removing_;  // ids in kRemoving: few, retried on every poll
  size_t poll_cursor_ = 0;
  OffloadStats stats_;
};

}  // namespace dpu::offload
