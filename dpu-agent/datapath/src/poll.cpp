// One iteration of a worker lcore's loop (poll.h).
#include "datapath/poll.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "datapath/engine.h"

namespace dpu::datapath {

unsigned pollOnce(Engine& engine, WorkerContext& worker, std::span<const RxQueue> queues) {
  rte_mbuf* packets[kRxBurst];
  unsigned received = 0;
  for (const RxQueue& q : queues) {
    uint16_t want = engine.rxBurstSize(worker, q.port);
    if (want == 0) continue;
    if (want > kRxBurst) want = kRxBurst;
    const uint16_t n = rte_eth_rx_burst(q.port, q.queue, packets, want);
    if (n == 0) continue;
    received += n;
    engine.processBurst(worker, q.port, packets, n);
  }
  engine.flush(worker);
  engine.quiescent(worker);
  return received;
}

}  // namespace dpu::datapath
