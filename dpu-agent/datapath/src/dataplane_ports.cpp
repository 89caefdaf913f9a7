// Role ports and representors of a running dataplane (dataplane_ports.h).
#include "datapath/dataplane_ports.h"

#include <rte_ethdev.h>

#include "common/log.h"
#include "datapath/xdp.h"

namespace dpu::datapath {
namespace {

const char* roleName(PortRole role) {
  switch (role) {
    case PortRole::kUplink: return "uplink";
    case PortRole::kManagement: return "management";
    case PortRole::kRepresentor: return "representor";
  }
  return "?";
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
                              << port.mac.str();
  if (observer_) observer_(port, role, true);
  uint16_t id = port.port_id;
  std::string name = port.name;
  ports_[name] = std::move(port);
  roles_[name] = role;
  if (active_) workers_->assign(id);
  return {};
}

Result<void> DataplanePorts::openRolePorts(const DataplaneConfig& config) {
  std::string xdp_program = config.xdp_program.empty() ? builtinXdpProgramPath() : config.xdp_program;
  auto uplink = createRolePort("uplink", config.uplink, setup_, xdp_program);
  if (!uplink) return prefixed("uplink", std::move(uplink).takeError());
  if (uplink->backend == "af_xdp") {
    auto ip = IpAddress::parse(config.tunnel_ip);
    auto steered = configureAttachedSteering(uplink->iface, makeSteerConfig(*ip, config.xdp_steer_arp));
    if (!steered) {
      destroyPort(*uplink);
      return prefixed("uplink XDP program", std::move(steered).takeError());
    }
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

void DataplanePorts::activate() {
  if (active_) return;
  active_ = true;
  for (const auto& [name, port] : ports_) workers_->assign(port.port_id);
  DPU_LOG(kInfo, "dataplane") << "polling " << ports_.size() << " ports";
}

void DataplanePorts::reconcile() {
  if (!engine_) return;
  std::vector<std::string> wanted_list = engine_->wantedRepresentors();
  std::set<std::string> wanted(wanted_list.begin(), wanted_list.end());
  std::vector<std::string> unwanted;
  for (const auto& [name, role] : roles_)
    if (role == PortRole::kRepresentor && !wanted.count(name)) unwanted.push_back(name);
  for (const auto& name : unwanted) remove(name);
  std::set<std::string> failed;
  for (const auto& name : wanted) {
    if (ports_.count(name) || name == "uplink" || name == "management") continue;
    auto port = backend_.create(name, setup_);
    if (!port) {
      if (!failed_.count(name)) {
        DPU_LOG(kWarn, "dataplane") << port.error() << " (will retry)";
      }
      failed.insert(name);
      continue;
    }
    if (auto added = add(std::move(*port), PortRole::kRepresentor); !added) {
      if (!failed_.count(name)) {
        DPU_LOG(kWarn, "dataplane") << added.error() << " (will retry)";
      }
      failed.insert(name);
    }
  }
  failed_ = std::move(failed);
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
      info->set_tx_dropped(stats.oerrors);
    }
    rte_eth_link link{};
    bool up = rte_eth_link_get_nowait(port.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
    std::string state = up ? "up" : "down";
    if (!workers_ || workers_->workerOf(port.port_id) < 0) state += ", not polled";
    info->set_state(state);
  }
}

void DataplanePorts::addCounters(dataplane::v1::OperatorReply& reply) const {
  if (xdp_iface_.empty()) return;
  auto counters = readAttachedCounters(xdp_iface_);
  if (!counters) return;
  auto add = [&](const char* name, uint64_t value, const char* description) {
    auto* c = reply.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_description(description);
  };
  add("xdp_steered", counters->redirected, "uplink XDP: overlay packets handed to the dataplane");
  add("xdp_to_kernel", counters->passed, "uplink XDP: other packets passed to the kernel");
  add("xdp_no_socket", counters->no_socket, "uplink XDP: overlay packets with no socket on their queue");
}

}  // namespace dpu::datapath
