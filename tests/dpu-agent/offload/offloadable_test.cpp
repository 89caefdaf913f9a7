// The hardware-independent analysis: the kinds each flow needs.
#include <catch2/catch.hpp>

#include "flows.h"
#include "offload/offloadable.h"

using namespace dpu::offload;
using namespace dpu::offload::fixtures;

namespace {
FeatureSet features(const dpu::flow::FlowSpec& f) {
  auto r = offloadFeatures(f);
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  return *r;
}
}  // namespace

TEST_CASE("offloadFeatures: the kinds each flow needs", "[offloadable]") {
  const FeatureSet local = features(localFlow());
  CHECK(local == FeatureSet{}
                     .add(Feature::kItemRepresentedPort)
                     .add(Feature::kItemEth)
                     .add(Feature::kItemIpv4)
                     .add(Feature::kItemUdp)
                     .add(Feature::kActionDecTtl)
                     .add(Feature::kActionSetMac)
                     .add(Feature::kActionRepresentedPort));
  const FeatureSet encap = features(encapFlow());
  CHECK(encap.has(Feature::kActionRawEncap));
  CHECK_FALSE(encap.has(Feature::kItemGeneve));
  const FeatureSet decap = features(decapFlow());
  CHECK(decap.has(Feature::kItemGeneve));
  CHECK(decap.has(Feature::kItemGeneveOpt));
  CHECK(decap.has(Feature::kActionRawDecap));
  const FeatureSet nat = features(natFlow());
  CHECK(nat.has(Feature::kActionSetIpv4));
  CHECK(nat.has(Feature::kActionSetTp));
  CHECK(nat.has(Feature::kItemTcp));
  CHECK(features(decapFlow(true, true)).has(Feature::kItemIpv6));
  const FeatureSet nat6 = features(natFlow6());
  CHECK(nat6.has(Feature::kActionSetIpv6));
  CHECK_FALSE(nat6.has(Feature::kActionSetIpv4));
  CHECK(nat6.has(Feature::kItemIpv6));
  // An address rewrite of the other family than the flow's is refused.
  auto crossed = natFlow6();
  crossed.actions[0] = act(ActionType::kSetIpv4Dst);
  CHECK_FALSE(offloadFeatures(crossed).ok());
  auto crossed4 = natFlow();
  crossed4.actions[0] = act(ActionType::kSetIpv6Dst);
  CHECK_FALSE(offloadFeatures(crossed4).ok());
  // North–south bridging: a match and one output, nothing rewritten.
  CHECK(features(bridgedFlow(kHostPf, kUplink)) == FeatureSet{}
                                                      .add(Feature::kItemRepresentedPort)
                                                      .add(Feature::kItemEth)
                                                      .add(Feature::kItemIpv4)
                                                      .add(Feature::kItemTcp)
                                                      .add(Feature::kActionRepresentedPort));
}

TEST_CASE("closePuntFlags: a TCP flow with a NAT rewrite keeps its SYN, FIN and RST in software",
          "[offloadable][nat]") {
  constexpr uint8_t kFinSynRst = 0x07;
  CHECK(closePuntFlags(natFlow()) == kFinSynRst);
  CHECK(closePuntFlags(natDecapFlow()) == kFinSynRst);
  // One rewrite of any NAT kind is enough: toFlowSpec gives them to translated flows only.
  for (ActionType type : {ActionType::kSetIpv4Src, ActionType::kSetIpv4Dst, ActionType::kSetL4Src,
                          ActionType::kSetL4Dst, ActionType::kSetIpv6Src, ActionType::kSetIpv6Dst}) {
    auto f = localFlow(false, dpu::overlay::ipproto::kTcp);
    f.actions.insert(f.actions.begin(), act(type));
    CHECK(closePuntFlags(f) == kFinSynRst);
  }
  // A connection tracked untranslated (NetworkPolicy's replies): the same.
  auto tracked = localFlow(false, dpu::overlay::ipproto::kTcp);
  tracked.tracked = true;
  CHECK(closePuntFlags(tracked) == kFinSynRst);
  tracked.match.key.ip_proto = dpu::overlay::ipproto::kUdp;
  CHECK(closePuntFlags(tracked) == 0);
  // Not translated, or not TCP: nothing punted.
  CHECK(closePuntFlags(localFlow(false, dpu::overlay::ipproto::kTcp)) == 0);
  CHECK(closePuntFlags(bridgedFlow(kHostPf, kUplink)) == 0);
  auto udp_nat = natFlow();
  udp_nat.match.key.ip_proto = dpu::overlay::ipproto::kUdp;
  CHECK(closePuntFlags(udp_nat) == 0);
  // The kinds the punt rules need come with the flow's.
  const FeatureSet nat = features(natFlow());
  CHECK(nat.has(Feature::kItemTcpFlags));
  CHECK(nat.has(Feature::kActionPortRepresentor));
  CHECK_FALSE(features(udp_nat).has(Feature::kItemTcpFlags));
  CHECK_FALSE(features(localFlow(false, dpu::overlay::ipproto::kTcp)).has(Feature::kActionPortRepresentor));
  // As dump-flows shows it.
  CHECK(describeClosePunt(kFinSynRst) == "punt:fin,syn,rst");
  CHECK(describeClosePunt(0x01) == "punt:fin");
  CHECK(describeClosePunt(0x14) == "punt:rst,0x0010");
  CHECK(describeClosePunt(0).empty());
  CHECK(featureName(Feature::kItemTcpFlags) == "item TCP (tcp_flags)");
  CHECK(featureName(Feature::kActionPortRepresentor) == "action PORT_REPRESENTOR");
}

TEST_CASE("closePuntShape: the port, tunnel, tag and IP version a flow's close punt rules match", "[offloadable][nat]") {
  const auto plain = closePuntShape(natFlow());
  REQUIRE(plain.has_value());
  CHECK(plain->port == kVf1);
  CHECK(plain->outer_family == 0);
  CHECK_FALSE(plain->vlan);
  CHECK(plain->family == 4);
  CHECK(describeClosePuntShape(*plain) == "port 1, IPv4");
  const auto reply = closePuntShape(natDecapFlow());
  REQUIRE(reply.has_value());
  CHECK(reply->port == kUplink);
  CHECK(reply->outer_family == 4);
  CHECK(describeClosePuntShape(*reply) == "port 0, geneve/IPv4, IPv4");
  // Connections differ in addresses and ports, not in shape.
  auto other = natFlow();
  other.match.key.l4_src = 51000;
  other.match.key.l3_dst = v4(10, 96, 7, 7);
  CHECK(closePuntShape(other) == plain);
  auto tracked6 = decapFlow(true, true);
  tracked6.match.key.ip_proto = dpu::overlay::ipproto::kTcp;
  tracked6.match.key.flags |= dpu::overlay::FlowKey::kFlagOuterVlan;
  tracked6.tracked = true;
  CHECK(describeClosePuntShape(*closePuntShape(tracked6)) == "port 0, geneve/IPv6, IPv6, VLAN");
  // No punt flags, no shape.
  CHECK_FALSE(closePuntShape(localFlow(false, dpu::overlay::ipproto::kTcp)).has_value());
}

TEST_CASE("offloadFeatures: names and the first missing kind", "[offloadable]") {
  CHECK(featureName(Feature::kActionRawEncap) == "action RAW_ENCAP");
  CHECK(featureName(Feature::kItemGeneveOpt) == "item GENEVE_OPT");
  const FeatureSet need = FeatureSet{}.add(Feature::kItemEth).add(Feature::kActionRawDecap);
  CHECK(firstMissing(need, FeatureSet{}.add(Feature::kItemEth)) == Feature::kActionRawDecap);
  CHECK(firstMissing(need, FeatureSet::all()) == Feature::kCount_);
}

TEST_CASE("geneveOuterLength and the encap template's UDP offset", "[offloadable]") {
  dpu::flow::TunnelMatch t;
  CHECK(geneveOuterLength(t) == 0);
  t.family = 4;
  CHECK(geneveOuterLength(t) == 58);
  t.family = 6;
  CHECK(geneveOuterLength(t) == 78);
  auto encap = encapFlow().actions[3];
  REQUIRE(encapUdpOffset(encap).ok());
  CHECK(*encapUdpOffset(encap) == 34);
  encap.encap_family = 6;
  CHECK_FALSE(encapUdpOffset(encap).ok());
  auto encap6 = encapFlow(false, true).actions[3];
  CHECK(*encapUdpOffset(encap6) == 54);
}
