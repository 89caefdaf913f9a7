// ClusterSource: where the agent learns about the cluster. Two implementations
// behind this interface — Kubernetes (list+watch over HTTPS) and a cluster file
// (the embedded default for the lab and for clusters without Kubernetes) — feed
// the same ClusterView, so the logical model never knows which one it reads.
// The object structs below are the same for both: the same fields, the same
// defaults and the same validation (control/cluster_objects.h), whichever
// source decoded them.
//
// Contract:
//  - start() begins syncing in the source's own thread(s) and returns at once;
//    a configuration error (unreadable kubeconfig, missing file) is returned.
//  - Every change is delivered through the ClusterListener, on the source's
//    thread, one object at a time, in the order the source saw them. The first
//    complete listing ends with synced(); after a relist (410 Gone, file
//    reload) the source delivers the differences only, then synced() again.
//  - Objects the source cannot make sense of are skipped, counted in
//    stats().malformed and logged with the object's name and the reason; an
//    object is delivered whole or not at all.
//  - stop() joins the threads; no callback runs after it returns.
//  - publishSelf() makes this node's own entry visible to the others
//    (Kubernetes: patch the Node's annotations dpu-cni.io/tunnel-ip,
//    dpu-cni.io/ipsec-public-key, dpu-cni.io/ipsec-epoch, dpu-cni.io/ipsec-mode,
//    dpu-cni.io/ipsec-nat-address and dpu-cni.io/port-keys; file source: write the node's entry into the
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
  // Its IPsec mode next to the key (annotation dpu-cni.io/ipsec-mode / file
  // "ipsecMode"): "on" (it sends ESP and refuses plaintext from peers that
  // advertise "on"), "keys" (SAs installed, it sends plaintext), or empty.
  std::string ipsec_mode = {};
  // Where peers reach it when a NAT is in front of it (annotation
  // dpu-cni.io/ipsec-nat-address / file "ipsecNatAddress"): the NAT's public
  // IPv4 address (docs/ipsec.md "NAT traversal"); empty: its tunnel IP.
  std::string ipsec_nat_address = {};
  bool operator==(const NodeInfo&) const = default;
};

// The L4 protocols Kubernetes names in Service, EndpointSlice, container and
// NetworkPolicy ports ("TCP", "UDP", "SCTP"; TCP when absent).
enum class Protocol : uint8_t { kTcp, kUdp, kSctp };

// A port given by number or by name, Kubernetes' IntOrString where it means a
// port (a Service's targetPort, a NetworkPolicy port). Absent: neither set.
struct PortRef {
  uint16_t number = 0;
  std::string name;  // an IANA service name ("http"), resolved against container or endpoint ports
  bool empty() const { return number == 0 && name.empty(); }
  bool isName() const { return !name.empty(); }
  bool operator==(const PortRef&) const = default;
};

// One port of one of the pod's containers (spec.containers[].ports[]): the
// pod's named ports, which NetworkPolicy ports and Service targetPorts name.
struct ContainerPort {
  std::string name;                      // may be empty
  uint16_t port = 0;                     // containerPort, 1..65535
  Protocol protocol = Protocol::kTcp;
  bool operator==(const ContainerPort&) const = default;
};

struct PodInfo {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node_name;                 // spec.nodeName
  std::vector<std::string> ips;          // status.podIPs
  std::map<std::string, std::string> labels;
  bool host_network = false;
  std::vector<ContainerPort> ports = {};  // every container's, in order
  bool operator==(const PodInfo&) const = default;
};

// A Namespace: its labels are what NetworkPolicy namespaceSelectors match
// (kubernetes.io/metadata.name=<name> is always among them: the API server
// sets it, the file source adds it).
struct NamespaceInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  bool operator==(const NamespaceInfo&) const = default;
};

struct ServicePort {
  std::string name;                      // required when the service has more than one port
  Protocol protocol = Protocol::kTcp;
  uint16_t port = 0;
  PortRef target_port;                   // defaults to `port`
  uint16_t node_port = 0;                // 0: none
  bool operator==(const ServicePort&) const = default;
};

enum class ServiceType : uint8_t { kClusterIP, kNodePort, kLoadBalancer, kExternalName };
enum class SessionAffinity : uint8_t { kNone, kClientIP };
// internalTrafficPolicy / externalTrafficPolicy.
enum class TrafficPolicy : uint8_t { kCluster, kLocal };

struct ServiceInfo {
  std::string ns;
  std::string name;
  std::map<std::string, std::string> labels;
  ServiceType type = ServiceType::kClusterIP;
  // spec.clusterIP "None": no virtual IP, clients resolve the endpoints.
  bool headless = false;
  std::vector<std::string> cluster_ips;  // spec.clusterIPs (or clusterIP); empty when headless or ExternalName
  // spec.ipFamilyPolicy (SingleStack when absent, as the API server sets it;
  // empty for ExternalName) and spec.ipFamilies ("IPv4", "IPv6"; from the
  // cluster IPs when absent). The dataplane needs only the cluster IPs; a
  // client that allocates them (the lab) reads these.
  std::string ip_family_policy;
  std::vector<std::string> ip_families;
  std::vector<ServicePort> ports;
  std::vector<std::string> external_ips;       // spec.externalIPs
  std::vector<std::string> load_balancer_ips;  // status.loadBalancer.ingress[].ip, served like externalIPs
  SessionAffinity session_affinity = SessionAffinity::kNone;
  // With ClientIP: spec.sessionAffinityConfig.clientIP.timeoutSeconds (10800 when absent); 0 otherwise.
  uint32_t affinity_timeout_seconds = 0;
  TrafficPolicy internal_traffic_policy = TrafficPolicy::kCluster;
  TrafficPolicy external_traffic_policy = TrafficPolicy::kCluster;
  bool publish_not_ready_addresses = false;
  // Labelled service.kubernetes.io/service-proxy-name: another proxy serves
  // it, and ours must leave it alone (as kube-proxy does).
  bool proxiedElsewhere() const { return labels.count("service.kubernetes.io/service-proxy-name") != 0; }
  bool operator==(const ServiceInfo&) const = default;
};

// Who an endpoint is (targetRef), when the slice says.
struct ObjectRef {
  std::string kind;                      // "Pod"
  std::string ns;
  std::string name;
  bool operator==(const ObjectRef&) const = default;
};

struct EndpointInfo {
  std::vector<std::string> addresses;
  // EndpointConditions with the API's reading of absent ones: ready and
  // serving default to true, terminating to false.
  bool ready = true;
  bool serving = true;
  bool terminating = false;
  std::string node_name;
  ObjectRef target_ref = {};             // empty when absent
  bool operator==(const EndpointInfo&) const = default;
};

enum class AddressType : uint8_t { kIPv4, kIPv6, kFQDN };

struct EndpointSliceInfo {
  std::string ns;
  std::string name;
  std::string service_name;              // label kubernetes.io/service-name
  AddressType address_type = AddressType::kIPv4;
  std::vector<EndpointInfo> endpoints;
  struct Port {
    std::string name;
    Protocol protocol = Protocol::kTcp;
    uint16_t port = 0;                   // 0: not given (all ports, says the API)
    bool operator==(const Port&) const = default;
  };
  std::vector<Port> ports;
  bool operator==(const EndpointSliceInfo&) const = default;
};

// metav1.LabelSelector. Empty (no labels, no expressions) selects everything.
enum class SelectorOperator : uint8_t { kIn, kNotIn, kExists, kDoesNotExist };
struct SelectorRequirement {
  std::string key;
  SelectorOperator op = SelectorOperator::kIn;
  std::vector<std::string> values;       // In/NotIn: at least one; Exists/DoesNotExist: none
  bool operator==(const SelectorRequirement&) const = default;
};
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<SelectorRequirement> match_expressions;
  // Whether an object with these labels is selected (every term must hold).
  bool matches(const std::map<std::string, std::string>& labels) const;
  bool operator==(const LabelSelector&) const = default;
};

// An ipBlock peer: `cidr` (host bits cleared) minus every `except` (each a
// strict subset of it).
struct IpBlock {
  std::string cidr;
  std::vector<std::string> except;
  bool operator==(const IpBlock&) const = default;
};

// One from/to entry. Either ipBlock alone, or one or both selectors: a
// podSelector alone picks pods of the policy's namespace; a namespaceSelector
// alone every pod of the namespaces it picks; both, those pods of those
// namespaces (AND). An absent selector (nullopt) is not an empty one.
struct NetworkPolicyPeer {
  std::optional<LabelSelector> pod_selector;
  std::optional<LabelSelector> namespace_selector;
  std::optional<IpBlock> ip_block;
  bool operator==(const NetworkPolicyPeer&) const = default;
};

struct NetworkPolicyPort {
  Protocol protocol = Protocol::kTcp;
  PortRef port;                          // empty: every port of the protocol
  uint16_t end_port = 0;                 // with a numbered port: the range port..end_port
  bool operator==(const NetworkPolicyPort&) const = default;
};

// An ingress rule (peers = from) or egress rule (peers = to). No peers: any
// peer; no ports: any port.
struct NetworkPolicyRule {
  std::vector<NetworkPolicyPeer> peers;
  std::vector<NetworkPolicyPort> ports;
  bool operator==(const NetworkPolicyRule&) const = default;
};

// networking.k8s.io/v1 NetworkPolicy, with the API server's defaulting
// applied (policyTypes, port protocols).
struct NetworkPolicyInfo {
  std::string ns;
  std::string name;
  LabelSelector pod_selector;            // the pods of `ns` the policy applies to
  // spec.policyTypes: whether the selected pods are isolated for ingress and
  // for egress. Absent in the object: Ingress, and Egress when it has egress rules.
  bool policy_ingress = true;
  bool policy_egress = false;
  std::vector<NetworkPolicyRule> ingress;
  std::vector<NetworkPolicyRule> egress;
  bool operator==(const NetworkPolicyInfo&) const = default;
};

enum class ObjectKind { kNode, kPod, kService, kEndpointSlice, kNetworkPolicy, kNamespace };
inline constexpr size_t kObjectKindCount = 6;
// "node", "pod", "service", "endpointslice", "networkpolicy", "namespace": metric labels.
inline const char* objectKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "node";
    case ObjectKind::kPod: return "pod";
    case ObjectKind::kService: return "service";
    case ObjectKind::kEndpointSlice: return "endpointslice";
    case ObjectKind::kNetworkPolicy: return "networkpolicy";
    case ObjectKind::kNamespace: return "namespace";
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
  virtual void namespaceUpserted(const NamespaceInfo& ns) = 0;
  virtual void namespaceDeleted(const std::string& name) = 0;
  // The first full listing (and each relist) is complete.
  virtual void synced() = 0;
};

struct ClusterSourceStats {
  uint64_t malformed = 0;                // objects skipped
  uint64_t watch_restarts = 0;           // streams resumed or relisted
  uint64_t relists = 0;                  // 410 Gone / file reloads
  // The Kubernetes source's relists by kind (index: ObjectKind): each kind
  // relists alone. The file source reloads everything at once (`relists`).
  std::array<uint64_t, kObjectKindCount> relists_by_kind{};
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
  std::string ipsec_mode = {};                     // "keys" or "on", published with the key; empty with none
  std::string ipsec_nat_address = {};              // ipsec.natAddress; empty: not behind a NAT
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
