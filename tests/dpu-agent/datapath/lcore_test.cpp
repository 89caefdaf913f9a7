// WorkerSet (lcore.h) with two worker lcores running around the stub engine:
// receive queues, not ports, are what the workers are given; the queues of
// one port go to different workers, ports spread evenly; unassign takes every
// queue of a port away and returns only once no worker polls any of them;
// one iteration of the loop (poll.h) takes from a queue only what the engine
// asks for. net_ring ports loop what is transmitted on queue i back to receive queue i,
// so a test picks the queue a packet arrives on (EAL --no-huge, three lcores
// on whatever CPUs there are).
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/lcore.h"
#include "stub_engine.h"

namespace {

using namespace dpu::datapath;
using namespace std::chrono_literals;
using dpu::datapath::testing::StubEngine;

template <typename Pred>
bool waitFor(Pred pred, std::chrono::milliseconds limit = 5s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

rte_mempool* eal() {
  static rte_mempool* pool = [] {
    const std::string prefix = "lcore-test-" + std::to_string(getpid());
    std::vector<std::string> args{"lcore_tests", "--no-huge", "--no-pci", "-m", "128", "--file-prefix", prefix,
                                  "--lcores", "0@0,1@0,2@0", "--log-level", "*:error"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    REQUIRE(rte_eal_init(static_cast<int>(argv.size()), argv.data()) >= 0);
    rte_mempool* p = rte_pktmbuf_pool_create("lcore_mbufs", 1023, 32, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    REQUIRE(p != nullptr);
    return p;
  }();
  return pool;
}

// A started net_ring port with `queues` receive and transmit queues.
uint16_t ringPort(const std::string& name, uint16_t queues) {
  rte_mempool* pool = eal();
  const std::string dev = "net_ring_" + name + std::to_string(getpid());
  REQUIRE(rte_dev_probe(dev.c_str()) == 0);
  uint16_t port = 0;
  REQUIRE(rte_eth_dev_get_port_by_name(dev.c_str(), &port) == 0);
  rte_eth_conf conf{};
  REQUIRE(rte_eth_dev_configure(port, queues, queues, &conf) == 0);
  for (uint16_t q = 0; q < queues; ++q) {
    REQUIRE(rte_eth_rx_queue_setup(port, q, 256, 0, nullptr, pool) == 0);
    REQUIRE(rte_eth_tx_queue_setup(port, q, 256, 0, nullptr) == 0);
  }
  REQUIRE(rte_eth_dev_start(port) == 0);
  return port;
}

// `count` frames onto receive queue `queue` of `port` (through its transmit queue of that number).
void inject(uint16_t port, uint16_t queue, unsigned count) {
  for (unsigned i = 0; i < count; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(eal());
    REQUIRE(m != nullptr);
    std::memset(rte_pktmbuf_append(m, 60), 0xab, 60);
    REQUIRE(rte_eth_tx_burst(port, queue, &m, 1) == 1);
  }
}

uint64_t got(StubEngine& engine, unsigned worker, uint16_t port) {
  return engine.worker(worker).per_port[port].load();
}

}  // namespace

TEST_CASE("workers: the queues of one port go to different workers, ports spread evenly", "[lcore]") {
  const uint16_t a = ringPort("qa", 2), b = ringPort("qb", 1), c = ringPort("qc", 1);
  StubEngine engine;
  WorkerSet workers(engine, 2, 0);
  REQUIRE(workers.start().ok());

  CHECK(workers.assign(a, 2) == std::vector<unsigned>{0, 1});
  // One queue each so far: b to the lowest index, c to the other.
  CHECK(workers.assign(b) == std::vector<unsigned>{0});
  CHECK(workers.assign(c) == std::vector<unsigned>{1});
  CHECK(workers.queuesOf(0) == std::vector<WorkerSet::RxQueue>{{a, 0}, {b, 0}});
  CHECK(workers.queuesOf(1) == std::vector<WorkerSet::RxQueue>{{a, 1}, {c, 0}});
  CHECK(workers.workersOf(a) == std::vector<int>{0, 1});
  CHECK(workers.workerOf(a, 1) == 1);
  // Assigning again changes nothing.
  CHECK(workers.assign(a, 2) == std::vector<unsigned>{0, 1});
  CHECK(workers.queuesOf(0).size() == 2);

  // Each queue is polled by its worker, and by it alone.
  inject(a, 0, 5);
  inject(a, 1, 7);
  REQUIRE(waitFor([&] { return got(engine, 0, a) == 5 && got(engine, 1, a) == 7; }));
  inject(b, 0, 3);
  inject(c, 0, 4);
  REQUIRE(waitFor([&] { return got(engine, 0, b) == 3 && got(engine, 1, c) == 4; }));
  CHECK(got(engine, 1, b) == 0);
  CHECK(got(engine, 0, c) == 0);

  // Two queues added to workers equally loaded: one each.
  const uint16_t d = ringPort("qd", 2);
  CHECK(workers.assign(d, 2) == std::vector<unsigned>{0, 1});
  CHECK(workers.queuesOf(0).size() == 3);
  CHECK(workers.queuesOf(1).size() == 3);
  workers.stop();
}

TEST_CASE("workers: unassign removes every queue of a port and returns once none is polled", "[lcore]") {
  const uint16_t a = ringPort("ua", 2), b = ringPort("ub", 1);
  StubEngine engine;
  WorkerSet workers(engine, 2, 0);
  REQUIRE(workers.start().ok());
  REQUIRE(workers.assign(a, 2) == std::vector<unsigned>{0, 1});
  REQUIRE(workers.assign(b) == std::vector<unsigned>{0});
  inject(a, 0, 2);
  inject(a, 1, 2);
  REQUIRE(waitFor([&] { return got(engine, 0, a) == 2 && got(engine, 1, a) == 2; }));

  workers.unassign(a);
  CHECK(workers.workersOf(a).empty());
  CHECK(workers.workerOf(a, 0) == -1);
  CHECK(workers.workerOf(a, 1) == -1);
  CHECK(workers.queuesOf(0) == std::vector<WorkerSet::RxQueue>{{b, 0}});
  CHECK(workers.queuesOf(1).empty());
  // Both workers have moved on to lists without `a`: what reaches its queues
  // now stays there, while b is still polled (its packets arrive, and both
  // workers keep iterating past the frames left on a).
  inject(a, 0, 3);
  inject(a, 1, 3);
  inject(b, 0, 6);
  REQUIRE(waitFor([&] { return got(engine, 0, b) == 6; }));
  const uint64_t i0 = workers.iterations(0), i1 = workers.iterations(1);
  REQUIRE(waitFor([&] { return workers.iterations(0) > i0 + 100 && workers.iterations(1) > i1 + 100; }));
  CHECK(got(engine, 0, a) == 2);
  CHECK(got(engine, 1, a) == 2);
  // The frames are still in a's rings.
  rte_mbuf* left[8];
  CHECK(rte_eth_rx_burst(a, 0, left, 8) == 3);
  rte_pktmbuf_free_bulk(left, 3);
  CHECK(rte_eth_rx_burst(a, 1, left, 8) == 3);
  rte_pktmbuf_free_bulk(left, 3);
  // Assigned again, it is polled again.
  CHECK(workers.assign(a, 2).size() == 2);
  inject(a, 1, 1);
  REQUIRE(waitFor([&] { return got(engine, 0, a) + got(engine, 1, a) == 5; }));
  workers.stop();
}

TEST_CASE("workers: a loop iteration takes from each queue what the engine asks for, and no more", "[lcore]") {
  const uint16_t a = ringPort("ba", 1), b = ringPort("bb", 1);
  StubEngine engine;
  WorkerContext& worker = engine.worker(0);
  const std::vector<RxQueue> queues{{a, 0}, {b, 0}};
  inject(a, 0, 40);
  inject(b, 0, 40);
  // b held to 5 a poll: a takes full bursts of 32, b its 5.
  engine.setRxBurst(b, 5);
  CHECK(pollOnce(engine, worker, queues) == 32 + 5);
  CHECK(engine.received(a) == 32);
  CHECK(engine.received(b) == 5);
  CHECK(worker.iterations.load() == 1);  // flush and quiescent ran
  // b skipped: its packets wait in its ring.
  engine.setRxBurst(b, 0);
  CHECK(pollOnce(engine, worker, queues) == 8);
  CHECK(engine.received(b) == 5);
  CHECK(worker.iterations.load() == 2);
  // b's full bursts back: what waited is taken.
  engine.setRxBurst(b, kRxBurst);
  CHECK(pollOnce(engine, worker, queues) == 32);
  CHECK(pollOnce(engine, worker, queues) == 3);
  CHECK(engine.received(a) == 40);
  CHECK(engine.received(b) == 40);
}
