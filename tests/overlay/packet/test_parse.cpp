// parsePacket against the scapy golden packets (what it records for each header
// type), a table of malformed frames with the exact Status each must give,
// truncation at every byte offset, and the slow-path checksum verifiers.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "overlay/checksum.h"
#include "overlay/flow_key.h"
#include "overlay/packet_builder.h"
#include "overlay/parse.h"
#include "packet_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

const char* const kValidPackets[] = {
    "eth_ipv4_udp",       "eth_ipv4_tcp_options",   "eth_ipv4_options_udp",   "vlan_ipv4_icmp_echo",
    "qinq_ipv4_udp",      "eth_ipv4_udp_nocsum",    "eth_ipv6_tcp",           "eth_ipv6_ext_udp",
    "eth_ipv6_ah_tcp",    "eth_ipv6_frag_first_udp", "eth_ipv6_icmpv6_echo",  "arp_request",
    "arp_reply",          "vlan_arp_request",       "vlan_arp_reply",         "icmpv6_ns",
    "icmpv6_na",          "icmpv6_ns_dad",          "icmpv6_na_dad",          "big_ipv4_tcp",
    "icmp_frag_needed",   "big_ipv6_udp",           "icmpv6_packet_too_big",  "nat_ipv4_udp_snat",
    "nat_ipv4_tcp_dnat",  "nat_ipv6_ext_udp_dnat",  "ipv4_frag_first_udp",    "ipv4_frag_later_udp",
    "eth_ipv4_udp_zero_sum", "nat_ipv4_udp_zero_sum", "ttl_ipv4_udp",         "ttl_ipv6_tcp",
};

struct Expected {
  const char* name;
  L3Type l3;
  L4Type l4;
  Fragment fragment;
  uint8_t vlans;
  uint16_t ethertype;
  uint16_t l3_offset;
  uint16_t l4_offset;
  uint16_t payload_offset;
  uint8_t ip_proto;
};

}  // namespace

TEST_CASE("parsePacket records every header of the golden packets") {
  using enum L3Type;
  const Expected table[] = {
      {"eth_ipv4_udp", kIpv4, L4Type::kUdp, Fragment::kNone, 0, 0x0800, 14, 34, 42, 17},
      {"eth_ipv4_tcp_options", kIpv4, L4Type::kTcp, Fragment::kNone, 0, 0x0800, 14, 34, 74, 6},
      {"eth_ipv4_options_udp", kIpv4, L4Type::kUdp, Fragment::kNone, 0, 0x0800, 14, 50, 58, 17},
      {"vlan_ipv4_icmp_echo", kIpv4, L4Type::kIcmp, Fragment::kNone, 1, 0x0800, 18, 38, 46, 1},
      {"qinq_ipv4_udp", kIpv4, L4Type::kUdp, Fragment::kNone, 2, 0x0800, 22, 42, 50, 17},
      {"eth_ipv6_tcp", kIpv6, L4Type::kTcp, Fragment::kNone, 0, 0x86dd, 14, 54, 74, 6},
      {"eth_ipv6_ext_udp", kIpv6, L4Type::kUdp, Fragment::kNone, 0, 0x86dd, 14, 78, 86, 17},
      {"eth_ipv6_ah_tcp", kIpv6, L4Type::kTcp, Fragment::kNone, 0, 0x86dd, 14, 86, 106, 6},
      {"eth_ipv6_frag_first_udp", kIpv6, L4Type::kUdp, Fragment::kFirst, 0, 0x86dd, 14, 62, 70, 17},
      {"eth_ipv6_icmpv6_echo", kIpv6, L4Type::kIcmpv6, Fragment::kNone, 0, 0x86dd, 14, 54, 62, 58},
      {"icmpv6_ns", kIpv6, L4Type::kIcmpv6, Fragment::kNone, 0, 0x86dd, 14, 54, 62, 58},
      {"ipv4_frag_first_udp", kIpv4, L4Type::kUdp, Fragment::kFirst, 0, 0x0800, 14, 34, 42, 17},
      {"ipv4_frag_later_udp", kIpv4, L4Type::kNone, Fragment::kLater, 0, 0x0800, 14, 34, 34, 17},
      {"arp_request", kArp, L4Type::kNone, Fragment::kNone, 0, 0x0806, 14, 0, 0, 0},
      {"vlan_arp_request", kArp, L4Type::kNone, Fragment::kNone, 1, 0x0806, 18, 0, 0, 0},
  };
  for (const Expected& e : table) {
    INFO(e.name);
    const auto frame = packet(e.name);
    const ParsedPacket p = parseOk(frame);
    CHECK(p.l3 == e.l3);
    CHECK(p.l4 == e.l4);
    CHECK(p.fragment == e.fragment);
    CHECK(p.vlan_count == e.vlans);
    CHECK(p.ethertype == e.ethertype);
    CHECK(p.l3_offset == e.l3_offset);
    CHECK(p.l4_offset == e.l4_offset);
    CHECK(p.payload_offset == e.payload_offset);
    CHECK(p.ip_proto == e.ip_proto);
    CHECK(p.frame_len == frame.size());
    CHECK(p.l3_end == frame.size());  // scapy adds no Ethernet padding
    if (p.isIp()) CHECK(p.payloadLength() == frame.size() - e.payload_offset);
  }
}

TEST_CASE("VLAN tags are recorded outer first with their TPIDs") {
  const auto qinq = packet("qinq_ipv4_udp");
  const ParsedPacket p = parseOk(qinq);
  CHECK(p.vlan_tpid[0] == eth::kTypeQinq);
  CHECK(p.vlan_tci[0] == 10);
  CHECK(p.vlan_tpid[1] == eth::kTypeVlan);
  CHECK(p.vlan_tci[1] == 20);
  CHECK(ParsedPacket::vlanOffset(1) == 16);
  CHECK(vlan::vid(qinq.data() + ParsedPacket::vlanOffset(1)) == 20);

  const auto tagged = packet("vlan_ipv4_icmp_echo");
  const ParsedPacket t = parseOk(tagged);
  CHECK(t.vlan_tci[0] == (3 << 13 | 100));
  CHECK(vlan::pcp(tagged.data() + 12) == 3);
}

TEST_CASE("every valid golden packet parses and verifies its checksums") {
  for (const char* name : kValidPackets) {
    INFO(name);
    const auto frame = packet(name);
    const ParsedPacket p = parseOk(frame);
    if (p.l3 == L3Type::kIpv4) CHECK(verifyIpv4Checksum(frame, p) == Status::kOk);
    if (p.l4 != L4Type::kNone && p.fragment == Fragment::kNone) CHECK(verifyL4Checksum(frame, p) == Status::kOk);
  }
}

TEST_CASE("truncating a valid packet at any byte is an error, never a crash") {
  for (const char* name : kValidPackets) {
    INFO(name);
    const auto frame = packet(name);
    for (size_t n = 0; n < frame.size(); ++n) {
      INFO("truncated to " << n << " bytes");
      CHECK(parseStatus({frame.data(), n}) != Status::kOk);
    }
  }
}

TEST_CASE("Ethernet padding after the IP datagram is allowed and ignored") {
  for (const char* name : {"eth_ipv4_udp", "eth_ipv6_tcp", "arp_request", "vlan_ipv4_icmp_echo"}) {
    INFO(name);
    auto frame = packet(name);
    const size_t original = frame.size();
    frame.resize(original + 18, 0xa5);
    const ParsedPacket p = parseOk(frame);
    CHECK(p.l3_end == original);
    CHECK(p.frame_len == frame.size());
    if (p.l3 == L3Type::kIpv4) CHECK(verifyIpv4Checksum(frame, p) == Status::kOk);
    if (p.l4 != L4Type::kNone) CHECK(verifyL4Checksum(frame, p) == Status::kOk);
  }
}

namespace {

struct Malformed {
  const char* what;
  const char* base;
  void (*mutate)(std::vector<uint8_t>&);
  Status expected;
};

void setByte(std::vector<uint8_t>& f, size_t at, uint8_t v) { f.at(at) = v; }
void set16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  (void)f.at(at + 1);
  store16(&f[at], v);
}

}  // namespace

TEST_CASE("each malformed frame gives its specific status") {
  // Offsets: Ethernet 0-13, IPv4/IPv6 from 14; see the layouts in the expectations test above.
  const Malformed table[] = {
      {"shorter than an Ethernet header", "eth_ipv4_udp", [](auto& f) { f.resize(13); }, Status::kTruncated},
      {"802.3 length instead of EtherType", "eth_ipv4_udp", [](auto& f) { set16(f, 12, 0x0040); },
       Status::kUnsupported},
      {"EtherType in the undefined 1501..1535 range", "eth_ipv4_udp", [](auto& f) { set16(f, 12, 0x05ff); },
       Status::kBadEthernet},
      {"three VLAN tags", "qinq_ipv4_udp", [](auto& f) { set16(f, 20, 0x8100); }, Status::kTooManyVlans},
      {"VLAN tag without EtherType", "vlan_ipv4_icmp_echo", [](auto& f) { f.resize(17); }, Status::kTruncated},
      {"ARP hardware type not Ethernet", "arp_request", [](auto& f) { set16(f, 14, 6); }, Status::kBadArp},
      {"ARP protocol type not IPv4", "arp_request", [](auto& f) { set16(f, 16, 0x86dd); }, Status::kBadArp},
      {"ARP hardware length 8", "arp_request", [](auto& f) { setByte(f, 18, 8); }, Status::kBadArp},
      {"ARP protocol length 16", "arp_request", [](auto& f) { setByte(f, 19, 16); }, Status::kBadArp},
      {"ARP body cut", "arp_request", [](auto& f) { f.resize(41); }, Status::kTruncated},
      {"IPv4 header cut", "eth_ipv4_udp", [](auto& f) { f.resize(33); }, Status::kTruncated},
      {"version 6 under EtherType IPv4", "eth_ipv4_udp", [](auto& f) { setByte(f, 14, 0x65); },
       Status::kBadIpVersion},
      {"IPv4 IHL 4", "eth_ipv4_udp", [](auto& f) { setByte(f, 14, 0x44); }, Status::kBadIpv4HeaderLength},
      {"IPv4 IHL 0", "eth_ipv4_udp", [](auto& f) { setByte(f, 14, 0x40); }, Status::kBadIpv4HeaderLength},
      {"IPv4 IHL beyond the frame", "eth_ipv4_udp", [](auto& f) { setByte(f, 14, 0x4f); },
       Status::kBadIpv4HeaderLength},
      {"IPv4 total length below 20", "eth_ipv4_udp", [](auto& f) { set16(f, 16, 19); },
       Status::kBadIpv4TotalLength},
      {"IPv4 total length below the header with options", "eth_ipv4_options_udp",
       [](auto& f) { set16(f, 16, 30); }, Status::kBadIpv4TotalLength},
      {"IPv4 total length beyond the frame", "eth_ipv4_udp", [](auto& f) { set16(f, 16, 42); },
       Status::kBadIpv4TotalLength},
      {"IPv6 header cut", "eth_ipv6_tcp", [](auto& f) { f.resize(53); }, Status::kTruncated},
      {"version 4 under EtherType IPv6", "eth_ipv6_tcp", [](auto& f) { setByte(f, 14, 0x45); },
       Status::kBadIpVersion},
      {"IPv6 payload length beyond the frame", "eth_ipv6_tcp", [](auto& f) { set16(f, 18, 34); },
       Status::kBadIpv6PayloadLength},
      {"hop-by-hop after a routing header", "eth_ipv6_ext_udp", [](auto& f) { setByte(f, 62, 0); },
       Status::kBadIpv6ExtHeader},
      {"extension header longer than the payload", "eth_ipv6_ext_udp", [](auto& f) { setByte(f, 55, 20); },
       Status::kBadIpv6ExtHeader},
      {"payload ends inside the extension headers", "eth_ipv6_ext_udp", [](auto& f) { set16(f, 18, 4); },
       Status::kBadIpv6ExtHeader},
      {"jumbogram (payload length 0)", "eth_ipv6_ext_udp", [](auto& f) { set16(f, 18, 0); },
       Status::kBadIpv6ExtHeader},
      {"AH length not a multiple of 8 over IPv6", "eth_ipv6_ah_tcp", [](auto& f) { setByte(f, 63, 3); },
       Status::kBadIpv6ExtHeader},
      {"TCP data offset 4", "eth_ipv4_tcp_options", [](auto& f) { setByte(f, 46, 0x40); }, Status::kBadL4Header},
      {"TCP data offset beyond the datagram", "eth_ipv6_tcp", [](auto& f) { setByte(f, 66, 0xf0); },
       Status::kBadL4Header},
      {"TCP header cut by the IP length", "eth_ipv6_tcp", [](auto& f) { set16(f, 18, 19); },
       Status::kBadL4Header},
      {"UDP length 7", "eth_ipv4_udp", [](auto& f) { set16(f, 38, 7); }, Status::kBadL4Header},
      {"UDP length beyond the datagram", "eth_ipv4_udp", [](auto& f) { set16(f, 38, 22); }, Status::kBadL4Header},
      {"UDP header cut by the IP length", "eth_ipv4_udp", [](auto& f) { set16(f, 16, 27); },
       Status::kBadL4Header},
      {"ICMP shorter than 8 bytes", "vlan_ipv4_icmp_echo", [](auto& f) { set16(f, 20, 27); },
       Status::kBadL4Header},
      {"ICMPv6 shorter than 8 bytes", "eth_ipv6_icmpv6_echo", [](auto& f) { set16(f, 18, 4); },
       Status::kBadL4Header},
      {"first fragment cutting the UDP header", "ipv4_frag_first_udp", [](auto& f) { set16(f, 16, 24); },
       Status::kBadL4Header},
  };
  for (const Malformed& m : table) {
    INFO(m.what);
    auto frame = packet(m.base);
    m.mutate(frame);
    CHECK(parseStatus(frame) == m.expected);
  }
}

TEST_CASE("the IPv6 extension header chain is bounded") {
  auto withDestOpts = [](int n) {
    PacketBuilder b;
    b.ethernet(kPeerMac, kPodMac).ipv6({.src = v6("fd00::1"), .dst = v6("fd00::2")});
    const uint8_t padn[] = {1, 4, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) b.ipv6Extension(ipproto::kDestOptions, padn);
    return b.udp(1, 2).build();
  };
  const auto eight = withDestOpts(kMaxIpv6ExtHeaders);
  CHECK(parseOk(eight).l4 == L4Type::kUdp);
  CHECK(parseStatus(withDestOpts(kMaxIpv6ExtHeaders + 1)) == Status::kBadIpv6ExtHeader);

  const auto two_fragments = PacketBuilder()
                                 .ethernet(kPeerMac, kPodMac)
                                 .ipv6({.src = v6("fd00::1"), .dst = v6("fd00::2")})
                                 .ipv6Fragment(0, true, 1)
                                 .ipv6Fragment(0, true, 1)
                                 .udp(1, 2)
                                 .build();
  CHECK(parseStatus(two_fragments) == Status::kBadIpv6ExtHeader);
}

TEST_CASE("frames the parser accepts without an L3 or L4 header") {
  SECTION("unknown EtherType switches at L2") {
    const auto lldp = PacketBuilder().ethernet(kPeerMac, kPodMac, 0x88cc).payload(pattern(40)).build();
    const ParsedPacket p = parseOk(lldp);
    CHECK(p.l3 == L3Type::kNone);
    CHECK(p.ethertype == 0x88cc);
    CHECK(p.l3_offset == 14);
  }
  SECTION("unknown IP protocols keep their offsets") {
    const auto gre = PacketBuilder()
                         .ethernet(kPeerMac, kPodMac)
                         .ipv4({.src = v4("10.0.0.1"), .dst = v4("10.0.0.2"), .protocol = 47})
                         .payload(pattern(8))
                         .build();
    const ParsedPacket p = parseOk(gre);
    CHECK(p.l4 == L4Type::kNone);
    CHECK(p.ip_proto == 47);
    CHECK(p.l4_offset == 34);
    CHECK(p.payload_offset == 34);
    CHECK(verifyL4Checksum(gre, p) == Status::kUnsupported);
  }
  SECTION("ICMP inside IPv6 is not ICMPv6") {
    const auto f = PacketBuilder()
                       .ethernet(kPeerMac, kPodMac)
                       .ipv6({.src = v6("fd00::1"), .dst = v6("fd00::2"), .next_header = ipproto::kIcmp})
                       .payload(pattern(8))
                       .build();
    CHECK(parseOk(f).l4 == L4Type::kNone);
  }
  SECTION("No Next Header ends the chain") {
    const auto f = PacketBuilder().ethernet(kPeerMac, kPodMac).ipv6({.src = v6("fd00::1")}).build();
    const ParsedPacket p = parseOk(f);
    CHECK(p.ip_proto == ipproto::kNoNext);
    CHECK(p.l4 == L4Type::kNone);
    CHECK(p.l4_offset == 54);
  }
  SECTION("an atomic IPv6 fragment is a whole packet (RFC 6946)") {
    const auto f = PacketBuilder()
                       .ethernet(kPeerMac, kPodMac)
                       .ipv6({.src = v6("fd00::1"), .dst = v6("fd00::2")})
                       .ipv6Fragment(0, false, 7)
                       .udp(1, 2)
                       .build();
    const ParsedPacket p = parseOk(f);
    CHECK(p.fragment == Fragment::kNone);
    CHECK(p.l4 == L4Type::kUdp);
    CHECK(verifyL4Checksum(f, p) == Status::kOk);
  }
  SECTION("a later IPv6 fragment has no L4") {
    const auto f = PacketBuilder()
                       .ethernet(kPeerMac, kPodMac)
                       .ipv6({.src = v6("fd00::1"), .dst = v6("fd00::2")})
                       .ipv6Fragment(3, true, 7)
                       .udp(1, 2)
                       .build();
    const ParsedPacket p = parseOk(f);
    CHECK(p.fragment == Fragment::kLater);
    CHECK(p.l4 == L4Type::kNone);
    CHECK(p.ip_proto == ipproto::kUdp);
    CHECK(p.l4_offset == 62);
    CHECK(verifyL4Checksum(f, p) == Status::kUnsupported);
  }
  SECTION("a UDP length shorter than the datagram (surplus area) is accepted") {
    auto f = packet("eth_ipv4_udp");
    set16(f, 38, 10);
    const ParsedPacket p = parseOk(f);
    CHECK(p.l4 == L4Type::kUdp);
  }
}

TEST_CASE("checksum verifiers catch any single flipped bit") {
  for (const char* name : {"eth_ipv4_udp", "eth_ipv4_tcp_options", "eth_ipv4_options_udp", "vlan_ipv4_icmp_echo",
                           "eth_ipv6_tcp", "eth_ipv6_ext_udp", "eth_ipv6_ah_tcp", "eth_ipv6_icmpv6_echo",
                           "icmpv6_ns"}) {
    INFO(name);
    const auto frame = packet(name);
    const ParsedPacket p = parseOk(frame);
    // IPv4 header: every byte is covered by its checksum.
    if (p.l3 == L3Type::kIpv4) {
      for (size_t i = p.l3_offset; i < p.l4_offset; ++i) {
        auto f = frame;
        f[i] ^= 0x01;
        ParsedPacket q;
        if (parsePacket(f, q) != Status::kOk) continue;  // a length field now lies
        INFO("byte " << i);
        CHECK(verifyIpv4Checksum(f, q) == Status::kBadIpv4Checksum);
      }
    }
    // L4: every byte of the segment, and the pseudo-header addresses.
    const size_t addr_begin = p.l3_offset + (p.l3 == L3Type::kIpv4 ? 12 : 8);
    const size_t addr_end = p.l3_offset + (p.l3 == L3Type::kIpv4 ? 20 : 40);
    for (size_t i = addr_begin; i < p.l3_end; ++i) {
      if (i >= addr_end && i < p.l4_offset) continue;
      if (p.l4 == L4Type::kIcmp && i < p.l4_offset) continue;  // no pseudo-header
      auto f = frame;
      f[i] ^= 0x01;
      ParsedPacket q;
      if (parsePacket(f, q) != Status::kOk || q.l4 != p.l4) continue;
      INFO("byte " << i);
      CHECK(verifyL4Checksum(f, q) == Status::kBadL4Checksum);
    }
  }
}

TEST_CASE("a zero UDP checksum means none over IPv4 and is invalid over IPv6") {
  const auto v4frame = packet("eth_ipv4_udp_nocsum");
  CHECK(verifyL4Checksum(v4frame, parseOk(v4frame)) == Status::kOk);
  auto v6frame = packet("eth_ipv6_ext_udp");
  set16(v6frame, 78 + 6, 0);
  CHECK(verifyL4Checksum(v6frame, parseOk(v6frame)) == Status::kBadL4Checksum);
  CHECK(verifyIpv4Checksum(v6frame, parseOk(v6frame)) == Status::kUnsupported);
}

TEST_CASE("L4 checksums over IPv6 use the final destination of a routing header") {
  // A segment routing header (RFC 8754) with one segment left: the pseudo-header
  // names Segment List[0], the last hop, not the current destination.
  const Ipv6Address final_dst = v6("fd00::99");
  const Ipv6Address hop = v6("fd00::50");
  // After the next-header and length bytes: type 4, segments left 1, last entry 1,
  // flags, tag, then Segment List[0] (the final destination) and [1].
  std::vector<uint8_t> srh = {4, 1, 1, 0, 0, 0};
  srh.insert(srh.end(), final_dst.begin(), final_dst.end());
  srh.insert(srh.end(), hop.begin(), hop.end());
  // Built with the pseudo-header of `final_dst` so its checksum is right.
  auto reference = PacketBuilder()
                       .ethernet(kPeerMac, kPodMac)
                       .ipv6({.src = v6("fd00::1"), .dst = final_dst})
                       .ipv6Extension(ipproto::kRouting, srh)
                       .udp(1000, 2000)
                       .payload(kPayload)
                       .build();
  auto frame = reference;
  std::memcpy(&frame[14 + 24], hop.data(), 16);  // in flight: the destination is the next segment
  const ParsedPacket p = parseOk(frame);
  CHECK(p.pseudo_dst_offset == 54 + 8);
  CHECK(verifyL4Checksum(frame, p) == Status::kOk);

  // An unknown routing type with segments left: the final destination is unknowable.
  frame[54 + 2] = 200;
  CHECK(verifyL4Checksum(frame, parseOk(frame)) == Status::kUnsupported);
}

TEST_CASE("neighbor discovery messages are validated as RFC 4861 §7.1 requires") {
  const auto ns = packet("icmpv6_ns");
  NeighborMessage m;
  REQUIRE(parseNeighborMessage(ns, parseOk(ns), m) == Status::kOk);
  CHECK(m.target_offset == 62);
  CHECK(std::memcmp(ns.data() + m.target_offset, v6("fd00::fe").data(), 16) == 0);
  CHECK(m.has_link_addr);
  CHECK(m.link_addr == kPodMac);

  const auto na = packet("icmpv6_na");
  REQUIRE(parseNeighborMessage(na, parseOk(na), m) == Status::kOk);
  CHECK(m.link_addr == kGwMac);

  const auto dad = packet("icmpv6_ns_dad");
  REQUIRE(parseNeighborMessage(dad, parseOk(dad), m) == Status::kOk);
  CHECK_FALSE(m.has_link_addr);

  const auto echo = packet("eth_ipv6_icmpv6_echo");
  CHECK(parseNeighborMessage(echo, parseOk(echo), m) == Status::kUnsupported);

  struct Bad {
    const char* what;
    void (*mutate)(std::vector<uint8_t>&);
    Status expected;
  };
  const Bad bad[] = {
      {"hop limit 64", [](auto& f) { setByte(f, 21, 64); }, Status::kBadL4Header},
      {"code 1", [](auto& f) { setByte(f, 55, 1); }, Status::kBadL4Header},
      {"option length 0", [](auto& f) { setByte(f, 79, 0); }, Status::kBadL4Header},
      {"option longer than the message", [](auto& f) { setByte(f, 79, 2); }, Status::kBadL4Header},
      {"multicast target", [](auto& f) { setByte(f, 62, 0xff); }, Status::kBadL4Header},
      {"bad checksum", [](auto& f) { f[80] ^= 1; }, Status::kBadL4Checksum},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    auto f = packet("icmpv6_ns");
    b.mutate(f);
    ParsedPacket p;
    REQUIRE(parsePacket(f, p) == Status::kOk);
    // Fix the checksum unless that is the point, so the check under test is the one that fails.
    if (b.expected != Status::kBadL4Checksum) {
      store16(&f[56], 0);
      const uint32_t sum = pseudoHeaderSumV6(&f[22], &f[38], 58, p.l4Length());
      store16(&f[56], checksumFinish(checksumAdd(&f[54], p.l4Length(), sum)));
    }
    CHECK(parseNeighborMessage(f, p, m) == b.expected);
  }

  // DAD must not carry a source link-layer address.
  auto dad_with_lla = PacketBuilder()
                          .ethernet(eth::ipv6MulticastMac(v6("ff02::1:ff00:fe").data()), kPodMac)
                          .ipv6({.src = v6("::"), .dst = v6("ff02::1:ff00:fe"), .hop_limit = 255})
                          .neighborSolicit(v6("fd00::fe"), kPodMac)
                          .build();
  CHECK(parseNeighborMessage(dad_with_lla, parseOk(dad_with_lla), m) == Status::kBadL4Header);
}

TEST_CASE("SCTP: the common header is recorded and its ports are the flow's") {
  // PacketBuilder has no SCTP header: the common header (ports 5000 -> 36412,
  // a verification tag, a CRC32c left zero) and a chunk as the payload.
  const std::vector<uint8_t> sctp = {0x13, 0x88, 0x8e, 0x3c, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0,
                                     0x01, 0x00, 0x00, 0x08, 0,    0,    0,    0};
  auto build = [](const std::vector<uint8_t>& l4) {
    return PacketBuilder()
        .ethernet({0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2})
        .ipv4({.src = 0x0a000001, .dst = 0x0a000002, .protocol = ipproto::kSctp})
        .payload(l4)
        .build();
  };
  const auto frame = build(sctp);
  const ParsedPacket p = parseOk(frame);
  CHECK(p.l4 == L4Type::kSctp);
  CHECK(p.l4_offset == 34);
  CHECK(p.payload_offset == 46);
  CHECK(verifyL4Checksum(frame, p) == Status::kUnsupported);  // a CRC32c, not the Internet checksum
  const FlowKey k = extractFlowKey(frame, p, 1, 0);
  CHECK(k.l4_src == 5000);
  CHECK(k.l4_dst == 36412);
  // Shorter than the common header: refused, as a short TCP or UDP header is.
  ParsedPacket q;
  CHECK(parsePacket(build(std::vector<uint8_t>(sctp.begin(), sctp.begin() + 8)), q) == Status::kBadL4Header);
}
