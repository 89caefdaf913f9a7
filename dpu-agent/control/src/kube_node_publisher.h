// What this DPU says about itself on its host's Node: a JSON merge patch of
// metadata.annotations (dpu-cni.io/tunnel-ip, dpu-cni.io/ipsec-public-key,
// dpu-cni.io/port-keys) over the source's Transport. The port keys are
// always written, empty too: a node whose last pod went must not keep naming
// it to the others.
//
// Private to dpu_control_kube.
#pragma once

#include <atomic>
#include <string>

#include "common/result.h"
#include "control/cluster_source.h"
#include "kube_transport.h"

namespace dpu::control::kube {

class NodePublisher {
 public:
  // `node_name`: the Node to patch when the entry names none.
  NodePublisher(Transport& transport, std::string node_name)
      : transport_(transport), node_name_(std::move(node_name)) {}

  Result<void> publish(const SelfEntry& self);

 private:
  Transport& transport_;
  const std::string node_name_;
  std::atomic<bool> published_{false};
};

}  // namespace dpu::control::kube
