// Per-lcore counters: drops by reason, events, and per-port packet counts.
//
// One list of reasons: overlay::Status values (overlay/status.def) come first,
// so a Status from a parser is a DropReason as it is, then the datapath's own
// (counters.def). Each worker writes only its own WorkerCounters with plain
// relaxed stores (no atomic read-modify-write on the packet path); readers on
// the control thread load them relaxed and sum over workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "overlay/status.h"
#include "port_limit.h"
#include "single_writer_counter.h"

namespace dpu::datapath {

enum class DropReason : uint8_t {
#define X(name, text) k##name,
#include "overlay/status.def"
#undef X
#define DROP(name, text) k##name,
#define EVENT(name, text)
#include "counters.def"
#undef DROP
#undef EVENT
  kCount
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
static_assert(kDropReasonCount <= 256, "drop reasons are stored in one byte per flow");

enum class Event : uint8_t {
#define DROP(name, text)
#define EVENT(name, text) k##name,
#include "counters.def"
#undef DROP
#undef EVENT
  kCount
};
inline constexpr size_t kEventCount = static_cast<size_t>(Event::kCount);

constexpr DropReason toDropReason(overlay::Status s) { return static_cast<DropReason>(s); }

std::string_view dropReasonName(DropReason r);
std::string_view dropReasonText(DropReason r);
std::string_view eventName(Event e);
std::string_view eventText(Event e);

struct PortCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_dropped = 0;  // received on this port and dropped, any reason
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_dropped = 0;  // refused by the port's tx queue
  uint64_t miss_budget_dropped = 0;  // of rx_dropped: misses over the slow-path budget (MissBudget)
  uint64_t miss_throttled = 0;       // polls that took less than a full burst for the budget (MissThrottled)
};

// Policies the per-policy drop counters hold (snapshot.h: PolicyNames).
inline constexpr uint16_t kMaxPolicyNames = 4096;

struct WorkerCounters {
  uint64_t drops[kDropReasonCount] = {};
  // New connections denied, by the index of a policy isolating the port that denied them.
  uint64_t policy_drops[kMaxPolicyNames] = {};
  uint64_t events[kEventCount] = {};
  PortCounters ports[kMaxPorts] = {};
};

}  // namespace dpu::datapath
