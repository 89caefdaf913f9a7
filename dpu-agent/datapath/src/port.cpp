// Creating, starting and removing DPDK ports, and the representor backends (port.h).
#include "datapath/port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "datapath/xdp.h"

namespace dpu::datapath {
namespace {

std::string dpdkError(int ret) { return rte_strerror(ret < 0 ? -ret : ret); }

// "net_pcap_r1,rx_pcap=..." → "net_pcap_r1"; a PCI address stays as it is.
std::string deviceName(const std::string& devargs) { return devargs.substr(0, devargs.find(',')); }

// A vdev's PMD (pcap, ring, null, af_packet) hands a transmitted mbuf back at
// once; a device's transmit ring keeps it until its completion.
bool isVdev(const std::string& devargs) { return devargs.rfind("net_", 0) == 0 || devargs.rfind("eth_", 0) == 0; }

// DPDK's own log lines while a port is probed and set up. A PMD says why it
// refused only there: rte_dev_probe returns -1 whatever the cause, which reads
// "Operation not permitted" as an errno. Captured, they become part of the
// error, which the caller logs once per change of reason instead of DPDK
// printing them on every retry.
class DpdkLogCapture {
 public:
  DpdkLogCapture() : previous_(rte_log_get_stream()) {
    stream_ = open_memstream(&buffer_, &size_);
    if (stream_ != nullptr) rte_openlog_stream(stream_);
  }
  ~DpdkLogCapture() {
    finish();
    std::free(buffer_);
  }
  DpdkLogCapture(const DpdkLogCapture&) = delete;
  DpdkLogCapture& operator=(const DpdkLogCapture&) = delete;

  // The lines logged so far, joined with "; " (capture ends).
  std::string text() {
    finish();
    std::string out;
    std::string all = buffer_ != nullptr ? std::string(buffer_, size_) : std::string();
    size_t start = 0;
    while (start < all.size()) {
      size_t end = all.find('\n', start);
      if (end == std::string::npos) end = all.size();
      std::string line = all.substr(start, end - start);
      start = end + 1;
      while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
      if (line.empty()) continue;
      out += (out.empty() ? "" : "; ") + line;
    }
    return out;
  }

 private:
  void finish() {
    if (stream_ == nullptr) return;
    rte_openlog_stream(previous_);
    std::fclose(stream_);
    stream_ = nullptr;
  }
  FILE* previous_;
  FILE* stream_ = nullptr;
  char* buffer_ = nullptr;
  size_t size_ = 0;
};

using StepClock = std::chrono::steady_clock;

void step(Port& port, const char* name, StepClock::time_point began) {
  port.steps.push_back(PortStep{name, began, StepClock::now()});
}

std::string withDpdkLog(std::string message, const std::string& logged) {
  return logged.empty() ? message : message + " (DPDK: " + logged + ")";
}

// The hash types RSS is asked for: the 5-tuple of TCP and UDP over IPv4 and
// IPv6, and the addresses alone for the rest (ICMP, ESP, fragments). Encapsulated
// traffic on the uplink spreads too: a Geneve source port carries the inner
// flow's hash (RFC 8926 section 3.3).
constexpr uint64_t kRssHashTypes = RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP |
                                   RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_TCP | RTE_ETH_RSS_NONFRAG_IPV6_UDP;

// How many receive queues the port gets, and what spreads packets over them.
struct RxPlan {
  uint16_t queues = 1;
  RxSpread spread = RxSpread::kSingle;
  uint64_t rss_hf = 0;
};

RxPlan planRx(const rte_eth_dev_info& info, unsigned workers) {
  RxPlan plan;
  // net_af_packet opens one socket per queue pair (qpairs=N) at probe time,
  // all in one PACKET_FANOUT_HASH group: the kernel hashes each flow to one
  // socket whether or not it is polled, and the PMD reports no RSS. Every one
  // of them must therefore be polled.
  if (info.driver_name != nullptr && std::strcmp(info.driver_name, "net_af_packet") == 0) {
    if (info.max_rx_queues > 1) {
      plan.queues = info.max_rx_queues;
      plan.spread = RxSpread::kKernelFanout;
    }
    return plan;
  }
  const uint64_t hf = info.flow_type_rss_offloads & kRssHashTypes;
  if (workers < 2 || info.max_rx_queues < 2 || hf == 0) return plan;
  plan.queues = static_cast<uint16_t>(std::min<unsigned>(workers, info.max_rx_queues));
  plan.spread = RxSpread::kRss;
  plan.rss_hf = hf;
  return plan;
}

Result<void> startPort(uint16_t port_id, const PortSetup& setup, Port& port) {
  rte_eth_dev_info info{};
  if (int ret = rte_eth_dev_info_get(port_id, &info); ret != 0)
    return Error{"cannot read device info: " + dpdkError(ret)};
  const uint16_t tx_queues = static_cast<uint16_t>(std::min<unsigned>(setup.workers, info.max_tx_queues));
  if (tx_queues == 0) return Error{"the device has no transmit queue"};
  const RxPlan rx = planRx(info, setup.workers);
  rte_eth_conf conf{};
  // The symmetric Toeplitz key (0x6d5a repeated, Woo and Park 2012): both
  // directions of a connection hash alike, so a port that sees both (the
  // uplink hairpinning between two pods of a node) keeps them on one lcore.
  std::vector<uint8_t> key(info.hash_key_size, 0);
  for (size_t i = 0; i < key.size(); ++i) key[i] = i % 2 == 0 ? 0x6d : 0x5a;
  if (rx.spread == RxSpread::kRss) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rx.rss_hf;
    // A PMD that states no key size gets none: it uses its default key.
    conf.rx_adv_conf.rss_conf.rss_key = key.empty() ? nullptr : key.data();
    conf.rx_adv_conf.rss_conf.rss_key_len = static_cast<uint8_t>(key.size());
  }
  auto began = StepClock::now();
  if (int ret = rte_eth_dev_configure(port_id, rx.queues, tx_queues, &conf); ret != 0)
    return Error{"rte_eth_dev_configure (" + std::to_string(rx.queues) + " rx, " + std::to_string(tx_queues) +
                 " tx queues): " + dpdkError(ret)};
  step(port, "configure", began);
  began = StepClock::now();
  uint16_t rx_desc = setup.rx_ring_size, tx_desc = setup.tx_ring_size;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);
  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = static_cast<int>(rte_socket_id());
  for (uint16_t q = 0; q < rx.queues; ++q) {
    if (int ret = rte_eth_rx_queue_setup(port_id, q, rx_desc, static_cast<unsigned>(socket), nullptr, setup.pool);
        ret != 0)
      return Error{"receive queue " + std::to_string(q) + " set-up: " + dpdkError(ret)};
  }
  for (uint16_t q = 0; q < tx_queues; ++q) {
    if (int ret = rte_eth_tx_queue_setup(port_id, q, tx_desc, static_cast<unsigned>(socket), nullptr); ret != 0)
      return Error{"transmit queue " + std::to_string(q) + " set-up: " + dpdkError(ret)};
  }
  step(port, "queues", began);
  began = StepClock::now();
  if (int ret = rte_eth_dev_start(port_id); ret != 0) return Error{"rte_eth_dev_start: " + dpdkError(ret)};
  // Representors and the uplink see frames for many MACs (pods, the router MAC).
  (void)rte_eth_promiscuous_enable(port_id);
  step(port, "start", began);
  port.tx_queues = tx_queues;
  port.rx_queues = rx.queues;
  port.rx_spread = rx.spread;
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

unsigned availableMbufs(const PortSetup& setup) {
  return setup.pool != nullptr ? rte_mempool_avail_count(setup.pool) : 0;
}

// Charges `port` `demand`; false (and the port destroyed) when it does not fit.
Result<Port> charged(Port port, const PortSetup& setup, const MbufDemand& demand) {
  if (setup.budget == nullptr) return port;
  if (!setup.budget->fits(demand.total())) {
    Error e{setup.budget->shortfall("port " + port.name, demand), ErrorCode::kExhausted};
    destroyPort(port);
    return e;
  }
  setup.budget->charge(port.name, demand.total());
  port.mbufs = demand.total();
  port.budget = setup.budget;
  return port;
}

// What an opened port held on to while it was set up (a NIC's receive
// descriptors; nothing for the vdevs that allocate per packet).
uint32_t stockSince(unsigned before, const PortSetup& setup) {
  const unsigned after = availableMbufs(setup);
  return before > after ? before - after : 0;
}

// Why af_xdp is passed over for port `name` ("" when it may be used).
std::string afXdpRefusal(const std::string& name, const PortSetup& setup, const MbufDemand& demand) {
  if (!setup.af_xdp_problem.empty()) return "the mbuf pool does not suit it: " + setup.af_xdp_problem;
  if (setup.budget == nullptr) return "";
  MbufDemand with_others = demand;
  with_others.in_flight += setup.mbufs_kept_for_others;
  if (setup.budget->fits(with_others.total())) return "";
  std::string why = setup.budget->shortfall(name + " on af_xdp", demand);
  if (why.empty()) {
    why = name + " on af_xdp needs " + demand.describe() + " mbufs and " + std::to_string(setup.mbufs_kept_for_others) +
          " stay for the ports that may open after it; " + std::to_string(setup.budget->unbudgeted()) +
          " of the pool's " + std::to_string(setup.budget->poolSize()) + " are unbudgeted; raise mbuf_pool_size by " +
          std::to_string(with_others.total() - setup.budget->unbudgeted());
  }
  return "mbuf budget: " + why;
}

}  // namespace

std::string rxSpreadName(RxSpread spread) {
  switch (spread) {
    case RxSpread::kSingle: return "single";
    case RxSpread::kRss: return "rss";
    case RxSpread::kKernelFanout: return "kernel fanout";
  }
  return "?";
}

Result<void> ethdevAvailable(const std::string& for_port) {
  if (rte_eth_dev_count_total() < RTE_MAX_ETHPORTS) return {};
  const std::string max = std::to_string(RTE_MAX_ETHPORTS);
  return Error{"RTE_MAX_ETHPORTS (" + max + ") ports are in use: this dpu-dataplane's DPDK can create no ethdev for " +
                   for_port + "; a node with more ports needs dpu-dataplane built against a DPDK configured with "
                   "-Dmax_ethports=N (N > " + max + ")",
               ErrorCode::kExhausted};
}

namespace {

Result<Port> adoptProbed(const std::string& name, uint16_t port_id, const PortSetup& setup,
                         std::vector<PortStep> steps) {
  Port port;
  port.name = name;
  port.port_id = port_id;
  port.steps = std::move(steps);
  if (auto started = startPort(port_id, setup, port); !started)
    return prefixed("port " + name + " (ethdev " + std::to_string(port_id) + ")", std::move(started).takeError());
  port.mac = portMac(port_id);
  return port;
}

}  // namespace

Result<Port> adoptPort(const std::string& name, uint16_t port_id, const PortSetup& setup) {
  return adoptProbed(name, port_id, setup, {});
}

Result<Port> createPort(const std::string& name, const std::string& devargs, const PortSetup& setup) {
  if (auto free = ethdevAvailable("port " + name); !free) return std::move(free).takeError();
  DpdkLogCapture dpdk_log;
  const auto began = StepClock::now();
  if (int ret = rte_dev_probe(devargs.c_str()); ret != 0) {
    // Probing -1 carries no errno; what the driver logged says why.
    std::string why = ret == -1 ? "the driver refused it" : dpdkError(ret);
    return Error{withDpdkLog("cannot probe " + devargs + " for port " + name + ": " + why, dpdk_log.text()),
                 ErrorCode::kUnavailable};
  }
  uint16_t port_id = 0;
  std::string dev = deviceName(devargs);
  if (int ret = rte_eth_dev_get_port_by_name(dev.c_str(), &port_id); ret != 0) {
    (void)rte_eal_hotplug_remove("vdev", dev.c_str());
    return Error{withDpdkLog("probed " + devargs + " but it created no ethdev named " + dev, dpdk_log.text()),
                 ErrorCode::kUnavailable};
  }
  auto port = adoptProbed(name, port_id, setup, {PortStep{"probe", began, StepClock::now()}});
  if (!port) {
    (void)rte_eth_dev_close(port_id);
    removeDevice(port_id, devargs);
    return Error{withDpdkLog(port.error() + " (devargs " + devargs + ")", dpdk_log.text()), ErrorCode::kUnavailable};
  }
  if (std::string logged = dpdk_log.text(); !logged.empty()) {
    DPU_LOG(kInfo, "dataplane") << "port " << name << ": DPDK: " << logged;
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
  if (port.budget != nullptr) port.budget->release(port.name);
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

// A vdev that opens with a demand known in advance: refused before probing
// when the budget cannot take it.
Result<Port> createBudgeted(const std::string& name, const std::string& devargs, const PortSetup& setup,
                            const MbufDemand& demand) {
  if (setup.budget != nullptr && !setup.budget->fits(demand.total()))
    return Error{setup.budget->shortfall("port " + name, demand), ErrorCode::kExhausted};
  auto port = createPort(name, devargs, setup);
  if (!port) return port;
  return charged(std::move(*port), setup, demand);
}

// A device whose stock is known only once it is open (a NIC, pcap, ring).
Result<Port> createMeasured(const std::string& name, const std::string& devargs, const PortSetup& setup) {
  const unsigned before = availableMbufs(setup);
  auto port = createPort(name, devargs, setup);
  if (!port) return port;
  const MbufDemand demand = measuredDemand(setup.shape(port->tx_queues), stockSince(before, setup), !isVdev(devargs));
  return charged(std::move(*port), setup, demand);
}

Result<Port> adoptMeasured(const std::string& name, uint16_t port_id, const PortSetup& setup) {
  const unsigned before = availableMbufs(setup);
  auto port = adoptPort(name, port_id, setup);
  if (!port) return port;
  port->backend = "preprobed";
  const MbufDemand demand = measuredDemand(setup.shape(port->tx_queues), stockSince(before, setup), true);
  return charged(std::move(*port), setup, demand);
}

// net_af_xdp on `iface` with `program`, then net_af_packet when allowed: af_xdp
// only when the pool suits it and its budget fits.
Result<Port> createOnNetdev(const std::string& name, const std::string& iface, const std::string& program,
                            const std::vector<PortKind>& backends, const PortSetup& setup) {
  if (auto free = ethdevAvailable("port " + name); !free) return std::move(free).takeError();
  const PortShape shape = setup.shape(static_cast<uint16_t>(setup.workers));
  std::string passed;  // why earlier backends were not used
  Error last{"no backend to open " + name + " with"};
  std::vector<PortStep> steps;  // before the backend that opens it
  for (PortKind kind : backends) {
    Result<Port> port = Error{""};
    const auto began = StepClock::now();
    if (kind == PortKind::kAfXdp) {
      const MbufDemand demand = afXdpDemand(shape);
      // A veth has one queue: net_af_xdp opens queue_count=1, one transmit
      // queue, and worker i transmits on queue i (engine.h).
      if (setup.workers > 1) {
        std::string why = "it opens one queue pair (queue_count=1) and each of the " +
                          std::to_string(setup.workers) + " workers needs its own transmit queue";
        passed += (passed.empty() ? "" : "; ") + std::string("af_xdp: ") + why;
        last = Error{why, ErrorCode::kNotSupported};
        continue;
      }
      if (std::string why = afXdpRefusal(name, setup, demand); !why.empty()) {
        passed += (passed.empty() ? "" : "; ") + std::string("af_xdp: ") + why;
        last = Error{why, ErrorCode::kExhausted};
        continue;
      }
      detachStale(iface);
      steps.push_back(PortStep{"xdp detach", began, StepClock::now()});
      port = createBudgeted(name, afXdpDevargs(name, iface, program), setup, demand);
      // A failed AF_XDP set-up can leave its program attached, redirecting
      // every packet to a socket that does not exist: the next backend would
      // receive nothing.
      if (!port) detachStale(iface);
    } else {
      port = createBudgeted(name, afPacketDevargs(name, iface, setup.workers), setup, afPacketDemand(shape));
    }
    if (port) {
      port->backend = portKindName(kind);
      port->backend_reason = passed;
      port->iface = iface;
      port->steps.insert(port->steps.begin(), steps.begin(), steps.end());
      return port;
    }
    steps.push_back(PortStep{portKindName(kind) + " refused", began, StepClock::now()});
    passed += (passed.empty() ? "" : "; ") + portKindName(kind) + ": " + port.error();
    last = std::move(port).takeError();
  }
  // The last failure's kind (capacity or not) decides whether a closing port may help.
  last.message = "cannot open " + name + " on " + (backends.size() == 1 ? "its backend" : "any backend") + ": " +
                 passed;
  return last;
}

}  // namespace

Result<Port> createRolePort(const std::string& name, const PortConfig& config, const PortSetup& setup,
                            const std::string& xdp_program) {
  switch (config.kind) {
    case PortKind::kDevargs: return createMeasured(name, config.devargs, setup);
    case PortKind::kAfPacket: return createOnNetdev(name, config.iface, "", {PortKind::kAfPacket}, setup);
    case PortKind::kAfXdp: {
      std::vector<PortKind> backends{PortKind::kAfXdp};
      if (config.fallback) backends.push_back(PortKind::kAfPacket);
      auto port = createOnNetdev(name, config.iface, xdp_program, backends, setup);
      if (port && !port->backend_reason.empty()) {
        DPU_LOG(kWarn, "dataplane") << name << " on " << config.iface << " runs on " << port->backend << ": "
                                    << port->backend_reason;
      }
      return port;
    }
    case PortKind::kPreprobed: {
      uint16_t port_id = 0;
      if (rte_eth_dev_get_port_by_name(config.ethdev_name.c_str(), &port_id) != 0)
        return Error{"no probed ethdev named " + config.ethdev_name + " for port " + name +
                     "; list the device under eal.allow"};
      return adoptMeasured(name, port_id, setup);
    }
  }
  return Error{"unknown port kind"};
}

uint32_t PortBackend::capacity(uint32_t open) const {
  // Every ethdev that is not one of our representors is in use otherwise
  // (the role ports, eal.vdevs, devices EAL probed).
  const uint32_t total = rte_eth_dev_count_total();
  const uint32_t others = total > open ? total - open : 0;
  return others >= RTE_MAX_ETHPORTS ? 0 : RTE_MAX_ETHPORTS - others;
}

namespace {

class HotplugBackend final : public PortBackend {
 public:
  explicit HotplugBackend(std::vector<PortKind> backends) : backends_(std::move(backends)) {}
  std::string kind() const override { return "hotplug"; }
  Result<Port> create(const std::string& name, const PortSetup& setup) override {
    // Representors get representor_redirect (everything to the socket), loaded
    // and detached by DPDK itself, so the netdev can be opened again later.
    return createOnNetdev(name, name, builtinRepresentorXdpProgramPath(), backends_, setup);
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
      if (n == name) return createMeasured(name, devargs, setup);
    if (template_.empty()) return Error{"no devargs for representor " + name + " in representors.ports"};
    return createMeasured(name, expandTemplate(template_, name), setup);
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
      if (n.size() > want.size() && n.compare(n.size() - want.size(), want.size(), want) == 0)
        return adoptMeasured(name, id, setup);
    }
    return Error{"no probed ethdev ends in " + suffix_ + index + " for representor " + name +
                 "; is the PF allowed with representor=[...] covering VF " + index + "?"};
  }
  void destroy(const Port& port) override {
    (void)rte_eth_dev_stop(port.port_id);
    if (port.budget != nullptr) port.budget->release(port.name);
  }
  uint32_t capacity(uint32_t) const override {
    // The representors EAL probed with the PF are all there will be.
    uint32_t count = 0;
    uint16_t id = 0;
    RTE_ETH_FOREACH_DEV(id) {
      char dev_name[RTE_ETH_NAME_MAX_LEN] = {};
      if (rte_eth_dev_get_name_by_port(id, dev_name) != 0) continue;
      const std::string n(dev_name);
      const size_t at = n.rfind(suffix_);
      // A VF number beyond the 12 bits of mlx5's VF field is the host PF's
      // representor (VF -1, printed unsigned): the host_pf port, not a pod's.
      if (at != std::string::npos && at + suffix_.size() < n.size() && n.size() - at - suffix_.size() <= 4 &&
          n.find_first_not_of("0123456789", at + suffix_.size()) == std::string::npos &&
          std::stoul(n.substr(at + suffix_.size())) < 4095)
        ++count;
    }
    return count;
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
