// The dpu-dataplane process parts (EAL, ports and the representor backend,
// worker lcores, the programming and operator sockets) around a stub Engine:
// a FullSync that names a representor hot-plugs its port and a worker polls
// it; a Delta that drops it removes the port while the lcores run; a second
// agent is refused; the operator API reports ports with their DPDK counters;
// the dataplane keeps going after the agent disconnects. net_ring ports loop
// transmitted packets back to their receive queue, so the test injects
// packets by transmitting on the port.
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/ipc_proto.h"
#include "datapath/api_server.h"
#include "datapath/dataplane_neighbours.h"
#include "datapath/dataplane_ports.h"
#include "datapath/eal.h"
#include "datapath/engine.h"
#include "datapath/lcore.h"
#include "stub_engine.h"

namespace {

using namespace dpu;
using namespace dpu::datapath;
using namespace std::chrono_literals;
namespace v1 = dpu::dataplane::v1;

using dpu::datapath::testing::StubEngine;

template <typename Pred>
bool waitFor(Pred pred, std::chrono::milliseconds limit = 5s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Transmits `count` small frames on `port` (net_ring loops them back to its receive queue).
void inject(rte_mempool* pool, uint16_t port, unsigned count) {
  for (unsigned i = 0; i < count; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    REQUIRE(m != nullptr);
    char* data = rte_pktmbuf_append(m, 60);
    std::memset(data, 0xab, 60);
    REQUIRE(rte_eth_tx_burst(port, 0, &m, 1) == 1);
  }
}

v1::ProgramReply send(const ipc::Socket& s, const v1::ProgramRequest& request) {
  REQUIRE(ipc::sendMessage(s, request, ipc::after(2s)).ok());
  v1::ProgramReply reply;
  auto frame = ipc::recvMessage(s, reply, ipc::after(5s));
  REQUIRE(frame.ok());
  return reply;
}

v1::ProgramRequest fullSync(uint64_t generation, std::vector<std::string> representors) {
  v1::ProgramRequest r;
  r.mutable_full_sync()->set_generation(generation);
  for (auto& name : representors) {
    auto* p = r.mutable_full_sync()->mutable_model()->add_ports();
    p->set_name("pod-" + name);
    p->set_representor(name);
  }
  return r;
}

}  // namespace

TEST_CASE("dataplane process: ports follow the model while the lcores run", "[dataplane]") {
  std::string tag = std::to_string(getpid());
  std::string dir = "/tmp/dpu-dataplane-test-" + tag;
  auto parsed = parseDataplaneConfig(R"({
    "eal": {"memory_mb": 128, "file_prefix": "dp-proc-)" + tag + R"(", "log_level": "*:error"},
    "workers": 1,
    "mbuf_pool_size": 2047,
    "mbuf_cache_size": 64,
    "idle_sleep_us": 20,
    "uplink": {"devargs": "net_ring_up)" + tag + R"("},
    "host_pf": {"devargs": "net_ring_hpf)" + tag + R"("},
    "representors": {"mode": "template", "devargs": "net_ring_{name})" + tag + R"("},
    "tunnel_ip": "192.168.100.1",
    "sockets": {"programming": ")" + dir + R"(/p.sock", "operator": ")" + dir + R"(/o.sock"}
  })", "test");
  REQUIRE(parsed.ok());
  const DataplaneConfig& config = *parsed;
  REQUIRE(initEal(config, "dataplane_process_tests").ok());
  rte_mempool* pool = rte_pktmbuf_pool_create("test_mbufs", config.mbuf_pool_size, config.mbuf_cache_size, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  REQUIRE(pool != nullptr);
  {
    StubEngine engine;
    auto backend = makePortBackend(config.representors);
    PortSetup setup;
    setup.pool = pool;
    setup.rx_ring_size = setup.tx_ring_size = 256;
    DataplanePorts ports(*backend, setup);
    REQUIRE(ports.openRolePorts(config).ok());
    WorkerSet workers(engine, 1, config.idle_sleep_us);
    REQUIRE(ports.attach(engine, workers).ok());
    CHECK(engine.bound().count("uplink") == 1);
    CHECK(engine.bound().count("host_pf") == 1);
    TunnelNeighbours neighbours(engine, "", {});
    ApiServer server(engine, ports, neighbours, config.sockets);
    REQUIRE(server.open().ok());
    std::atomic<bool> stop{false};
    std::thread control([&] { server.run(stop); });

    uint16_t uplink = ports.rolePort("uplink")->port_id;
    // Not polled before the first model.
    inject(pool, uplink, 4);
    std::this_thread::sleep_for(50ms);
    CHECK(engine.received(uplink) == 0);

    auto agent = ipc::connectUnix(config.sockets.programming, ipc::after(2s));
    REQUIRE(agent.ok());
    v1::ProgramRequest hello;
    hello.mutable_hello()->set_agent_id("test");
    auto greeted = send(*agent, hello);
    CHECK(greeted.hello().instance_id() == "stub");
    // Every ethdev but the uplink and the host PF is left to representors.
    CHECK(greeted.hello().max_ethports() == RTE_MAX_ETHPORTS);
    CHECK(greeted.hello().port_capacity() == RTE_MAX_ETHPORTS - 2);

    // A second agent is refused while the first is connected.
    {
      auto second = ipc::connectUnix(config.sockets.programming, ipc::after(2s));
      REQUIRE(second.ok());
      v1::ProgramReply refusal;
      auto frame = ipc::recvMessage(*second, refusal, ipc::after(2s));
      REQUIRE(frame.ok());
      CHECK(refusal.status() == v1::INVALID);
      CHECK_THAT(refusal.message(), Catch::Contains("another agent"));
    }

    // The worker lcores start with the first model, every port already theirs.
    CHECK(workers.iterations(0) == 0);
    CHECK(send(*agent, fullSync(1, {"ra", "rb"})).status() == v1::OK);
    REQUIRE(waitFor([&] { return engine.bound().count("ra") && engine.bound().count("rb"); }));
    REQUIRE(waitFor([&] { return workers.iterations(0) > 0; }));
    // The backlog on the uplink is polled now, and the host PF with it.
    REQUIRE(waitFor([&] { return engine.received(uplink) == 4; }));
    const uint16_t host_pf = ports.rolePort("host_pf")->port_id;
    inject(pool, host_pf, 3);
    REQUIRE(waitFor([&] { return engine.received(host_pf) == 3; }));
    uint16_t ra = engine.bound().at("ra");
    inject(pool, ra, 10);
    REQUIRE(waitFor([&] { return engine.received(ra) == 10; }));

    // The operator API: the engine's port list with the process's devargs and counters.
    v1::OperatorRequest ports_request;
    ports_request.mutable_ports();
    auto reply = ipc::call<v1::OperatorReply>(config.sockets.operator_api, ports_request, ipc::after(2s));
    REQUIRE(reply.ok());
    bool found = false;
    for (const auto& p : reply->ports()) {
      if (p.name() != "ra") continue;
      found = true;
      CHECK(p.devargs() == "net_ring_ra" + tag);
      CHECK(p.rx_packets() == 10);
      CHECK(p.tx_packets() == 10);
      CHECK(p.role() == "stub");
      CHECK(p.state().find("not polled") == std::string::npos);
    }
    CHECK(found);

    // A Delta drops rb: its port is removed while the worker runs, traffic on ra goes on.
    v1::ProgramRequest delta;
    delta.mutable_delta()->set_base_generation(1);
    delta.mutable_delta()->set_generation(2);
    delta.mutable_delta()->add_delete_ports("rb");
    CHECK(send(*agent, delta).status() == v1::OK);
    REQUIRE(waitFor([&] { return engine.bound().count("rb") == 0; }));
    uint16_t dummy = 0;
    CHECK(rte_eth_dev_get_port_by_name(("net_ring_rb" + tag).c_str(), &dummy) != 0);
    inject(pool, ra, 5);
    REQUIRE(waitFor([&] { return engine.received(ra) == 15; }));

    // The agent goes away: the dataplane keeps polling; a new agent resyncs.
    agent->close();
    inject(pool, ra, 5);
    REQUIRE(waitFor([&] { return engine.received(ra) == 20; }));
    auto again = ipc::connectUnix(config.sockets.programming, ipc::after(2s));
    REQUIRE(again.ok());
    CHECK(send(*again, hello).hello().generation() == 2);
    CHECK(send(*again, fullSync(3, {"ra", "rc"})).status() == v1::OK);
    REQUIRE(waitFor([&] { return engine.bound().count("rc") == 1; }));
    CHECK(engine.maintained_.load() > 0);

    stop.store(true);
    control.join();
    server.close();
    CHECK(access(config.sockets.programming.c_str(), F_OK) != 0);
    workers.stop();
    ports.closeAll();
    CHECK(engine.bound().empty());
  }
  rte_mempool_free(pool);
  cleanupEal();
  rmdir(dir.c_str());
}
