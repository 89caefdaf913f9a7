// NetworkPolicy validation (validate.h): the first problem found, with the
// field's path and what to do about it.
#include "policy/validate.h"

#include <string>

#include "common/net_address.h"
#include "control/cluster_objects.h"

namespace dpu::policy {
namespace {

using namespace dpu::control;

// The first problem, as "field: what is wrong; what to do".
struct Problem {
  std::string field;
  std::string message;
  explicit operator bool() const { return !message.empty(); }
};

Problem checkSelector(const LabelSelector& sel, const std::string& where) {
  for (const auto& [k, v] : sel.match_labels)
    if (k.empty()) return {where + ".matchLabels", "has an empty key; give every label a name"};
  for (size_t i = 0; i < sel.match_expressions.size(); ++i) {
    const auto& req = sel.match_expressions[i];
    std::string at = where + ".matchExpressions[" + std::to_string(i) + "]";
    if (req.key.empty()) return {at + ".key", "is empty; name the label the requirement tests"};
    bool sets = false;
    switch (req.op) {
      case SelectorOperator::kIn:
      case SelectorOperator::kNotIn: sets = true; break;
      case SelectorOperator::kExists:
      case SelectorOperator::kDoesNotExist: sets = false; break;
      default:
        return {at + ".operator", "is not one of In, NotIn, Exists, DoesNotExist (value " +
                                      std::to_string(static_cast<int>(req.op)) + "); use one of them"};
    }
    if (sets && req.values.empty())
      return {at + ".values", std::string("is empty; operator ") + selectorOperatorName(req.op) +
                                  " needs at least one value"};
    if (!sets && !req.values.empty())
      return {at + ".values", std::string("must be empty for operator ") + selectorOperatorName(req.op) +
                                  "; remove the values or use In/NotIn"};
  }
  return {};
}

Problem checkIpBlock(const IpBlock& block, const std::string& where) {
  auto cidr = IpPrefix::parse(block.cidr, true);
  if (!cidr) return {where + ".cidr", "'" + block.cidr + "' is not a CIDR; write it as 10.0.0.0/16 or fd00::/64"};
  for (size_t i = 0; i < block.except.size(); ++i) {
    std::string at = where + ".except[" + std::to_string(i) + "]";
    auto ex = IpPrefix::parse(block.except[i], true);
    if (!ex) return {at, "'" + block.except[i] + "' is not a CIDR; write it as 10.0.1.0/24 or fd00::/80"};
    if (ex->address.family != cidr->address.family)
      return {at, "'" + block.except[i] + "' is of another address family than cidr " + cidr->str() +
                      "; list only excepts of the cidr's family"};
    if (!cidr->contains(ex->address) || ex->length <= cidr->length)
      return {at, "'" + block.except[i] + "' is not strictly inside cidr " + cidr->str() +
                      "; list only ranges within the cidr"};
  }
  return {};
}

Problem checkPort(const NetworkPolicyPort& port, const std::string& at) {
  if (port.protocol != Protocol::kTcp && port.protocol != Protocol::kUdp && port.protocol != Protocol::kSctp)
    return {at + ".protocol", "is not TCP, UDP or SCTP (value " + std::to_string(static_cast<int>(port.protocol)) +
                                  "); use one of them"};
  if (port.port.isName()) {
    if (auto why = portNameProblem(port.port.name); !why.empty())
      return {at + ".port", "\"" + port.port.name + "\" is not a port name: " + why};
    if (port.end_port != 0)
      return {at + ".endPort", "follows the named port \"" + port.port.name +
                                   "\"; a range needs a port number, or drop endPort"};
  } else if (port.end_port != 0) {
    if (port.port.empty()) return {at + ".endPort", "is given without port; give port, the first port of the range"};
    if (port.end_port < port.port.number)
      return {at + ".endPort", std::to_string(port.end_port) + " is below port " + std::to_string(port.port.number) +
                                   "; give an endPort at or above port"};
  }
  return {};
}

Problem checkRules(const std::vector<NetworkPolicyRule>& rules, const std::string& where, const char* peers_key) {
  for (size_t i = 0; i < rules.size(); ++i) {
    std::string rule = where + "[" + std::to_string(i) + "]";
    const auto& r = rules[i];
    for (size_t j = 0; j < r.peers.size(); ++j) {
      const auto& peer = r.peers[j];
      std::string at = rule + "." + peers_key + "[" + std::to_string(j) + "]";
      if (!peer.ip_block && !peer.pod_selector && !peer.namespace_selector)
        return {at, "names no peer; give podSelector, namespaceSelector or ipBlock"};
      if (peer.ip_block && (peer.pod_selector || peer.namespace_selector))
        return {at, "combines ipBlock with a selector; put the ipBlock in a peer of its own"};
      if (peer.pod_selector)
        if (auto p = checkSelector(*peer.pod_selector, at + ".podSelector")) return p;
      if (peer.namespace_selector)
        if (auto p = checkSelector(*peer.namespace_selector, at + ".namespaceSelector")) return p;
      if (peer.ip_block)
        if (auto p = checkIpBlock(*peer.ip_block, at + ".ipBlock")) return p;
    }
    for (size_t j = 0; j < r.ports.size(); ++j)
      if (auto p = checkPort(r.ports[j], rule + ".ports[" + std::to_string(j) + "]")) return p;
  }
  return {};
}

}  // namespace

Result<void> validatePolicy(const NetworkPolicyInfo& policy) {
  const std::string object = "networkpolicy " + policy.ns + "/" + policy.name;
  Problem p;
  if (policy.ns.empty() || policy.name.empty()) p = {"metadata", "needs a namespace and a name"};
  if (!p) p = checkSelector(policy.pod_selector, "spec.podSelector");
  if (!p) p = checkRules(policy.ingress, "spec.ingress", "from");
  if (!p) p = checkRules(policy.egress, "spec.egress", "to");
  if (!p) return {};
  return Error{object + ": " + p.field + ": " + p.message, ErrorCode::kInvalid};
}

}  // namespace dpu::policy
