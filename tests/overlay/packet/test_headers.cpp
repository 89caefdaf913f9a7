// Header accessors (headers.h): every getter reads the field scapy wrote into
// a golden packet, and every setter writes back what the getter then reads.
#include <catch2/catch.hpp>

#include <vector>

#include "overlay/headers.h"
#include "packet_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

TEST_CASE("Ethernet and VLAN accessors") {
  auto f = packet("qinq_ipv4_udp");
  CHECK(eth::dst(f.data()) == kPeerMac);
  CHECK(eth::src(f.data()) == kPodMac);
  CHECK(eth::type(f.data()) == eth::kTypeQinq);
  const uint8_t* outer = f.data() + 12;
  CHECK(vlan::tpid(outer) == eth::kTypeQinq);
  CHECK(vlan::vid(outer) == 10);
  CHECK(vlan::tpid(outer + 4) == eth::kTypeVlan);
  CHECK(vlan::vid(outer + 4) == 20);
  CHECK(vlan::isTpid(eth::kTypeVlan));
  CHECK_FALSE(vlan::isTpid(eth::kTypeIpv4));

  eth::setDst(f.data(), kGwMac);
  eth::setSrc(f.data(), kPeerMac);
  vlan::setTci(f.data() + 16, 0xe00f);
  CHECK(eth::dst(f.data()) == kGwMac);
  CHECK(eth::src(f.data()) == kPeerMac);
  CHECK(vlan::pcp(f.data() + 16) == 7);
  CHECK(vlan::vid(f.data() + 16) == 15);
  CHECK(eth::ipv6MulticastMac(v6("ff02::1:ff00:fe").data()) == MacAddress{0x33, 0x33, 0xff, 0, 0, 0xfe});
}

TEST_CASE("ARP accessors") {
  auto f = packet("arp_request");
  const uint8_t* a = f.data() + 14;
  CHECK(arp::htype(a) == arp::kHtypeEthernet);
  CHECK(arp::ptype(a) == eth::kTypeIpv4);
  CHECK(arp::hlen(a) == 6);
  CHECK(arp::plen(a) == 4);
  CHECK(arp::op(a) == arp::kOpRequest);
  CHECK(arp::senderMac(a) == kPodMac);
  CHECK(arp::senderIp(a) == v4("10.0.0.1"));
  CHECK(arp::targetMac(a) == kZeroMac);
  CHECK(arp::targetIp(a) == v4("10.0.0.254"));
}

TEST_CASE("IPv4 accessors, options included") {
  auto f = packet("eth_ipv4_options_udp");
  uint8_t* ip = f.data() + 14;
  CHECK(ipv4::version(ip) == 4);
  CHECK(ipv4::ihl(ip) == 9);
  CHECK(ipv4::headerLen(ip) == 36);
  CHECK(ipv4::optionsLen(ip) == 16);
  CHECK(ipv4::options(ip)[0] == 0x94);  // router alert
  CHECK(ipv4::options(ip)[4] == 7);     // record route
  CHECK(ipv4::totalLength(ip) == 36 + 8 + 13);
  CHECK(ipv4::ttl(ip) == 64);
  CHECK(ipv4::protocol(ip) == ipproto::kUdp);
  CHECK(ipv4::src(ip) == v4("10.0.0.1"));
  CHECK(ipv4::dst(ip) == v4("10.0.0.2"));
  CHECK_FALSE(ipv4::dontFragment(ip));

  const auto tcp4 = packet("eth_ipv4_tcp_options");
  CHECK(ipv4::dontFragment(tcp4.data() + 14));
  const auto frag = packet("ipv4_frag_later_udp");
  CHECK(ipv4::fragOffset(frag.data() + 14) == 4);
  CHECK(ipv4::moreFragments(frag.data() + 14));
  CHECK(ipv4::id(frag.data() + 14) == 0x55);

  ipv4::setTtl(ip, 9);
  ipv4::setTos(ip, 0xb8);
  ipv4::setId(ip, 0xbeef);
  ipv4::setFragField(ip, ipv4::kFlagDf | 3);
  ipv4::setSrc(ip, 0x01020304);
  ipv4::setDst(ip, 0x05060708);
  CHECK(ipv4::ttl(ip) == 9);
  CHECK(ipv4::tos(ip) == 0xb8);
  CHECK(ipv4::id(ip) == 0xbeef);
  CHECK(ipv4::fragOffset(ip) == 3);
  CHECK(ipv4::src(ip) == 0x01020304);
  CHECK(ipv4::dst(ip) == 0x05060708);
  CHECK(ipv4::isMulticast(v4("239.1.2.3")));
  CHECK_FALSE(ipv4::isMulticast(v4("10.0.0.1")));
}

TEST_CASE("IPv6 and extension header accessors") {
  auto f = packet("eth_ipv6_ext_udp");
  uint8_t* ip = f.data() + 14;
  CHECK(ipv6::version(ip) == 6);
  CHECK(ipv6::payloadLength(ip) == 24 + 8 + 13);
  CHECK(ipv6::nextHeader(ip) == ipproto::kHopByHop);
  CHECK(ipv6::hopLimit(ip) == 64);
  CHECK(ipv6::srcAddress(ip) == v6("fd00::1"));
  CHECK(ipv6::dstAddress(ip) == v6("fd00::2"));
  const uint8_t* hbh = ip + 40;
  CHECK(ipv6::extNextHeader(hbh) == ipproto::kRouting);
  CHECK(ipv6::extLength(ipproto::kHopByHop, hbh) == 8);
  const uint8_t* rh = hbh + 8;
  CHECK(ipv6::routingType(rh) == 0);
  CHECK(ipv6::segmentsLeft(rh) == 0);

  const auto ah = packet("eth_ipv6_ah_tcp");
  CHECK(ipv6::extLength(ipproto::kAh, ah.data() + 62) == 24);
  const auto frag = packet("eth_ipv6_frag_first_udp");
  CHECK(ipv6::extLength(ipproto::kFragment, frag.data() + 54) == 8);
  CHECK(ipv6::fragOffset(frag.data() + 54) == 0);
  CHECK(ipv6::fragMore(frag.data() + 54));
  CHECK(ipv6::fragId(frag.data() + 54) == 0xabcdef);

  ipv6::setVersionClassFlow(ip, 0xab, 0x12345);
  CHECK(ipv6::version(ip) == 6);
  CHECK(ipv6::trafficClass(ip) == 0xab);
  CHECK(ipv6::flowLabel(ip) == 0x12345);
  ipv6::setHopLimit(ip, 1);
  CHECK(ipv6::hopLimit(ip) == 1);
  CHECK(ipv6::isMulticast(ipv6::kAllNodes.data()));
  CHECK(ipv6::isUnspecified(Ipv6Address{}.data()));
  CHECK_FALSE(ipv6::isUnspecified(ipv6::kAllNodes.data()));
}

TEST_CASE("ICMP, ICMPv6 and neighbor discovery accessors") {
  const auto echo = packet("vlan_ipv4_icmp_echo");
  const uint8_t* h = echo.data() + 38;
  CHECK(icmp::type(h) == icmp::kTypeEchoRequest);
  CHECK(icmp::code(h) == 0);
  CHECK(icmp::echoId(h) == 0x1234);
  CHECK(icmp::echoSeq(h) == 1);
  CHECK(icmp::isEcho(icmp::type(h)));

  const auto err = packet("icmp_frag_needed");
  CHECK(icmp::type(err.data() + 34) == icmp::kTypeDestUnreachable);
  CHECK(icmp::code(err.data() + 34) == icmp::kCodeFragNeeded);
  CHECK(icmp::nextHopMtu(err.data() + 34) == 1400);
  CHECK(icmp::isError(icmp::kTypeDestUnreachable));

  const auto ptb = packet("icmpv6_packet_too_big");
  CHECK(icmp6::type(ptb.data() + 54) == icmp6::kTypePacketTooBig);
  CHECK(icmp6::mtu(ptb.data() + 54) == 1400);
  CHECK(icmp6::isError(icmp6::kTypePacketTooBig));
  CHECK_FALSE(icmp6::isError(icmp6::kTypeEchoRequest));

  const auto na = packet("icmpv6_na");
  const uint8_t* n = na.data() + 54;
  CHECK(icmp6::type(n) == icmp6::kTypeNeighborAdvert);
  CHECK(icmp6::naFlags(n) == (icmp6::kNaFlagRouter | icmp6::kNaFlagSolicited | icmp6::kNaFlagOverride));
  CHECK(std::equal(icmp6::ndTarget(n), icmp6::ndTarget(n) + 16, v6("fd00::fe").begin()));
  CHECK(n[icmp6::kNdOptionsOffset] == icmp6::kNdOptTargetLinkAddr);

  const auto e6 = packet("eth_ipv6_icmpv6_echo");
  CHECK(icmp6::echoId(e6.data() + 54) == 0x4321);
  CHECK(icmp6::echoSeq(e6.data() + 54) == 2);
}

TEST_CASE("UDP and TCP accessors, options included") {
  auto u = packet("eth_ipv4_udp");
  uint8_t* h = u.data() + 34;
  CHECK(udp::srcPort(h) == 1234);
  CHECK(udp::dstPort(h) == 5678);
  CHECK(udp::length(h) == 8 + 13);
  udp::setSrcPort(h, 1);
  udp::setDstPort(h, 2);
  CHECK(udp::srcPort(h) == 1);
  CHECK(udp::dstPort(h) == 2);

  auto t = packet("eth_ipv4_tcp_options");
  uint8_t* th = t.data() + 34;
  CHECK(tcp::srcPort(th) == 40000);
  CHECK(tcp::dstPort(th) == 80);
  CHECK(tcp::seq(th) == 1000);
  CHECK(tcp::ack(th) == 0);
  CHECK(tcp::dataOffset(th) == 10);
  CHECK(tcp::headerLen(th) == 40);
  CHECK(tcp::flags(th) == tcp::kFlagSyn);
  CHECK(tcp::window(th) == 65535);
  CHECK(th[20] == tcp::kOptionMss);
  CHECK(load16(th + 22) == 1460);
  tcp::setSeq(th, 0xdeadbeef);
  tcp::setAck(th, 7);
  tcp::setFlags(th, tcp::kFlagAck | tcp::kFlagFin);
  tcp::setWindow(th, 9);
  tcp::setUrgentPointer(th, 3);
  CHECK(tcp::seq(th) == 0xdeadbeef);
  CHECK(tcp::ack(th) == 7);
  CHECK(tcp::flags(th) == (tcp::kFlagAck | tcp::kFlagFin));
  CHECK(tcp::window(th) == 9);
  CHECK(tcp::urgentPointer(th) == 3);
}
