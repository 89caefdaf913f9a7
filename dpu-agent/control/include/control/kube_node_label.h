// The host's node name of a DPU whose config says where to read it
// (nodeName: {fromNodeLabel: L, node: N}): the value of label L on the DPU's
// own Node N. A DaemonSet gives every DPU the same config file and each pod
// only its own node's name (the downward API); the pairing DPU -> host lives
// on the DPU's Node, set once by the operator or by the DPU provisioner.
#pragma once

#include <chrono>
#include <string>

#include "common/result.h"
#include "control/kube_config.h"

namespace dpu::control {

// GET /api/v1/nodes/NODE and the label's value. kNotFound: no such Node, or
// it has no such label (the message says how to set it); kForbidden: RBAC;
// kUnavailable: the API server did not answer.
Result<std::string> readNodeLabel(const KubeConnection& connection, const std::string& node, const std::string& label,
                                  std::chrono::seconds timeout = std::chrono::seconds(10));

}  // namespace dpu::control
