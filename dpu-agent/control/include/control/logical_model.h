// The logical model the agent programs into dpu-dataplane (proto
// dpu.dataplane.v1.LogicalModel), kept as maps keyed the way Deltas name
// objects, with a record of what changed since the datapath last heard.
//
// Every mutation compares the new object with the current one and marks it
// dirty only when it differs; takePending() turns the dirty set into one Delta
// (upserts for objects that exist, deletes for those that do not). So one pod
// or one node changing costs one small Delta, never a rebuild of the whole
// model; a FullSync (connect, RESYNC_NEEDED) takes the whole map and clears
// the dirty set in the same critical section, so nothing is lost in between.
//
// Thread-safe: the agent mutates from the API and cluster-source threads, the
// dataplane client reads from its own thread and waits for changes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/net_address.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::control {

namespace dpv1 = ::dpu::dataplane::v1;

// The distributed router's MAC: the gateway MAC on every node (OVN-Kubernetes'
// 0a:58:a9:fe:00:01 convention: link-local 169.254.0.1 as a MAC), constant
// cluster-wide so a pod keeps its gateway's ARP entry wherever traffic goes.
inline constexpr const char* kRouterMac = "0a:58:a9:fe:00:01";

// The logical switch key (the Geneve VNI) of a node subnet. Every node must
// compute the same key for the same subnet without talking to the others, so
// it is the subnet's position inside the cluster CIDR that holds it (+1; the
// i-th cluster CIDR adds i << 20). A subnet outside every cluster CIDR gets a
// stable hash in the upper half of the 24-bit VNI space.
uint32_t datapathKeyFor(const IpPrefix& subnet, const std::vector<IpPrefix>& cluster_cidrs);

class ModelState {
 public:
  using Clock = std::chrono::steady_clock;

  ModelState();
  ~ModelState();
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  struct Pending {
    dpv1::Delta delta;            // generations left at 0: the client stamps them
    Clock::time_point oldest;     // when the oldest change in it was made
    size_t changes = 0;
    uint64_t sequence = 0;        // the change sequence it brings the dataplane up to (acknowledge())
  };

  void setNode(const dpv1::NodeSettings& node);
  // NodeSettings.ipsec alone (the IPsec controller: a node leaving mode on
  // keeps encrypting for a grace period); nothing before setNode().
  void setNodeIpsec(bool encrypt);
  void upsertPort(const dpv1::LogicalPort& port);
  // A port and its NetworkPolicy in one step (nullopt: the port has none), so
  // the Delta that brings a new pod's port brings its rules too: no window in
  // which a pod that policies isolate is reachable unprotected.
  void upsertPort(const dpv1::LogicalPort& port, const std::optional<dpv1::PortPolicy>& policy);
  // Deletes the port's PortPolicy too, in the same step.
  void deletePort(const std::string& name);
  void upsertLocalSubnet(const dpv1::Subnet& subnet);
  void deleteLocalSubnet(const std::string& cidr);
  void upsertRemoteNode(const dpv1::RemoteNode& node);
  void deleteRemoteNode(const std::string& name);
  // IPsec SAs (their keys are secret: the model is never logged or dumped).
  void upsertIpsecSa(const dpv1::IpsecSa& sa);
  void deleteIpsecSa(const std::string& name);
  // Makes the SAs exactly `sas` (by name) in one step, so that one Delta
  // carries a whole change: an outbound switch never shows the dataplane a
  // node without an outbound SA, or with two.
  void setIpsecSas(const std::map<std::string, dpv1::IpsecSa>& sas);
  // Services by name ("namespace/name"): one service, one Delta entry.
  void upsertService(const dpv1::Service& service);
  void deleteService(const std::string& name);
  // The NetworkPolicy rules of one port, by port name (PortPolicy.port). A
  // port without one is isolated in neither direction. The agent sets them
  // only for ports in the model.
  void upsertPortPolicy(const dpv1::PortPolicy& policy);
  void deletePortPolicy(const std::string& port);
  // Several ports' PortPolicies in one step (nullopt: the port has none), so
  // one cluster change that alters many pods' rules reaches the dataplane as
  // one Delta, never as a first part the dataplane installs alone.
  void setPortPolicies(const std::vector<std::pair<std::string, std::optional<dpv1::PortPolicy>>>& policies);

  // The whole model, and (for a FullSync) the dirty set cleared atomically with it;
  // `sequence`: the change sequence the model is at (for acknowledge()).
  dpv1::LogicalModel snapshot() const;
  dpv1::LogicalModel snapshotAndClear(std::optional<Clock::time_point>* oldest_pending = nullptr,
                                      uint64_t* sequence = nullptr);
  std::optional<Pending> takePending();
  bool hasPending() const;
  // Waits until a change is pending or the timeout passes; true when one is.
  bool waitForChange(std::chrono::milliseconds timeout) const;
  // Wakes waiters (shutdown).
  void notifyAll() const;
  // Readable (poll POLLIN) after every change and notifyAll(), for a waiter
  // that also waits on a socket (the dataplane client); clearChangeFd()
  // before looking for what changed, so a change after the look wakes it again.
  int changeFd() const { return change_fd_; }
  void clearChangeFd() const;

  size_t portCount() const;
  size_t remoteNodeCount() const;
  size_t ipsecSaCount() const;
  size_t serviceCount() const;
  size_t portPolicyCount() const;

  // Every change takes the next number of one sequence. The dataplane client
  // acknowledges the sequence of each request the dataplane accepted, so the
  // agent can tell a port the dataplane has (in its latest version) from one
  // still on its way. forgetAcknowledged() on a new dataplane instance: nothing is
  // acknowledged until its first full sync.
  void acknowledge(uint64_t sequence);
  void forgetAcknowledged();
  // The port exists and its latest version was acknowledged.
  bool portAcknowledged(const std::string& name) const;
  // Changes made that the dataplane has not acknowledged (0: it forwards with
  // the whole model; after forgetAcknowledged(), every change so far).
  uint64_t unacknowledgedChanges() const;

 private:
  void markLocked();
  bool upsertPortLocked(const dpv1::LogicalPort& port);
  bool setPortPolicyLocked(const std::string& port, const std::optional<dpv1::PortPolicy>& policy);

  void signalChange() const;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  int change_fd_ = -1;  // eventfd
  std::optional<dpv1::NodeSettings> node_;
  std::map<std::string, dpv1::LogicalPort> ports_;
  std::map<std::string, dpv1::Subnet> local_subnets_;
  std::map<std::string, dpv1::RemoteNode> remote_nodes_;
  std::map<std::string, dpv1::IpsecSa> ipsec_sas_;
  std::map<std::string, dpv1::Service> services_;
  std::map<std::string, dpv1::PortPolicy> port_policies_;
  bool node_dirty_ = false;
  std::set<std::string> dirty_ports_, dirty_subnets_, dirty_remotes_, dirty_sas_, dirty_services_, dirty_policies_;
  std::optional<Clock::time_point> oldest_;
  uint64_t sequence_ = 0, acknowledged_ = 0;
  std::map<std::string, uint64_t> port_sequence_;  // the change that made each port's latest version
};

}  // namespace dpu::control
