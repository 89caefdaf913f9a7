// The reference evaluator: whether NetworkPolicy lets one connection through,
// decided straight from the networking.k8s.io/v1 definition, one policy and
// one peer at a time, with no index, no compilation and no cleverness. It is
// slow on purpose: it is the truth the compiler (compiler.h) is tested
// against, and the wording of each step follows the API reference.
//
//  - A pod is isolated for ingress (egress) when a policy of its namespace
//    whose podSelector matches it has Ingress (Egress) among its policyTypes;
//    the decoder defaults policyTypes as the API server does (Ingress always,
//    Egress when there are egress rules). Not isolated: everything passes.
//  - Isolated: a connection passes when some rule of some such policy allows
//    it (the union of the policies). A rule allows it when one of its peers
//    matches the other end (no peers: any end) and one of its ports matches
//    (no ports: any protocol, any port).
//  - A peer: podSelector alone picks pods of the policy's namespace;
//    namespaceSelector alone every pod of the namespaces it matches (against
//    the namespace's labels, kubernetes.io/metadata.name included); both, the
//    pods matching podSelector in those namespaces; ipBlock the addresses of
//    cidr not in any except, pod addresses included. Host-network pods are
//    neither selected by policies nor picked by selectors (their address is
//    the node's).
//  - A port: its protocol, and a number, a range (endPort) or a name, which
//    means the container port of that name and protocol of the DESTINATION
//    pod (ingress: the isolated pod; egress: the other end, which must be a
//    pod with that port).
//  - Ingress is judged at the destination, egress at the source; a
//    connection passes when both do.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "control/cluster_source.h"

namespace dpu::policy {

// A snapshot of what policy depends on.
struct ClusterState {
  std::map<std::string, control::NamespaceInfo> namespaces;  // by name
  std::map<std::string, control::PodInfo> pods;              // by "namespace/name"
  std::vector<control::NetworkPolicyInfo> policies;          // valid ones (validatePolicy)
};

// The labels a namespaceSelector sees for namespace `ns`: its own, and
// kubernetes.io/metadata.name=<ns> always (the API server sets it; a pod's
// namespace the source has not delivered yet has that label alone).
std::map<std::string, std::string> namespaceLabels(const std::map<std::string, control::NamespaceInfo>& namespaces,
                                                   const std::string& ns);

// One end of a connection: an address, and the pod it belongs to
// ("namespace/name" in ClusterState::pods; empty for an address outside the
// cluster's pods).
struct Endpoint {
  std::string pod;
  IpAddress ip;
};

// Whether the destination's ingress policy lets `src` reach it, and whether
// the source's egress policy lets it reach `dst` (true when that end is not a
// pod). ip_protocol is the IP protocol number (6 TCP, 17 UDP, 132 SCTP, 1
// ICMP, ...); port the destination port (0 for port-less protocols).
bool ingressAllowed(const ClusterState& cluster, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol,
                    uint16_t port);
bool egressAllowed(const ClusterState& cluster, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol,
                   uint16_t port);
// Both.
bool allowed(const ClusterState& cluster, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol,
             uint16_t port);

}  // namespace dpu::policy
