// Backoff and logging decisions for representors that could not be opened (port_retry.h).
#include "datapath/port_retry.h"

#include <algorithm>

namespace dpu::datapath {

PortRetries::PortRetries(Clock::duration first, Clock::duration longest) : first_(first), longest_(longest) {}

bool PortRetries::failed(const std::string& port, const Error& error, Clock::time_point now) {
  ++failed_attempts_;
  auto [it, fresh] = failures_.try_emplace(port);
  Failure& f = it->second;
  const bool changed = fresh || f.reason != error.message;
  f.delay = fresh ? first_ : std::min<Clock::duration>(f.delay * 2, longest_);
  f.next = now + f.delay;
  f.reason = error.message;
  f.code = error.code;
  ++f.attempts;
  return changed;
}

unsigned PortRetries::succeeded(const std::string& port) {
  auto it = failures_.find(port);
  if (it == failures_.end()) return 0;
  const unsigned attempts = it->second.attempts;
  failures_.erase(it);
  return attempts;
}

bool PortRetries::due(const std::string& port, Clock::time_point now) const {
  auto it = failures_.find(port);
  return it == failures_.end() || now >= it->second.next;
}

void PortRetries::retryNow(ErrorCode code, Clock::time_point now) {
  for (auto& [port, f] : failures_)
    if (f.code == code) f.next = std::min(f.next, now);
}

void PortRetries::keepOnly(const std::set<std::string>& wanted) {
  for (auto it = failures_.begin(); it != failures_.end();) {
    it = wanted.count(it->first) ? std::next(it) : failures_.erase(it);
  }
}

std::optional<PortRetries::Clock::time_point> PortRetries::nextDue() const {
  std::optional<Clock::time_point> earliest;
  for (const auto& [port, f] : failures_)
    if (!earliest || f.next < *earliest) earliest = f.next;
  return earliest;
}

const PortRetries::Failure* PortRetries::failure(const std::string& port) const {
  auto it = failures_.find(port);
  return it == failures_.end() ? nullptr : &it->second;
}

}  // namespace dpu::datapath
