// NAT and TTL rewrites: byte for byte against scapy's from-scratch results
// (gen_packets.py), and against a full rebuild with PacketBuilder for random
// packets, so the RFC 1624 incremental updates are checked two independent ways.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <vector>

#include "overlay/checksum.h"
#include "overlay/nat.h"
#include "overlay/packet_builder.h"
#include "packet_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

using Rewrite = std::function<void(std::span<uint8_t>, const ParsedPacket&)>;

void ok(Status s) { REQUIRE(s == Status::kOk); }

}  // namespace

TEST_CASE("NAT rewrites match scapy's full recomputation") {
  const uint32_t nat4 = v4("192.168.1.10");
  const uint32_t svc4 = v4("10.96.0.10");
  const Ipv6Address nat6 = v6("2001:db8::10");
  const Ipv6Address svc6 = v6("fd00:96::10");
  const struct {
    const char* original;
    const char* expected;
    Rewrite rewrite;
  } table[] = {
      {"eth_ipv4_udp", "nat_ipv4_udp_snat",
       [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); ok(setL4SrcPort(f, p, 40001)); }},
      {"eth_ipv4_tcp_options", "nat_ipv4_tcp_dnat",
       [&](auto f, auto& p) { ok(setIpv4Dst(f, p, svc4)); ok(setL4DstPort(f, p, 8080)); }},
      {"eth_ipv4_options_udp", "nat_ipv4_options_udp_dnat", [&](auto f, auto& p) { ok(setIpv4Dst(f, p, svc4)); }},
      {"vlan_ipv4_icmp_echo", "nat_vlan_ipv4_icmp_echo",
       [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); ok(setL4SrcPort(f, p, 0x9999)); }},
      {"qinq_ipv4_udp", "nat_qinq_ipv4_udp",
       [&](auto f, auto& p) {
         ok(setIpv4Src(f, p, nat4)); ok(setIpv4Dst(f, p, svc4));
         ok(setL4SrcPort(f, p, 1)); ok(setL4DstPort(f, p, 65535));
       }},
      {"eth_ipv4_udp_nocsum", "nat_ipv4_udp_nocsum",
       [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); ok(setL4SrcPort(f, p, 40001)); }},
      {"eth_ipv4_udp_zero_sum", "nat_ipv4_udp_zero_sum", [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); }},
      {"eth_ipv6_tcp", "nat_ipv6_tcp_snat",
       [&](auto f, auto& p) { ok(setIpv6Src(f, p, nat6)); ok(setL4SrcPort(f, p, 50000)); }},
      {"eth_ipv6_ext_udp", "nat_ipv6_ext_udp_dnat",
       [&](auto f, auto& p) { ok(setIpv6Dst(f, p, svc6)); ok(setL4DstPort(f, p, 53)); }},
      {"eth_ipv6_icmpv6_echo", "nat_ipv6_icmpv6_echo",
       [&](auto f, auto& p) { ok(setIpv6Src(f, p, nat6)); ok(setL4DstPort(f, p, 0x1111)); }},
      {"ipv4_frag_first_udp", "nat_ipv4_frag_first_udp",
       [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); ok(setL4SrcPort(f, p, 40001)); }},
      {"ipv4_frag_later_udp", "nat_ipv4_frag_later_udp",
       [&](auto f, auto& p) { ok(setIpv4Src(f, p, nat4)); ok(setL4SrcPort(f, p, 40001)); }},
      {"eth_ipv4_udp", "ttl_ipv4_udp", [](auto f, auto& p) { ok(decrementTtl(f, p)); }},
      {"eth_ipv6_tcp", "ttl_ipv6_tcp", [](auto f, auto& p) { ok(decrementTtl(f, p)); }},
  };
  for (const auto& t : table) {
    INFO(t.original << " -> " << t.expected);
    auto frame = packet(t.original);
    const ParsedPacket p = parseOk(frame);
    t.rewrite(frame, p);
    CHECK(toHex(frame) == toHex(packet(t.expected)));
  }
}

TEST_CASE("a computed UDP checksum of zero is sent as 0xffff, and 0 stays 0") {
  auto frame = packet("eth_ipv4_udp_zero_sum");
  const ParsedPacket p = parseOk(frame);
  REQUIRE(setIpv4Src(frame, p, v4("192.168.1.10")) == Status::kOk);
  CHECK(udp::checksum(frame.data() + p.l4_offset) == 0xffff);
  CHECK(verifyL4Checksum(frame, p) == Status::kOk);

  auto none = packet("eth_ipv4_udp_nocsum");
  const ParsedPacket q = parseOk(none);
  REQUIRE(setL4DstPort(none, q, 9) == Status::kOk);
  REQUIRE(setIpv4Dst(none, q, 1) == Status::kOk);
  CHECK(udp::checksum(none.data() + q.l4_offset) == 0);
}

namespace {

// One random packet: its build parameters, so the expected result after a
// rewrite is the same packet built again with the new values.
struct Spec {
  bool v6 = false;
  uint8_t proto = ipproto::kUdp;
  int vlans = 0;
  uint32_t src4 = 0, dst4 = 0;
  Ipv6Address src6 = {}, dst6 = {};
  uint16_t sport = 0, dport = 0;
  uint8_t ttl = 64;
  bool udp_checksum = true;
  std::vector<uint8_t> data;

  std::vector<uint8_t> build() const {
    PacketBuilder b;
    b.ethernet(kPeerMac, kPodMac);
    for (int i = 0; i < vlans; ++i) b.vlan(static_cast<uint16_t>(100 + i), i == 0 && vlans == 2 ? eth::kTypeQinq : eth::kTypeVlan);
    if (v6) {
      b.ipv6({.src = src6, .dst = dst6, .hop_limit = ttl});
    } else {
      b.ipv4({.src = src4, .dst = dst4, .ttl = ttl, .id = 0x1234, .frag_field = ipv4::kFlagDf});
    }
    switch (proto) {
      case ipproto::kUdp:
        b.udp(sport, dport, udp_checksum);
        break;
      case ipproto::kTcp:
        b.tcp({.src_port = sport, .dst_port = dport, .seq = 1, .ack = 2, .flags = tcp::kFlagAck, .window = 100});
        break;
      default:
        if (v6) b.icmpv6Echo(icmp6::kTypeEchoRequest, sport, dport);
        else b.icmpEcho(icmp::kTypeEchoRequest, sport, dport);
        break;
    }
    return b.payload(data).build();
  }
};

}  // namespace

TEST_CASE("random NAT rewrites equal a full rebuild") {
  std::mt19937 rng(1624);
  auto r16 = [&] { return static_cast<uint16_t>(rng()); };
  auto addr6 = [&] {
    Ipv6Address a;
    for (auto& b : a) b = static_cast<uint8_t>(rng());
    return a;
  };
  const uint8_t protos[] = {ipproto::kUdp, ipproto::kTcp, ipproto::kIcmp};
  for (int round = 0; round < 3000; ++round) {
    Spec s;
    s.v6 = rng() % 2;
    s.proto = protos[rng() % 3];
    s.vlans = static_cast<int>(rng() % 3);
    s.src4 = static_cast<uint32_t>(rng());
    s.dst4 = static_cast<uint32_t>(rng());
    s.src6 = addr6();
    s.dst6 = addr6();
    s.sport = r16();
    s.dport = r16();
    s.ttl = static_cast<uint8_t>(2 + rng() % 254);
    s.udp_checksum = s.v6 || rng() % 4 != 0;
    s.data.resize(rng() % 64);
    for (auto& b : s.data) b = static_cast<uint8_t>(rng());

    auto frame = s.build();
    const ParsedPacket p = parseOk(frame);
    Spec want = s;
    const int op = static_cast<int>(rng() % 5);
    switch (op) {
      case 0:
        if (s.v6) {
          want.src6 = addr6();
          REQUIRE(setIpv6Src(frame, p, want.src6) == Status::kOk);
        } else {
          want.src4 = static_cast<uint32_t>(rng());
          REQUIRE(setIpv4Src(frame, p, want.src4) == Status::kOk);
        }
        break;
      case 1:
        if (s.v6) {
          want.dst6 = addr6();
          REQUIRE(setIpv6Dst(frame, p, want.dst6) == Status::kOk);
        } else {
          want.dst4 = static_cast<uint32_t>(rng());
          REQUIRE(setIpv4Dst(frame, p, want.dst4) == Status::kOk);
        }
        break;
      case 2:
        want.sport = r16();
        REQUIRE(setL4SrcPort(frame, p, want.sport) == Status::kOk);
        break;
      case 3:
        if (s.proto == ipproto::kIcmp) {
          want.sport = r16();  // the echo identifier, whichever "port" is set
          REQUIRE(setL4DstPort(frame, p, want.sport) == Status::kOk);
        } else {
          want.dport = r16();
          REQUIRE(setL4DstPort(frame, p, want.dport) == Status::kOk);
        }
        break;
      case 4:
        want.ttl = static_cast<uint8_t>(s.ttl - 1);
        REQUIRE(decrementTtl(frame, p) == Status::kOk);
        break;
    }
    auto expected = want.build();
    INFO("round " << round << " op " << op << " v6 " << s.v6 << " proto " << int{s.proto});
    // Without a UDP checksum the rebuild also sends none.
    REQUIRE(toHex(frame) == toHex(expected));
    if (!s.v6) REQUIRE(verifyIpv4Checksum(frame, p) == Status::kOk);
    REQUIRE(verifyL4Checksum(frame, p) == Status::kOk);
  }
}

TEST_CASE("TTL and hop limit stop at 1") {
  for (const char* name : {"eth_ipv4_udp", "eth_ipv6_tcp"}) {
    INFO(name);
    auto frame = packet(name);
    const ParsedPacket p = parseOk(frame);
    const size_t ttl_at = p.l3_offset + (p.l3 == L3Type::kIpv4 ? 8 : 7);
    for (uint8_t ttl : {uint8_t{0}, uint8_t{1}}) {
      frame[ttl_at] = ttl;
      const auto before = frame;
      CHECK(decrementTtl(frame, p) == Status::kTtlExpired);
      CHECK(frame == before);
    }
    frame[ttl_at] = 2;
    if (p.l3 == L3Type::kIpv4) {  // make the header valid again for the check below
      ipv4::setChecksum(frame.data() + 14, 0);
      ipv4::setChecksum(frame.data() + 14, internetChecksum({frame.data() + 14, 20}));
    }
    CHECK(decrementTtl(frame, p) == Status::kOk);
    CHECK(frame[ttl_at] == 1);
    if (p.l3 == L3Type::kIpv4) CHECK(verifyIpv4Checksum(frame, p) == Status::kOk);
  }
}

TEST_CASE("rewrites that do not apply change nothing") {
  auto check_unchanged = [](const char* name, const Rewrite& rewrite) {
    INFO(name);
    auto frame = packet(name);
    const auto before = frame;
    rewrite(frame, parseOk(frame));
    CHECK(frame == before);
  };
  const Ipv6Address a6 = v6("fd00::99");
  check_unchanged("eth_ipv4_udp", [&](auto f, auto& p) {
    CHECK(setIpv6Src(f, p, a6) == Status::kUnsupported);
    CHECK(setIpv6Dst(f, p, a6) == Status::kUnsupported);
  });
  check_unchanged("eth_ipv6_tcp", [](auto f, auto& p) {
    CHECK(setIpv4Src(f, p, 1) == Status::kUnsupported);
    CHECK(setIpv4Dst(f, p, 1) == Status::kUnsupported);
  });
  check_unchanged("arp_request", [](auto f, auto& p) {
    CHECK(setL4SrcPort(f, p, 1) == Status::kUnsupported);
    CHECK(decrementTtl(f, p) == Status::kUnsupported);
    CHECK(setIpv4Src(f, p, 1) == Status::kUnsupported);
  });
  // ICMP errors and neighbor discovery have no identifier to translate.
  check_unchanged("icmp_frag_needed", [](auto f, auto& p) { CHECK(setL4SrcPort(f, p, 1) == Status::kUnsupported); });
  check_unchanged("icmpv6_ns", [](auto f, auto& p) { CHECK(setL4DstPort(f, p, 1) == Status::kUnsupported); });
  // Later fragments carry no ports: a no-op that succeeds.
  check_unchanged("ipv4_frag_later_udp", [](auto f, auto& p) {
    CHECK(setL4SrcPort(f, p, 1) == Status::kOk);
    CHECK(setL4DstPort(f, p, 1) == Status::kOk);
  });
}

TEST_CASE("an IPv6 destination that is not final leaves the L4 checksum alone") {
  const Ipv6Address final_dst = v6("fd00::99");
  std::vector<uint8_t> srh = {4, 1, 1, 0, 0, 0};  // SRH, 1 segment left, Segment List[0] = final_dst
  srh.insert(srh.end(), final_dst.begin(), final_dst.end());
  const Ipv6Address next = v6("fd00::50");
  srh.insert(srh.end(), next.begin(), next.end());
  auto frame = PacketBuilder()
                   .ethernet(kPeerMac, kPodMac)
                   .ipv6({.src = v6("fd00::1"), .dst = final_dst})
                   .ipv6Extension(ipproto::kRouting, srh)
                   .tcp({.src_port = 1, .dst_port = 2})
                   .build();
  const ParsedPacket p = parseOk(frame);
  const uint16_t before = tcp::checksum(frame.data() + p.l4_offset);
  REQUIRE(setIpv6Dst(frame, p, next) == Status::kOk);
  CHECK(tcp::checksum(frame.data() + p.l4_offset) == before);
  CHECK(verifyL4Checksum(frame, p) == Status::kOk);
  REQUIRE(setIpv6Src(frame, p, v6("fd00::7")) == Status::kOk);
  CHECK(verifyL4Checksum(frame, p) == Status::kOk);
}
