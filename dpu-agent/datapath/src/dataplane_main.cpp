// dpu-dataplane: the DPDK datapath process. It owns the EAL, the ports and
// the worker lcores, runs the Engine (engine.h) on them, serves the
// programming API (dpu-agent) and the operator API (dpuctl), and keeps
// forwarding with its last model while no agent is connected.
//
//   dpu-dataplane --config /etc/dpu/dataplane.yaml
//   dpu-dataplane --config FILE --standby        # warm standby: takes over when the active one exits
//   dpu-dataplane --config FILE --check-config   # validate the config and exit
//
// One dataplane is active for a node (it holds `<programming socket>.lock`,
// takeover.h). Without --standby a second one is refused at once. With
// --standby a process that finds another active starts EAL and creates its
// mbuf pool, then waits for that lock, which the kernel releases the instant
// the active one exits (crash, SIGKILL, SIGTERM): only then does it detach
// stale XDP programs, open the ports, bind the sockets and take the agent's
// resync (one that finds nobody active is active at once). Its EAL
// --file-prefix is eal.file_prefix plus "-a" or "-b" (the slot it holds). A
// config whose EAL probes devices at start (eal.allow, preprobed ports) cannot
// wait: standbyProblem() says so and the standby exits.
//
// SIGTERM/SIGINT: stop the lcores, close the ports, remove the sockets, exit 0
// (a standby that is still waiting just exits).
// Exit codes: 0 clean stop, 1 start-up failure (the message names what to fix),
// 2 bad command line or configuration.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "common/log.h"
#include "common/version.h"
#include "datapath/api_server.h"
#include "datapath/dataplane_config.h"
#include "datapath/dataplane_neighbours.h"
#include "datapath/dataplane_ports.h"
#include "datapath/eal.h"
#include "datapath/engine.h"
#include "datapath/lcore.h"
#include "datapath/mbuf_budget.h"
#include "datapath/mbuf_pool.h"
#include "datapath/metrics.h"
#include "datapath/nat_keepalive.h"
#include "datapath/port.h"
#include "datapath/startup_timeline.h"
#include "datapath/takeover.h"
#include "datapath/xdp.h"
#include "offload/none_backend.h"
#include "offload/rte_flow_backend.h"

namespace {

using namespace dpu;
using namespace dpu::datapath;

std::atomic<bool> g_stop{false};

void onSignal(int) { g_stop.store(true); }

void usage(FILE* out) {
  std::fprintf(out,
               "usage: dpu-dataplane --config FILE [--standby | --check-config]\n"
               "  --config FILE    the dataplane configuration (JSON or YAML)\n"
               "  --standby        start warm (EAL, mbuf pool), take over when the active dataplane exits\n"
               "  --check-config   validate the configuration and exit\n"
               "  --version        print the version and exit\n");
}

int fail(const std::string& message) {
  DPU_LOG(kError, "dataplane") << message;
  return 1;
}

int run(const DataplaneConfig& config, const char* program, StartupTimeline& timeline, bool standby) {
  using Clock = StartupTimeline::Clock;
  // Which process owns the node's ports (takeover.h). A standby holds a slot
  // (its EAL prefix) and waits for the active lock after its warm-up below;
  // an active one takes the lock now or refuses to start.
  const std::string& socket = config.sockets.programming;
  HeldLock active;
  Slot slot;
  DataplaneConfig eal_config = config;
  if (standby) {
    auto claimed = claimSlot(socket);
    if (!claimed) return fail(claimed.error());
    slot = std::move(*claimed);
    eal_config.eal.file_prefix += "-" + slot.name;
    // Nobody active: this one is, from the start (a cold start, as without --standby).
    if (auto acquired = acquireActive(socket); acquired) {
      active = std::move(*acquired);
      standby = false;
      (void)slot.lock.publish(std::to_string(::getpid()) + " active\n");
    } else if (acquired.code() != ErrorCode::kConflict) {
      return fail(acquired.error());
    } else if (std::string problem = standbyProblem(config); !problem.empty()) {
      return fail(problem);
    }
  } else {
    auto acquired = acquireActive(socket);
    if (!acquired) return fail(acquired.error());
    active = std::move(*acquired);
  }
  // Beside EAL's start, which is mostly waiting (it loads every PMD and, on
  // x86 without an Intel TSC leaf, sleeps 100 ms to measure the TSC): the pool's
  // memory is faulted in without hugepages (mbuf_pool.h), and the XDP
  // programs a killed predecessor left are detached (xdp.h), by an active
  // process only: a standby's predecessor still runs them.
  std::unique_ptr<PoolArea> area = PoolArea::prepare(config);
  StaleXdpSweep stale;
  Clock::time_point sweep_began{}, sweep_ended{};
  std::thread sweeper;
  auto sweep = [&] {
    sweep_began = Clock::now();
    stale = detachStaleXdpPrograms();
    sweep_ended = Clock::now();
  };
  if (mayUseAfXdp(config) && !standby) sweeper = std::thread(sweep);
  auto began = Clock::now();
  auto init = initEal(eal_config, program);
  if (sweeper.joinable()) sweeper.join();
  if (!init) return fail(init.error());
  timeline.add("eal", began);
  if (sweep_ended != Clock::time_point{}) timeline.add("stale xdp detach (beside eal)", sweep_began, sweep_ended);

  began = Clock::now();
  auto created_pool = createMbufPool(config, area.get());
  if (area) {
    (void)area->wait();  // its thread is done: the times are final
    timeline.add("mbuf pool memory (beside eal)", area->began(), area->ended());
    area.reset();
  }
  if (!created_pool) {
    cleanupEal();
    return fail(created_pool.error());
  }
  rte_mempool* pool = *created_pool;
  timeline.add("mbuf pool", began);

  if (standby) {
    // Warm: wait for the active dataplane to exit. What follows is the
    // takeover, timed from the moment the lock is ours (the part of the
    // outage this process still costs).
    DPU_LOG(kInfo, "dataplane") << "standby (slot " << slot.name << ", EAL prefix " << eal_config.eal.file_prefix
                                << "): warm after " << timeline.line() << "; waiting for " << activeLockPath(socket);
    // "PID standby" in the slot file: warm (a supervisor may wait for it).
    if (auto published = slot.lock.publish(std::to_string(::getpid()) + " standby\n"); !published) {
      DPU_LOG(kWarn, "dataplane") << published.error();
    }
    const int predecessor = activeLockOwner(socket);
    auto acquired = waitForActive(socket, g_stop);
    if (!acquired) {
      rte_mempool_free(pool);
      cleanupEal();
      if (acquired.code() == ErrorCode::kClosed) {
        DPU_LOG(kInfo, "dataplane") << "standby stopped before a takeover";
        return 0;
      }
      return fail(acquired.error());
    }
    active = std::move(*acquired);
    (void)slot.lock.publish(std::to_string(::getpid()) + " active\n");
    timeline = StartupTimeline();
    timeline.mark("takeover", Clock::now());
    DPU_LOG(kInfo, "dataplane") << "taking over: the active dataplane"
                                << (predecessor > 0 ? " (pid " + std::to_string(predecessor) + ")" : std::string())
                                << " exited";
    if (mayUseAfXdp(config)) {
      sweep();
      timeline.add("stale xdp detach", sweep_began, sweep_ended);
    }
  }
  for (const auto& iface : stale.detached)
    DPU_LOG(kInfo, "dataplane") << "detached the XDP program a previous dataplane left on " << iface;
  for (const auto& error : stale.errors) DPU_LOG(kWarn, "dataplane") << error;

  int status = 0;
  {
    auto backend = makePortBackend(config.representors);
    // Every port is charged its share of the pool (mbuf_budget.h); af_xdp only
    // where the pool's layout lets its umem cover every mbuf (mbuf_pool.h).
    MbufBudget budget(config.mbuf_pool_size, mbufPoolReserve(config.workers, config.mbuf_cache_size));
    PortSetup setup;
    setup.pool = pool;
    setup.workers = config.workers;
    setup.rx_ring_size = config.rx_ring_size;
    setup.tx_ring_size = config.tx_ring_size;
    setup.budget = &budget;
    if (mayUseAfXdp(config)) setup.af_xdp_problem = afXdpUmemProblem(pool);
    DPU_LOG(kInfo, "dataplane") << "mbuf pool: " << config.mbuf_pool_size << " mbufs of "
                                << rte_pktmbuf_data_room_size(pool) << " bytes, " << budget.reserve()
                                << " kept for lcore caches and bursts, the rest budgeted per port"
                                << (setup.af_xdp_problem.empty() ? "" : "; no af_xdp: " + setup.af_xdp_problem);
    DataplanePorts ports(*backend, setup);
    ports.setTimeline(&timeline);
    if (auto opened = ports.openRolePorts(config); !opened) {
      rte_mempool_free(pool);
      cleanupEal();
      return fail(opened.error());
    }
    const Port* uplink = ports.rolePort("uplink");

    // The offload backend. rte_flow goes through the uplink's switch domain;
    // ports without rte_flow refuse each rule and the flow stays in software.
    offload::NoOffloadBackend no_offload;
    std::unique_ptr<offload::RteFlowBackend> rte_flow;
    offload::OffloadBackend* offload = &no_offload;
    if (config.offload == "rte_flow") {
      offload::RteFlowBackendConfig flow_config;
      flow_config.eswitch_port = uplink->port_id;
      flow_config.ports.add(uplink->port_id, uplink->port_id);
      flow_config.tunnel_ports.push_back(uplink->port_id);
      auto created = offload::RteFlowBackend::create(flow_config);
      if (!created) {
        ports.closeAll();
        rte_mempool_free(pool);
        cleanupEal();
        return fail("offload rte_flow: " + created.error());
      }
      rte_flow = std::move(*created);
      offload = rte_flow.get();
    }

    began = Clock::now();
    EngineConfig engine_config;
    engine_config.workers = config.workers;
    engine_config.flow_cache_entries = config.flow_cache_entries;
    engine_config.flow_idle_timeout_ms = config.flow_idle_timeout_ms;
    static_assert(kMaxMissBudget == EngineConfig::kMaxMissBudget &&
                  kDefaultMissBudget == EngineConfig::kDefaultMissBudget &&
                  kDefaultMissCycleShare == EngineConfig::kDefaultMissCycleShare);
    engine_config.miss_budget = config.miss_budget;
    engine_config.miss_cycle_share = config.miss_cycle_share;
    engine_config.tunnel_ip = config.tunnel_ip;
    engine_config.offload = offload;
    engine_config.max_host_macs = config.north_south.max_host_macs;
    engine_config.host_mac_ageing_ms = config.north_south.host_mac_ageing_s * 1000;
    engine_config.max_neighbours = config.north_south.max_neighbours;
    engine_config.neighbour_stale_ms = config.north_south.neighbour_stale_s * 1000;
    // The config's defaults and bounds are the engine's (dataplane_config.h).
    static_assert(EngineConfig::kDefaultConntrackEntries == kDefaultConntrackEntries &&
                  EngineConfig::kDefaultAffinityEntries == kDefaultAffinityEntries);
    engine_config.conntrack_entries = config.conntrack.max_entries;
    engine_config.affinity_entries = config.conntrack.affinity_entries;
    engine_config.conntrack_timeouts = config.conntrack.timeouts;
    engine_config.nat_ports_file = socket + ".natt-ports";
    if (config.conntrack.persist) {
      // Beside the active lock, which this process holds: no other opens them.
      engine_config.conntrack_file = socket + ".conntrack";
      engine_config.affinity_file = socket + ".affinity";
    }
    auto engine = Engine::create(engine_config);
    if (!engine) {
      ports.closeAll();
      rte_flow.reset();
      rte_mempool_free(pool);
      cleanupEal();
      return fail("engine: " + engine.error());
    }
    timeline.add("engine", began);
    WorkerSet workers(**engine, config.workers, config.idle_sleep_us);
    if (rte_flow) {
      ports.setObserver([&](const Port& port, PortRole role, bool added) {
        if (role == PortRole::kUplink) return;
        if (!added) {
          rte_flow->removePort(port.port_id);
        } else if (auto ok = rte_flow->addPort(port.port_id, port.port_id, false); !ok) {
          DPU_LOG(kWarn, "dataplane") << "offload: port " << port.name << ": " << ok.error();
        }
      });
    }
    if (auto attached = ports.attach(**engine, workers); !attached) {
      status = fail(attached.error());
    } else {
      std::map<IpAddress, MacAddress> static_hops;
      for (const auto& hop : config.next_hops)
        static_hops[*IpAddress::parse(hop.peer)] = *MacAddress::parse(hop.mac);
      std::string uplink_iface = config.resolve_next_hops ? ports.rolePort("uplink")->iface : "";
      TunnelNeighbours neighbours(**engine, uplink_iface, std::move(static_hops));
      ApiServer server(**engine, ports, neighbours, config.sockets);
      server.setTimeline(&timeline);
      NatKeepalives keepalives(**engine, config.resolve_next_hops ? uplink_iface : "");
      server.setNatKeepalives(&keepalives);
      MetricsEndpoint metrics(config.metrics, config.sockets.operator_api);
      // Each step, when it succeeds, is a start-up phase.
      auto timed = [&](const char* phase, const auto& step) -> Result<void> {
        const auto at = Clock::now();
        Result<void> done = step();
        if (done) timeline.add(phase, at);
        return done;
      };
      if (auto resolving = timed("next hops", [&] { return neighbours.open(); }); !resolving) {
        status = fail(resolving.error());
      } else if (auto open = timed("sockets", [&] { return server.open(); }); !open) {
        status = fail(open.error());
      } else if (auto listening = config.metrics.enabled ? timed("metrics", [&] { return metrics.start(); })
                                                         : Result<void>{};
                 !listening) {
        status = fail(listening.error());
      } else {
        // Who is active, for operators and supervisors (the lab waits for its pid here).
        if (auto published = active.publish(std::to_string(::getpid()) + "\n"); !published) {
          DPU_LOG(kWarn, "dataplane") << published.error();
        }
        // The worker lcores start with the first model (DataplanePorts::activate).
        DPU_LOG(kInfo, "dataplane") << "running: " << config.workers << " worker lcore(s), flow cache "
                                    << config.flow_cache_entries << " entries per worker ("
                                    << (*engine)->bytesPerFlow() << " bytes per flow), offload " << config.offload;
        server.run(g_stop);
        if (!server.failure().empty()) status = fail(server.failure());
        DPU_LOG(kInfo, "dataplane") << "stopping";
      }
      metrics.stop();
      server.close();
    }
    workers.stop();
    ports.closeAll();
    engine->reset();
    rte_flow.reset();
  }
  rte_mempool_free(pool);
  cleanupEal();
  if (status == 0) {
    DPU_LOG(kInfo, "dataplane") << "stopped";
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // Start-up is timed from here: the dynamic loader's work before it is a
  // few milliseconds (LD_DEBUG=statistics), EAL loading its PMDs is counted in "eal".
  StartupTimeline timeline;
  std::string config_path;
  bool check = false;
  bool standby = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      config_path = arg.substr(9);
    } else if (arg == "--check-config") {
      check = true;
    } else if (arg == "--standby") {
      standby = true;
    } else if (arg == "--version") {
      std::printf("dpu-dataplane %s\n", DPU_VERSION);
      return 0;
    } else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "dpu-dataplane: unknown argument %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (config_path.empty()) {
    usage(stderr);
    return 2;
  }
  auto config = loadDataplaneConfig(config_path);
  if (!config) {
    std::fprintf(stderr, "dpu-dataplane: %s\n", config.error().c_str());
    return 2;
  }
  // Validation reads the document only, as the other daemons' --check-config:
  // it creates no log file on the machine it runs on.
  if (check) {
    std::printf("%s: OK\n", config_path.c_str());
    return 0;
  }
  if (auto level = log::parseLevel(config->log_level); level) log::setLevel(*level);
  if (!config->log_file.empty()) {
    if (auto file = log::setFile(config->log_file); !file) {
      std::fprintf(stderr, "dpu-dataplane: log.file: %s\n", file.error().c_str());
      return 2;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return run(*config, argv[0], timeline, standby);
}
