// The key rotation as a dataplane knows it (docs/ipsec.md, "Operating it").
// The dataplane holds no key: the rotation is the agent's. What it keeps:
//  - `dpuctl ipsec rotate` requests, counted for the agent, which sees the
//    count on every program reply (ProgramReply.ipsec_rotation_requests) and
//    acknowledges what it took on its status polls
//    (StatusRequest.ipsec_rotations_taken);
//  - the rotation's state as the agent's last status poll reported it
//    (StatusRequest.ipsec_rotation), for `dpuctl ipsec`.
// Shared by dpu-dataplane's engine and the fake dataplane, so both answer
// alike. Control thread only.
#pragma once

#include <cstdint>
#include <optional>

#include "common/result.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::model {

class IpsecRotation {
 public:
  // One more request; refused while the dataplane holds no SA (IPsec off,
  // or no peer known yet).
  Result<void> request(bool holds_sas);

  // An agent's status poll: its acknowledgement (kept so that a restarted
  // agent does not take a request twice; never above the requests made,
  // never back), taken whatever else the poll holds, and its rotation state.
  // A state that is not one an agent sends is refused, saying what is wrong,
  // and the last good one kept.
  Result<void> status(const dataplane::v1::StatusRequest& status, uint64_t now_ms);

  uint64_t requests() const { return requests_; }
  uint64_t taken() const { return taken_; }
  // The counts, and the last state reported with its age.
  void describe(dataplane::v1::IpsecInfo& out, uint64_t now_ms) const;

 private:
  uint64_t requests_ = 0;
  uint64_t taken_ = 0;
  std::optional<dataplane::v1::IpsecRotationState> state_;
  uint64_t reported_ms_ = 0;
};

// The longest text (waiting_for, deferred, last_error, a peer's node name
// and problem) a report may carry in bytes; a sender clips to it
// (clipRotationText).
inline constexpr size_t kRotationTextMax = 1'024;

// `text` cut to kRotationTextMax bytes, never inside a UTF-8 sequence (a
// protobuf string must stay valid UTF-8).
std::string clipRotationText(const std::string& text);

// Why `state` is not a rotation state an agent sends ("" when it is).
std::string rotationStateProblem(const dataplane::v1::IpsecRotationState& state);

}  // namespace dpu::model
