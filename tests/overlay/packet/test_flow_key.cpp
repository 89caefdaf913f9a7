// FlowKey extraction for each packet kind, its layout guarantees, and the hash:
// equal to XXH64 (checked against libxxhash), well mixed, seeded, not symmetric.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "overlay/flow_key.h"
#include "overlay/packet_builder.h"
#include "packet_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

FlowKey keyOf(const std::vector<uint8_t>& frame, uint32_t in_port = 7, uint32_t tunnel = 0) {
  return extractFlowKey(frame, parseOk(frame), in_port, tunnel);
}

std::array<uint8_t, 16> l3v4(const char* a) {
  std::array<uint8_t, 16> out{};
  store32(out.data(), v4(a));
  return out;
}

}  // namespace

TEST_CASE("FlowKey is one padding-free cache line, zero when empty") {
  STATIC_REQUIRE(sizeof(FlowKey) == 64);
  FlowKey k;
  uint8_t zero[64] = {};
  CHECK(std::memcmp(&k, zero, 64) == 0);
}

TEST_CASE("flow keys of each packet kind") {
  SECTION("IPv4 UDP") {
    const FlowKey k = keyOf(packet("eth_ipv4_udp"), 3, 0x123456);
    CHECK(k.in_port == 3);
    CHECK(k.tunnel_id == 0x123456);
    CHECK(k.eth_dst == kPeerMac);
    CHECK(k.eth_src == kPodMac);
    CHECK(k.ethertype == eth::kTypeIpv4);
    CHECK(k.ip_proto == ipproto::kUdp);
    CHECK(k.l3_src == l3v4("10.0.0.1"));
    CHECK(k.l3_dst == l3v4("10.0.0.2"));
    CHECK(k.l4_src == 1234);
    CHECK(k.l4_dst == 5678);
    CHECK(k.flags == 0);
  }
  SECTION("IPv4 TCP") {
    const FlowKey k = keyOf(packet("eth_ipv4_tcp_options"));
    CHECK(k.ip_proto == ipproto::kTcp);
    CHECK(k.l4_src == 40000);
    CHECK(k.l4_dst == 80);
  }
  SECTION("ICMP echo on a VLAN") {
    const FlowKey k = keyOf(packet("vlan_ipv4_icmp_echo"));
    CHECK(k.flags == FlowKey::kFlagOuterVlan);
    CHECK(k.vlan_tci[0] == (3 << 13 | 100));
    CHECK(k.vlan_tci[1] == 0);
    CHECK(k.l4_src == (icmp::kTypeEchoRequest << 8));
    CHECK(k.l4_dst == 0x1234);
  }
  SECTION("ICMP error: type and code, no identifier") {
    const FlowKey k = keyOf(packet("icmp_frag_needed"));
    CHECK(k.l4_src == (3 << 8 | 4));
    CHECK(k.l4_dst == 0);
  }
  SECTION("QinQ") {
    const FlowKey k = keyOf(packet("qinq_ipv4_udp"));
    CHECK(k.flags == (FlowKey::kFlagOuterVlan | FlowKey::kFlagInnerVlan | FlowKey::kFlagOuterQinq));
    CHECK(k.vlan_tci[0] == 10);
    CHECK(k.vlan_tci[1] == 20);
  }
  SECTION("IPv6 with extension headers") {
    const FlowKey k = keyOf(packet("eth_ipv6_ext_udp"));
    CHECK(k.ethertype == eth::kTypeIpv6);
    CHECK(k.ip_proto == ipproto::kUdp);
    CHECK(k.l3_src == v6("fd00::1"));
    CHECK(k.l3_dst == v6("fd00::2"));
    CHECK(k.l4_dst == 5678);
  }
  SECTION("ICMPv6 echo and neighbor solicitation") {
    const FlowKey echo = keyOf(packet("eth_ipv6_icmpv6_echo"));
    CHECK(echo.l4_src == (128 << 8));
    CHECK(echo.l4_dst == 0x4321);
    const FlowKey ns = keyOf(packet("icmpv6_ns"));
    CHECK(ns.l4_src == (135 << 8));
    CHECK(ns.l4_dst == 0);
  }
  SECTION("fragments: the first keeps its ports, later ones have none") {
    const FlowKey first = keyOf(packet("ipv4_frag_first_udp"));
    CHECK(first.flags == FlowKey::kFlagFragment);
    CHECK(first.l4_src == 1234);
    const FlowKey later = keyOf(packet("ipv4_frag_later_udp"));
    CHECK(later.flags == (FlowKey::kFlagFragment | FlowKey::kFlagLaterFragment));
    CHECK(later.l4_src == 0);
    CHECK(later.l4_dst == 0);
    CHECK(later.ip_proto == ipproto::kUdp);
    CHECK(keyOf(packet("eth_ipv6_frag_first_udp")).flags == FlowKey::kFlagFragment);
  }
  SECTION("ARP: opcode and protocol addresses") {
    const FlowKey k = keyOf(packet("arp_request"));
    CHECK(k.ethertype == eth::kTypeArp);
    CHECK(k.ip_proto == arp::kOpRequest);
    CHECK(k.l3_src == l3v4("10.0.0.1"));
    CHECK(k.l3_dst == l3v4("10.0.0.254"));
    CHECK(k.l4_src == 0);
  }
  SECTION("non-IP: L2 only") {
    const auto lldp = PacketBuilder().ethernet(kPeerMac, kPodMac, 0x88cc).payload(pattern(30)).build();
    const FlowKey k = keyOf(lldp);
    CHECK(k.ethertype == 0x88cc);
    CHECK(k.l3_src == std::array<uint8_t, 16>{});
    CHECK(k.ip_proto == 0);
  }
}

TEST_CASE("keys compare equal exactly when their packets belong to one flow") {
  const auto a = packet("eth_ipv4_udp");
  const auto b = packet("nat_ipv4_udp_snat");
  CHECK(keyOf(a) == keyOf(a));
  CHECK_FALSE(keyOf(a) == keyOf(b));
  CHECK_FALSE(keyOf(a, 1) == keyOf(a, 2));
  CHECK_FALSE(keyOf(a, 1, 5) == keyOf(a, 1, 6));
  // Padding after the datagram and the payload do not matter.
  auto padded = a;
  padded.resize(a.size() + 10, 0xee);
  CHECK(keyOf(padded) == keyOf(a));
  const FlowKey k1 = keyOf(a), k2 = keyOf(padded);
  CHECK(std::memcmp(&k1, &k2, sizeof(FlowKey)) == 0);
  CHECK(flowHash64(k1) == flowHash64(k2));
}

TEST_CASE("flowHash64 is XXH64 of the key bytes") {
  // Reference values from libxxhash 0.8.1 (XXH64 over the bytes 0..63).
  FlowKey k;
  uint8_t bytes[64];
  for (int i = 0; i < 64; ++i) bytes[i] = static_cast<uint8_t>(i);
  std::memcpy(&k, bytes, sizeof k);
  CHECK(flowHash64(k) == 0xf7c67301db6713f0ull);
  CHECK(flowHash64(k, 0x9e3779b97f4a7c15ull) == 0x2589245e62a1969bull);
  CHECK(flowHash64(FlowKey{}) == 0x257b09a147b82a19ull);
}

TEST_CASE("the flow hash is well mixed") {
  std::mt19937_64 rng(99);
  SECTION("avalanche: each input bit flips about half of the output bits") {
    std::array<int, 64> flips_per_output{};
    int trials = 0;
    double total = 0;
    for (int round = 0; round < 64; ++round) {
      uint8_t bytes[64];
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      FlowKey k;
      std::memcpy(&k, bytes, sizeof k);
      const uint64_t h = flowHash64(k);
      for (int bit = 0; bit < 512; ++bit) {
        uint8_t flipped[64];
        std::memcpy(flipped, bytes, sizeof flipped);
        flipped[bit / 8] ^= static_cast<uint8_t>(1 << (bit % 8));
        FlowKey f;
        std::memcpy(&f, flipped, sizeof f);
        const uint64_t diff = h ^ flowHash64(f);
        total += std::popcount(diff);
        for (int o = 0; o < 64; ++o) flips_per_output[o] += (diff >> o) & 1;
        ++trials;
      }
    }
    CHECK(total / trials == Approx(32.0).margin(0.5));
    for (int o = 0; o < 64; ++o) {
      INFO("output bit " << o);
      CHECK(flips_per_output[o] / double(trials) == Approx(0.5).margin(0.03));
    }
  }
  SECTION("flows differing only in the source port spread evenly over buckets") {
    // The common case for a flow cache and for ECMP: one client, many ports.
    FlowKey k = keyOf(packet("eth_ipv4_tcp_options"));
    constexpr int kBuckets = 1024;
    constexpr int kFlows = 65536;
    std::vector<int> buckets(kBuckets), ports(16384);
    for (int port = 0; port < kFlows; ++port) {
      k.l4_src = static_cast<uint16_t>(port);
      ++buckets[flowHash32(k) % kBuckets];
      ++ports[flowHash32(k) & 0x3fff];  // the bits a Geneve source port uses
    }
    // Binomial(65536, 1/1024): mean 64, sd 8; 6 sd either side.
    for (int b : buckets) CHECK((b > 16 && b < 112));
    double chi2 = 0;
    for (int b : buckets) chi2 += (b - 64.0) * (b - 64.0) / 64.0;
    CHECK(chi2 < 1023 + 6 * std::sqrt(2 * 1023.0));
    int empty = 0;
    for (int c : ports) empty += c == 0;
    CHECK(empty < 16384 * 0.03);  // 4 flows per port on average: e^-4 = 1.8% empty
  }
}

TEST_CASE("the flow hash is seeded and not symmetric") {
  const FlowKey fwd = keyOf(packet("eth_ipv4_udp"));
  FlowKey rev = fwd;
  std::swap(rev.l3_src, rev.l3_dst);
  std::swap(rev.l4_src, rev.l4_dst);
  std::swap(rev.eth_src, rev.eth_dst);
  CHECK(flowHash64(fwd) != flowHash64(rev));
  CHECK(flowHash64(fwd, 1) != flowHash64(fwd, 2));
  CHECK(flowHash64(fwd, 1) == flowHash64(fwd, 1));
  CHECK(flowHash32(fwd) == static_cast<uint32_t>(flowHash64(fwd) ^ (flowHash64(fwd) >> 32)));
}
