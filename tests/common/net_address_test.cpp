#include <catch2/catch.hpp>

#include <algorithm>

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

// contains() is masked(a, length) == address, whatever the prefix holds (one
// built by hand may have host bits, an IPv4 one bytes past its four).
TEST_CASE("a prefix contains exactly the addresses whose masked form is its address") {
  auto reference = [](const IpPrefix& p, const IpAddress& a) {
    IpAddress m = a;
    for (size_t i = 0; i < m.size(); ++i) {
      const int bits = static_cast<int>(p.length) - static_cast<int>(i * 8);
      if (bits >= 8) continue;
      m.bytes[i] &= bits <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - bits));
    }
    return a.family == p.address.family && m == p.address;
  };
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  unsigned inside = 0;
  for (int i = 0; i < 200000; ++i) {
    const bool v6 = next() & 1;
    IpPrefix p;
    p.address.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
    p.length = static_cast<uint8_t>(next() % (v6 ? 129 : 33));
    IpAddress a;
    a.family = next() % 16 == 0 ? (v6 ? IpAddress::Family::kV4 : IpAddress::Family::kV6) : p.address.family;
    for (size_t b = 0; b < 16; ++b) a.bytes[b] = static_cast<uint8_t>(next());
    if (!v6 || next() % 4 != 0) std::fill(a.bytes.begin() + (v6 ? 16 : 4), a.bytes.end(), 0);
    // Mostly a canonical prefix around a: some share its first bits.
    p.address = a;
    p.address.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
    for (size_t b = 0; b < p.address.size(); ++b) {
      const int bits = static_cast<int>(p.length) - static_cast<int>(b * 8);
      if (bits < 8) p.address.bytes[b] &= bits <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - bits));
    }
    switch (next() % 4) {
      case 0: a.bytes[next() % 16] ^= static_cast<uint8_t>(1u << (next() % 8)); break;  // one bit off
      case 1: p.address.bytes[next() % 16] ^= static_cast<uint8_t>(1u << (next() % 8)); break;
      default: break;
    }
    INFO(p.str() << " " << a.str());
    const bool want = reference(p, a);
    inside += want;
    REQUIRE(p.contains(a) == want);
  }
  CHECK(inside > 20000);  // both answers well represented
  CHECK(inside < 180000);
}

TEST_CASE("MAC addresses") {
  auto m = MacAddress::parse("0A:58:0a:f4:01:05");
  REQUIRE(m.ok());
  CHECK(m->str() == "0a:58:0a:f4:01:05");
  CHECK(MacAddress::fromIp(*IpAddress::parse("10.244.1.5")) == *m);
  CHECK_FALSE(MacAddress::parse("0a:58:0a:f4:01").ok());
  CHECK_FALSE(MacAddress::parse("0a:58:0a:f4:01:05:").ok());
}
