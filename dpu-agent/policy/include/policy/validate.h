// The checks a NetworkPolicy must pass before the compiler takes it: what the
// API server's validation refuses, checked again on the decoded object,
// because the compiler's input is not only the Kubernetes decoder's (the
// cluster file, the lab, tests) and because a rule it cannot read must fail
// the one policy, named, never the node. A refused policy is left out whole;
// every other policy stays in force.
#pragma once

#include "common/result.h"
#include "control/cluster_source.h"

namespace dpu::policy {

// Ok, or an error (ErrorCode::kInvalid) naming the policy, the field as the
// API spells it ("spec.ingress[0].from[1].ipBlock.except[0]") and what to
// fix: an invalid cidr; an except that is not a CIDR, of another family, or
// not strictly inside its cidr; an ipBlock in the same peer as a selector; a
// peer with nothing in it; endPort without a port, after a named port or
// below port; an invalid port name; a protocol other than TCP, UDP or SCTP;
// a selector requirement with an empty key, an unknown operator, In/NotIn
// without values or Exists/DoesNotExist with values; a matchLabels key that
// is empty. (A port number 0 cannot reach this struct: PortRef reads 0 as
// "no port", and the decoder refuses a 0 in the object.)
Result<void> validatePolicy(const control::NetworkPolicyInfo& policy);

}  // namespace dpu::policy
