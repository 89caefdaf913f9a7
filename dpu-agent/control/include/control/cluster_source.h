// ClusterSource: where the agent learns about the cluster. Two implementations
// behind this interface — Kubernetes (list+watch over HTTPS) and a cluster file
// (the embedded default for the lab and for clusters without Kubernetes) — feed
// the same ClusterView, so the logical model never knows which one it reads.
//
// Contract:
//  - start() begins syncing in the source's own thread(s) and returns at once;
//    a configuration error (unreadable kubeconfig, missing file) is returned.
//  - Every change is delivered through the ClusterListener, on the source's
//    thread, one object at a time, in the order the source saw them. The first
//    complete listing ends with synced(); after a relist (410 Gone, file
//    reload) the source delivers the differences only, then synced() again.
//  - Objects the source cannot make sense of are skipped, counted in
//    stats().malformed and logged with the object's name and the reason.
//  - stop() joins the threads; no callback runs after it returns.
//  - publishSelf() makes this node's own entry visible to the others
//    (Kubernetes: patch the Node's annotations dpu-cni.io/tunnel-ip,
//    dpu-cni.io/ipsec-public-key, dpu-cni.io/ipsec-epoch and
//    dpu-cni.io/port-keys; file source: write the node's entry into the
//    node's publish file, which the lab merges). The agent calls it again
//    whenever its port keys or its IPsec key change.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace dpu::control {

struct NodeInfo {
  std::string name;
  std::string tunnel_ip;                 // annotation dpu-cni.io/tunnel-ip / file "tunnelIP"
  std::vector<std::string> pod_cidrs;    // spec.podCIDRs / file "podCIDR(s)"
  std::string ipsec_public_key;          // base64 X25519; empty when not published
  std::map<std::string, std::string> labels;
  // The node's logical port keys by pod address (annotation dpu-cni.io/port-keys
  // / file "portKeys"): senders put the destination's key in the OVN egress key.
  std::map<std::string, uint32_t> port_keys = {};
  // The epoch of ipsec_public_key (annotation dpu-cni.io/ipsec-epoch / file
  // "ipsecEpoch"): it grows with every new key; 0 when not published.
  uint32_t ipsec_epoch = 0;
  bool operator==(const NodeInfo&) const = default;
};

struct PodInfo {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node_name;                 // spec.nodeName
  std::vector<std::string> ips;          // status.podIPs
  std::map<std::string, std::string> labels;
  bool host_network = false;
  bool operator==(const PodInfo&) const = default;
};

struct ServicePort {
  std::string name;
  std::string protocol;                  // TCP, UDP, SCTP
  uint16_t port = 0;
  std::string target_port;               // number or name
  uint16_t node_port = 0;
  bool operator==(const ServicePort&) const = default;
};

struct ServiceInfo {
  std::string ns;
  std::string name;
  std::string type;                      // ClusterIP, NodePort, LoadBalancer, ExternalName
  std::vector<std::string> cluster_ips;
  std::vector<ServicePort> ports;
  std::string session_affinity;
  bool operator==(const ServiceInfo&) const = default;
};

struct EndpointInfo {
  std::vector<std::string> addresses;
  bool ready = true;
  bool serving = true;
  bool terminating = false;
  std::string node_name;
  bool operator==(const EndpointInfo&) const = default;
};

struct EndpointSliceInfo {
  std::string ns;
  std::string name;
  std::string service_name;              // label kubernetes.io/service-name
  std::string address_type;              // IPv4, IPv6
  std::vector<EndpointInfo> endpoints;
  struct Port {
    std::string name;
    std::string protocol;
    uint16_t port = 0;
    bool operator==(const Port&) const = default;
  };
  std::vector<Port> ports;
  bool operator==(const EndpointSliceInfo&) const = default;
};

// Kept as the API server's JSON text for now: the policy issue gives it a model.
struct NetworkPolicyInfo {
  std::string ns;
  std::string name;
  std::string spec_json;
  bool operator==(const NetworkPolicyInfo&) const = default;
};

enum class ObjectKind { kNode, kPod, kService, kEndpointSlice, kNetworkPolicy };
inline constexpr size_t kObjectKindCount = 5;
// "node", "pod", "service", "endpointslice", "networkpolicy": metric labels.
inline const char* objectKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "node";
    case ObjectKind::kPod: return "pod";
    case ObjectKind::kService: return "service";
    case ObjectKind::kEndpointSlice: return "endpointslice";
    case ObjectKind::kNetworkPolicy: return "networkpolicy";
  }
  return "unknown";
}

class ClusterListener {
 public:
  virtual ~ClusterListener() = default;
  virtual void nodeUpserted(const NodeInfo& node) = 0;
  virtual void nodeDeleted(const std::string& name) = 0;
  virtual void podUpserted(const PodInfo& pod) = 0;
  virtual void podDeleted(const std::string& ns, const std::string& name) = 0;
  virtual void serviceUpserted(const ServiceInfo& svc) = 0;
  virtual void serviceDeleted(const std::string& ns, const std::string& name) = 0;
  virtual void endpointSliceUpserted(const EndpointSliceInfo& slice) = 0;
  virtual void endpointSliceDeleted(const std::string& ns, const std::string& name) = 0;
  virtual void networkPolicyUpserted(const NetworkPolicyInfo& policy) = 0;
  virtual void networkPolicyDeleted(const std::string& ns, const std::string& name) = 0;
  // The first full listing (and each relist) is complete.
  virtual void synced() = 0;
};

struct ClusterSourceStats {
  uint64_t malformed = 0;                // objects skipped
  uint64_t watch_restarts = 0;           // streams resumed or relisted
  uint64_t relists = 0;                  // 410 Gone / file reloads
  uint64_t events = 0;
  // `events` by kind (index: ObjectKind), so an operator sees that Services or
  // NetworkPolicies arrive even while the agent does nothing with them yet.
  std::array<uint64_t, kObjectKindCount> events_by_kind{};
  bool synced = false;
  std::string last_error;                // the last problem, for /readyz and logs
};

// What this node publishes about itself.
struct SelfEntry {
  std::string node_name;
  std::string tunnel_ip;
  std::string ipsec_public_key;  // empty: none (IPsec off, or the key is not installed yet)
  std::map<std::string, uint32_t> port_keys = {};  // address → logical port key (Agent::portKeys)
  uint32_t ipsec_epoch = 0;                        // of ipsec_public_key; 0 with none
};

class ClusterSource {
 public:
  virtual ~ClusterSource() = default;
  virtual Result<void> start(ClusterListener& listener) = 0;
  virtual void stop() = 0;
  virtual Result<void> publishSelf(const SelfEntry& self) = 0;
  virtual ClusterSourceStats stats() const = 0;
  // "kubernetes" or "file", for logs and metrics.
  virtual std::string kind() const = 0;
};

}  // namespace dpu::control
