// The compiled NetworkPolicy of a pod as a PortPolicy (see policy_model.h).
#include "control/policy_model.h"

#include "model/model.h"

namespace dpu::control {
namespace {

namespace dpv1 = ::dpu::dataplane::v1;

void fill(const policy::DirectionRules& in, dpv1::PolicyDirection& out) {
  out.set_isolated(in.isolated);
  if (!in.isolated) return;
  for (const auto& p : in.policies) out.add_policies(p);
  for (const auto& r : in.rules) {
    auto* rule = out.add_rules();
    // Packed: a peer picking thousands of pods costs no text on either side.
    model::packPolicyPeers(r.peers, *rule);
    rule->set_protocol(r.protocol);
    rule->set_port_first(r.port_first);
    rule->set_port_last(r.port_last);
    rule->set_policy(r.policy);
  }
}

}  // namespace

std::optional<dpv1::PortPolicy> portPolicyOf(const std::string& port, const policy::PodRules& rules) {
  if (!rules.ingress.isolated && !rules.egress.isolated) return std::nullopt;
  dpv1::PortPolicy out;
  out.set_port(port);
  out.set_pod(rules.pod);
  fill(rules.ingress, *out.mutable_ingress());
  fill(rules.egress, *out.mutable_egress());
  return out;
}

}  // namespace dpu::control
