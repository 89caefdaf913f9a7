// Role ports and representors of a running dataplane (dataplane_ports.h).
#include "datapath/dataplane_ports.h"

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <cstdio>

#include "common/log.h"
#include "datapath/xdp.h"

namespace dpu::datapath {
namespace {

const char* roleName(PortRole role) {
  switch (role) {
    case PortRole::kUplink: return "uplink";
    case PortRole::kManagement: return "management";
    case PortRole::kRepresentor: return "representor";
    case PortRole::kHostPf: return "host_pf";
  }
  return "?";
}

uint64_t msUntil(DataplanePorts::Clock::time_point when, DataplanePorts::Clock::time_point now) {
  if (when <= now) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(when - now).count());
}

std::string seconds(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace

DataplanePorts::DataplanePorts(PortBackend& backend, PortSetup setup) : backend_(backend), setup_(setup) {}

DataplanePorts::~DataplanePorts() { closeAll(); }

Result<void> DataplanePorts::add(Port port, PortRole role) {
  auto destroy = [&] {
    if (role == PortRole::kRepresentor) {
      backend_.destroy(port);
    } else {
      destroyPort(port);
    }
  };
  // Worker i transmits on queue i of every port (engine.h): a port with fewer
  // transmit queues than workers would be written out of bounds.
  if (port.tx_queues < setup_.workers) {
    Error e{"port " + port.name + " (" + (port.devargs.empty() ? port.backend : port.devargs) + ") has " +
            std::to_string(port.tx_queues) + " transmit queue(s), but each of the " + std::to_string(setup_.workers) +
            " workers needs its own; use workers: 1 with this port kind"};
    destroy();
    return e;
  }
  if (auto bound = engine_->bindPort(port.name, port.port_id, role, port.mac); !bound) {
    destroy();
    return prefixed("binding port " + port.name, std::move(bound).takeError());
  }
  DPU_LOG(kInfo, "dataplane") << roleName(role) << " " << port.name << ": ethdev " << port.port_id << " ("
                              << port.backend << (port.devargs.empty() ? "" : ", " + port.devargs) << "), mac "
                              << port.mac.str() << ", " << port.rx_queues << " rx queue(s)"
                              << (port.rx_queues > 1 ? " spread by " + rxSpreadName(port.rx_spread) : "");
  if (observer_) observer_(port, role, true);
  if (timeline_ != nullptr && !port.steps.empty()) {
    const std::string phase = "port " + port.name + " " + port.backend;
    timeline_->add(phase, port.steps.front().began, port.steps.back().ended);
    for (const PortStep& s : port.steps) timeline_->add(phase + ": " + s.name, s.began, s.ended);
  }
  uint16_t id = port.port_id;
  uint16_t rx_queues = port.rx_queues;
  std::string name = port.name;
  ports_[name] = std::move(port);
  roles_[name] = role;
  if (active_) workers_->assign(id, rx_queues);
  return {};
}

Result<void> DataplanePorts::openRolePorts(const DataplaneConfig& config) {
  std::string xdp_program = config.xdp_program.empty() ? builtinXdpProgramPath() : config.xdp_program;
  auto uplink = createRolePort("uplink", config.uplink, setup_, xdp_program);
  if (!uplink) return prefixed("uplink", std::move(uplink).takeError());
  if (uplink->backend == "af_xdp") {
    auto ip = IpAddress::parse(config.tunnel_ip);
    const auto began = std::chrono::steady_clock::now();
    auto steered = configureAttachedSteering(uplink->iface, makeSteerConfig(*ip, config.xdp_steer_arp));
    if (!steered) {
      destroyPort(*uplink);
      return prefixed("uplink XDP program", std::move(steered).takeError());
    }
    uplink->steps.push_back(PortStep{"steering", began, std::chrono::steady_clock::now()});
    xdp_iface_ = uplink->iface;
    DPU_LOG(kInfo, "dataplane") << "uplink " << uplink->iface << ": overlay_steer steers Geneve/ESP to "
                                << config.tunnel_ip << (config.xdp_steer_arp ? " and its ARP" : "")
                                << " into the socket";
  }
  if (!config.uplink_mac.empty()) uplink->mac = *MacAddress::parse(config.uplink_mac);
  pending_.emplace_back(std::move(*uplink), PortRole::kUplink);
  if (config.management.configured) {
    auto mgmt = createRolePort("management", config.management, setup_, "");
    if (!mgmt) {
      closeUnbound();
      return prefixed("management port", std::move(mgmt).takeError());
    }
    pending_.emplace_back(std::move(*mgmt), PortRole::kManagement);
  }
  if (config.host_pf.configured) {
    // Everything the host PF sends is the dataplane's (bridged, north–south):
    // on af_xdp it gets the representors' program, which redirects all.
    auto host = createRolePort("host_pf", config.host_pf, setup_, builtinRepresentorXdpProgramPath());
    if (!host) {
      closeUnbound();
      return prefixed("host PF port", std::move(host).takeError());
    }
    pending_.emplace_back(std::move(*host), PortRole::kHostPf);
  }
  return {};
}

void DataplanePorts::closeUnbound() {
  for (auto& [port, role] : pending_) destroyPort(port);
  pending_.clear();
}

Result<void> DataplanePorts::attach(Engine& engine, WorkerSet& workers) {
  engine_ = &engine;
  workers_ = &workers;
  auto pending = std::move(pending_);
  pending_.clear();
  for (size_t i = 0; i < pending.size(); ++i) {
    if (auto added = add(std::move(pending[i].first), pending[i].second); !added) {
      for (size_t j = i + 1; j < pending.size(); ++j) destroyPort(pending[j].first);
      return added;
    }
  }
  return {};
}

const Port* DataplanePorts::rolePort(const std::string& name) const {
  if (auto it = ports_.find(name); it != ports_.end()) return &it->second;
  for (const auto& [port, role] : pending_)
    if (port.name == name) return &port;
  return nullptr;
}

Result<void> DataplanePorts::activate() {
  if (active_) return {};
  active_ = true;
  for (const auto& [name, port] : ports_) workers_->assign(port.port_id, port.rx_queues);
  if (auto started = workers_->start(); !started)
    return prefixed("starting the worker lcores", std::move(started).takeError());
  DPU_LOG(kInfo, "dataplane") << "polling " << ports_.size() << " ports";
  return {};
}

uint32_t DataplanePorts::openRepresentors() const {
  uint32_t open = 0;
  for (const auto& [name, role] : roles_) open += role == PortRole::kRepresentor;
  return open;
}

uint32_t DataplanePorts::portCapacity() const { return backend_.capacity(openRepresentors()); }

PortSetup DataplanePorts::representorSetup() const {
  PortSetup setup = setup_;
  const uint32_t capacity = portCapacity();
  const uint32_t after = capacity > openRepresentors() + 1 ? capacity - openRepresentors() - 1 : 0;
  setup.mbufs_kept_for_others = after * afPacketDemand(setup_.shape(static_cast<uint16_t>(setup_.workers))).total();
  return setup;
}

void DataplanePorts::reconcile() {
  if (!engine_) return;
  const Clock::time_point now = clock_();
  std::vector<std::string> wanted_list = engine_->wantedRepresentors();
  std::set<std::string> wanted(wanted_list.begin(), wanted_list.end());
  std::vector<std::string> unwanted;
  for (const auto& [name, role] : roles_)
    if (role == PortRole::kRepresentor && !wanted.count(name)) unwanted.push_back(name);
  for (const auto& name : unwanted) remove(name);
  // What a removed port held (an ethdev, mbufs) may be what another one lacked.
  if (!unwanted.empty()) retries_.retryNow(ErrorCode::kExhausted, now);
  retries_.keepOnly(wanted);
  std::set<std::string> tried;
  for (const auto& name : wanted_list) {  // in the engine's order (engine.h)
    if (!tried.insert(name).second) continue;
    if (ports_.count(name) || name == "uplink" || name == "management" || name == "host_pf") continue;
    if (!retries_.due(name, now)) continue;
    auto port = backend_.create(name, representorSetup());
    Result<void> opened = port ? add(std::move(*port), PortRole::kRepresentor) : Result<void>(std::move(port).takeError());
    if (!opened) {
      if (retries_.failed(name, opened.failure(), now)) {
        const PortRetries::Failure* f = retries_.failure(name);
        DPU_LOG(kWarn, "dataplane") << "representor " << name << " is not open: " << opened.error() << " (retrying in "
                                    << seconds(msUntil(f->next, now)) << ", with backoff; logged again only if the reason changes)";
      }
      continue;
    }
    if (unsigned attempts = retries_.succeeded(name); attempts > 0) {
      DPU_LOG(kInfo, "dataplane") << "representor " << name << " opened after " << attempts << " failed attempt(s)";
    }
  }
}

void DataplanePorts::annotate(const dataplane::v1::ProgramRequest& request, dataplane::v1::ProgramReply& reply) const {
  if (request.has_hello()) {
    reply.mutable_hello()->set_port_capacity(portCapacity());
    reply.mutable_hello()->set_max_ethports(RTE_MAX_ETHPORTS);
  }
  if (!engine_) return;
  const Clock::time_point now = clock_();
  for (const auto& [name, f] : retries_.failures()) {
    for (const auto& logical : engine_->logicalPortsOf(name)) {
      auto* problem = reply.add_problems();
      problem->set_kind(dataplane::v1::ObjectProblem::PORT);
      problem->set_name(logical);
      problem->set_state(dataplane::v1::ObjectProblem::PORT_UNAVAILABLE);
      problem->set_reason("representor " + name + " could not be opened: " + f.reason + " (attempt " +
                          std::to_string(f.attempts) + ", next in " + seconds(msUntil(f.next, now)) + ")");
    }
  }
}

void DataplanePorts::remove(const std::string& name) {
  auto it = ports_.find(name);
  if (it == ports_.end() || !engine_) return;
  Port port = it->second;
  PortRole role = roles_[name];
  // Stop polling, let the engine forget the port, and wait until no lcore can
  // still hold it (a buffered transmit, an old snapshot) before closing it.
  workers_->unassign(port.port_id);
  engine_->unbindPort(name);
  workers_->waitQuiescent();
  workers_->waitQuiescent();
  if (observer_) observer_(port, role, false);
  if (role == PortRole::kRepresentor) {
    backend_.destroy(port);
  } else {
    destroyPort(port);
  }
  ports_.erase(it);
  roles_.erase(name);
  DPU_LOG(kInfo, "dataplane") << "removed " << roleName(role) << " " << name;
}

void DataplanePorts::closeAll() {
  closeUnbound();
  std::vector<std::string> names;
  for (const auto& [name, port] : ports_) names.push_back(name);
  for (const auto& name : names) remove(name);
}

void DataplanePorts::describe(dataplane::v1::OperatorReply& reply) const {
  for (const auto& [name, port] : ports_) {
    dataplane::v1::PortInfo* info = nullptr;
    for (auto& p : *reply.mutable_ports())
      if (p.dpdk_port() == port.port_id) info = &p;
    if (!info) {
      info = reply.add_ports();
      info->set_name(name);
      info->set_role(roleName(roles_.at(name)));
      info->set_dpdk_port(port.port_id);
    }
    info->set_devargs(port.devargs.empty() ? port.backend : port.devargs);
    rte_eth_stats stats{};
    if (rte_eth_stats_get(port.port_id, &stats) == 0) {
      info->set_rx_packets(stats.ipackets);
      info->set_tx_packets(stats.opackets);
      info->set_rx_dropped(stats.imissed + stats.ierrors + stats.rx_nombuf);
      info->set_rx_missed(stats.imissed);
      info->set_tx_dropped(stats.oerrors);
      info->set_rx_bytes(stats.ibytes);
      info->set_tx_bytes(stats.obytes);
    }
    rte_eth_link link{};
    bool up = rte_eth_link_get_nowait(port.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
    std::string state = up ? "up" : "down";
    const std::vector<int> queue_workers = workers_ ? workers_->workersOf(port.port_id) : std::vector<int>{};
    const int worker = queue_workers.empty() ? -1 : queue_workers.front();
    if (worker < 0) state += ", not polled";
    info->set_state(state);
    info->set_backend(port.backend);
    info->set_backend_reason(port.backend_reason);
    info->set_mbufs(port.mbufs);
    info->set_worker(worker);
    info->set_rx_queues(port.rx_queues);
    info->set_rx_spread(rxSpreadName(port.rx_spread));
    for (int w : queue_workers) info->add_queue_workers(w);
  }
  const Clock::time_point now = clock_();
  for (const auto& [name, f] : retries_.failures()) {
    auto* info = reply.add_ports();
    info->set_name(name);
    info->set_role(roleName(PortRole::kRepresentor));
    info->set_state("failed");
    info->set_error(f.reason);
    info->set_retry_in_ms(msUntil(f.next, now));
    info->set_worker(-1);
    std::string logical;
    if (engine_) {
      for (const auto& l : engine_->logicalPortsOf(name)) logical += (logical.empty() ? "" : ",") + l;
    }
    info->set_logical_port(logical);
  }
}

void DataplanePorts::addCounters(dataplane::v1::OperatorReply& reply) const {
  auto add = [&](const char* name, uint64_t value, const char* description,
                 dataplane::v1::CounterKind kind = dataplane::v1::COUNTER_EVENT) {
    auto* c = reply.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_description(description);
    c->set_kind(kind);
  };
  constexpr auto kGauge = dataplane::v1::COUNTER_GAUGE;
  add("port_capacity", portCapacity(),
      "representor ports this dataplane can open (its DPDK's RTE_MAX_ETHPORTS less the ethdevs used otherwise)", kGauge);
  add("ports_unavailable", retries_.failures().size(),
      "representors the model wants that could not be opened (dpuctl ports: state failed)", kGauge);
  add("port_open_failures", retries_.failedAttempts(), "failed attempts to open a representor (retried with backoff)");
  if (setup_.budget != nullptr) {
    add("mbuf_pool_size", setup_.budget->poolSize(), "mbufs in the pool (mbuf_pool_size)", kGauge);
    add("mbufs_budgeted", setup_.budget->budgeted(), "mbufs budgeted to the open ports (dpuctl ports: MBUFS)", kGauge);
    add("mbufs_reserved", setup_.budget->reserve(), "mbufs kept for the lcores' mempool caches and receive bursts",
        kGauge);
  }
  if (setup_.pool != nullptr)
    add("mbufs_free", rte_mempool_avail_count(setup_.pool), "mbufs in the pool now", kGauge);
  if (xdp_iface_.empty()) return;
  auto counters = readAttachedCounters(xdp_iface_);
  if (!counters) return;
  add("xdp_steered", counters->redirected, "uplink XDP: overlay packets handed to the dataplane");
  add("xdp_to_kernel", counters->passed, "uplink XDP: other packets passed to the kernel");
  add("xdp_no_socket", counters->no_socket, "uplink XDP: overlay packets with no socket on their queue");
  add("xdp_host", counters->host,
      "uplink XDP: of the packets steered (or without a socket), the host's: to a host MAC, ARP/ND for a node IP");
}

void DataplanePorts::steerHost(const HostSteering& steering) {
  if (xdp_iface_.empty() || !ports_.count("host_pf") || steering.version == steered_version_) return;
  XdpHostSteering s{steering.host_macs, steering.node_ips};
  if (auto written = configureAttachedHostSteering(xdp_iface_, s); !written) {
    if (written.error() != steer_error_) {
      DPU_LOG(kWarn, "dataplane") << "uplink " << xdp_iface_ << ": cannot steer the host's traffic: " << written.error();
      steer_error_ = written.error();
    }
    return;
  }
  steer_error_.clear();
  steered_version_ = steering.version;
  DPU_LOG(kInfo, "dataplane") << "uplink " << xdp_iface_ << ": XDP steers to the host PF frames for "
                              << steering.host_macs.size() << " host MAC(s) and ARP/ND for "
                              << steering.node_ips.size() << " node IP(s)";
}

}  // namespace dpu::datapath
