// Our builders against scapy: PacketBuilder must produce the golden frames of
// gen_packets.py byte for byte, and the allocation-free slow-path replies
// (replies.h) must answer the golden requests exactly as scapy built the answers.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <functional>
#include <vector>

#include "overlay/buffer.h"
#include "overlay/packet_builder.h"
#include "overlay/replies.h"
#include "packet_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

const uint32_t kPodV4 = v4("10.0.0.1");
const uint32_t kPeerV4 = v4("10.0.0.2");
const uint32_t kGwV4 = v4("10.0.0.254");
const Ipv6Address kPodV6 = v6("fd00::1");
const Ipv6Address kPeerV6 = v6("fd00::2");
const Ipv6Address kGwV6 = v6("fd00::fe");

// gen_packets.py's TCP_OPTIONS: MSS 1460, SACK permitted, timestamps (12345, 0), NOP, window scale 7.
const std::vector<uint8_t> kTcpOptions = {2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0x30, 0x39,
                                          0, 0, 0, 0,   1, 3, 3, 7};
// Router alert (RFC 2113) and an empty two-slot record route (RFC 791).
const std::vector<uint8_t> kIpv4Options = {0x94, 4, 0, 0, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0};
const std::vector<uint8_t> kPadN4 = {1, 4, 0, 0, 0, 0};

PacketBuilder ethToPeer() { return std::move(PacketBuilder().ethernet(kPeerMac, kPodMac)); }

}  // namespace

TEST_CASE("PacketBuilder reproduces the scapy frames") {
  const std::vector<uint8_t> ah_body = [] {
    std::vector<uint8_t> b = {0, 0, 0, 0, 1, 0, 0, 0, 0, 5};  // reserved, SPI 0x100, sequence 5
    auto icv = pattern(12, 3);
    b.insert(b.end(), icv.begin(), icv.end());
    return b;
  }();
  const std::vector<uint8_t> routing0 = {0, 0, 0, 0, 0, 0};  // type 0, no segments left
  const Ipv6Address solicited = v6("ff02::1:ff00:fe");

  const std::pair<const char*, std::function<std::vector<uint8_t>()>> table[] = {
      {"eth_ipv4_udp",
       [] { return ethToPeer().ipv4({.src = kPodV4, .dst = kPeerV4}).udp(1234, 5678).payload(kPayload).build(); }},
      {"eth_ipv4_tcp_options",
       [] {
         return ethToPeer()
             .ipv4({.src = kPodV4, .dst = kPeerV4, .frag_field = ipv4::kFlagDf})
             .tcp({.src_port = 40000, .dst_port = 80, .seq = 1000, .window = 65535, .options = kTcpOptions})
             .build();
       }},
      {"eth_ipv4_options_udp",
       [] {
         return ethToPeer()
             .ipv4({.src = kPodV4, .dst = kPeerV4, .options = kIpv4Options})
             .udp(1234, 5678)
             .payload(kPayload)
             .build();
       }},
      {"vlan_ipv4_icmp_echo",
       [] {
         return ethToPeer()
             .vlan(3 << 13 | 100)
             .ipv4({.src = kPodV4, .dst = kPeerV4})
             .icmpEcho(icmp::kTypeEchoRequest, 0x1234, 1)
             .payload(pattern(32))
             .build();
       }},
      {"qinq_ipv4_udp",
       [] {
         return ethToPeer()
             .vlan(10, eth::kTypeQinq)
             .vlan(20)
             .ipv4({.src = kPodV4, .dst = kPeerV4})
             .udp(1234, 5678)
             .payload(kPayload)
             .build();
       }},
      {"eth_ipv4_udp_nocsum",
       [] {
         return ethToPeer().ipv4({.src = kPodV4, .dst = kPeerV4}).udp(1234, 5678, false).payload(kPayload).build();
       }},
      {"eth_ipv6_tcp",
       [] {
         return ethToPeer()
             .ipv6({.src = kPodV6, .dst = kPeerV6})
             .tcp({.src_port = 40000,
                   .dst_port = 443,
                   .seq = 7,
                   .ack = 9,
                   .flags = tcp::kFlagPsh | tcp::kFlagAck,
                   .window = 512})
             .payload(kPayload)
             .build();
       }},
      {"eth_ipv6_ext_udp",
       [&] {
         return ethToPeer()
             .ipv6({.src = kPodV6, .dst = kPeerV6})
             .ipv6Extension(ipproto::kHopByHop, kPadN4)
             .ipv6Extension(ipproto::kRouting, routing0)
             .ipv6Extension(ipproto::kDestOptions, kPadN4)
             .udp(1234, 5678)
             .payload(kPayload)
             .build();
       }},
      {"eth_ipv6_ah_tcp",
       [&] {
         return ethToPeer()
             .ipv6({.src = kPodV6, .dst = kPeerV6})
             .ipv6Extension(ipproto::kDestOptions, kPadN4)
             .ipv6Extension(ipproto::kAh, ah_body)
             .tcp({.src_port = 40000, .dst_port = 443, .seq = 1, .window = 1024})
             .build();
       }},
      {"eth_ipv6_frag_first_udp",
       [] {
         return ethToPeer()
             .ipv6({.src = kPodV6, .dst = kPeerV6})
             .ipv6Fragment(0, true, 0xabcdef)
             .udp(1234, 5678)
             .payload(pattern(24))
             .build();
       }},
      {"eth_ipv6_icmpv6_echo",
       [] {
         return ethToPeer()
             .ipv6({.src = kPodV6, .dst = kPeerV6})
             .icmpv6Echo(icmp6::kTypeEchoRequest, 0x4321, 2)
             .payload(pattern(16))
             .build();
       }},
      {"arp_request",
       [] {
         return PacketBuilder()
             .ethernet(eth::kBroadcast, kPodMac)
             .arp(arp::kOpRequest, kPodMac, kPodV4, kZeroMac, kGwV4)
             .build();
       }},
      {"vlan_arp_request",
       [] {
         return PacketBuilder()
             .ethernet(eth::kBroadcast, kPodMac)
             .vlan(100)
             .arp(arp::kOpRequest, kPodMac, kPodV4, kZeroMac, kGwV4)
             .build();
       }},
      {"icmpv6_ns",
       [&] {
         return PacketBuilder()
             .ethernet(eth::ipv6MulticastMac(solicited.data()), kPodMac)
             .ipv6({.src = kPodV6, .dst = solicited, .hop_limit = 255})
             .neighborSolicit(kGwV6, kPodMac)
             .build();
       }},
      {"icmpv6_ns_dad",
       [&] {
         return PacketBuilder()
             .ethernet(eth::ipv6MulticastMac(solicited.data()), kPodMac)
             .ipv6({.src = {}, .dst = solicited, .hop_limit = 255})
             .neighborSolicit(kGwV6, std::nullopt)
             .build();
       }},
      {"icmpv6_na",
       [] {
         return PacketBuilder()
             .ethernet(kPodMac, kGwMac)
             .ipv6({.src = kGwV6, .dst = kPodV6, .hop_limit = 255})
             .neighborAdvert(icmp6::kNaFlagRouter | icmp6::kNaFlagSolicited | icmp6::kNaFlagOverride, kGwV6, kGwMac)
             .build();
       }},
      {"big_ipv4_tcp",
       [] {
         return PacketBuilder()
             .ethernet(kGwMac, kPodMac)
             .ipv4({.src = kPodV4, .dst = v4("10.1.0.2"), .id = 0x77, .frag_field = ipv4::kFlagDf})
             .tcp({.src_port = 40000, .dst_port = 80, .seq = 1, .ack = 2, .flags = tcp::kFlagAck, .window = 512})
             .payload(pattern(1400))
             .build();
       }},
      {"big_ipv6_udp",
       [] {
         return PacketBuilder()
             .ethernet(kGwMac, kPodMac)
             .ipv6({.src = kPodV6, .dst = v6("fd00:1::2")})
             .udp(1234, 5678)
             .payload(pattern(1452))
             .build();
       }},
      {"arp_reply",
       [] {
         return PacketBuilder()
             .ethernet(kPodMac, kGwMac)
             .arp(arp::kOpReply, kGwMac, kGwV4, kPodMac, kPodV4)
             .build();
       }},
      {"vlan_arp_reply",
       [] {
         return PacketBuilder()
             .ethernet(kPodMac, kGwMac)
             .vlan(100)
             .arp(arp::kOpReply, kGwMac, kGwV4, kPodMac, kPodV4)
             .build();
       }},
      {"icmp_frag_needed",
       [] {
         const auto offending = packet("big_ipv4_tcp");
         return PacketBuilder()
             .ethernet(kPodMac, kGwMac)
             .ipv4({.src = kGwV4, .dst = kPodV4})
             .icmp(icmp::kTypeDestUnreachable, icmp::kCodeFragNeeded, 1400)
             .payload(std::span(offending).subspan(14, 28))
             .build();
       }},
      {"icmpv6_packet_too_big",
       [] {
         const auto offending = packet("big_ipv6_udp");
         return PacketBuilder()
             .ethernet(kPodMac, kGwMac)
             .ipv6({.src = kGwV6, .dst = kPodV6})
             .icmpv6(icmp6::kTypePacketTooBig, 0, 1400)
             .payload(std::span(offending).subspan(14, 1232))
             .build();
       }},
      {"ipv4_frag_first_udp",
       [] {
         // The first 24 bytes of the datagram's data: the UDP header of the whole
         // datagram (its length and checksum cover all 72 bytes) is not something
         // PacketBuilder computes, so only compare everything but those fields.
         const auto data = pattern(64, 9);
         auto frame = ethToPeer()
                          .ipv4({.src = kPodV4, .dst = kPeerV4, .id = 0x55, .frag_field = ipv4::kFlagMf})
                          .udp(1234, 5678)
                          .payload(std::span(data).first(24))
                          .build();
         const auto golden = packet("ipv4_frag_first_udp");
         std::copy(golden.begin() + 38, golden.begin() + 42, frame.begin() + 38);
         return frame;
       }},
  };
  for (const auto& [name, build] : table) {
    INFO(name);
    const auto expected = packet(name);
    const auto built = build();
    CHECK(toHex(built) == toHex(expected));
  }
}

TEST_CASE("PacketBuilder refuses layers out of place") {
  CHECK_THROWS_AS(PacketBuilder().udp(1, 2), std::invalid_argument);
  CHECK_THROWS_AS(PacketBuilder().vlan(1), std::invalid_argument);
  CHECK_THROWS_AS(PacketBuilder().payload(kPayload), std::invalid_argument);
  CHECK_NOTHROW(PacketBuilder().ipv4({}).udp(1, 2).build());  // a bare datagram, to quote in an ICMP error
  CHECK_THROWS_AS(PacketBuilder().ethernet(kPeerMac, kPodMac).tcp({}), std::invalid_argument);
  CHECK_THROWS_AS(PacketBuilder().ethernet(kPeerMac, kPodMac).ipv4({}).icmpv6(128, 0), std::invalid_argument);
  CHECK_THROWS_AS(PacketBuilder().ethernet(kPeerMac, kPodMac).ipv6({}).ipv6Extension(ipproto::kRouting, kTcpOptions),
                  std::invalid_argument);  // 22 bytes: not a multiple of 8
  CHECK_THROWS_AS(PacketBuilder().ethernet(kPeerMac, kPodMac).ipv4({.options = std::vector<uint8_t>(41, 1)}),
                  std::invalid_argument);
}

namespace {

// A PacketBuffer over its own array, as an mbuf would be.
struct Buffer {
  std::array<uint8_t, 2048> bytes{};
  PacketBuffer buf{bytes.data(), static_cast<uint32_t>(bytes.size()), 128, 0};
  std::vector<uint8_t> contents() const { return {buf.data(), buf.data() + buf.size()}; }
};

}  // namespace

TEST_CASE("slow-path replies match scapy") {
  SECTION("ARP reply, untagged and on a VLAN") {
    for (auto [request, reply] : {std::pair{"arp_request", "arp_reply"}, {"vlan_arp_request", "vlan_arp_reply"}}) {
      INFO(request);
      const auto in = packet(request);
      Buffer out;
      REQUIRE(buildArpReply(in, parseOk(in), kGwMac, out.buf) == Status::kOk);
      CHECK(toHex(out.contents()) == toHex(packet(reply)));
    }
  }
  SECTION("ARP request from a node address, broadcast, as scapy builds it") {
    Buffer out;
    REQUIRE(buildArpRequest(kPodMac, kPodV4, kGwV4, eth::kBroadcast, out.buf) == Status::kOk);
    CHECK(toHex(out.contents()) == toHex(packet("arp_request")));
  }
  SECTION("neighbor solicitation from an address and from none (a probe), to the solicited-node group") {
    Buffer out;
    REQUIRE(buildNeighborSolicit(kPodMac, kPodV6, kGwV6, eth::kBroadcast, out.buf) == Status::kOk);
    CHECK(toHex(out.contents()) == toHex(packet("icmpv6_ns")));
    REQUIRE(buildNeighborProbe(kPodMac, kGwV6, out.buf) == Status::kOk);
    CHECK(toHex(out.contents()) == toHex(packet("icmpv6_ns_dad")));
  }
  SECTION("neighbor advertisement, solicited and for duplicate address detection") {
    for (auto [request, reply] : {std::pair{"icmpv6_ns", "icmpv6_na"}, {"icmpv6_ns_dad", "icmpv6_na_dad"}}) {
      INFO(request);
      const auto in = packet(request);
      Buffer out;
      REQUIRE(buildNeighborAdvert(in, parseOk(in), kGwMac, out.buf) == Status::kOk);
      CHECK(toHex(out.contents()) == toHex(packet(reply)));
    }
  }
  SECTION("ICMP fragmentation needed") {
    const auto in = packet("big_ipv4_tcp");
    Buffer out;
    REQUIRE(buildIcmpFragNeeded(in, parseOk(in), kGwMac, kGwV4, 1400, out.buf) == Status::kOk);
    CHECK(toHex(out.contents()) == toHex(packet("icmp_frag_needed")));
  }
  SECTION("refusals of a service without endpoints: ICMP port unreachable and TCP reset, from the service") {
    for (auto [request, reply] : {std::pair{"svc_ipv4_udp", "icmp_port_unreachable"},
                                  {"svc_ipv6_udp", "icmpv6_port_unreachable"}}) {
      INFO(request);
      const auto in = packet(request);
      Buffer out;
      REQUIRE(buildIcmpPortUnreachable(in, parseOk(in), kGwMac, out.buf) == Status::kOk);
      CHECK(toHex(out.contents()) == toHex(packet(reply)));
    }
    for (auto [request, reply] : {std::pair{"svc_ipv4_tcp_syn", "tcp_rst_for_syn"},
                                  {"svc_ipv4_tcp_ack", "tcp_rst_for_ack"},
                                  {"svc_ipv6_tcp_syn", "tcp6_rst_for_syn"}}) {
      INFO(request);
      const auto in = packet(request);
      Buffer out;
      REQUIRE(buildTcpReset(in, parseOk(in), kGwMac, out.buf) == Status::kOk);
      CHECK(toHex(out.contents()) == toHex(packet(reply)));
    }
    // A reset is never answered, nor an ICMP error.
    const auto rst = packet("tcp_rst_for_syn");
    Buffer out;
    CHECK(buildTcpReset(rst, parseOk(rst), kGwMac, out.buf) == Status::kUnsupported);
    const auto unreachable = packet("icmp_port_unreachable");
    CHECK(buildIcmpPortUnreachable(unreachable, parseOk(unreachable), kGwMac, out.buf) == Status::kUnsupported);
  }
  SECTION("ICMPv6 packet too big, quoting up to 1280 bytes") {
    const auto in = packet("big_ipv6_udp");
    Buffer out;
    REQUIRE(buildIcmp6PacketTooBig(in, parseOk(in), kGwMac, kGwV6, 1400, out.buf) == Status::kOk);
    CHECK(out.buf.size() == 14 + 1280);
    CHECK(toHex(out.contents()) == toHex(packet("icmpv6_packet_too_big")));
  }
}

TEST_CASE("replies are valid packets that parse and verify") {
  struct Case {
    const char* request;
    std::function<Status(std::span<const uint8_t>, const ParsedPacket&, PacketBuffer&)> build;
  };
  const Case cases[] = {
      {"vlan_arp_request", [](auto in, auto& p, auto& out) { return buildArpReply(in, p, kGwMac, out); }},
      {"icmpv6_ns", [](auto in, auto& p, auto& out) { return buildNeighborAdvert(in, p, kGwMac, out); }},
      {"big_ipv4_tcp",
       [](auto in, auto& p, auto& out) { return buildIcmpFragNeeded(in, p, kGwMac, kGwV4, 1400, out); }},
      {"big_ipv6_udp",
       [](auto in, auto& p, auto& out) { return buildIcmp6PacketTooBig(in, p, kGwMac, kGwV6, 1280, out); }},
  };
  for (const Case& c : cases) {
    INFO(c.request);
    const auto in = packet(c.request);
    Buffer out;
    REQUIRE(c.build(in, parseOk(in), out.buf) == Status::kOk);
    const auto reply = out.contents();
    const ParsedPacket p = parseOk(reply);
    if (p.l3 == L3Type::kIpv4) CHECK(verifyIpv4Checksum(reply, p) == Status::kOk);
    if (p.l4 != L4Type::kNone) CHECK(verifyL4Checksum(reply, p) == Status::kOk);
    if (p.l4 == L4Type::kIcmpv6 && icmp6::type(reply.data() + p.l4_offset) == icmp6::kTypeNeighborAdvert) {
      NeighborMessage m;
      CHECK(parseNeighborMessage(reply, p, m) == Status::kOk);
    }

    // Too little room: kNoRoom and the buffer untouched.
    std::array<uint8_t, 40> small{};
    small.fill(0x5a);
    PacketBuffer tiny(small.data(), small.size(), 0, 10);
    CHECK(c.build(in, parseOk(in), tiny) == Status::kNoRoom);
    CHECK(tiny.size() == 10);
    CHECK(small[0] == 0x5a);
  }
}

TEST_CASE("ARP requests: a unicast probe, refusals, no room") {
  Buffer out;
  REQUIRE(buildArpRequest(kPodMac, kPodV4, kGwV4, kPeerMac, out.buf) == Status::kOk);
  const auto probe = PacketBuilder().ethernet(kPeerMac, kPodMac).arp(arp::kOpRequest, kPodMac, kPodV4, kZeroMac, kGwV4).build();
  CHECK(toHex(out.contents()) == toHex(probe));
  const ParsedPacket p = parseOk(out.contents());
  CHECK(p.l3 == L3Type::kArp);
  // Never from a multicast MAC or from 0.0.0.0 (that is an RFC 5227 probe).
  CHECK(buildArpRequest(eth::kBroadcast, kPodV4, kGwV4, kPeerMac, out.buf) == Status::kUnsupported);
  CHECK(buildArpRequest(kPodMac, 0, kGwV4, kPeerMac, out.buf) == Status::kUnsupported);
  std::array<uint8_t, 40> small{};
  PacketBuffer tiny(small.data(), small.size(), 0, 10);
  CHECK(buildArpRequest(kPodMac, kPodV4, kGwV4, kPeerMac, tiny) == Status::kNoRoom);
  CHECK(tiny.size() == 10);
}

TEST_CASE("neighbor solicitations: a unicast probe, refusals, no room") {
  Buffer out;
  REQUIRE(buildNeighborSolicit(kPodMac, kPodV6, kGwV6, kPeerMac, out.buf) == Status::kOk);
  // To the neighbour's own address and MAC; a receiver accepts it (RFC 4861 §7.1.1).
  const ParsedPacket p = parseOk(out.contents());
  REQUIRE(p.l4 == L4Type::kIcmpv6);
  NeighborMessage msg;
  REQUIRE(parseNeighborMessage(out.contents(), p, msg) == Status::kOk);
  CHECK(eth::dst(out.contents().data()) == kPeerMac);
  CHECK(std::memcmp(out.contents().data() + p.l3_offset + ipv6::kDstOffset, kGwV6.data(), 16) == 0);
  CHECK(std::memcmp(out.contents().data() + msg.target_offset, kGwV6.data(), 16) == 0);
  CHECK(msg.has_link_addr);
  CHECK(msg.link_addr == kPodMac);
  // Never from a multicast MAC, from :: (that is a probe) or a group, nor for a group.
  const Ipv6Address unspecified{};
  CHECK(buildNeighborSolicit(eth::kBroadcast, kPodV6, kGwV6, kPeerMac, out.buf) == Status::kUnsupported);
  CHECK(buildNeighborSolicit(kPodMac, unspecified, kGwV6, kPeerMac, out.buf) == Status::kUnsupported);
  CHECK(buildNeighborSolicit(kPodMac, ipv6::kAllNodes, kGwV6, kPeerMac, out.buf) == Status::kUnsupported);
  CHECK(buildNeighborSolicit(kPodMac, kPodV6, ipv6::kAllNodes, kPeerMac, out.buf) == Status::kUnsupported);
  CHECK(buildNeighborProbe(eth::kBroadcast, kGwV6, out.buf) == Status::kUnsupported);
  CHECK(buildNeighborProbe(kPodMac, unspecified, out.buf) == Status::kUnsupported);
  std::array<uint8_t, 70> small{};  // a solicitation is 86 bytes, a probe 78
  PacketBuffer tiny(small.data(), small.size(), 0, 10);
  CHECK(buildNeighborSolicit(kPodMac, kPodV6, kGwV6, kPeerMac, tiny) == Status::kNoRoom);
  CHECK(buildNeighborProbe(kPodMac, kGwV6, tiny) == Status::kNoRoom);
  CHECK(tiny.size() == 10);
}

TEST_CASE("replies refuse what must never be answered") {
  Buffer out;
  SECTION("an ARP reply is not a request") {
    const auto in = packet("arp_reply");
    CHECK(buildArpReply(in, parseOk(in), kGwMac, out.buf) == Status::kUnsupported);
    auto multicast_sender = packet("arp_request");
    multicast_sender[22] = 0x01;  // sender hardware address 01:00:...
    CHECK(buildArpReply(multicast_sender, parseOk(multicast_sender), kGwMac, out.buf) == Status::kUnsupported);
    const auto ip = packet("eth_ipv4_udp");
    CHECK(buildArpReply(ip, parseOk(ip), kGwMac, out.buf) == Status::kUnsupported);
  }
  SECTION("a neighbor advertisement is not a solicitation") {
    const auto in = packet("icmpv6_na");
    CHECK(buildNeighborAdvert(in, parseOk(in), kGwMac, out.buf) == Status::kUnsupported);
  }
  SECTION("fragmentation needed only for DF datagrams that are not ICMP errors") {
    auto no_df = packet("big_ipv4_tcp");
    no_df[20] = 0;  // clear DF (the checksum does not matter here)
    CHECK(buildIcmpFragNeeded(no_df, parseOk(no_df), kGwMac, kGwV4, 1400, out.buf) == Status::kUnsupported);
    const auto error = packet("icmp_frag_needed");
    auto error_df = error;
    error_df[20] = 0x40;
    CHECK(buildIcmpFragNeeded(error_df, parseOk(error_df), kGwMac, kGwV4, 1400, out.buf) == Status::kUnsupported);
    const auto ok = packet("big_ipv4_tcp");
    CHECK(buildIcmpFragNeeded(ok, parseOk(ok), kGwMac, kGwV4, 67, out.buf) == Status::kUnsupported);
    auto multicast_src = ok;
    multicast_src[26] = 224;
    CHECK(buildIcmpFragNeeded(multicast_src, parseOk(multicast_src), kGwMac, kGwV4, 1400, out.buf) ==
          Status::kUnsupported);
    auto broadcast_dst = ok;
    std::fill(broadcast_dst.begin() + 30, broadcast_dst.begin() + 34, 0xff);
    CHECK(buildIcmpFragNeeded(broadcast_dst, parseOk(broadcast_dst), kGwMac, kGwV4, 1400, out.buf) ==
          Status::kUnsupported);
    const auto v6 = packet("big_ipv6_udp");
    CHECK(buildIcmpFragNeeded(v6, parseOk(v6), kGwMac, kGwV4, 1400, out.buf) == Status::kUnsupported);
  }
  SECTION("packet too big never answers an ICMPv6 error or an unspecified source") {
    const auto error = packet("icmpv6_packet_too_big");
    CHECK(buildIcmp6PacketTooBig(error, parseOk(error), kGwMac, kGwV6, 1400, out.buf) == Status::kUnsupported);
    const auto dad = packet("icmpv6_ns_dad");
    CHECK(buildIcmp6PacketTooBig(dad, parseOk(dad), kGwMac, kGwV6, 1400, out.buf) == Status::kUnsupported);
    const auto ok = packet("big_ipv6_udp");
    CHECK(buildIcmp6PacketTooBig(ok, parseOk(ok), kGwMac, kGwV6, 1279, out.buf) == Status::kUnsupported);
  }
  CHECK(out.buf.size() == 0);
}

TEST_CASE("ICMP errors quote only what the offending packet has") {
  // A short datagram: the quote is the whole datagram, not 28 bytes.
  const auto small = PacketBuilder()
                         .ethernet(kGwMac, kPodMac)
                         .ipv4({.src = kPodV4, .dst = kPeerV4, .frag_field = ipv4::kFlagDf, .protocol = 47})
                         .payload(pattern(3))
                         .build();
  Buffer out;
  REQUIRE(buildIcmpFragNeeded(small, parseOk(small), kGwMac, kGwV4, 576, out.buf) == Status::kOk);
  const auto reply = out.contents();
  CHECK(reply.size() == 14 + 20 + 8 + 23);
  CHECK(std::equal(reply.begin() + 42, reply.end(), small.begin() + 14));
  const ParsedPacket p = parseOk(reply);
  CHECK(verifyL4Checksum(reply, p) == Status::kOk);
  CHECK(icmp::nextHopMtu(reply.data() + p.l4_offset) == 576);
}
