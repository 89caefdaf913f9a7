// The worker lcores of dpu-dataplane: run-to-completion loops, one per worker
// lcore, each polling the (port, receive queue) pairs assigned to it:
//   pollOnce (poll.h): for each (port, queue): Engine::rxBurstSize →
//     rte_eth_rx_burst(up to 32) → Engine::processBurst; Engine::flush;
//     Engine::quiescent
//   report our own quiescent state.
//
// What is scheduled is a receive queue, not a port: the queues of a port with
// several (RSS, af_packet's kernel fanout: port.h) go to different workers,
// each to the worker polling the fewest queues. A flow stays on one lcore
// because its hash picks one queue, so the per-worker flow caches need no
// sharing; the engine is told the port only (its counters are per worker and
// port, summed on read).
//
// Assignment changes while the loops run. Each worker reads an immutable
// queue list through an atomic pointer once per iteration; the control thread
// publishes a new list (seq_cst store) and frees the old one only after the
// worker has finished an iteration that began after the store (its epoch
// counter, seq_cst, moved on) — the same RCU pattern as the engine's snapshots.
// Removing a port therefore waits for that quiescence before the port is stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "datapath/poll.h"

namespace dpu::datapath {

class Engine;

class WorkerSet {
 public:
  WorkerSet(Engine& engine, unsigned workers, uint32_t idle_sleep_us);
  ~WorkerSet();
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  // Launches the loops on the worker lcores (1..workers).
  Result<void> start();
  // Stops the loops and waits for them to return.
  void stop();

  using RxQueue = datapath::RxQueue;

  // Adds receive queues 0..rx_queues-1 of `port`, each to the worker polling
  // the fewest queues (among equals, one not yet polling this port, then the
  // lowest index); returns the worker of each queue. A port already assigned
  // keeps its workers.
  std::vector<unsigned> assign(uint16_t port, uint16_t rx_queues = 1);
  // Removes every queue of the port and waits until no worker polls any of them.
  void unassign(uint16_t port);
  // Waits until every running worker has completed one full iteration.
  void waitQuiescent();
  // Worker index polling queue `queue` of `port`, or -1.
  int workerOf(uint16_t port, uint16_t queue = 0) const;
  // The worker of each receive queue of `port` (by queue number); empty when not polled.
  std::vector<int> workersOf(uint16_t port) const;
  // The queues worker `worker` polls.
  std::vector<RxQueue> queuesOf(unsigned worker) const;
  unsigned workers() const { return static_cast<unsigned>(slots_.size()); }
  // Iterations each worker has completed (for liveness checks and tests).
  uint64_t iterations(unsigned worker) const;

 private:
  struct alignas(64) Slot {
    std::atomic<const std::vector<RxQueue>*> queues{nullptr};
    std::atomic<uint64_t> epoch{0};
    std::atomic<bool> running{false};
    unsigned lcore = 0;
    unsigned index = 0;
    WorkerSet* owner = nullptr;
  };
  static int loop(void* slot);
  void publish(Slot& slot, std::vector<RxQueue> queues);

  Engine& engine_;
  uint32_t idle_sleep_us_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
};

}  // namespace dpu::datapath
