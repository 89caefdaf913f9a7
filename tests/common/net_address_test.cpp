#include <catch2/catch.hpp>

#include "common/net_address.h"

using namespace dpu;

TEST_CASE("addresses and prefixes round-trip") {
  auto a = IpAddress::parse("10.244.1.5");
  REQUIRE(a.ok());
  CHECK(a->str() == "10.244.1.5");
  CHECK(a->plus(251).str() == "10.244.2.0");
  auto p = IpPrefix::parse("10.244.1.0/24");
  REQUIRE(p.ok());
  CHECK(p->contains(*a));
  CHECK(p->size() == 256);
  CHECK_FALSE(p->contains(*IpAddress::parse("10.244.2.1")));
  auto host = IpPrefix::parse("10.244.1.5/24");
  REQUIRE_FALSE(host.ok());
  CHECK_THAT(host.error(), Catch::Contains("did you mean 10.244.1.0/24"));
  auto v6 = IpPrefix::parse("fd00:10:244:1::/64");
  REQUIRE(v6.ok());
  CHECK(v6->contains(*IpAddress::parse("fd00:10:244:1::5")));
  CHECK(IpPrefix::parse("10.0.0.0/8")->overlaps(*p));
  CHECK_FALSE(IpAddress::parse("10.244.1").ok());
  CHECK_FALSE(IpPrefix::parse("10.244.1.0/33").ok());
  auto ifa = IpInterfaceAddress::parse("10.244.1.5/24");
  REQUIRE(ifa.ok());
  CHECK(ifa->network().str() == "10.244.1.0/24");
}

TEST_CASE("MAC addresses") {
  auto m = MacAddress::parse("0A:58:0a:f4:01:05");
  REQUIRE(m.ok());
  CHECK(m->str() == "0a:58:0a:f4:01:05");
  CHECK(MacAddress::fromIp(*IpAddress::parse("10.244.1.5")) == *m);
  CHECK_FALSE(MacAddress::parse("0a:58:0a:f4:01").ok());
  CHECK_FALSE(MacAddress::parse("0a:58:0a:f4:01:05:").ok());
}
