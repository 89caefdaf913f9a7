// The dataplane's ports at their limits, around a stub Engine (EAL
// in-process, --no-huge, net_ring representors from a devargs template):
//  - the mbuf pool is laid out so that net_af_xdp's umem covers every mbuf
//    (DPDK's default layout leaves most of them out without hugepages);
//  - a representor beyond RTE_MAX_ETHPORTS fails with that reason, is listed
//    as failed and named in every ProgramReply, is retried with backoff on a
//    controlled clock, and opens at once when another port closes;
//  - a port the mbuf budget cannot take fails the same way and opens when a
//    port gives its mbufs back.
// EAL initialises once per process, so these share one binary of their own.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "datapath/dataplane_config.h"
#include "datapath/dataplane_ports.h"
#include "datapath/lcore.h"
#include "datapath/mbuf_pool.h"
#include "stub_engine.h"

namespace {

using namespace dpu;
using namespace dpu::datapath;
using namespace std::chrono_literals;
namespace v1 = dpu::dataplane::v1;
using dpu::datapath::testing::StubEngine;

void initEalOnce() {
  static bool done = [] {
    const std::string prefix = "--file-prefix=dataplane_ports_test_" + std::to_string(getpid());
    std::vector<std::string> args = {"dataplane_ports_tests", "--no-huge", "--no-pci", "-m", "256", prefix,
                                     "--log-level=*:error", "-l", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return rte_eal_init(static_cast<int>(argv.size()), argv.data()) >= 0;
  }();
  REQUIRE(done);
}

DataplaneConfig ringConfig(const std::string& tag) {
  auto parsed = parseDataplaneConfig(R"({
    "uplink": {"devargs": "net_ring_up)" + tag + R"("},
    "representors": {"mode": "template", "devargs": "net_ring_{name})" + tag + R"("},
    "tunnel_ip": "192.168.100.1"
  })", "test");
  REQUIRE(parsed.ok());
  return *parsed;
}

v1::ProgramRequest fullSync(uint64_t generation, const std::vector<std::string>& representors) {
  v1::ProgramRequest r;
  r.mutable_full_sync()->set_generation(generation);
  for (const auto& name : representors) {
    auto* p = r.mutable_full_sync()->mutable_model()->add_ports();
    p->set_name("pod-" + name);
    p->set_representor(name);
  }
  return r;
}

v1::ProgramRequest deleting(uint64_t base, const std::string& representor) {
  v1::ProgramRequest r;
  r.mutable_delta()->set_base_generation(base);
  r.mutable_delta()->set_generation(base + 1);
  r.mutable_delta()->add_delete_ports(representor);
  return r;
}

const v1::PortInfo* portInfo(const v1::OperatorReply& reply, const std::string& name) {
  for (const auto& p : reply.ports())
    if (p.name() == name) return &p;
  return nullptr;
}

uint64_t counter(const v1::OperatorReply& reply, const std::string& name) {
  for (const auto& c : reply.counters())
    if (c.name() == name) return c.value();
  FAIL("no counter " << name);
  return 0;
}

}  // namespace

TEST_CASE("mbuf pool: net_af_xdp's umem covers every mbuf of the dataplane's pool", "[dataplane][ports]") {
  initEalOnce();
  // The default config opens representors on af_xdp.
  auto parsed = parseDataplaneConfig("uplink: {kind: af_xdp, iface: u0}\ntunnel_ip: 192.168.100.1\nmbuf_pool_size: 4095\n",
                                     "test");
  REQUIRE(parsed.ok());
  REQUIRE(mayUseAfXdp(*parsed));
  auto pool = createMbufPool(*parsed);
  REQUIRE(pool.ok());
  CHECK(afXdpUmemProblem(*pool) == "");
  CHECK(rte_mempool_avail_count(*pool) == 4095);
  CHECK(rte_pktmbuf_data_room_size(*pool) >= RTE_MBUF_DEFAULT_BUF_SIZE);
  // Every mbuf works as one (allocated, filled to its room, freed).
  std::vector<rte_mbuf*> all(4095);
  REQUIRE(rte_pktmbuf_alloc_bulk(*pool, all.data(), 4095) == 0);
  for (rte_mbuf* m : all) CHECK(rte_pktmbuf_append(m, 1514) != nullptr);
  rte_pktmbuf_free_bulk(all.data(), 4095);
  rte_mempool_free(*pool);

  // Without hugepages the same pool lives in memory faulted in beforehand,
  // beside EAL's start: the umem covers it the same, every mbuf works.
  auto area = PoolArea::prepare(*parsed);
  REQUIRE(area != nullptr);
  auto in_area = createMbufPool(*parsed, area.get());
  REQUIRE(in_area.ok());
  REQUIRE(area->wait().ok());
  CHECK(area->ended() >= area->began());
  area.reset();  // the pool owns the memory now
  CHECK(afXdpUmemProblem(*in_area) == "");
  CHECK(rte_mempool_avail_count(*in_area) == 4095);
  REQUIRE(rte_pktmbuf_alloc_bulk(*in_area, all.data(), 4095) == 0);
  for (rte_mbuf* m : all) CHECK(rte_pktmbuf_append(m, 1514) != nullptr);
  rte_pktmbuf_free_bulk(all.data(), 4095);
  rte_mempool_free(*in_area);
  // With hugepages (or PCI devices, or no af_xdp) the pool comes from EAL.
  auto huge = parseDataplaneConfig(
      "eal: {no_huge: false}\nuplink: {kind: af_xdp, iface: u0}\ntunnel_ip: 192.168.100.1\n", "test");
  REQUIRE(huge.ok());
  CHECK(PoolArea::prepare(*huge) == nullptr);

  // DPDK's default layout, which the dataplane used: without hugepages each
  // object has a page of its own and the umem ends long before the pool does.
  rte_mempool* plain = rte_pktmbuf_pool_create("plain_layout", 4095, 128, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  REQUIRE(plain != nullptr);
  CHECK_THAT(afXdpUmemProblem(plain), Catch::Contains("mbufs out"));
  rte_mempool_free(plain);

  // Without af_xdp the pool keeps DPDK's layout.
  const DataplaneConfig ring = ringConfig("pool");
  CHECK_FALSE(mayUseAfXdp(ring));
}

TEST_CASE("ports: a representor beyond RTE_MAX_ETHPORTS fails with that reason and is retried with backoff",
          "[dataplane][ports]") {
  initEalOnce();
  const std::string tag = "c";  // ring names are short (the PMD prefixes them)
  const DataplaneConfig config = ringConfig(tag);
  rte_mempool* pool = rte_pktmbuf_pool_create("cap_mbufs", 2047, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  REQUIRE(pool != nullptr);
  {
    StubEngine engine;
    auto backend = makePortBackend(config.representors);
    PortSetup setup;
    setup.pool = pool;
    setup.rx_ring_size = setup.tx_ring_size = 64;
    DataplanePorts ports(*backend, setup);
    DataplanePorts::Clock::time_point now{};
    ports.setClock([&] { return now; });
    auto opened = ports.openRolePorts(config);
    INFO((opened.ok() ? std::string() : opened.error()));
    REQUIRE(opened.ok());
    WorkerSet workers(engine, 1, 0);
    REQUIRE(ports.attach(engine, workers).ok());
    REQUIRE(rte_eth_dev_count_total() == 1);
    CHECK(ports.portCapacity() == RTE_MAX_ETHPORTS - 1);

    // One representor more than the ethdevs left.
    std::vector<std::string> reps;
    for (unsigned i = 0; i < RTE_MAX_ETHPORTS; ++i) reps.push_back("r" + std::to_string(i));
    REQUIRE(engine.program(fullSync(1, reps)).status() == v1::OK);
    ports.reconcile();
    CHECK(engine.bound().size() == RTE_MAX_ETHPORTS);  // the uplink and 31 representors
    REQUIRE(ports.retries().failures().size() == 1);
    const std::string refused = ports.retries().failures().begin()->first;
    const PortRetries::Failure& failure = ports.retries().failures().begin()->second;
    INFO(failure.reason);
    CHECK(failure.code == ErrorCode::kExhausted);
    CHECK_THAT(failure.reason, Catch::Contains("RTE_MAX_ETHPORTS (" + std::to_string(RTE_MAX_ETHPORTS) +
                                               ") ports are in use"));
    CHECK_THAT(failure.reason, Catch::Contains("-Dmax_ethports=N"));
    CHECK_THAT(failure.reason, !Catch::Contains("not permitted"));
    CHECK(ports.portCapacity() == RTE_MAX_ETHPORTS - 1);

    // Every reply names the logical port left without its port.
    v1::ProgramRequest status;
    status.mutable_status();
    v1::ProgramReply reply;
    ports.annotate(status, reply);
    REQUIRE(reply.problems_size() == 1);
    CHECK(reply.problems(0).kind() == v1::ObjectProblem::PORT);
    CHECK(reply.problems(0).name() == "pod-" + refused);
    CHECK(reply.problems(0).state() == v1::ObjectProblem::PORT_UNAVAILABLE);
    CHECK_THAT(reply.problems(0).reason(), Catch::Contains("RTE_MAX_ETHPORTS"));
    // The answer to Hello carries the capacity.
    v1::ProgramRequest hello;
    hello.mutable_hello();
    v1::ProgramReply greeted;
    ports.annotate(hello, greeted);
    CHECK(greeted.hello().port_capacity() == RTE_MAX_ETHPORTS - 1);
    CHECK(greeted.hello().max_ethports() == RTE_MAX_ETHPORTS);

    // dpuctl ports and stats.
    v1::OperatorReply listed;
    ports.describe(listed);
    const v1::PortInfo* info = portInfo(listed, refused);
    REQUIRE(info != nullptr);
    CHECK(info->state() == "failed");
    CHECK(info->error() == failure.reason);
    CHECK(info->retry_in_ms() == 250);
    CHECK(info->logical_port() == "pod-" + refused);
    CHECK(info->worker() == -1);
    const v1::PortInfo* open = portInfo(listed, "r1");
    REQUIRE(open != nullptr);
    CHECK(open->backend() == "devargs");
    CHECK(open->state() == "up, not polled");
    v1::OperatorReply stats;
    ports.addCounters(stats);
    CHECK(counter(stats, "ports_unavailable") == 1);
    CHECK(counter(stats, "port_open_failures") == 1);
    CHECK(counter(stats, "port_capacity") == RTE_MAX_ETHPORTS - 1);

    // Model changes and the periodic reconcile before the backoff is due try nothing.
    for (int i = 0; i < 50; ++i) ports.reconcile();
    CHECK(ports.retries().failedAttempts() == 1);
    // 250 ms, then 500 ms, then 1 s.
    now += 250ms;
    ports.reconcile();
    CHECK(ports.retries().failedAttempts() == 2);
    now += 499ms;
    ports.reconcile();
    CHECK(ports.retries().failedAttempts() == 2);
    now += 1ms;
    ports.reconcile();
    CHECK(ports.retries().failedAttempts() == 3);
    CHECK(ports.retries().failure(refused)->delay == 1s);

    // A pod detaches: its port closes and the refused one opens at once.
    const std::string leaving = refused == "r0" ? "r1" : "r0";
    REQUIRE(engine.program(deleting(1, leaving)).status() == v1::OK);
    ports.reconcile();
    CHECK(ports.retries().failures().empty());
    CHECK(engine.bound().count(refused) == 1);
    CHECK(engine.bound().count(leaving) == 0);
    v1::ProgramReply after;
    ports.annotate(status, after);
    CHECK(after.problems_size() == 0);
    ports.closeAll();
    CHECK(rte_eth_dev_count_total() == 0);
  }
  rte_mempool_free(pool);
}

TEST_CASE("ports: a port the mbuf budget cannot take fails until another gives its mbufs back", "[dataplane][ports]") {
  initEalOnce();
  const std::string tag = "m";
  const DataplaneConfig config = ringConfig(tag);
  rte_mempool* pool = rte_pktmbuf_pool_create("budget_mbufs", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  REQUIRE(pool != nullptr);
  {
    StubEngine engine;
    auto backend = makePortBackend(config.representors);
    // Room for the uplink and one representor (a burst in flight each), and 10 more.
    MbufBudget budget(2 * kMbufBurst + 10, 0);
    PortSetup setup;
    setup.pool = pool;
    setup.rx_ring_size = setup.tx_ring_size = 64;
    setup.budget = &budget;
    DataplanePorts ports(*backend, setup);
    DataplanePorts::Clock::time_point now{};
    ports.setClock([&] { return now; });
    auto opened = ports.openRolePorts(config);
    INFO((opened.ok() ? std::string() : opened.error()));
    REQUIRE(opened.ok());
    WorkerSet workers(engine, 1, 0);
    REQUIRE(ports.attach(engine, workers).ok());
    CHECK(budget.of("uplink") == kMbufBurst);

    REQUIRE(engine.program(fullSync(1, {"ra", "rb"})).status() == v1::OK);
    ports.reconcile();
    CHECK(engine.bound().count("ra") == 1);
    const PortRetries::Failure* failure = ports.retries().failure("rb");
    REQUIRE(failure != nullptr);
    INFO(failure->reason);
    CHECK(failure->code == ErrorCode::kExhausted);
    CHECK_THAT(failure->reason, Catch::Contains("needs 32 in flight mbufs but 10 of the pool's 74 are unbudgeted"));
    CHECK_THAT(failure->reason, Catch::Contains("raise mbuf_pool_size by 22"));
    // Nothing of it was opened.
    uint16_t id = 0;
    CHECK(rte_eth_dev_get_port_by_name(("net_ring_rb" + tag).c_str(), &id) != 0);
    CHECK(budget.budgeted() == 2 * kMbufBurst);

    REQUIRE(engine.program(deleting(1, "ra")).status() == v1::OK);
    ports.reconcile();
    CHECK(ports.retries().failures().empty());
    CHECK(engine.bound().count("rb") == 1);
    CHECK(budget.of("ra") == 0);
    CHECK(budget.of("rb") == kMbufBurst);
    v1::OperatorReply listed;
    ports.describe(listed);
    const v1::PortInfo* rb = portInfo(listed, "rb");
    REQUIRE(rb != nullptr);
    CHECK(rb->mbufs() == kMbufBurst);  // a ring port keeps none; a transmit burst in flight
    v1::OperatorReply stats;
    ports.addCounters(stats);
    CHECK(counter(stats, "mbufs_budgeted") == 2 * kMbufBurst);
    CHECK(counter(stats, "mbuf_pool_size") == 74);
    ports.closeAll();
    CHECK(budget.budgeted() == 0);
  }
  rte_mempool_free(pool);
}
