// Ports of dpu-dataplane: DPDK ethdevs created from devargs, configured with
// one transmit queue per worker and as many receive queues as something
// spreads flows over (each queue polled by exactly one worker lcore), and the
// PortBackend that turns a representor name from the logical model into such
// a port.
//
// Receive queues: a PMD that offers RSS and several receive queues gets
// min(workers, max_rx_queues) of them, hashed (symmetric Toeplitz key) on the
// TCP/UDP 5-tuple, or the IP addresses for other traffic, as far as the device
// hashes those types; net_af_packet opened with qpairs=workers has its queue
// pairs spread by the kernel (PACKET_FANOUT_HASH on the flow, with rollover to
// another socket when one's ring is full); every other port (net_af_xdp on a
// single-queue netdev, pcap, ring, null) keeps one receive queue. A flow stays
// on one lcore because its hash picks one queue.
//
// Representors come from one of three backends behind the same interface:
//  - hotplug: a vdev per representor netdev, probed when a pod attaches
//    (net_af_xdp, falling back to net_af_packet) and removed when the model no
//    longer wants it — the lab and any DPU whose representors are netdevs;
//  - preprobed: mlx5 representors EAL probed with the PF (representor=[...]),
//    found by their ethdev name "<PF>_representor_vf<N>" for model name
//    "pf0vf<N>"; never removed, only unbound (unproven on hardware);
//  - template: a vdev from a devargs template with {name} (net_pcap, net_ring
//    for tests and benchmarks).
//
// Every port is charged its share of the mbuf pool (mbuf_budget.h) when it
// opens and releases it when it is destroyed; af_xdp is chosen only when the
// pool's layout suits it (mbuf_pool.h) and its budget fits. A port that cannot
// be opened fails with the true reason: every ethdev of the DPDK build in use
// (RTE_MAX_ETHPORTS, ErrorCode::kExhausted), the mbuf pool fully budgeted
// (kExhausted), or what the PMD logged while it refused (kUnavailable).
// All calls are control-thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "datapath/dataplane_config.h"
#include "datapath/mbuf_budget.h"

struct rte_mempool;

namespace dpu::datapath {

struct PortSetup {
  rte_mempool* pool = nullptr;
  unsigned workers = 1;      // transmit queues wanted (one per worker lcore)
  uint16_t rx_ring_size = 1024;
  uint16_t tx_ring_size = 1024;
  MbufBudget* budget = nullptr;     // charged for every port opened; nullptr: no budget
  std::string af_xdp_problem;       // why af_xdp cannot use `pool` ("" when it can)
  // af_xdp only when this many mbufs stay unbudgeted after it: the share of
  // the ports that may still open after this one, on af_packet.
  uint32_t mbufs_kept_for_others = 0;

  PortShape shape(uint16_t tx_queues) const { return {workers, rx_ring_size, tx_ring_size, tx_queues}; }
};

// What spreads a port's received packets over its receive queues.
enum class RxSpread { kSingle, kRss, kKernelFanout };
std::string rxSpreadName(RxSpread spread);  // "single", "rss", "kernel fanout"

// One step of opening a port and when it ran (start-up phases: startup_timeline.h).
struct PortStep {
  std::string name;  // "xdp detach", "probe", "configure", "queues", "start", "steering"
  std::chrono::steady_clock::time_point began, ended;
};

// A created, started ethdev.
struct Port {
  std::string name;          // model name: representor netdev, "uplink", "management"
  uint16_t port_id = 0;
  std::string devargs;       // what created it ("" for preprobed)
  std::string backend;       // af_xdp, af_packet, devargs, preprobed
  std::string backend_reason;  // why this backend and not the one preferred ("" when it was the first choice)
  std::string iface;         // the netdev, for af_xdp/af_packet
  MacAddress mac;
  uint16_t tx_queues = 1;
  uint16_t rx_queues = 1;
  RxSpread rx_spread = RxSpread::kSingle;
  uint32_t mbufs = 0;        // budgeted to it from the pool
  MbufBudget* budget = nullptr;  // what it is charged to (released by destroyPort)
  bool hotplugged = false;   // we probed it: remove it on close
  // How opening it went, step by step: on net_af_xdp "queues" holds the umem,
  // the socket and the XDP program; a backend tried and passed over is one
  // step ("af_xdp refused").
  std::vector<PortStep> steps;
};

// Why another ethdev cannot be created: every one of RTE_MAX_ETHPORTS is in
// use (kExhausted, with the remedy). Success when one is free.
Result<void> ethdevAvailable(const std::string& for_port);

// Probes `devargs` (rte_dev_probe), configures and starts the port.
Result<Port> createPort(const std::string& name, const std::string& devargs, const PortSetup& setup);
// Configures and starts an ethdev EAL already probed.
Result<Port> adoptPort(const std::string& name, uint16_t port_id, const PortSetup& setup);
// Stops and closes the port; removes the device when we probed it; releases its mbufs.
void destroyPort(const Port& port);

// A role port from its config (uplink, management). The uplink on af_xdp gets
// the XDP program `xdp_program` and falls back to af_packet when allowed.
Result<Port> createRolePort(const std::string& name, const PortConfig& config, const PortSetup& setup,
                            const std::string& xdp_program);

class PortBackend {
 public:
  virtual ~PortBackend() = default;
  virtual std::string kind() const = 0;
  // A started port for representor `name` (from LogicalPort.representor).
  virtual Result<Port> create(const std::string& name, const PortSetup& setup) = 0;
  // Undoes create(); preprobed ports are stopped but stay probed.
  virtual void destroy(const Port& port) = 0;
  // Representor ports it can have open at once, `open` of them open now:
  // hotplug and template, the ethdevs RTE_MAX_ETHPORTS leaves to
  // representors; preprobed, the representor ethdevs EAL probed.
  virtual uint32_t capacity(uint32_t open) const;
};

std::unique_ptr<PortBackend> makePortBackend(const RepresentorConfig& config);

}  // namespace dpu::datapath
