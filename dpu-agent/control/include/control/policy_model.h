// NetworkPolicy in the logical model: the compiled rules of one local pod
// (dpu-agent/policy, rules.h) as the dataplane's PortPolicy of one of its
// ports (proto dpu.dataplane.v1, "NetworkPolicy"). Pure translation: the
// agent decides which ports get which pod's rules and when.
#pragma once

#include <optional>
#include <string>

#include "dpu/dataplane/v1/dataplane.pb.h"
#include "policy/rules.h"

namespace dpu::control {

// The PortPolicy of port `port` (an attachment id) for a pod with `rules`;
// nullopt when the pod is isolated in neither direction (a port without a
// PortPolicy passes everything, so none is sent). A direction that is not
// isolated is sent as such, with no rules.
std::optional<::dpu::dataplane::v1::PortPolicy> portPolicyOf(const std::string& port, const policy::PodRules& rules);

}  // namespace dpu::control
