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

TEST_CASE("fake eswitch: the first NAT TCP flow of a port and shape makes its close punt rules, all or none",
          "[fake][nat]") {
  FakeEswitch sw(EswitchProfile::mlx5Like(6));
  auto nat = sw.install(natFlow());
  REQUIRE(nat.ok());
  CHECK(sw.puntFlags(*nat) == 0x07);  // FIN, SYN, RST
  CHECK(sw.installedCount() == 1);
  CHECK(sw.ruleCount() == 4);         // its rule and its port's three punt rules
  REQUIRE(sw.closePuntSets().size() == 1);
  CHECK(sw.closePuntSets()[0] == *closePuntShape(natFlow()));
  // Another connection from the port: one place.
  auto second = natFlow();
  second.match.key.l4_src = 41000;
  auto nat2 = sw.install(second);
  REQUIRE(nat2.ok());
  CHECK(sw.ruleCount() == 5);
  // A NAT reply over Geneve needs the uplink's own three: four places, and the table is full for it,
  // not for a plain flow.
  CHECK_THAT(sw.validate(natDecapFlow()).error(), Catch::Contains("table full (6 rules)"));
  auto local = sw.install(localFlow());
  REQUIRE(local.ok());
  CHECK(sw.puntFlags(*local) == 0);
  CHECK(sw.ruleCount() == 6);
  // Removing flows frees their places only: the port keeps its punt rules.
  REQUIRE(sw.remove(*local).ok());
  REQUIRE(sw.remove(*nat2).ok());
  REQUIRE(sw.remove(*nat).ok());
  CHECK(sw.ruleCount() == 3);
  CHECK(sw.puntFlags(*nat) == 0);
  CHECK_THAT(sw.validate(natDecapFlow()).error(), Catch::Contains("table full (6 rules)"));  // 3 + 4
  CHECK(sw.validate(second).ok());
  sw.flush();
  CHECK(sw.ruleCount() == 0);
  CHECK(sw.closePuntSets().empty());

  // The punt rules fail after validation: nothing of the flow or the set stays.
  sw.failNextPuntInstall("out of steering memory");
  auto failed = sw.install(natFlow());
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error() == "close punt rule: out of steering memory");
  CHECK(sw.installedCount() == 0);
  CHECK(sw.ruleCount() == 0);
  CHECK(sw.closePuntSets().empty());
  CHECK_FALSE(sw.forwarder(natFlow().match).has_value());
  // Armed only for a flow that makes punt rules.
  sw.failNextPuntInstall("again");
  CHECK(sw.install(localFlow()).ok());
  CHECK(sw.install(natFlow()).error() == "close punt rule: again");
  CHECK(sw.install(natFlow()).ok());
  sw.failNextPuntInstall("not used");
  CHECK(sw.install(second).ok());  // its port has them now
}

TEST_CASE("fake eswitch: PORT_REPRESENTOR only to a port on the switch; a NIC without it keeps NAT TCP in software",
          "[fake][nat]") {
  auto profile = EswitchProfile::mlx5Like();
  profile.ports = {kUplink, kVf2};  // VF1, where the NAT flow arrives, is not on it
  FakeEswitch off(profile);
  CHECK(off.validate(natFlow()).error() ==
        "fake eswitch (mlx5-like): action PORT_REPRESENTOR to port 1, which is not on the eswitch");
  CHECK(off.validate(natDecapFlow()).ok());  // arrives on the uplink, leaves to VF2

  auto no_punt = EswitchProfile::mlx5Like();
  no_punt.name = "no-punt";
  no_punt.supported.drop(Feature::kActionPortRepresentor);
  FakeEswitch sw(no_punt);
  CHECK(sw.validate(natFlow()).error() == "fake eswitch (no-punt): action PORT_REPRESENTOR not supported");
  // Flows without punt rules do not need it.
  CHECK(sw.validate(localFlow(false, dpu::overlay::ipproto::kTcp)).ok());
}
