// When dpu-dataplane tries again to open a representor it could not open, and
// when it says so. A port that fails is retried with exponential backoff
// (250 ms, doubling up to 30 s) rather than on every model change and every
// second, and its failure is logged when its reason changes, not on each
// attempt. A port refused for want of capacity (ErrorCode::kExhausted: every
// ethdev in use, the mbuf pool fully budgeted) is retried at once when another
// port closes and frees what it lacked.
//
// Pure (no DPDK, the clock is the caller's): DataplanePorts drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/result.h"

namespace dpu::datapath {

class PortRetries {
 public:
  using Clock = std::chrono::steady_clock;
  struct Failure {
    std::string reason;
    ErrorCode code = ErrorCode::kFailed;
    unsigned attempts = 0;          // failed attempts in a row
    Clock::duration delay{};        // before the next attempt
    Clock::time_point next{};       // the next attempt is due
  };

  explicit PortRetries(Clock::duration first = std::chrono::milliseconds(250),
                       Clock::duration longest = std::chrono::seconds(30));

  // Records a failed attempt to open `port`. True when the reason is not the
  // one of its previous failure (so the caller logs it).
  bool failed(const std::string& port, const Error& error, Clock::time_point now);
  // `port` opened: forgets its failures; returns how many attempts had failed.
  unsigned succeeded(const std::string& port);
  // Whether `port` may be tried now: it never failed, or its retry is due.
  bool due(const std::string& port, Clock::time_point now) const;
  // Every port that failed with `code` is due now.
  void retryNow(ErrorCode code, Clock::time_point now);
  // Forgets the ports not in `wanted` (the model dropped them).
  void keepOnly(const std::set<std::string>& wanted);
  // When the earliest retry is due; nullopt when nothing failed.
  std::optional<Clock::time_point> nextDue() const;

  const std::map<std::string, Failure>& failures() const { return failures_; }
  const Failure* failure(const std::string& port) const;
  // Failed attempts since start, of every port.
  uint64_t failedAttempts() const { return failed_attempts_; }

 private:
  Clock::duration first_;
  Clock::duration longest_;
  std::map<std::string, Failure> failures_;
  uint64_t failed_attempts_ = 0;
};

}  // namespace dpu::datapath
