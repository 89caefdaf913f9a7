// The one thread that calls the ClusterListener for the Kubernetes source:
// every reflector hands its changes here, so callbacks never run
// concurrently, always on this thread, and each kind's changes arrive in the
// order its reflector saw them. A bounded queue pushes back on the
// reflectors (max_pending decoded objects waiting). synced() is called each
// time a kind finishes a listing while every kind has listed at least once.
//
// Private to dpu_control_kube.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "control/cluster_source.h"
#include "control/kube_objects.h"

namespace dpu::control::kube {

// What reaches the listener.
struct Delivery {
  enum class Op : uint8_t { kUpsert, kDelete, kListed };
  Op op = Op::kUpsert;
  ObjectKind kind = ObjectKind::kNode;
  KubeObject object;  // upsert: the object; delete: ns and name
};

class Dispatcher {
 public:
  // `kinds`: the kinds that must all have listed before synced().
  Dispatcher(ClusterListener& listener, const std::vector<ObjectKind>& kinds, size_t max_pending);
  ~Dispatcher() { stop(); }

  void start();
  // Wakes every waiting producer and joins the thread; no callback runs after it.
  void stop();

  // Queues a batch in order (and clears it); waits while max_pending are queued.
  void enqueue(std::vector<Delivery>& batch);
  void enqueueOne(Delivery&& d);

  bool synced() const { return synced_.load(); }
  uint64_t events() const { return events_.load(); }
  std::array<uint64_t, kObjectKindCount> eventsByKind() const;

 private:
  void run();
  void deliver(Delivery& d);

  ClusterListener& listener_;
  uint32_t all_mask_ = 0;
  const size_t max_pending_;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable queue_cv_;
  std::condition_variable space_cv_;
  std::deque<Delivery> queue_;
  std::atomic<bool> stopping_{false};  // set under mu_, so waiters see it
  uint32_t listed_ = 0;                // kinds listed at least once; the dispatcher thread's

  std::atomic<uint64_t> events_{0};
  std::array<std::atomic<uint64_t>, kObjectKindCount> events_by_kind_{};
  std::atomic<bool> synced_{false};
};

}  // namespace dpu::control::kube
