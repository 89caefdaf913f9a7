// The dataplane's acknowledgements as the program benches wait for them: the
// last generation a DataplaneClient saw acknowledged, and when it arrived.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "control/dataplane_client.h"

namespace dpu::bench {

class DataplaneAcks {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DataplaneAcks(dpu::control::DataplaneClient& client) {
    client.onGeneration([this](uint64_t g) {
      const auto now = Clock::now();
      std::lock_guard lock(mu_);
      acked_ = g;
      acked_at_ = now;
      cv_.notify_all();
    });
  }

  // Waits up to LIMIT for a generation above ABOVE; AT is when the last one came.
  bool waitAbove(uint64_t above, std::chrono::milliseconds limit, Clock::time_point& at) {
    std::unique_lock lock(mu_);
    const bool ok = cv_.wait_for(lock, limit, [&] { return acked_ > above; });
    at = acked_at_;
    return ok;
  }

  uint64_t last() {
    std::lock_guard lock(mu_);
    return acked_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t acked_ = 0;
  Clock::time_point acked_at_;
};

}  // namespace dpu::bench
