// Interop with scapy: our encapsulation of the golden inner frame must equal
// scapy's packet byte for byte (tests/overlay/golden/gen_geneve.py builds them
// with the same parameters), and our decapsulation must read scapy's packets.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "geneve_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 7 * i);
  return v;
}

// The option sets of gen_geneve.py, with storage that outlives the spans.
struct GoldenOptions {
  std::array<uint8_t, 4> ovn_single{};
  std::array<uint8_t, 4> ovn_several{};
  std::vector<uint8_t> exp8 = pattern(8, 1);
  std::vector<uint8_t> int124 = pattern(124, 2);
  std::vector<uint8_t> max124 = pattern(124, 3);
  std::vector<uint8_t> max120 = pattern(120, 4);
  std::vector<GeneveOption> ovn, several, maximum;

  GoldenOptions() {
    GeneveOption o;
    REQUIRE(makeOvnOption({0x1234, 0xbeef}, ovn_single, o) == Status::kOk);
    ovn = {o};
    REQUIRE(makeOvnOption({5, 7}, ovn_several, o) == Status::kOk);
    several = {o, {0xffff, 0x01, exp8}, {0x0103, 0x05, int124}};
    maximum = {{0xffff, 0x10, max124}, {0xffff, 0x11, max120}};
  }
};

struct GoldenCase {
  std::string name;
  UnderlayFamily family;
  bool udp_checksum;
  bool oam;
  std::vector<GeneveOption> GoldenOptions::*options;  // nullptr: none
};

const std::vector<GoldenCase>& goldenCases() {
  static const std::vector<GoldenCase> cases = {
      {"v4_nocsum_noopt", UnderlayFamily::kIpv4, false, false, nullptr},
      {"v4_csum_noopt", UnderlayFamily::kIpv4, true, false, nullptr},
      {"v4_nocsum_ovn", UnderlayFamily::kIpv4, false, false, &GoldenOptions::ovn},
      {"v4_csum_ovn", UnderlayFamily::kIpv4, true, false, &GoldenOptions::ovn},
      {"v4_nocsum_several", UnderlayFamily::kIpv4, false, false, &GoldenOptions::several},
      {"v4_nocsum_max", UnderlayFamily::kIpv4, false, false, &GoldenOptions::maximum},
      {"v4_nocsum_oam", UnderlayFamily::kIpv4, false, true, nullptr},
      {"v6_noopt", UnderlayFamily::kIpv6, false, false, nullptr},
      {"v6_ovn", UnderlayFamily::kIpv6, false, false, &GoldenOptions::ovn},
      {"v6_several", UnderlayFamily::kIpv6, false, false, &GoldenOptions::several},
      {"v6_max", UnderlayFamily::kIpv6, false, false, &GoldenOptions::maximum},
  };
  return cases;
}

}  // namespace

TEST_CASE("encapsulation equals scapy's packets byte for byte") {
  const auto inner = golden(kGeneveGolden, "inner_frame");
  GoldenOptions opts;
  for (const GoldenCase& c : goldenCases()) {
    SECTION(c.name) {
      GeneveTunnel t = goldenTunnel(c.family);
      t.udp_checksum = c.udp_checksum;
      t.oam = c.oam;
      if (c.options != nullptr) t.options = opts.*c.options;
      const auto expected = golden(kGeneveGolden, c.name);

      TestPacket one_call(inner);
      REQUIRE(encapGeneve(one_call.buffer(), t, kGoldenFlowHash) == Status::kOk);
      CHECK(toHex(one_call.bytes()) == toHex(expected));

      GeneveEncapTemplate tpl;
      REQUIRE(tpl.build(t) == Status::kOk);
      CHECK(tpl.length() == expected.size() - inner.size());
      TestPacket templated(inner);
      REQUIRE(tpl.encap(templated.buffer(), kGoldenFlowHash) == Status::kOk);
      CHECK(toHex(templated.bytes()) == toHex(expected));
    }
  }
}

TEST_CASE("scapy's packets decapsulate to the inner frame") {
  const auto inner = golden(kGeneveGolden, "inner_frame");
  GoldenOptions opts;
  for (const GoldenCase& c : goldenCases()) {
    SECTION(c.name) {
      TestPacket pkt(golden(kGeneveGolden, c.name));
      GeneveHeaders h;
      REQUIRE(decapGeneve(pkt.buffer(), {}, h) == Status::kOk);
      CHECK(pkt.bytes() == inner);
      CHECK(h.family == c.family);
      CHECK(h.vni == kGoldenVni);
      CHECK(h.oam == c.oam);
      CHECK(h.src_port == 0xc44c);
      CHECK(h.dst_port == kGeneveUdpPort);
      CHECK(h.ttl == 64);
      CHECK(h.src_mac == goldenTunnel(c.family).src_mac);
      CHECK(h.dst_mac == goldenTunnel(c.family).dst_mac);
      CHECK(h.src_ip == goldenTunnel(c.family).src_ip);
      CHECK(h.dst_ip == goldenTunnel(c.family).dst_ip);
      CHECK(h.udp_checksum == (c.udp_checksum || c.family == UnderlayFamily::kIpv6));
      const std::vector<GeneveOption> none;
      const std::vector<GeneveOption>& want = c.options ? opts.*c.options : none;
      REQUIRE(h.option_count == want.size());
      bool critical = false;
      for (size_t i = 0; i < want.size(); ++i) {
        CHECK(h.options[i].option_class == want[i].option_class);
        CHECK(h.options[i].type == want[i].type);
        CHECK(std::vector<uint8_t>(h.options[i].data.begin(), h.options[i].data.end()) ==
              std::vector<uint8_t>(want[i].data.begin(), want[i].data.end()));
        critical = critical || want[i].critical();
      }
      CHECK(h.critical == critical);
      if (c.options == &GoldenOptions::ovn) {
        REQUIRE(h.ovn.has_value());
        CHECK(*h.ovn == OvnPortKeys{0x1234, 0xbeef});
      } else if (c.options == &GoldenOptions::several) {
        REQUIRE(h.ovn.has_value());
        CHECK(*h.ovn == OvnPortKeys{5, 7});
      } else {
        CHECK_FALSE(h.ovn.has_value());
      }
    }
  }
}

TEST_CASE("an outer VLAN tag is accepted on receive") {
  const auto inner = golden(kGeneveGolden, "inner_frame");
  TestPacket pkt(golden(kGeneveGolden, "v4_vlan_ovn"));
  GeneveHeaders h;
  REQUIRE(decapGeneve(pkt.buffer(), {}, h) == Status::kOk);
  CHECK(h.vlan);
  CHECK((h.vlan_tci & 0x0fff) == 100);
  CHECK(h.inner_offset == 14 + 4 + 20 + 8 + 8 + 8);
  CHECK(pkt.bytes() == inner);
  REQUIRE(h.ovn.has_value());
  CHECK(*h.ovn == OvnPortKeys{0x1234, 0xbeef});
}

TEST_CASE("every truncation of a golden packet is rejected") {
  for (const char* name : {"v4_nocsum_noopt", "v4_csum_ovn", "v4_nocsum_max", "v6_several", "v4_vlan_ovn"}) {
    const auto pkt = golden(kGeneveGolden, name);
    for (size_t n = 0; n < pkt.size(); ++n) {
      std::vector<uint8_t> cut(pkt.begin(), pkt.begin() + static_cast<std::ptrdiff_t>(n));
      GeneveHeaders h;
      INFO(name << " cut at " << n);
      REQUIRE(parseGeneve(cut, {}, h) != Status::kOk);
    }
  }
}
