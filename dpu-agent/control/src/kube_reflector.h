// One kind's reflector, as client-go's: on its own thread, over the shared
// Transport, it lists the kind (pages of `page_size`, the next page in flight
// while one is decoded), watches from the list's resourceVersion with
// bookmarks, resumes a watch that ends or drops from the last version it saw,
// relists on 410 Gone (or every relist_period) delivering only what differs
// from what it delivered before, and backs off with jitter on failures. Each
// kind has its own state, versions, backoff and counters: one kind's 410 or
// outage relists or delays only that kind.
//
// Private to dpu_control_kube.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/result.h"
#include "control/cluster_source.h"
#include "kube_dispatcher.h"
#include "kube_transport.h"

namespace dpu::control::kube {

// The source's stop, seen by every reflector: interruptible sleeps.
class StopSignal {
 public:
  bool stopping() const { return stopping_.load(); }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  // Sleeps unless stopping; false when stopping.
  bool sleepFor(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, d, [this] { return stopping_.load(); });
  }

 private:
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

struct ReflectorOptions {
  ObjectKind kind = ObjectKind::kNode;
  uint32_t page_size = 2000;
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::seconds watch_timeout{300};
  std::chrono::seconds relist_period{0};  // 0: only on 410
};

class Reflector {
 public:
  Reflector(ReflectorOptions options, Transport& transport, Dispatcher& dispatcher, StopSignal& stop,
            LastError& errors);
  ~Reflector() { join(); }
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void start();
  void join();  // after the StopSignal and Transport::cancel()

  ObjectKind kind() const { return options_.kind; }
  uint64_t malformed() const { return malformed_.load(); }
  uint64_t watchRestarts() const { return watch_restarts_.load(); }
  uint64_t relists() const { return relists_.load(); }

  // Full jitter over an exponentially growing ceiling, never below half of
  // it, so a fleet of agents does not stampede a recovering API server.
  static std::chrono::milliseconds backoff(int failures, std::chrono::milliseconds initial,
                                           std::chrono::milliseconds max, std::mt19937_64& rng);

 private:
  struct IndexEntry {
    uint64_t fingerprint = 0;
    uint32_t generation = 0;
  };
  using Index = std::unordered_map<std::string, IndexEntry>;
  enum class WatchEnd { kEnded, kGone, kFailed };

  void run();
  // Lists every page, delivers what differs from index_; the list's resourceVersion.
  Result<std::string> list(uint32_t generation);
  WatchEnd watch(std::string& rv, uint64_t& delivered, std::string& error);
  std::string listPath(const std::string& cont) const;
  void countMalformed(const KubeObject& o);
  void fail(const std::string& error);

  const ReflectorOptions options_;
  Transport& transport_;
  Dispatcher& dispatcher_;
  StopSignal& stop_;
  LastError& errors_;
  std::thread thread_;
  Index index_;  // what was delivered, by key; only this reflector's thread touches it
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> watch_restarts_{0};
  std::atomic<uint64_t> relists_{0};
};

}  // namespace dpu::control::kube
