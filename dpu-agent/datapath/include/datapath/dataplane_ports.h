// The ports of a running dpu-dataplane: the role ports from the config
// (uplink, host management port) and the representors the logical model
// wants, created through the PortBackend as pods attach and removed when the
// model drops them. Each port is bound to the Engine under its model name and
// assigned to a worker lcore. Control thread only.
//
// Ports are polled only once the dataplane has a model (the first accepted
// FullSync): before that every packet would be dropped for want of a model,
// and a pcap or ring port keeps its packets until then.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "datapath/dataplane_config.h"
#include "datapath/engine.h"
#include "datapath/lcore.h"
#include "datapath/port.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {

class DataplanePorts {
 public:
  DataplanePorts(PortBackend& backend, PortSetup setup);
  ~DataplanePorts();

  // Creates the uplink (with the XDP program on af_xdp) and the management
  // port, before the engine exists (the rte_flow offload backend needs the
  // uplink). Closes what it created on failure.
  Result<void> openRolePorts(const DataplaneConfig& config);
  // Binds the role ports to the engine; from here on ports are bound as they
  // come. Not polled until activate().
  Result<void> attach(Engine& engine, WorkerSet& workers);
  // Starts polling every bound port (after the first model).
  void activate();
  bool active() const { return active_; }
  // Creates representors the model wants and lacks, removes those it no
  // longer wants. Failures are logged and retried on the next call.
  void reconcile();
  // Whether a wanted representor is still missing (reconcile again later).
  bool missing() const { return !failed_.empty(); }
  // Unassigns, unbinds and closes every port.
  void closeAll();

  // Fills devargs, DPDK counters and link state into the engine's port list
  // (adding ports the engine does not list).
  void describe(dataplane::v1::OperatorReply& reply) const;
  // XDP steering counters of the uplink, when it runs our program.
  void addCounters(dataplane::v1::OperatorReply& reply) const;
  const std::map<std::string, Port>& ports() const { return ports_; }
  // A role port by name ("uplink", "management"), bound or not yet; nullptr if none.
  const Port* rolePort(const std::string& name) const;
  // Told about each port after it is bound (added) and before it is closed
  // (removed): the rte_flow offload backend tracks the eswitch's ports.
  using PortObserver = std::function<void(const Port& port, PortRole role, bool added)>;
  void setObserver(PortObserver observer) { observer_ = std::move(observer); }

 private:
  Result<void> add(Port port, PortRole role);
  void closeUnbound();
  std::vector<std::pair<Port, PortRole>> pending_;  // role ports before attach()
  void remove(const std::string& name);

  Engine* engine_ = nullptr;
  WorkerSet* workers_ = nullptr;
  PortBackend& backend_;
  PortSetup setup_;
  std::map<std::string, Port> ports_;           // by model name
  std::map<std::string, PortRole> roles_;
  std::set<std::string> failed_;                // wanted representors we could not create
  bool active_ = false;
  std::string xdp_iface_;
  PortObserver observer_;                        // uplink netdev running overlay_steer
};

}  // namespace dpu::datapath
