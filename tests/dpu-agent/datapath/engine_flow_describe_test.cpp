// flow::describeMatch / describeActions: the dump-flows text of every kind of
// match and action (pure; no EAL).
#include <catch2/catch.hpp>

#include "flow/flow.h"
#include "overlay/geneve.h"
#include "overlay/packet_builder.h"

using namespace dpu;

namespace {
flow::FlowMatch matchOf(const std::vector<uint8_t>& frame, uint32_t in_port) {
  overlay::ParsedPacket p;
  REQUIRE(overlay::parsePacket(frame, p) == overlay::Status::kOk);
  flow::FlowMatch m;
  m.key = overlay::extractFlowKey(frame, p, in_port);
  return m;
}
const overlay::MacAddress kA = {0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05};
const overlay::MacAddress kR = {0x0a, 0x58, 0xa9, 0xfe, 0x00, 0x01};
}  // namespace

TEST_CASE("describeMatch: IPv4, IPv6, ARP, ICMP and tunnel metadata", "[engine]") {
  auto udp = overlay::PacketBuilder().ethernet(kR, kA).ipv4({.src = 0x0af40105, .dst = 0x0af40207}).udp(1234, 80).build();
  CHECK(flow::describeMatch(matchOf(udp, 3)) ==
        "in_port=3,eth_src=0a:58:0a:f4:01:05,eth_dst=0a:58:a9:fe:00:01,ipv4,nw_src=10.244.1.5,nw_dst=10.244.2.7,"
        "udp,tp_src=1234,tp_dst=80");
  overlay::Ipv6Address s{0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, d{};
  d[15] = 1;
  auto tcp6 = overlay::PacketBuilder().ethernet(kR, kA).ipv6({.src = s, .dst = d}).tcp({.src_port = 1, .dst_port = 2}).build();
  CHECK(flow::describeMatch(matchOf(tcp6, 1)) ==
        "in_port=1,eth_src=0a:58:0a:f4:01:05,eth_dst=0a:58:a9:fe:00:01,ipv6,ipv6_src=fd00:10::5,ipv6_dst=::1,tcp,"
        "tp_src=1,tp_dst=2");
  auto arp = overlay::PacketBuilder().ethernet(overlay::eth::kBroadcast, kA).arp(1, kA, 0x0af40105, {}, 0x0af40101).build();
  CHECK(flow::describeMatch(matchOf(arp, 2)).find("arp,arp_op=1,arp_spa=10.244.1.5,arp_tpa=10.244.1.1") !=
        std::string::npos);
  auto echo = overlay::PacketBuilder().ethernet(kR, kA).ipv4({.src = 1, .dst = 2}).icmpEcho(8, 77, 1).build();
  CHECK(flow::describeMatch(matchOf(echo, 2)).find("icmp,icmp_type=8,icmp_code=0,icmp_id=77") != std::string::npos);
  auto m = matchOf(udp, 0);
  m.tunnel.family = 4;
  m.tunnel.remote_ip = {192, 168, 100, 2};
  m.tunnel.local_ip = {192, 168, 100, 1};
  m.tunnel.vni = 10;
  m.tunnel.ingress_port_key = 9;
  m.tunnel.egress_port_key = 0x8000;
  CHECK(flow::describeMatch(m).rfind("tun_src=192.168.100.2,tun_dst=192.168.100.1,tun_id=10,"
                                     "tun_ovn(ingress=9,egress=32768),in_port=0,",
                                     0) == 0);
}

TEST_CASE("describeActions: every action type", "[engine]") {
  std::array<uint8_t, 4> data;
  overlay::GeneveOption opt;
  REQUIRE(overlay::makeOvnOption({1, 0x8000}, data, opt) == overlay::Status::kOk);
  overlay::GeneveTunnel t;
  t.dst_mac = {2, 0, 0, 0, 0, 2};
  t.src_ip = {192, 168, 100, 1};
  t.dst_ip = {192, 168, 100, 2};
  t.vni = 20;
  t.options = std::span<const overlay::GeneveOption>(&opt, 1);
  overlay::GeneveEncapTemplate tmpl;
  REQUIRE(tmpl.build(t) == overlay::Status::kOk);

  std::vector<flow::FlowAction> a(12);
  a[0].type = flow::ActionType::kGeneveDecap;
  a[0].decap_bytes = 58;
  a[1].type = flow::ActionType::kDecTtl;
  a[2].type = flow::ActionType::kSetEthSrc;
  a[2].mac = kR;
  a[3].type = flow::ActionType::kSetEthDst;
  a[3].mac = kA;
  a[4].type = flow::ActionType::kGeneveEncap;
  a[4].encap_header.assign(tmpl.bytes().begin(), tmpl.bytes().end());
  a[5].type = flow::ActionType::kSetIpv4Src;
  a[5].ipv4 = 0x0100000a;  // 10.0.0.1 in network order on a little-endian host
  a[6].type = flow::ActionType::kSetL4Dst;
  a[6].l4_port = 8080;
  a[7].type = flow::ActionType::kEspEncrypt;
  a[7].sa_index = 4;
  a[8].type = flow::ActionType::kOutput;
  a[8].port = 3;
  a[9].type = flow::ActionType::kSetL4Src;
  a[9].l4_port = 1;
  a[10].type = flow::ActionType::kEspDecrypt;
  a[11].type = flow::ActionType::kDrop;
  a[11].drop_reason = 7;
  const std::string text = flow::describeActions(a);
  CHECK(text.find("geneve_decap(58),dec_ttl,set_eth_src:0a:58:a9:fe:00:01,set_eth_dst:0a:58:0a:f4:01:05,") == 0);
  CHECK(text.find("geneve_encap(src=192.168.100.1,remote=192.168.100.2,vni=20,ingress=1,egress=32768,"
                  "next_hop=02:00:00:00:00:02)") != std::string::npos);
  CHECK(text.find("set_tp_dst:8080,esp_encrypt(sa=4),output:3,set_tp_src:1,esp_decrypt(sa=0),drop(reason=7)") !=
        std::string::npos);
  CHECK(flow::describeActions({}) == "drop");
}
