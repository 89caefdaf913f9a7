// OffloadManager (see offload_manager.h).
#include "offload/offload_manager.h"

#include <algorithm>

#include "common/log.h"
#include "offload/offloadable.h"
#include "overlay/flow_key.h"

namespace dpu::offload {

namespace {
constexpr const char* kTooManyReasons = "refused (too many distinct refusal reasons to keep; see the log)";
}  // namespace

const char* offloadStateName(OffloadState state) {
  switch (state) {
    case OffloadState::kNone: return "none";
    case OffloadState::kPending: return "pending";
    case OffloadState::kInHw: return "in_hw";
    case OffloadState::kSoftware: return "software";
    case OffloadState::kRemoving: return "removing";
  }
  return "unknown";
}

OffloadManager::OffloadManager(OffloadBackend& backend, OffloadManagerConfig config)
    : backend_(backend), config_(config), inherited_(backend), caps_(backend.capabilities()) {
  reasons_.emplace_back();  // index 0: no reason
  intern(kTooManyReasons);  // index 1: what every reason past the table's size becomes
  stats_.capacity = capacity();
}

OffloadManager::~OffloadManager() {
  for (Record& r : records_) {
    if (r.state == OffloadState::kInHw || r.state == OffloadState::kRemoving) {
      (void)backend_.remove(OffloadHandle{r.handle});
    }
  }
  // A clean stop leaves nothing behind, a predecessor's rules included (~InheritedRules).
}

size_t OffloadManager::beginResync() { return inherited_.begin(); }

OffloadManager::ResyncResult OffloadManager::endResync() {
  const uint32_t errors_before = stats_.remove_errors;
  ResyncResult result = inherited_.end();
  stats_.remove_errors = errors_before + (result.remove_errors - resync_remove_errors_);
  resync_remove_errors_ = 0;
  if (result.remove_errors != 0) {
    DPU_LOG(kWarn, "offload") << result.remove_errors
                              << " of a previous dataplane's rules could not be removed from hardware (retried)";
  }
  return result;
}

uint32_t OffloadManager::capacity() const {
  const uint32_t a = config_.max_hw_flows;
  const uint32_t b = caps_.max_flows;
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

OffloadManager::Record* OffloadManager::find(FlowId id) {
  if (id >= records_.size() || records_[id].state == OffloadState::kNone) return nullptr;
  return &records_[id];
}

const OffloadManager::Record* OffloadManager::find(FlowId id) const {
  if (id >= records_.size() || records_[id].state == OffloadState::kNone) return nullptr;
  return &records_[id];
}

uint16_t OffloadManager::intern(const std::string& reason) {
  auto it = reason_index_.find(reason);
  if (it != reason_index_.end()) return it->second;
  if (reasons_.size() >= 0xffff) {
    DPU_LOG(kWarn, "offload") << "flow kept in software: " << reason;
    return reason_index_.at(kTooManyReasons);
  }
  const auto index = static_cast<uint16_t>(reasons_.size());
  reasons_.push_back(reason);
  reason_index_.emplace(reason, index);
  return index;
}

void OffloadManager::toSoftware(Record& r, const std::string& reason) {
  r = Record{};
  r.state = OffloadState::kSoftware;
  r.reason = intern(reason);
  ++stats_.software;
  ++stats_.refused;
}

Result<OffloadState> OffloadManager::offer(FlowId id, const flow::FlowSpec& flow) {
  if (id >= config_.max_flow_id) {
    return Error{"offload: flow id " + std::to_string(id) + " is beyond the configured maximum " +
                 std::to_string(config_.max_flow_id)};
  }
  if (id >= records_.size()) records_.resize(static_cast<size_t>(id) + 1);
  Record& r = records_[id];
  if (r.state == OffloadState::kInHw || r.state == OffloadState::kRemoving) {
    return Error{"offload: flow " + std::to_string(id) + " is " + offloadStateName(r.state) +
                 "; withdraw it before offering it again"};
  }
  if (r.state == OffloadState::kSoftware) --stats_.software;
  r = Record{};
  r.state = OffloadState::kPending;

  // A previous dataplane's rule for this match (restart: see the header).
  InheritedRule* old = inherited_.find(flow);
  if (old != nullptr && old->flow == flow) {
    // Unchanged: this flow's rule already forwards; take it over as it is.
    const OffloadHandle handle = inherited_.adopt(*old);
    r.handle = handle.id;
    r.state = OffloadState::kInHw;
    r.punt_flags = closePuntFlags(flow);
    // What it counted so far was the previous process's traffic, not news for this flow.
    if (auto hw = backend_.query(handle); hw) {
      r.seen_packets = hw->packets;
      r.seen_bytes = hw->bytes;
    }
    ++stats_.in_hw;
    return r.state;
  }
  install(r, flow);
  if (old != nullptr && !inherited_.replaced(*old)) {
    // Its replacement (a rule, or the software path) is in place; the old rule's removal failed: retried.
    DPU_LOG(kWarn, "offload") << "removing a previous dataplane's rule from hardware failed (retried)";
    ++stats_.remove_errors;
    ++resync_remove_errors_;
  }
  return r.state;
}

void OffloadManager::install(Record& r, const flow::FlowSpec& flow) {
  const uint32_t cap = capacity();
  if (cap != 0 && stats_.in_hw + stats_.removing + inherited_.left() >= cap) {
    toSoftware(r, "offload table full (" + std::to_string(cap) + " flows in hardware)");
    return;
  }
  if (auto ok = backend_.validate(flow); !ok) {
    toSoftware(r, ok.error());
    return;
  }
  auto handle = backend_.install(flow);
  if (!handle) {
    toSoftware(r, handle.error());
    return;
  }
  r.handle = handle->id;
  r.state = OffloadState::kInHw;
  r.punt_flags = closePuntFlags(flow);
  ++stats_.in_hw;
  ++stats_.installed;
}

bool OffloadManager::readDelta(FlowId id, const Record& r, CounterDelta& delta, HwCounters& absolute) {
  auto hw = backend_.query(OffloadHandle{r.handle});
  if (!hw) {
    ++stats_.query_errors;
    return false;
  }
  delta.id = id;
  // Counters below what was seen mean the device started over (a port
  // restart flushes and recreates rules): everything it has now is new.
  delta.packets = hw->packets >= r.seen_packets ? hw->packets - r.seen_packets : hw->packets;
  delta.bytes = hw->bytes >= r.seen_bytes ? hw->bytes - r.seen_bytes : hw->bytes;
  delta.idle_seconds = hw->idle_seconds;
  absolute = *hw;
  return true;
}

Result<CounterDelta> OffloadManager::withdraw(FlowId id) {
  Record* r = find(id);
  if (r == nullptr) return Error{"offload: flow " + std::to_string(id) + " was never offered or is already withdrawn"};
  CounterDelta delta;
  delta.id = id;
  switch (r->state) {
    case OffloadState::kSoftware:
      --stats_.software;
      [[fallthrough]];
    case OffloadState::kPending:
    case OffloadState::kNone:
      *r = Record{};
      return delta;
    case OffloadState::kInHw:
    case OffloadState::kRemoving:
      break;
  }
  // Read the last counts before the rule goes; they are committed only once
  // the removal succeeded (otherwise the next poll reports them).
  HwCounters absolute;
  const bool have_delta = readDelta(id, *r, delta, absolute);
  if (auto removed = backend_.remove(OffloadHandle{r->handle}); !removed) {
    ++stats_.remove_errors;
    if (r->state == OffloadState::kInHw) {
      --stats_.in_hw;
      ++stats_.removing;
      r->state = OffloadState::kRemoving;
      removing_.push_back(id);
    }
    return Error{"offload: removing flow " + std::to_string(id) + " from hardware failed (retried): " +
                 removed.error()};
  }
  if (r->state == OffloadState::kRemoving) {
    --stats_.removing;
    std::erase(removing_, id);
  } else {
    --stats_.in_hw;
  }
  *r = Record{};
  if (!have_delta) {
    delta.packets = 0;
    delta.bytes = 0;
  }
  return delta;
}

std::vector<CounterDelta> OffloadManager::pollCounters(size_t budget) {
  std::vector<CounterDelta> out;
  // A previous dataplane's rules whose removal failed.
  stats_.remove_errors += inherited_.retryStale();
  // Removals that failed before: the rule may still be forwarding.
  for (size_t i = 0; i < removing_.size();) {
    const FlowId id = removing_[i];
    Record& r = records_[id];
    CounterDelta delta;
    HwCounters absolute;
    const bool have = readDelta(id, r, delta, absolute);
    if (backend_.remove(OffloadHandle{r.handle})) {
      r = Record{};
      --stats_.removing;
      removing_[i] = removing_.back();
      removing_.pop_back();
      if (have && (delta.packets != 0 || delta.bytes != 0)) out.push_back(delta);
      continue;
    }
    ++stats_.remove_errors;
    ++i;
  }
  const size_t n = records_.size();
  size_t queried = 0;
  for (size_t visited = 0; visited < n && queried < budget; ++visited) {
    if (poll_cursor_ >= n) poll_cursor_ = 0;
    const FlowId id = static_cast<FlowId>(poll_cursor_++);
    Record& r = records_[id];
    if (r.state != OffloadState::kInHw) continue;
    ++queried;
    CounterDelta delta;
    HwCounters absolute;
    if (!readDelta(id, r, delta, absolute)) continue;
    r.seen_packets = absolute.packets;
    r.seen_bytes = absolute.bytes;
    r.idle_seconds = delta.idle_seconds;
    if (delta.packets != 0 || delta.bytes != 0) out.push_back(delta);
  }
  return out;
}

FlowOffloadStatus OffloadManager::status(FlowId id) const {
  const Record* r = find(id);
  if (r == nullptr) return {};
  FlowOffloadStatus st;
  st.state = r->state;
  st.reason = reasons_[r->reason];
  st.hw_packets = r->seen_packets;
  st.hw_bytes = r->seen_bytes;
  st.idle_seconds = r->idle_seconds;
  return st;
}

std::string OffloadManager::describe(FlowId id) const {
  const Record* r = find(id);
  if (r == nullptr) return "";
  switch (r->state) {
    case OffloadState::kInHw:
      return r->punt_flags == 0 ? "offloaded" : "offloaded+" + describeClosePunt(r->punt_flags);
    case OffloadState::kSoftware: return "software: " + reasons_[r->reason];
    default: return offloadStateName(r->state);
  }
}

OffloadStats OffloadManager::stats() const { return stats_; }

}  // namespace dpu::offload
