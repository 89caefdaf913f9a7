// The ports of a running dpu-dataplane: the role ports from the config
// (uplink, host management port, host PF) and the representors the logical model
// wants, created through the PortBackend as pods attach and removed when the
// model drops them. Each port is bound to the Engine under its model name and
// assigned to a worker lcore. Control thread only.
//
// Ports are polled only once the dataplane has a model (the first accepted
// FullSync): before that every packet would be dropped for want of a model,
// and a pcap or ring port keeps its packets until then. The worker lcores
// start then too (unless started before): a queue handed to a running worker
// waits until the worker passes a quiescent point, which on a loaded machine
// is a scheduling delay per port, and start-up is the outage of a restart.
//
// A wanted representor that cannot be opened is not forgotten: it is retried
// with backoff (port_retry.h), its failure is logged once per reason, it is
// listed by describe() as "failed" with the reason and the next attempt, and
// every ProgramReply names the logical ports it leaves without a port
// (ObjectProblem PORT_UNAVAILABLE), so the agent can fail CHECK for them. The
// agent learns up front how many representors fit (portCapacity, in
// HelloReply) and refuses attachments beyond it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "datapath/dataplane_config.h"
#include "datapath/engine.h"
#include "datapath/lcore.h"
#include "datapath/mbuf_budget.h"
#include "datapath/port.h"
#include "datapath/port_retry.h"
#include "datapath/startup_timeline.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {

class DataplanePorts {
 public:
  using Clock = PortRetries::Clock;

  // `setup.budget`, when set, is charged for every port (it must outlive this).
  DataplanePorts(PortBackend& backend, PortSetup setup);
  ~DataplanePorts();

  // Creates the uplink (with the XDP program on af_xdp), the management port
  // and the host PF port, before the engine exists (the rte_flow offload
  // backend needs the uplink). Closes what it created on failure.
  Result<void> openRolePorts(const DataplaneConfig& config);
  // Binds the role ports to the engine; from here on ports are bound as they
  // come. Not polled until activate().
  Result<void> attach(Engine& engine, WorkerSet& workers);
  // Starts polling every bound port (after the first model): hands them to
  // the workers, then starts the workers if they are not running yet.
  Result<void> activate();
  bool active() const { return active_; }
  // Creates representors the model wants and lacks (those that failed before
  // only when their retry is due), removes those it no longer wants.
  void reconcile();
  // Whether a wanted representor is still missing, and when to reconcile for it.
  bool missing() const { return !retries_.failures().empty(); }
  std::optional<Clock::time_point> nextRetry() const { return retries_.nextDue(); }
  // Unassigns, unbinds and closes every port.
  void closeAll();

  // Representor ports this dataplane can open in all (HelloReply.port_capacity).
  uint32_t portCapacity() const;
  // HelloReply's capacity fields (in the answer to Hello) and a PORT_UNAVAILABLE
  // problem per logical port whose representor could not be opened.
  void annotate(const dataplane::v1::ProgramRequest& request, dataplane::v1::ProgramReply& reply) const;

  // Fills devargs, backends, budgets, workers, DPDK counters and link state
  // into the engine's port list (adding ports the engine does not list, and
  // the representors that failed).
  void describe(dataplane::v1::OperatorReply& reply) const;
  // XDP steering counters of the uplink, when it runs our program; port and
  // mbuf pool figures.
  void addCounters(dataplane::v1::OperatorReply& reply) const;
  // With a host PF port, tells the uplink's XDP program (when it runs ours)
  // what to steer for the host, if that changed since the last call.
  void steerHost(const HostSteering& steering);
  const std::map<std::string, Port>& ports() const { return ports_; }
  // A role port by name ("uplink", "management"), bound or not yet; nullptr if none.
  const Port* rolePort(const std::string& name) const;
  // Told about each port after it is bound (added) and before it is closed
  // (removed): the rte_flow offload backend tracks the eswitch's ports.
  using PortObserver = std::function<void(const Port& port, PortRole role, bool added)>;
  void setObserver(PortObserver observer) { observer_ = std::move(observer); }
  // Where each port opened during start-up is recorded, with its steps
  // (until the timeline finishes); nullptr: nowhere. It must outlive this.
  void setTimeline(StartupTimeline* timeline) { timeline_ = timeline; }
  // The clock the retries follow (tests).
  void setClock(std::function<Clock::time_point()> clock) { clock_ = std::move(clock); }
  const PortRetries& retries() const { return retries_; }

 private:
  Result<void> add(Port port, PortRole role);
  void closeUnbound();
  void remove(const std::string& name);
  uint32_t openRepresentors() const;
  // A representor's setup: af_xdp only with room left for the ports that may open after it.
  PortSetup representorSetup() const;

  std::vector<std::pair<Port, PortRole>> pending_;  // role ports before attach()
  Engine* engine_ = nullptr;
  WorkerSet* workers_ = nullptr;
  PortBackend& backend_;
  PortSetup setup_;
  std::map<std::string, Port> ports_;           // by model name
  std::map<std::string, PortRole> roles_;
  PortRetries retries_;                          // wanted representors we could not create
  std::function<Clock::time_point()> clock_ = [] { return Clock::now(); };
  bool active_ = false;
  std::string xdp_iface_;                        // uplink netdev running overlay_steer
  uint64_t steered_version_ = 0;                 // HostSteering::version in the XDP maps
  std::string steer_error_;                      // the last failure to write them (logged once)
  PortObserver observer_;
  StartupTimeline* timeline_ = nullptr;
};

}  // namespace dpu::datapath
