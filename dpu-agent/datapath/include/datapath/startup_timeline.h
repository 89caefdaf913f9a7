// How long dpu-dataplane took to start, phase by phase, so that the outage
// of a restart reads as its parts (EAL, the mbuf pool, each port's probe,
// queue set-up and start on its backend, the sockets, the wait for the agent,
// the first full sync, the representors, forwarding) instead of a guess.
//
// Every phase is a name, when it began (from the origin: the start of main)
// and how long it lasted. The timeline ends when the dataplane forwards (its
// ports are polled with the first model); finish() logs it as one line, and
// the operator API's stats reply carries it (OperatorReply.startup, printed
// by `dpuctl startup`), so a test reads it without parsing a log.
// Phases recorded after finish() are ignored: a representor opened an hour
// later is not start-up. Control thread only. Pure: no DPDK.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dpu::dataplane::v1 {
class OperatorReply;
}

namespace dpu::datapath {

struct StartupPhase {
  std::string name;
  uint64_t start_us = 0;     // from the origin
  uint64_t duration_us = 0;
  bool moment = false;       // a point in time (agent connected, forwarding), not a span
};

class StartupTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // `origin_unix_us`: the origin on the wall clock (the stats answer gives it,
  // so a test can line the phases up with its own clock).
  explicit StartupTimeline(Clock::time_point origin = Clock::now(), uint64_t origin_unix_us = unixNowUs());
  static uint64_t unixNowUs();

  // A phase from `began` to `ended`.
  void add(std::string name, Clock::time_point began, Clock::time_point ended);
  void add(std::string name, Clock::time_point began) { add(std::move(name), began, Clock::now()); }
  // A moment: something happened at `at`.
  void mark(std::string name, Clock::time_point at);
  // Start-up is over: the ports are polled with the first model. Marks
  // "forwarding" and returns line().
  std::string finish(Clock::time_point at);
  bool finished() const { return finished_; }

  // "eal 151.2 ms, mbuf pool 88.0 ms, ..., forwarding at 402.7 ms": each
  // phase with its duration, moments with their time, in the order they
  // began (whatever the order they were added in).
  std::string line() const;
  const std::vector<StartupPhase>& phases() const { return phases_; }
  // From the origin to finish() (0 before it).
  uint64_t totalUs() const { return total_us_; }
  // OperatorReply.startup, startup_us and started_unix_us.
  void describe(dataplane::v1::OperatorReply& reply) const;

 private:
  uint64_t sinceOrigin(Clock::time_point t) const;
  void insert(StartupPhase phase);

  Clock::time_point origin_;
  uint64_t origin_unix_us_ = 0;
  std::vector<StartupPhase> phases_;
  bool finished_ = false;
  uint64_t total_us_ = 0;
};

}  // namespace dpu::datapath
