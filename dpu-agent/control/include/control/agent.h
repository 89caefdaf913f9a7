// The agent's state and rules: attachments (validated, IPAM'd, checkpointed),
// the cluster view it learns from a ClusterSource, and the logical model it
// derives from both. The REST layer (api_server.h) and the cluster source call
// in; the model (logical_model.h) carries the result to the dataplane client.
//
// Every attach/detach is decided and checkpointed under one lock before it is
// answered, so an answer a client got survives kill -9. The model is updated
// one object at a time: an attachment is one port, a node is one remote node.
//
// A pod attachment is named by (network, sandbox, ifname), as CNI names one,
// and held for one VF. host-shim, the only client that makes them, sends its
// list of held ones (reconcile): the agent releases the rest, except an
// attach newer than the list, and refuses an attach older than the last list
// that did not hold it (an ADD host-shim gave up on; attach.proto says more).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "control/agent_config.h"
#include "control/cluster_source.h"
#include "control/ipam.h"
#include "control/logical_model.h"
#include "control/service_compiler.h"
#include "dpu/attach/v1/attach.pb.h"
#include "policy/compiler.h"

namespace dpu::control {

namespace attv1 = ::dpu::attach::v1;

class Agent : public ClusterListener {
 public:
  // `pods_checked`: a Kubernetes source is configured, so attach requires the pod
  // to be scheduled on this node and attachments of vanished pods are released.
  Agent(AgentConfig config, ModelState& model, bool pods_checked);

  // Loads the checkpoint (a missing or unusable one means a new boot id, logged)
  // and puts what it holds into the model.
  Result<void> restore();

  // The operations of the attach API. A refusal's ErrorCode says what kind it
  // is (kInvalid, kConflict with the holder, kNotFound, kForbidden,
  // kUnavailable, kExhausted, kFailed); the API router alone turns it into an
  // HTTP status (api_router.h httpStatusOf).
  Result<attv1::AttachResponse> attach(const attv1::AttachRequest& request);
  Result<attv1::DetachResponse> detach(const attv1::DetachRequest& request);
  // Releases every POD attachment host-shim does not hold (attach.proto,
  // ReconcileRequest), and remembers the list for refusing older attaches.
  Result<attv1::ReconcileResponse> reconcile(const attv1::ReconcileRequest& request);
  attv1::AttachmentList list() const;
  // One attachment (404 when unknown), with its dataplane state: what CHECK asks.
  Result<attv1::AttachResponse> get(const std::string& id) const;

  // Where Attachment.dataplane_state comes from: given a port name (the
  // attachment id), "programmed", "pending" or why not (the dataplane
  // client's portState). Unset: "pending". Called under the agent's lock, so
  // it must not call back into the Agent.
  void setDataplaneView(std::function<std::string(const std::string&)> view) { dataplane_view_ = std::move(view); }

  // This node's port keys, address → key (every attachment's addresses), for
  // the cluster source to publish so that other nodes name our ports in the
  // OVN egress key; and a number that changes whenever they change.
  std::map<std::string, uint32_t> portKeys() const;
  uint64_t portKeysVersion() const { return port_keys_version_.load(); }

  std::string bootId() const;
  bool clusterSynced() const { return synced_.load(); }
  // Why attach cannot work yet ("" when it can): no pod CIDR, no sync.
  std::string notReadyReason() const;
  const AgentConfig& config() const { return config_; }

  struct IpamUsage {
    std::string cidr;
    uint64_t used = 0;
    uint64_t capacity = 0;
  };
  std::vector<IpamUsage> ipamUsage() const;
  size_t attachmentCount() const;
  uint64_t releasedOrphans() const { return released_orphans_.load(); }
  uint64_t releasedByReconcile() const { return released_by_reconcile_.load(); }
  // Services left out of the model because the dataplane would refuse them,
  // "namespace/name" → why (also logged once per distinct reason).
  std::map<std::string, std::string> refusedServices() const;
  // NetworkPolicies left out as invalid, "namespace/name" → why, naming the
  // field (policy/validate.h; also logged once per distinct reason). Every
  // other policy stays in force.
  std::map<std::string, std::string> refusedPolicies() const;
  // How many representor ports the dataplane can open (HelloReply.port_capacity;
  // 0: not known) and its DPDK's RTE_MAX_ETHPORTS. Every attachment needs
  // one: an attach beyond the capacity is refused (507) before anything is
  // allocated, rather than answered with a pod the dataplane cannot open.
  void setPortCapacity(uint32_t capacity, uint32_t max_ethports);
  uint32_t portCapacity() const { return port_capacity_.load(); }
  // The dataplane generation last acknowledged, recorded in the checkpoint.
  void setDataplaneGeneration(uint64_t generation) { generation_.store(generation); }
  uint64_t dataplaneGeneration() const { return generation_.load(); }

  // ClusterListener
  void nodeUpserted(const NodeInfo& node) override;
  void nodeDeleted(const std::string& name) override;
  void podUpserted(const PodInfo& pod) override;
  void podDeleted(const std::string& ns, const std::string& name) override;
  void serviceUpserted(const ServiceInfo& svc) override;
  void serviceDeleted(const std::string& ns, const std::string& name) override;
  void endpointSliceUpserted(const EndpointSliceInfo& slice) override;
  void endpointSliceDeleted(const std::string& ns, const std::string& name) override;
  void networkPolicyUpserted(const NetworkPolicyInfo& policy) override;
  void networkPolicyDeleted(const std::string& ns, const std::string& name) override;
  void namespaceUpserted(const NamespaceInfo& ns) override;
  void namespaceDeleted(const std::string& name) override;
  void synced() override;

 private:
  struct PodPlacement {
    std::string uid;
    std::string node_name;
  };
  struct Record {
    attv1::Attachment attachment;
    uint32_t port_key = 0;
  };

  Result<void> validateAttach(const attv1::AttachRequest& r) const;
  std::optional<std::string> findHolderLocked(uint32_t pf, uint32_t vf) const;
  using SandboxKey = std::tuple<std::string, std::string, std::string>;  // network, sandbox, ifname
  static SandboxKey sandboxKeyOf(const attv1::Attachment& a) { return {a.network(), a.sandbox_id(), a.ifname()}; }
  std::optional<std::string> findBySandboxLocked(const SandboxKey& key) const;
  std::optional<std::string> findManagementLocked() const;
  bool macHeldLocked(const std::string& mac) const;
  std::string holderOfAddressLocked(const IpAddress& ip) const;  // attachment id, or why there is none
  Result<uint32_t> allocatePortKeyLocked();
  void setPodCidrsLocked(const std::vector<IpPrefix>& cidrs);
  void releaseLocked(const std::string& id);
  Result<void> checkpointLocked();
  dpv1::LogicalPort portOf(const Record& r) const;
  attv1::Attachment withState(const Record& r) const;
  // Why `mac` cannot be a new attachment's MAC ("" when it can): the model's
  // rules (zero, multicast, the router's) and the attachments that hold it.
  std::string macProblemLocked(const MacAddress& mac, std::string& holder) const;
  dpv1::NodeSettings nodeSettings() const;
  std::optional<dpv1::RemoteNode> remoteNodeOf(const NodeInfo& node) const;
  void releaseOrphansLocked();
  // Compiles one service (service_compiler.h) into the model: upserted,
  // deleted (gone, not proxied) or left out as refused.
  void recompileServiceLocked(const std::string& key);
  // NetworkPolicy (docs/policy.md, "The agent"). The pod the compiler sees
  // for "ns/name": the cluster source's, made local by this node's
  // attachments of it (the agent knows its own pods from their attachments:
  // the node, and the addresses while the source has none yet); nullopt when
  // neither knows it.
  std::optional<PodInfo> policyPodLocked(const std::string& key) const;
  // Gives the compiler the pod as policyPodLocked sees it now; returns what changed.
  policy::Changes refreshPolicyPodLocked(const std::string& key);
  // The PortPolicy of one attachment of pod `key` (nullopt: not isolated).
  std::optional<dpv1::PortPolicy> portPolicyLocked(const std::string& id, const std::string& key) const;
  // Reprograms the PortPolicies of the attachments of the pods that changed
  // and records refusals.
  void applyPolicyChangesLocked(const policy::Changes& changes);
  // Puts an attachment's port into the model with its PortPolicy, in one step.
  void upsertPortLocked(const Record& r);
  std::vector<std::string> attachmentsOfPodLocked(const std::string& key) const;

  const AgentConfig config_;
  ModelState& model_;
  const bool pods_checked_;

  mutable std::mutex mu_;
  std::string boot_id_;
  std::map<std::string, Record> attachments_;  // by id
  std::map<std::pair<uint32_t, uint32_t>, std::string> by_vf_;
  std::map<SandboxKey, std::string> by_sandbox_;
  std::vector<IpPrefix> pod_cidrs_;
  std::vector<Ipam> ipams_;
  std::vector<std::string> pending_recent_;  // released list restored before the pod CIDR is known
  uint32_t next_port_key_ = 1;
  std::map<std::string, PodPlacement> pods_;  // "ns/name"
  std::map<std::string, NodeInfo> nodes_;
  ServiceCatalog service_catalog_;
  std::map<std::string, std::string> refused_services_;  // "ns/name" → why
  policy::PolicyCompiler policy_;
  std::map<std::string, PodInfo> source_pods_;           // "ns/name", as the cluster source gives them
  std::set<std::string> deleted_attached_pods_;          // deleted in the source, still attached here
  std::map<std::string, std::string> refused_policies_;  // "ns/name" → why
  std::atomic<bool> synced_{false};
  bool first_sync_done_ = false;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint32_t> port_capacity_{0};
  std::atomic<uint32_t> max_ethports_{0};
  std::atomic<uint64_t> released_orphans_{0};
  std::atomic<uint64_t> port_keys_version_{0};
  std::function<std::string(const std::string&)> dataplane_view_;
  std::atomic<uint64_t> released_by_reconcile_{0};
  // host-shim's last list (reconcile): its instance, its numbering and what it held.
  using HeldKey = std::tuple<std::string, std::string, std::string, uint32_t, uint32_t>;  // + pf, vf
  std::string reconciled_instance_;
  uint64_t reconciled_as_of_ = 0;
  std::set<HeldKey> reconciled_held_;
};

}  // namespace dpu::control
