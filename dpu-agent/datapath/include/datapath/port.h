// Ports of dpu-dataplane: DPDK ethdevs created from devargs, configured with
// one receive queue (polled by exactly one worker lcore) and one transmit
// queue per worker, and the PortBackend that turns a representor name from the
// logical model into such a port.
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
// All calls are control-thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/net_address.h"
#include "common/result.h"
#include "datapath/dataplane_config.h"

struct rte_mempool;

namespace dpu::datapath {

struct PortSetup {
  rte_mempool* pool = nullptr;
  unsigned workers = 1;      // transmit queues wanted (one per worker lcore)
  uint16_t rx_ring_size = 1024;
  uint16_t tx_ring_size = 1024;
};

// A created, started ethdev.
struct Port {
  std::string name;          // model name: representor netdev, "uplink", "management"
  uint16_t port_id = 0;
  std::string devargs;       // what created it ("" for preprobed)
  std::string backend;       // af_xdp, af_packet, devargs, preprobed
  std::string iface;         // the netdev, for af_xdp/af_packet
  MacAddress mac;
  uint16_t tx_queues = 1;
  bool hotplugged = false;   // we probed it: remove it on close
};

// Probes `devargs` (rte_dev_probe), configures and starts the port.
Result<Port> createPort(const std::string& name, const std::string& devargs, const PortSetup& setup);
// Configures and starts an ethdev EAL already probed.
Result<Port> adoptPort(const std::string& name, uint16_t port_id, const PortSetup& setup);
// Stops and closes the port; removes the device when we probed it.
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
};

std::unique_ptr<PortBackend> makePortBackend(const RepresentorConfig& config);

}  // namespace dpu::datapath
