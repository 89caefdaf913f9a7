#include "model/ipsec_rotation.h"

#include <algorithm>
#include <set>
#include <string>

namespace dpu::model {
namespace {

// Bounds well above any real report (a node has one entry per other node),
// so a broken sender cannot make the dataplane keep megabytes for dpuctl.
constexpr int kMaxPeers = 65'536;
constexpr size_t kMaxText = kRotationTextMax;

// `text` cut to `max` bytes, never inside a UTF-8 sequence: a protobuf string
// (a report, or the reply's message that quotes one) must stay valid UTF-8.
std::string clipUtf8(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  // Back over continuation bytes (10xxxxxx) to the start of the cut sequence.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

std::string rotationStateProblem(const dataplane::v1::IpsecRotationState& state) {
  static const std::set<std::string> kPhases = {"idle", "installing", "publishing", "grace"};
  if (!kPhases.count(state.phase())) {
    return "ipsec_rotation.phase \"" + clipUtf8(state.phase(), 64) +
           "\" is not a rotation phase: send idle, installing, publishing or grace";
  }
  const bool next = state.phase() == "installing" || state.phase() == "publishing";
  if (next != (state.next_epoch() != 0)) {
    return "ipsec_rotation.next_epoch " + std::to_string(state.next_epoch()) + " does not fit phase " +
           state.phase() + ": an epoch is installed or published exactly while installing or publishing";
  }
  if (state.phase() == "grace" && state.previous_epoch() == 0) {
    return "ipsec_rotation: phase grace needs the previous_epoch it accepts";
  }
  for (const std::string* text : {&state.waiting_for(), &state.deferred(), &state.last_error()}) {
    if (text->size() > kMaxText) {
      return "ipsec_rotation: a text field of " + std::to_string(text->size()) + " bytes is above the " +
             std::to_string(kMaxText) + " a report may carry";
    }
  }
  if (state.peers_size() > kMaxPeers) {
    return "ipsec_rotation lists " + std::to_string(state.peers_size()) + " peers, above " + std::to_string(kMaxPeers);
  }
  std::set<std::string> names;
  for (const auto& p : state.peers()) {
    if (p.node().empty() || p.node().size() > kMaxText) {
      return "ipsec_rotation.peers: a node name must have 1 to " + std::to_string(kMaxText) + " bytes";
    }
    if (p.problem().size() > kMaxText) return "ipsec_rotation.peers[" + p.node() + "].problem is too long";
    if (!names.insert(p.node()).second) return "ipsec_rotation.peers lists node " + p.node() + " twice";
  }
  return "";
}

std::string clipRotationText(const std::string& text) { return clipUtf8(text, kMaxText); }

Result<void> IpsecRotation::request(bool holds_sas) {
  if (!holds_sas) {
    return Error{"this node holds no IPsec SA (IPsec is off in the agent's configuration, or no other node "
                 "is known yet): there is nothing to rotate",
                 ErrorCode::kInvalid};
  }
  ++requests_;
  return {};
}

Result<void> IpsecRotation::status(const dataplane::v1::StatusRequest& status, uint64_t now_ms) {
  // The acknowledgement first: clamped, it cannot be wrong, and a state the
  // dataplane refuses must not make a restarted agent take a request twice.
  taken_ = std::max(taken_, std::min(status.ipsec_rotations_taken(), requests_));
  if (!status.has_ipsec_rotation()) {
    state_.reset();  // an agent with IPsec off reports none
    return {};
  }
  if (auto why = rotationStateProblem(status.ipsec_rotation()); !why.empty()) {
    return Error{"StatusRequest: " + why, ErrorCode::kInvalid};
  }
  state_ = status.ipsec_rotation();
  reported_ms_ = now_ms;
  return {};
}

void IpsecRotation::describe(dataplane::v1::IpsecInfo& out, uint64_t now_ms) const {
  out.set_rotation_requests(requests_);
  out.set_rotations_taken(taken_);
  if (state_) {
    *out.mutable_rotation() = *state_;
    out.set_rotation_reported_ms_ago(now_ms > reported_ms_ ? now_ms - reported_ms_ : 0);
  }
}

}  // namespace dpu::model
