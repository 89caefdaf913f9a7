// One iteration of a worker lcore's run-to-completion loop, apart from the
// loop (lcore.h) so that the engine bench times exactly what the lcores run:
//   for each (port, receive queue): Engine::rxBurstSize → rte_eth_rx_burst of
//     that many (none: the queue is not read this time) → Engine::processBurst
//   Engine::flush; Engine::quiescent.
// The engine answers fewer than kRxBurst for a port whose packets are mostly
// flow-cache misses over its slow-path budget, so those wait in the NIC's ring
// (and are dropped there when it is full) instead of being received, parsed
// and dropped by the lcore.
#pragma once

#include <cstdint>
#include <span>

namespace dpu::datapath {

class Engine;
class WorkerContext;

// A receive queue a worker polls.
struct RxQueue {
  uint16_t port = 0;
  uint16_t queue = 0;
  bool operator==(const RxQueue&) const = default;
};

// Runs one iteration over `queues` with `worker` (its lcore's own context);
// returns the packets received.
unsigned pollOnce(Engine& engine, WorkerContext& worker, std::span<const RxQueue> queues);

}  // namespace dpu::datapath
