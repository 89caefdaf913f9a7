// `dpuctl ipsec rotate` as a dataplane keeps it (docs/ipsec.md, "Operating
// it"): the operator's requests, counted for the agent, which sees the count
// on every program reply (ProgramReply.ipsec_rotation_requests) and
// acknowledges what it took on its status polls
// (StatusRequest.ipsec_rotations_taken). The dataplane holds no key: the
// rotation is the agent's. Shared by dpu-dataplane's engine and the fake
// dataplane, so both answer alike. Control thread only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/result.h"

namespace dpu::model {

class RotationRequests {
 public:
  // One more request; refused while the dataplane holds no SA (IPsec off,
  // or no peer known yet).
  Result<void> request(bool holds_sas) {
    if (!holds_sas) {
      return Error{"this node holds no IPsec SA (IPsec is off in the agent's configuration, or no other node "
                   "is known yet): there is nothing to rotate",
                   ErrorCode::kInvalid};
    }
    ++requests_;
    return {};
  }
  // The agent's acknowledgement: kept so that a restarted agent does not take
  // a request twice; never above the requests made, never back.
  void taken(uint64_t n) { taken_ = std::max(taken_, std::min(n, requests_)); }

  uint64_t requests() const { return requests_; }
  uint64_t taken() const { return taken_; }

 private:
  uint64_t requests_ = 0;
  uint64_t taken_ = 0;
};

}  // namespace dpu::model
