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
  // North–south bridging: a match and one output, nothing rewritten.
  CHECK(features(bridgedFlow(kHostPf, kUplink)) == FeatureSet{}
                                                      .add(Feature::kItemRepresentedPort)
                                                      .add(Feature::kItemEth)
                                                      .add(Feature::kItemIpv4)
                                                      .add(Feature::kItemTcp)
                                                      .add(Feature::kActionRepresentedPort));
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
