// IPAM: reserved addresses, exhaustion, released addresses reused last.
#include <catch2/catch.hpp>

#include <set>

#include "control/ipam.h"

using namespace dpu::control;
using dpu::IpAddress;
using dpu::IpPrefix;

namespace {
IpAddress ip(const char* s) { return *IpAddress::parse(s); }
}  // namespace

TEST_CASE("network, gateway, management and broadcast are never handed out") {
  Ipam ipam(*IpPrefix::parse("10.244.1.0/29"));
  CHECK(ipam.gateway() == ip("10.244.1.1"));
  CHECK(ipam.managementAddress() == ip("10.244.1.2"));
  CHECK(ipam.capacity() == 4);
  std::set<std::string> got;
  for (int i = 0; i < 4; ++i) {
    auto a = ipam.allocate();
    REQUIRE(a.ok());
    got.insert(a->str());
  }
  CHECK(got == std::set<std::string>{"10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"});
  auto none = ipam.allocate();
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error(), Catch::Contains("10.244.1.0/29 is exhausted"));
  CHECK(ipam.usedCount() == 4);
  CHECK(ipam.isReserved(ip("10.244.1.7")));
  CHECK(ipam.isReserved(ip("10.244.1.0")));
  CHECK_FALSE(ipam.isReserved(ip("10.244.1.3")));
}

TEST_CASE("a released address comes back only when nothing fresh is left") {
  Ipam ipam(*IpPrefix::parse("10.244.1.0/29"));
  auto a = *ipam.allocate();  // .3
  auto b = *ipam.allocate();  // .4
  ipam.release(a);
  CHECK(ipam.allocate()->str() == "10.244.1.5");
  CHECK(ipam.allocate()->str() == "10.244.1.6");
  ipam.release(b);
  // Only released ones remain: the oldest first.
  CHECK(*ipam.allocate() == a);
  CHECK(*ipam.allocate() == b);
  CHECK_FALSE(ipam.allocate().ok());
}

TEST_CASE("the released list survives a restart: no reuse across it") {
  std::vector<std::string> recent;
  IpAddress kept;
  {
    Ipam ipam(*IpPrefix::parse("10.244.1.0/24"));
    auto a = *ipam.allocate();
    kept = *ipam.allocate();
    ipam.release(a);
    recent = ipam.recentlyReleased();
    CHECK(recent == std::vector<std::string>{a.str()});
  }
  // A new process: in-use addresses come from the attachments, the rest from the list.
  Ipam ipam(*IpPrefix::parse("10.244.1.0/24"));
  REQUIRE(ipam.claim(kept).ok());
  ipam.setRecentlyReleased(recent);
  // 252 assignable: one kept, one released; the 250 fresh ones come first.
  for (int i = 0; i < 250; ++i) {
    auto n = ipam.allocate();
    REQUIRE(n.ok());
    CHECK(n->str() != recent[0]);
  }
  CHECK(ipam.allocate()->str() == recent[0]);
  CHECK_FALSE(ipam.claim(kept).ok());
  CHECK_FALSE(ipam.claim(ip("10.244.2.3")).ok());
}

TEST_CASE("IPv6 pools work without walking the whole space") {
  Ipam ipam(*IpPrefix::parse("fd00:10:244:1::/64"));
  CHECK(ipam.gateway().str() == "fd00:10:244:1::1");
  CHECK(ipam.allocate()->str() == "fd00:10:244:1::3");
  CHECK(ipam.capacity() > 1000000);
}
