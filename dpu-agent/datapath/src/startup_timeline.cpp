// The dataplane's start-up phases (startup_timeline.h).
#include "datapath/startup_timeline.h"

#include <algorithm>
#include <cstdio>

#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {
namespace {

std::string ms(uint64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", static_cast<double>(us) / 1000.0);
  return text;
}

}  // namespace

StartupTimeline::StartupTimeline(Clock::time_point origin, uint64_t origin_unix_us)
    : origin_(origin), origin_unix_us_(origin_unix_us) {}

uint64_t StartupTimeline::unixNowUs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

uint64_t StartupTimeline::sinceOrigin(Clock::time_point t) const {
  if (t <= origin_) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count());
}

void StartupTimeline::add(std::string name, Clock::time_point began, Clock::time_point ended) {
  if (finished_) return;
  StartupPhase p;
  p.name = std::move(name);
  p.start_us = sinceOrigin(began);
  const uint64_t end = sinceOrigin(ended);
  p.duration_us = end > p.start_us ? end - p.start_us : 0;
  insert(std::move(p));
}

void StartupTimeline::insert(StartupPhase phase) {
  // In the order they began (a port opened before the engine is recorded
  // when it is bound to it); a phase that began with another comes after it.
  auto at = std::upper_bound(phases_.begin(), phases_.end(), phase.start_us,
                             [](uint64_t start, const StartupPhase& p) { return start < p.start_us; });
  phases_.insert(at, std::move(phase));
}

void StartupTimeline::mark(std::string name, Clock::time_point at) {
  if (finished_) return;
  StartupPhase p;
  p.name = std::move(name);
  p.start_us = sinceOrigin(at);
  p.moment = true;
  insert(std::move(p));
}

std::string StartupTimeline::finish(Clock::time_point at) {
  if (finished_) return line();
  mark("forwarding", at);
  finished_ = true;
  total_us_ = sinceOrigin(at);
  return line();
}

std::string StartupTimeline::line() const {
  std::string out;
  for (const StartupPhase& p : phases_) {
    if (!out.empty()) out += ", ";
    out += p.name + (p.moment ? " at " + ms(p.start_us) : " " + ms(p.duration_us));
  }
  return out;
}

void StartupTimeline::describe(dataplane::v1::OperatorReply& reply) const {
  for (const StartupPhase& p : phases_) {
    auto* out = reply.add_startup();
    out->set_name(p.name);
    out->set_start_us(p.start_us);
    out->set_duration_us(p.duration_us);
    out->set_moment(p.moment);
  }
  reply.set_startup_us(total_us_);
  reply.set_started_unix_us(origin_unix_us_);
}

}  // namespace dpu::datapath
