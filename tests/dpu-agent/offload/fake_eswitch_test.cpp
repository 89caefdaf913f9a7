// The fake eswitch's own state: capacity, supported kinds, counters, aging,
// injected failures, and a flush like a port restart.
#include <catch2/catch.hpp>

#include "fake_eswitch.h"
#include "flows.h"

using namespace dpu::offload;
using namespace dpu::offload::fixtures;
using testing::EswitchProfile;
using testing::FakeEswitch;

TEST_CASE("fake eswitch: capacity is a refusal like any other", "[fake]") {
  FakeEswitch sw(EswitchProfile::mlx5Like(2));
  auto a = sw.install(localFlow());
  auto b = sw.install(decapFlow());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = sw.install(encapFlow());
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.error(), Catch::Contains("table full (2 rules)"));
  CHECK(sw.remove(*a).ok());
  CHECK(sw.install(encapFlow()).ok());
  CHECK(sw.installedCount() == 2);
}

TEST_CASE("fake eswitch: the profile decides which kinds go in", "[fake]") {
  FakeEswitch sw(EswitchProfile::restrictive());
  auto plain = localFlow();
  plain.actions = {output(kVf2)};  // switching without rewrites
  CHECK(sw.validate(plain).ok());
  const auto decap = sw.validate(decapFlow());
  REQUIRE_FALSE(decap.ok());
  CHECK(decap.error() == "fake eswitch (restrictive): item GENEVE not supported");
  CHECK_FALSE(sw.capabilities().raw_encap);
  CHECK(EswitchProfile::mlx5Like().supported == FeatureSet::all());
}

TEST_CASE("fake eswitch: ports off the switch", "[fake]") {
  auto profile = EswitchProfile::mlx5Like();
  profile.ports = {kUplink, kVf1};
  FakeEswitch sw(profile);
  CHECK_THAT(sw.validate(localFlow()).error(), Catch::Contains("output port 2 is not on the eswitch"));
}

TEST_CASE("fake eswitch: counters tests bump, idle time and aging", "[fake]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  auto h = sw.install(localFlow());
  REQUIRE(h.ok());
  CHECK(sw.hit(*h, 10, 1000));
  sw.advance(5);
  CHECK(sw.hit(*h, 1, 64));
  sw.advance(7);
  auto c = sw.query(*h);
  REQUIRE(c.ok());
  CHECK(c->packets == 11);
  CHECK(c->bytes == 1064);
  CHECK(c->idle_seconds == 7);
  CHECK(sw.agedRules().empty());
  sw.advance(30);
  REQUIRE(sw.agedRules().size() == 1);
  CHECK(sw.agedRules()[0] == *h);
  CHECK_FALSE(sw.hit(OffloadHandle{999}, 1, 1));
}

TEST_CASE("fake eswitch: injected refusals and failed removals, flush", "[fake]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  sw.refuseNext("firmware says no");
  CHECK(sw.install(localFlow()).error() == "firmware says no");
  auto h = sw.install(localFlow());
  REQUIRE(h.ok());
  REQUIRE(sw.installed(*h) != nullptr);
  CHECK(*sw.installed(*h) == localFlow());
  sw.failNextRemove();
  CHECK_FALSE(sw.remove(*h).ok());
  CHECK(sw.installedCount() == 1);
  sw.flush();
  CHECK(sw.installedCount() == 0);
  CHECK_FALSE(sw.query(*h).ok());
}
