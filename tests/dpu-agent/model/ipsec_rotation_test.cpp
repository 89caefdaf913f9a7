// model::IpsecRotation: what a dataplane keeps of the agent's key rotation
// (dpuctl ipsec rotate's requests, the acknowledgement, the reported state)
// and the validation of a reported state, shared by the engine and the fake.
#include "model/ipsec_rotation.h"

#include <catch2/catch.hpp>

namespace dpv1 = dpu::dataplane::v1;
using dpu::model::IpsecRotation;
using dpu::model::rotationStateProblem;

namespace {

dpv1::IpsecRotationState state(const std::string& phase, uint32_t current, uint32_t next, uint32_t previous) {
  dpv1::IpsecRotationState s;
  s.set_phase(phase);
  s.set_current_epoch(current);
  s.set_next_epoch(next);
  s.set_previous_epoch(previous);
  return s;
}

}  // namespace

TEST_CASE("ipsec rotation: every state an agent reports is accepted", "[model][ipsec]") {
  CHECK(rotationStateProblem(state("idle", 1, 0, 0)).empty());
  CHECK(rotationStateProblem(state("idle", 0, 0, 0)).empty());  // a first start, nothing published yet
  CHECK(rotationStateProblem(state("installing", 1, 2, 0)).empty());
  CHECK(rotationStateProblem(state("installing", 2, 3, 1)).empty());  // a rotation deferred past a grace
  CHECK(rotationStateProblem(state("publishing", 1, 2, 0)).empty());
  CHECK(rotationStateProblem(state("grace", 2, 0, 1)).empty());
}

TEST_CASE("ipsec rotation: a state no agent sends is named, field and fix", "[model][ipsec]") {
  CHECK_THAT(rotationStateProblem(state("", 1, 0, 0)), Catch::Contains("send idle, installing, publishing or grace"));
  CHECK_THAT(rotationStateProblem(state("Grace", 2, 0, 1)), Catch::Contains("\"Grace\" is not a rotation phase"));
  // A long phase is quoted in part, cut before a character, never inside one.
  const auto quoted = rotationStateProblem(state(std::string(63, 'p') + "\xc3\xa9", 1, 0, 0));
  CHECK_THAT(quoted, Catch::StartsWith("ipsec_rotation.phase \"" + std::string(63, 'p') + "\" is not"));
  CHECK_THAT(rotationStateProblem(state("installing", 1, 0, 0)), Catch::Contains("next_epoch 0 does not fit phase installing"));
  CHECK_THAT(rotationStateProblem(state("idle", 1, 2, 0)), Catch::Contains("next_epoch 2 does not fit phase idle"));
  CHECK_THAT(rotationStateProblem(state("grace", 2, 0, 0)), Catch::Contains("phase grace needs the previous_epoch"));
  auto long_text = state("idle", 1, 0, 0);
  long_text.set_waiting_for(std::string(dpu::model::kRotationTextMax + 1, 'x'));
  CHECK_THAT(rotationStateProblem(long_text), Catch::Contains("above the 1024 a report may carry"));
  auto peers = state("idle", 1, 0, 0);
  peers.add_peers()->set_node("node-b");
  CHECK(rotationStateProblem(peers).empty());
  peers.add_peers()->set_node("node-b");
  CHECK_THAT(rotationStateProblem(peers), Catch::Contains("lists node node-b twice"));
  auto unnamed = state("idle", 1, 0, 0);
  unnamed.add_peers();
  CHECK_THAT(rotationStateProblem(unnamed), Catch::Contains("a node name must have 1 to 1024 bytes"));
}

TEST_CASE("ipsec rotation: requests, the acknowledgement and the last state, as dpuctl ipsec sees them",
          "[model][ipsec]") {
  IpsecRotation r;
  REQUIRE_FALSE(r.request(false));
  CHECK(r.requests() == 0);
  REQUIRE(r.request(true));
  REQUIRE(r.request(true));
  REQUIRE(r.request(true));
  dpv1::StatusRequest poll;
  poll.set_ipsec_rotations_taken(2);
  *poll.mutable_ipsec_rotation() = state("installing", 1, 2, 0);
  REQUIRE(r.status(poll, 1'000));
  CHECK(r.taken() == 2);
  dpv1::IpsecInfo info;
  r.describe(info, 1'250);
  CHECK(info.rotation_requests() == 3);
  CHECK(info.rotations_taken() == 2);
  CHECK(info.rotation().phase() == "installing");
  CHECK(info.rotation_reported_ms_ago() == 250);
  // A bad state is refused and the last good one kept; the acknowledgement
  // is taken all the same (never above the requests made).
  dpv1::StatusRequest bad;
  bad.set_ipsec_rotations_taken(5);
  *bad.mutable_ipsec_rotation() = state("grace", 2, 0, 0);
  auto refused = r.status(bad, 2'000);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::StartsWith("StatusRequest: ipsec_rotation: phase grace"));
  info.Clear();
  r.describe(info, 2'000);
  CHECK(info.rotation().phase() == "installing");
  CHECK(info.rotation_reported_ms_ago() == 1'000);
  CHECK(r.taken() == 3);
  // The acknowledgement never goes back; a poll without a state clears it.
  dpv1::StatusRequest off;
  off.set_ipsec_rotations_taken(0);
  REQUIRE(r.status(off, 3'000));
  CHECK(r.taken() == 3);
  info.Clear();
  r.describe(info, 3'000);
  CHECK_FALSE(info.has_rotation());
}

TEST_CASE("ipsec rotation: a sender's text is clipped to what a report carries, never inside a character",
          "[model][ipsec]") {
  using dpu::model::clipRotationText;
  using dpu::model::kRotationTextMax;
  CHECK(clipRotationText("short") == "short");
  const std::string ascii(kRotationTextMax + 10, 'x');
  CHECK(clipRotationText(ascii).size() == kRotationTextMax);
  // "é" is two bytes: 1,023 bytes of 'x' then "é" cuts inside it at 1,024.
  const std::string cut = std::string(kRotationTextMax - 1, 'x') + "\xc3\xa9" + "tail";
  CHECK(clipRotationText(cut) == std::string(kRotationTextMax - 1, 'x'));
  // A three-byte character ending exactly at the limit is kept whole.
  const std::string whole = std::string(kRotationTextMax - 3, 'x') + "\xe2\x82\xac" + "more";
  CHECK(clipRotationText(whole) == std::string(kRotationTextMax - 3, 'x') + "\xe2\x82\xac");
  auto long_name = state("idle", 1, 0, 0);
  long_name.add_peers()->set_node(clipRotationText(std::string(2 * kRotationTextMax, 'n')));
  CHECK(rotationStateProblem(long_name).empty());
  long_name.mutable_peers(0)->set_node(std::string(kRotationTextMax + 1, 'n'));
  CHECK_THAT(rotationStateProblem(long_name), Catch::Contains("a node name must have 1 to 1024 bytes"));
}
