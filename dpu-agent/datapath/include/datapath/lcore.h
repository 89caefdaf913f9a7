// The worker lcores of dpu-dataplane: run-to-completion loops, one per worker
// lcore, each polling the receive queue of the ports assigned to it:
//   for each port: rte_eth_rx_burst(32) → Engine::processBurst
//   Engine::flush; Engine::quiescent; report our own quiescent state.
//
// Port assignment changes while the loops run. Each worker reads an immutable
// port list through an atomic pointer once per iteration; the control thread
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

  // Adds the port to the worker with the fewest ports; returns that worker.
  unsigned assign(uint16_t port);
  // Removes the port from its worker and waits until no worker polls it.
  void unassign(uint16_t port);
  // Waits until every running worker has completed one full iteration.
  void waitQuiescent();
  // Worker index polling `port`, or -1.
  int workerOf(uint16_t port) const;
  unsigned workers() const { return static_cast<unsigned>(slots_.size()); }
  // Iterations each worker has completed (for liveness checks and tests).
  uint64_t iterations(unsigned worker) const;

 private:
  struct alignas(64) Slot {
    std::atomic<const std::vector<uint16_t>*> ports{nullptr};
    std::atomic<uint64_t> epoch{0};
    std::atomic<bool> running{false};
    unsigned lcore = 0;
    unsigned index = 0;
    WorkerSet* owner = nullptr;
  };
  static int loop(void* slot);
  void publish(Slot& slot, std::vector<uint16_t> ports);

  Engine& engine_;
  uint32_t idle_sleep_us_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
};

}  // namespace dpu::datapath
