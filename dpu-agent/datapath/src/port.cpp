// Creating, starting and removing DPDK ports, and the representor backends (port.h).
#include "datapath/port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "datapath/xdp.h"

namespace dpu::datapath {
namespace {

std::string dpdkError(int ret) { return rte_strerror(ret < 0 ? -ret : ret); }

// "net_pcap_r1,rx_pcap=..." → "net_pcap_r1"; a PCI address stays as it is.
std::string deviceName(const std::string& devargs) { return devargs.substr(0, devargs.find(',')); }

Result<void> startPort(uint16_t port_id, const PortSetup& setup, uint16_t& tx_queues) {
  rte_eth_dev_info info{};
  if (int ret = rte_eth_dev_info_get(port_id, &info); ret != 0)
    return Error{"cannot read device info: " + dpdkError(ret)};
  tx_queues = static_cast<uint16_t>(std::min<unsigned>(setup.workers, info.max_tx_queues));
  if (tx_queues == 0) return Error{"the device has no transmit queue"};
  rte_eth_conf conf{};
  if (int ret = rte_eth_dev_configure(port_id, 1, tx_queues, &conf); ret != 0)
    return Error{"rte_eth_dev_configure: " + dpdkError(ret)};
  uint16_t rx_desc = setup.rx_ring_size, tx_desc = setup.tx_ring_size;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);
  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = static_cast<int>(rte_socket_id());
  if (int ret = rte_eth_rx_queue_setup(port_id, 0, rx_desc, static_cast<unsigned>(socket), nullptr, setup.pool);
      ret != 0)
    return Error{"receive queue set-up: " + dpdkError(ret)};
  for (uint16_t q = 0; q < tx_queues; ++q) {
    if (int ret = rte_eth_tx_queue_setup(port_id, q, tx_desc, static_cast<unsigned>(socket), nullptr); ret != 0)
      return Error{"transmit queue " + std::to_string(q) + " set-up: " + dpdkError(ret)};
  }
  if (int ret = rte_eth_dev_start(port_id); ret != 0) return Error{"rte_eth_dev_start: " + dpdkError(ret)};
  // Representors and the uplink see frames for many MACs (pods, the router MAC).
  (void)rte_eth_promiscuous_enable(port_id);
  return {};
}

MacAddress portMac(uint16_t port_id) {
  rte_ether_addr addr{};
  MacAddress mac;
  if (rte_eth_macaddr_get(port_id, &addr) == 0) std::memcpy(mac.bytes.data(), addr.addr_bytes, 6);
  return mac;
}

void removeDevice(uint16_t port_id, const std::string& devargs) {
  std::string name = deviceName(devargs);
  if (int ret = rte_eal_hotplug_remove("vdev", name.c_str()); ret != 0) {
    // Not a vdev (a PCI device we probed): remove through the ethdev's device.
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port_id, &info) == 0 && info.device != nullptr) {
      if (int r2 = rte_dev_remove(info.device); r2 != 0) {
        DPU_LOG(kWarn, "dataplane") << "cannot remove device " << name << ": " << dpdkError(r2);
      }
    }
  }
}

}  // namespace

Result<Port> adoptPort(const std::string& name, uint16_t port_id, const PortSetup& setup) {
  Port port;
  port.name = name;
  port.port_id = port_id;
  if (auto started = startPort(port_id, setup, port.tx_queues); !started)
    return prefixed("port " + name + " (ethdev " + std::to_string(port_id) + ")", std::move(started).takeError());
  port.mac = portMac(port_id);
  return port;
}

Result<Port> createPort(const std::string& name, const std::string& devargs, const PortSetup& setup) {
  if (int ret = rte_dev_probe(devargs.c_str()); ret != 0)
    return Error{"cannot probe " + devargs + " for port " + name + ": " + dpdkError(ret)};
  uint16_t port_id = 0;
  std::string dev = deviceName(devargs);
  if (int ret = rte_eth_dev_get_port_by_name(dev.c_str(), &port_id); ret != 0) {
    (void)rte_eal_hotplug_remove("vdev", dev.c_str());
    return Error{"probed " + devargs + " but it created no ethdev named " + dev};
  }
  auto port = adoptPort(name, port_id, setup);
  if (!port) {
    (void)rte_eth_dev_close(port_id);
    removeDevice(port_id, devargs);
    return Error{port.error() + " (devargs " + devargs + ")"};
  }
  port->devargs = devargs;
  port->hotplugged = true;
  port->backend = "devargs";
  return port;
}

void destroyPort(const Port& port) {
  if (int ret = rte_eth_dev_stop(port.port_id); ret != 0) {
    DPU_LOG(kWarn, "dataplane") << "stopping port " << port.name << ": " << dpdkError(ret);
  }
  (void)rte_eth_dev_close(port.port_id);
  if (port.hotplugged) removeDevice(port.port_id, port.devargs);
}

namespace {

// A predecessor killed without cleanup (SIGKILL, a crash) left its XDP program
// on the netdev; net_af_xdp would refuse the port and we would fall back to af_packet.
void detachStale(const std::string& iface) {
  if (auto stale = detachStaleXdpProgram(iface); !stale) {
    DPU_LOG(kWarn, "dataplane") << stale.error();
  } else if (*stale) {
    DPU_LOG(kInfo, "dataplane") << "detached the XDP program a previous dataplane left on " << iface;
  }
}

}  // namespace

Result<Port> createRolePort(const std::string& name, const PortConfig& config, const PortSetup& setup,
                            const std::string& xdp_program) {
  switch (config.kind) {
    case PortKind::kDevargs: return createPort(name, config.devargs, setup);
    case PortKind::kAfPacket: {
      auto port = createPort(name, afPacketDevargs(name, config.iface), setup);
      if (port) {
        port->backend = "af_packet";
        port->iface = config.iface;
      }
      return port;
    }
    case PortKind::kAfXdp: {
      detachStale(config.iface);
      auto port = createPort(name, afXdpDevargs(name, config.iface, xdp_program), setup);
      if (port) {
        port->backend = "af_xdp";
        port->iface = config.iface;
        return port;
      }
      if (!config.fallback) return port;
      DPU_LOG(kWarn, "dataplane") << "af_xdp on " << config.iface << " failed (" << port.error()
                                  << "); falling back to af_packet";
      detachStale(config.iface);  // what the failed attempt loaded would take af_packet's packets
      auto fallback = createPort(name, afPacketDevargs(name, config.iface), setup);
      if (fallback) {
        fallback->backend = "af_packet";
        fallback->iface = config.iface;
        return fallback;
      }
      return Error{port.error() + "; fallback: " + fallback.error()};
    }
    case PortKind::kPreprobed: {
      uint16_t port_id = 0;
      if (rte_eth_dev_get_port_by_name(config.ethdev_name.c_str(), &port_id) != 0)
        return Error{"no probed ethdev named " + config.ethdev_name + " for port " + name +
                     "; list the device under eal.allow"};
      auto port = adoptPort(name, port_id, setup);
      if (port) port->backend = "preprobed";
      return port;
    }
  }
  return Error{"unknown port kind"};
}

namespace {

class HotplugBackend final : public PortBackend {
 public:
  explicit HotplugBackend(std::vector<PortKind> backends) : backends_(std::move(backends)) {}
  std::string kind() const override { return "hotplug"; }
  Result<Port> create(const std::string& name, const PortSetup& setup) override {
    std::string errors;
    for (PortKind kind : backends_) {
      // Representors get representor_redirect (everything to the socket), loaded
      // and detached by DPDK itself, so the netdev can be opened again later.
      std::string devargs = kind == PortKind::kAfXdp ? afXdpDevargs(name, name, builtinRepresentorXdpProgramPath())
                                                     : afPacketDevargs(name, name);
      if (kind == PortKind::kAfXdp) detachStale(name);
      auto port = createPort(name, devargs, setup);
      if (port) {
        port->backend = portKindName(kind);
        port->iface = name;
        return port;
      }
      errors += (errors.empty() ? "" : "; ") + port.error();
      // A failed AF_XDP set-up can leave its program attached, redirecting
      // every packet to a socket that does not exist: the next backend would
      // receive nothing.
      if (kind == PortKind::kAfXdp) detachStale(name);
    }
    return Error{"no backend could open representor " + name + ": " + errors};
  }
  void destroy(const Port& port) override { destroyPort(port); }

 private:
  std::vector<PortKind> backends_;
};

class TemplateBackend final : public PortBackend {
 public:
  explicit TemplateBackend(const RepresentorConfig& config)
      : template_(config.devargs_template), by_name_(config.devargs_by_name) {}
  std::string kind() const override { return "template"; }
  Result<Port> create(const std::string& name, const PortSetup& setup) override {
    for (const auto& [n, devargs] : by_name_)
      if (n == name) return createPort(name, devargs, setup);
    if (template_.empty()) return Error{"no devargs for representor " + name + " in representors.ports"};
    return createPort(name, expandTemplate(template_, name), setup);
  }
  void destroy(const Port& port) override { destroyPort(port); }

 private:
  std::string template_;
  std::vector<std::pair<std::string, std::string>> by_name_;
};

class PreprobedBackend final : public PortBackend {
 public:
  explicit PreprobedBackend(std::string suffix) : suffix_(std::move(suffix)) {}
  std::string kind() const override { return "preprobed"; }
  Result<Port> create(const std::string& name, const PortSetup& setup) override {
    // The model names VF representors "pf<P>vf<N>"; mlx5 names the ethdev "<PF>_representor_vf<N>"
    // (or "..._representor_c0pf<P>vf<N>" with several PFs).
    size_t vf = name.rfind("vf");
    if (vf == std::string::npos || vf + 2 >= name.size())
      return Error{"representor " + name + " is not of the form pf<P>vf<N>, as preprobed mode needs"};
    std::string index = name.substr(vf + 2);
    uint16_t id = 0;
    RTE_ETH_FOREACH_DEV(id) {
      char dev_name[RTE_ETH_NAME_MAX_LEN] = {};
      if (rte_eth_dev_get_name_by_port(id, dev_name) != 0) continue;
      std::string n(dev_name);
      std::string want = suffix_ + index;
      if (n.size() > want.size() && n.compare(n.size() - want.size(), want.size(), want) == 0) {
        auto port = adoptPort(name, id, setup);
        if (port) port->backend = "preprobed";
        return port;
      }
    }
    return Error{"no probed ethdev ends in " + suffix_ + index + " for representor " + name +
                 "; is the PF allowed with representor=[...] covering VF " + index + "?"};
  }
  void destroy(const Port& port) override {
    (void)rte_eth_dev_stop(port.port_id);
  }

 private:
  std::string suffix_;
};

}  // namespace

std::unique_ptr<PortBackend> makePortBackend(const RepresentorConfig& config) {
  switch (config.mode) {
    case RepresentorMode::kHotplug: return std::make_unique<HotplugBackend>(config.backends);
    case RepresentorMode::kTemplate: return std::make_unique<TemplateBackend>(config);
    case RepresentorMode::kPreprobed: return std::make_unique<PreprobedBackend>(config.preprobed_suffix);
  }
  return nullptr;
}

}  // namespace dpu::datapath
