// The reference evaluator (reference.h), step by step as the API defines it.
#include "policy/reference.h"

#include "common/net_address.h"
#include "control/cluster_objects.h"
#include "policy/rules.h"

namespace dpu::policy {
namespace {

using namespace dpu::control;

enum class Direction { kIngress, kEgress };

const PodInfo* podOf(const ClusterState& c, const Endpoint& e) {
  if (e.pod.empty()) return nullptr;
  auto it = c.pods.find(e.pod);
  return it == c.pods.end() ? nullptr : &it->second;
}

bool selects(const NetworkPolicyInfo& policy, const PodInfo& pod) {
  return !pod.host_network && pod.ns == policy.ns && policy.pod_selector.matches(pod.labels);
}

bool ipBlockHas(const IpBlock& block, const IpAddress& ip) {
  auto cidr = IpPrefix::parse(block.cidr, true);
  if (!cidr || !cidr->contains(ip)) return false;
  for (const auto& text : block.except) {
    auto ex = IpPrefix::parse(text, true);
    if (ex && ex->contains(ip)) return false;
  }
  return true;
}

// Whether `peer` of a rule of `policy` matches the other end of the connection.
bool peerMatches(const ClusterState& c, const NetworkPolicyInfo& policy, const NetworkPolicyPeer& peer,
                 const Endpoint& other) {
  if (peer.ip_block) return ipBlockHas(*peer.ip_block, other.ip);
  const PodInfo* pod = podOf(c, other);
  if (pod == nullptr || pod->host_network) return false;
  if (peer.namespace_selector) {
    if (!peer.namespace_selector->matches(namespaceLabels(c.namespaces, pod->ns))) return false;
  } else if (pod->ns != policy.ns) {
    return false;
  }
  return !peer.pod_selector || peer.pod_selector->matches(pod->labels);
}

// Whether `port` of a rule matches; a named port is looked up in the
// destination pod's container ports.
bool portMatches(const NetworkPolicyPort& p, const PodInfo* destination, uint8_t ip_protocol, uint16_t port) {
  if (ipProtocol(p.protocol) != ip_protocol) return false;
  if (p.port.empty()) return true;
  if (p.port.isName()) {
    if (destination == nullptr) return false;
    for (const auto& cp : destination->ports)
      if (cp.name == p.port.name && cp.protocol == p.protocol && cp.port == port) return true;
    return false;
  }
  if (p.end_port != 0) return port >= p.port.number && port <= p.end_port;
  return port == p.port.number;
}

bool judged(const ClusterState& c, Direction dir, const PodInfo& subject, const Endpoint& other,
            const PodInfo* destination, uint8_t ip_protocol, uint16_t port) {
  bool isolated = false;
  for (const auto& policy : c.policies) {
    if (!selects(policy, subject)) continue;
    if (dir == Direction::kIngress ? !policy.policy_ingress : !policy.policy_egress) continue;
    isolated = true;
    for (const auto& rule : dir == Direction::kIngress ? policy.ingress : policy.egress) {
      bool peer_ok = rule.peers.empty();
      for (const auto& peer : rule.peers) peer_ok = peer_ok || peerMatches(c, policy, peer, other);
      bool port_ok = rule.ports.empty();
      for (const auto& p : rule.ports) port_ok = port_ok || portMatches(p, destination, ip_protocol, port);
      if (peer_ok && port_ok) return true;
    }
  }
  return !isolated;
}

}  // namespace

std::map<std::string, std::string> namespaceLabels(const std::map<std::string, NamespaceInfo>& namespaces,
                                                   const std::string& ns) {
  std::map<std::string, std::string> labels;
  if (auto it = namespaces.find(ns); it != namespaces.end()) labels = it->second.labels;
  labels[kNamespaceNameLabel] = ns;
  return labels;
}

bool ingressAllowed(const ClusterState& c, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol,
                    uint16_t port) {
  const PodInfo* pod = podOf(c, dst);
  if (pod == nullptr || pod->host_network) return true;
  return judged(c, Direction::kIngress, *pod, src, pod, ip_protocol, port);
}

bool egressAllowed(const ClusterState& c, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol,
                   uint16_t port) {
  const PodInfo* pod = podOf(c, src);
  if (pod == nullptr || pod->host_network) return true;
  const PodInfo* destination = podOf(c, dst);
  if (destination != nullptr && destination->host_network) destination = nullptr;
  return judged(c, Direction::kEgress, *pod, dst, destination, ip_protocol, port);
}

bool allowed(const ClusterState& c, const Endpoint& src, const Endpoint& dst, uint8_t ip_protocol, uint16_t port) {
  return ingressAllowed(c, src, dst, ip_protocol, port) && egressAllowed(c, src, dst, ip_protocol, port);
}

}  // namespace dpu::policy
