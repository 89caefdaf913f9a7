// The rte_flow translation, checked field by field for every kind of flow:
// the item array, the spec/mask values (big-endian where rte_flow says so),
// the action array with its configurations, and the refusals with reasons.
// No EAL and no device: buildRteFlowRule is pure.
#include <catch2/catch.hpp>

#include <rte_byteorder.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "flows.h"
#include "offload/rte_flow_rule.h"
#include "overlay/flow_key.h"

using namespace dpu::offload;
using namespace dpu::offload::fixtures;

namespace {

PortMap ports() {
  PortMap p;
  p.add(kUplink, 10);  // ethdev ids differ from datapath ids on purpose
  p.add(kVf1, 11);
  p.add(kVf2, 12);
  p.add(kHostPf, 13);
  return p;
}

template <typename T>
const T& spec(const rte_flow_item* item) {
  REQUIRE(item != nullptr);
  REQUIRE(item->spec != nullptr);
  return *static_cast<const T*>(item->spec);
}
template <typename T>
const T& mask(const rte_flow_item* item) {
  REQUIRE(item != nullptr);
  REQUIRE(item->mask != nullptr);
  return *static_cast<const T*>(item->mask);
}
template <typename T>
const T& conf(const rte_flow_action* action) {
  REQUIRE(action != nullptr);
  REQUIRE(action->conf != nullptr);
  return *static_cast<const T*>(action->conf);
}

RteFlowRule build(const dpu::flow::FlowSpec& f, const RteFlowRuleOptions& o = {}) {
  auto r = buildRteFlowRule(f, ports(), o);
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string refusal(const dpu::flow::FlowSpec& f) {
  auto r = buildRteFlowRule(f, ports());
  REQUIRE_FALSE(r.ok());
  return r.error();
}

bool sameMac(const rte_ether_addr& a, const Mac& m) { return std::memcmp(a.addr_bytes, m.data(), 6) == 0; }
bool allOnes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != 0xff) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("local VF to VF: represented port, exact 5-tuple, MAC rewrite, TTL, output", "[rte_flow]") {
  const auto flow = localFlow();
  const RteFlowRule r = build(flow);
  CHECK(r.attr.transfer == 1);
  CHECK(r.attr.group == 1);
  CHECK(r.attr.priority == 1);
  CHECK(r.attr.ingress == 0);
  CHECK(r.attr.egress == 0);
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 UDP END");
  CHECK(describeActions(r) == "DEC_TTL SET_MAC_SRC SET_MAC_DST COUNT REPRESENTED_PORT END");

  const auto* port = r.item(RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT);
  CHECK(spec<rte_flow_item_ethdev>(port).port_id == 11);
  CHECK(mask<rte_flow_item_ethdev>(port).port_id == 0xffff);

  const auto* eth = r.item(RTE_FLOW_ITEM_TYPE_ETH);
  CHECK(sameMac(spec<rte_flow_item_eth>(eth).hdr.src_addr, kPod1Mac));
  CHECK(sameMac(spec<rte_flow_item_eth>(eth).hdr.dst_addr, kGatewayMac));
  CHECK(spec<rte_flow_item_eth>(eth).hdr.ether_type == rte_cpu_to_be_16(0x0800));
  CHECK(mask<rte_flow_item_eth>(eth).hdr.ether_type == 0xffff);
  CHECK(allOnes(&mask<rte_flow_item_eth>(eth).hdr.src_addr, 6));
  CHECK(allOnes(&mask<rte_flow_item_eth>(eth).hdr.dst_addr, 6));
  CHECK(spec<rte_flow_item_eth>(eth).has_vlan == 0);
  CHECK(mask<rte_flow_item_eth>(eth).has_vlan == 1);

  const auto* ip = r.item(RTE_FLOW_ITEM_TYPE_IPV4);
  const uint8_t src[4] = {10, 244, 1, 5}, dst[4] = {10, 244, 2, 7};
  CHECK(std::memcmp(&spec<rte_flow_item_ipv4>(ip).hdr.src_addr, src, 4) == 0);
  CHECK(std::memcmp(&spec<rte_flow_item_ipv4>(ip).hdr.dst_addr, dst, 4) == 0);
  CHECK(spec<rte_flow_item_ipv4>(ip).hdr.next_proto_id == 17);
  CHECK(mask<rte_flow_item_ipv4>(ip).hdr.src_addr == 0xffffffff);
  CHECK(mask<rte_flow_item_ipv4>(ip).hdr.dst_addr == 0xffffffff);
  CHECK(mask<rte_flow_item_ipv4>(ip).hdr.next_proto_id == 0xff);
  // Not a fragment: MF and offset zero under mask.
  CHECK(spec<rte_flow_item_ipv4>(ip).hdr.fragment_offset == 0);
  CHECK(mask<rte_flow_item_ipv4>(ip).hdr.fragment_offset == rte_cpu_to_be_16(0x3fff));
  // TTL is not part of the match (the TTL guards handle expiry).
  CHECK(mask<rte_flow_item_ipv4>(ip).hdr.time_to_live == 0);

  const auto* udp = r.item(RTE_FLOW_ITEM_TYPE_UDP);
  CHECK(spec<rte_flow_item_udp>(udp).hdr.src_port == rte_cpu_to_be_16(40000));
  CHECK(spec<rte_flow_item_udp>(udp).hdr.dst_port == rte_cpu_to_be_16(53));
  CHECK(mask<rte_flow_item_udp>(udp).hdr.src_port == 0xffff);
  CHECK(mask<rte_flow_item_udp>(udp).hdr.dst_port == 0xffff);

  CHECK(r.action(RTE_FLOW_ACTION_TYPE_DEC_TTL)->conf == nullptr);
  CHECK(std::memcmp(conf<rte_flow_action_set_mac>(r.action(RTE_FLOW_ACTION_TYPE_SET_MAC_SRC)).mac_addr,
                    kGatewayMac.data(), 6) == 0);
  CHECK(std::memcmp(conf<rte_flow_action_set_mac>(r.action(RTE_FLOW_ACTION_TYPE_SET_MAC_DST)).mac_addr,
                    kPod2Mac.data(), 6) == 0);
  CHECK(conf<rte_flow_action_ethdev>(r.action(RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT)).port_id == 12);
  CHECK(r.action(RTE_FLOW_ACTION_TYPE_COUNT) != nullptr);
  CHECK(r.age == nullptr);
}

TEST_CASE("host PF <-> uplink: the host's traffic bridged as one represented-port output, untouched",
          "[rte_flow][north-south]") {
  struct Way {
    uint32_t from, to;
    uint16_t in_ethdev, out_ethdev;
  };
  for (const Way w : {Way{kHostPf, kUplink, 13, 10}, Way{kUplink, kHostPf, 10, 13}}) {
    INFO("from " << w.from << " to " << w.to);
    const auto flow = bridgedFlow(w.from, w.to);
    const RteFlowRule r = build(flow);
    CHECK(r.attr.transfer == 1);
    CHECK(r.attr.group == 1);
    CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 TCP END");
    // No rewrite: nothing but the counter and the output.
    CHECK(describeActions(r) == "COUNT REPRESENTED_PORT END");
    CHECK(spec<rte_flow_item_ethdev>(r.item(RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT)).port_id == w.in_ethdev);
    CHECK(conf<rte_flow_action_ethdev>(r.action(RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT)).port_id == w.out_ethdev);
    const auto* eth = r.item(RTE_FLOW_ITEM_TYPE_ETH);
    CHECK(sameMac(spec<rte_flow_item_eth>(eth).hdr.src_addr, flow.match.key.eth_src));
    CHECK(sameMac(spec<rte_flow_item_eth>(eth).hdr.dst_addr, flow.match.key.eth_dst));
    CHECK(allOnes(&mask<rte_flow_item_eth>(eth).hdr.dst_addr, 6));
    const auto* tcp = r.item(RTE_FLOW_ITEM_TYPE_TCP);
    CHECK(spec<rte_flow_item_tcp>(tcp).hdr.src_port == rte_cpu_to_be_16(flow.match.key.l4_src));
    CHECK(spec<rte_flow_item_tcp>(tcp).hdr.dst_port == rte_cpu_to_be_16(flow.match.key.l4_dst));
  }
  // Its ARP stays in software (the slow path learns from every one): not an IP flow.
  auto arp = bridgedFlow(kHostPf, kUplink);
  arp.match.key.ethertype = dpu::overlay::eth::kTypeArp;
  CHECK_THAT(refusal(arp), Catch::Contains("ethertype 0x0806 is not offloaded"));
}

TEST_CASE("the largest rule fits its arena", "[rte_flow]") {
  auto f = decapFlow(true, true);
  // Longest encap template (options fill 252 bytes) after a full set of rewrites.
  FlowAction encap = fixtures::act(ActionType::kGeneveEncap);
  encap.encap_header = encapTemplate();
  encap.encap_header.resize(14 + 20 + 8 + 8 + 252);
  encap.encap_header[42] = 252 / 4;  // Geneve Opt Len
  f.actions = {f.actions[0]};
  while (f.actions.size() < 14) f.actions.push_back(setMac(ActionType::kSetEthSrc, kGatewayMac));
  f.actions.push_back(encap);
  f.actions.push_back(output(kUplink));
  RteFlowRuleOptions o;
  o.age_timeout_s = 10;
  const RteFlowRule r = build(f, o);
  CHECK(r.arena_used < RteFlowRule::kArenaBytes);
  CHECK(conf<rte_flow_action_raw_encap>(r.action(RTE_FLOW_ACTION_TYPE_RAW_ENCAP)).size == 302);
}

TEST_CASE("a moved rule keeps its arrays valid", "[rte_flow]") {
  RteFlowRule a = build(localFlow());
  const void* eth_spec = a.item(RTE_FLOW_ITEM_TYPE_ETH)->spec;
  RteFlowRule b = std::move(a);
  CHECK(b.item(RTE_FLOW_ITEM_TYPE_ETH)->spec == eth_spec);
  CHECK(sameMac(spec<rte_flow_item_eth>(b.item(RTE_FLOW_ITEM_TYPE_ETH)).hdr.src_addr, kPod1Mac));
}

TEST_CASE("a VLAN-tagged flow matches the tag and the ethertype inside it", "[rte_flow]") {
  auto flow = localFlow();
  flow.match.key.flags = FlowKey::kFlagOuterVlan;
  flow.match.key.vlan_tci[0] = 0x2064;  // PCP 1, VID 100
  const RteFlowRule r = build(flow);
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH VLAN IPV4 UDP END");
  const auto* eth = r.item(RTE_FLOW_ITEM_TYPE_ETH);
  CHECK(spec<rte_flow_item_eth>(eth).has_vlan == 1);
  CHECK(mask<rte_flow_item_eth>(eth).has_vlan == 1);
  CHECK(mask<rte_flow_item_eth>(eth).hdr.ether_type == 0);
  const auto* vlan = r.item(RTE_FLOW_ITEM_TYPE_VLAN);
  CHECK(spec<rte_flow_item_vlan>(vlan).hdr.vlan_tci == rte_cpu_to_be_16(0x2064));
  CHECK(mask<rte_flow_item_vlan>(vlan).hdr.vlan_tci == 0xffff);
  CHECK(spec<rte_flow_item_vlan>(vlan).hdr.eth_proto == rte_cpu_to_be_16(0x0800));
  CHECK(mask<rte_flow_item_vlan>(vlan).has_more_vlan == 1);
  CHECK(spec<rte_flow_item_vlan>(vlan).has_more_vlan == 0);
}

TEST_CASE("VF to Geneve: RAW_ENCAP carries the template bytes", "[rte_flow]") {
  const auto flow = encapFlow();
  const std::vector<uint8_t> tmpl = encapTemplate();
  REQUIRE(tmpl.size() == 14 + 20 + 8 + 8 + 8);

  SECTION("exactly the template when the source port is not filled") {
    RteFlowRuleOptions o;
    o.fill_source_port = false;
    const RteFlowRule r = build(flow, o);
    CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 UDP END");
    CHECK(describeActions(r) == "DEC_TTL SET_MAC_SRC SET_MAC_DST RAW_ENCAP COUNT REPRESENTED_PORT END");
    const auto& encap = conf<rte_flow_action_raw_encap>(r.action(RTE_FLOW_ACTION_TYPE_RAW_ENCAP));
    REQUIRE(encap.size == tmpl.size());
    CHECK(std::vector<uint8_t>(encap.data, encap.data + encap.size) == tmpl);
    CHECK(encap.preserve == nullptr);
    CHECK(conf<rte_flow_action_ethdev>(r.action(RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT)).port_id == 10);
  }
  SECTION("the template with the flow's Geneve source port, as software encap sends it") {
    RteFlowRuleOptions o;
    o.source_port_seed = 77;
    const RteFlowRule r = build(flow, o);
    const auto& encap = conf<rte_flow_action_raw_encap>(r.action(RTE_FLOW_ACTION_TYPE_RAW_ENCAP));
    REQUIRE(encap.size == tmpl.size());
    std::vector<uint8_t> got(encap.data, encap.data + encap.size);
    const uint16_t sport = dpu::overlay::geneveSourcePort(dpu::overlay::flowHash32(flow.match.key, 77));
    CHECK(got[34] == (sport >> 8));
    CHECK(got[35] == (sport & 0xff));
    CHECK(sport >= 49152);
    got[34] = got[35] = 0;
    CHECK(got == tmpl);
  }
}

TEST_CASE("VF to Geneve with an IPv6 inner flow over an IPv4 underlay", "[rte_flow][ipv6]") {
  const RteFlowRule r = build(encapFlow(/*ipv6_inner=*/true));
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV6 UDP END");
  CHECK(describeActions(r) == "DEC_TTL SET_MAC_SRC SET_MAC_DST RAW_ENCAP COUNT REPRESENTED_PORT END");
}

TEST_CASE("Geneve over an IPv6 underlay stays in software (outer UDP checksum)", "[rte_flow][ipv6]") {
  CHECK_THAT(refusal(encapFlow(false, /*ipv6_outer=*/true)), Catch::Contains("UDP checksum"));
}

TEST_CASE("Geneve decap to VF: outer items, the OVN option, RAW_DECAP of the outer length", "[rte_flow]") {
  const auto flow = decapFlow();
  const RteFlowRule r = build(flow);
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 UDP GENEVE GENEVE_OPT ETH IPV4 UDP END");
  CHECK(describeActions(r) == "RAW_DECAP COUNT REPRESENTED_PORT END");
  CHECK(spec<rte_flow_item_ethdev>(r.item(RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT)).port_id == 10);

  const auto* outer_eth = r.item(RTE_FLOW_ITEM_TYPE_ETH, 0);
  CHECK(spec<rte_flow_item_eth>(outer_eth).hdr.ether_type == rte_cpu_to_be_16(0x0800));
  CHECK(mask<rte_flow_item_eth>(outer_eth).hdr.src_addr.addr_bytes[0] == 0);

  const auto* outer_ip = r.item(RTE_FLOW_ITEM_TYPE_IPV4, 0);
  const uint8_t peer[4] = {192, 168, 0, 2}, local[4] = {192, 168, 0, 1};
  CHECK(std::memcmp(&spec<rte_flow_item_ipv4>(outer_ip).hdr.src_addr, peer, 4) == 0);
  CHECK(std::memcmp(&spec<rte_flow_item_ipv4>(outer_ip).hdr.dst_addr, local, 4) == 0);
  CHECK(spec<rte_flow_item_ipv4>(outer_ip).hdr.next_proto_id == 17);

  const auto* outer_udp = r.item(RTE_FLOW_ITEM_TYPE_UDP, 0);
  CHECK(spec<rte_flow_item_udp>(outer_udp).hdr.dst_port == rte_cpu_to_be_16(6081));
  CHECK(mask<rte_flow_item_udp>(outer_udp).hdr.dst_port == 0xffff);
  CHECK(mask<rte_flow_item_udp>(outer_udp).hdr.src_port == 0);  // the sender's entropy

  const auto* geneve = r.item(RTE_FLOW_ITEM_TYPE_GENEVE);
  const auto& gs = spec<rte_flow_item_geneve>(geneve);
  const auto& gm = mask<rte_flow_item_geneve>(geneve);
  CHECK(gs.vni[0] == 0x12);
  CHECK(gs.vni[1] == 0x34);
  CHECK(gs.vni[2] == 0x56);
  CHECK((gm.vni[0] & gm.vni[1] & gm.vni[2]) == 0xff);
  CHECK(gs.protocol == rte_cpu_to_be_16(0x6558));
  CHECK(gm.protocol == 0xffff);
  // Opt Len 2 words (the OVN option alone), O bit clear; C and version unmatched.
  CHECK(rte_be_to_cpu_16(gs.ver_opt_len_o_c_rsvd0) == 0x0200);
  CHECK(rte_be_to_cpu_16(gm.ver_opt_len_o_c_rsvd0) == 0x3f80);

  const auto* opt = r.item(RTE_FLOW_ITEM_TYPE_GENEVE_OPT);
  const auto& os = spec<rte_flow_item_geneve_opt>(opt);
  const auto& om = mask<rte_flow_item_geneve_opt>(opt);
  CHECK(os.option_class == rte_cpu_to_be_16(0x0102));
  CHECK(os.option_type == 0x80);
  CHECK(os.option_len == 1);
  CHECK(om.option_class == 0xffff);
  CHECK(om.option_type == 0xff);
  CHECK(om.option_len == 0x1f);
  REQUIRE(os.data != nullptr);
  REQUIRE(om.data != nullptr);
  const uint8_t want[4] = {0x00, kIngressKey, 0x00, kEgressKey};
  CHECK(std::memcmp(os.data, want, 4) == 0);
  CHECK(allOnes(om.data, 4));

  const auto* inner_eth = r.item(RTE_FLOW_ITEM_TYPE_ETH, 1);
  CHECK(sameMac(spec<rte_flow_item_eth>(inner_eth).hdr.dst_addr, kPod2Mac));
  const auto* inner_udp = r.item(RTE_FLOW_ITEM_TYPE_UDP, 1);
  CHECK(spec<rte_flow_item_udp>(inner_udp).hdr.dst_port == rte_cpu_to_be_16(53));

  const auto& decap = conf<rte_flow_action_raw_decap>(r.action(RTE_FLOW_ACTION_TYPE_RAW_DECAP));
  REQUIRE(decap.size == 58);
  REQUIRE(decap.data != nullptr);
  // The buffer is the outer headers such a packet carries.
  CHECK(decap.data[12] == 0x08);
  CHECK(decap.data[13] == 0x00);
  CHECK(decap.data[14 + 9] == 17);
  CHECK(std::memcmp(decap.data + 26, peer, 4) == 0);
  CHECK(std::memcmp(decap.data + 30, local, 4) == 0);
  CHECK(decap.data[36] == 0x17);  // UDP destination 6081 = 0x17c1
  CHECK(decap.data[37] == 0xc1);
  CHECK(decap.data[42] == 2);      // Geneve Opt Len
  CHECK(decap.data[46] == 0x12);   // VNI
  CHECK(decap.data[50] == 0x01);   // OVN class 0x0102
  CHECK(decap.data[51] == 0x02);
  CHECK(decap.data[52] == 0x80);
  CHECK(conf<rte_flow_action_ethdev>(r.action(RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT)).port_id == 12);
}

TEST_CASE("Geneve decap over an IPv6 underlay with an IPv6 inner flow", "[rte_flow][ipv6]") {
  const RteFlowRule r = build(decapFlow(/*ipv6_inner=*/true, /*ipv6_outer=*/true));
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV6 UDP GENEVE GENEVE_OPT ETH IPV6 UDP END");
  const auto* outer = r.item(RTE_FLOW_ITEM_TYPE_IPV6, 0);
  CHECK(spec<rte_flow_item_ipv6>(outer).hdr.src_addr[15] == 0x12);
  CHECK(spec<rte_flow_item_ipv6>(outer).hdr.dst_addr[15] == 0x11);
  CHECK(spec<rte_flow_item_ipv6>(outer).hdr.proto == 17);
  CHECK(spec<rte_flow_item_eth>(r.item(RTE_FLOW_ITEM_TYPE_ETH, 0)).hdr.ether_type == rte_cpu_to_be_16(0x86dd));
  CHECK(conf<rte_flow_action_raw_decap>(r.action(RTE_FLOW_ACTION_TYPE_RAW_DECAP)).size == 78);
}

TEST_CASE("IPv6 local flow: addresses, next header, no fragment header", "[rte_flow][ipv6]") {
  const RteFlowRule r = build(localFlow(/*ipv6=*/true, 6));
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV6 TCP END");
  const auto* ip = r.item(RTE_FLOW_ITEM_TYPE_IPV6);
  const auto want_src = v6(5);
  CHECK(std::memcmp(spec<rte_flow_item_ipv6>(ip).hdr.src_addr, want_src.data(), 16) == 0);
  CHECK(allOnes(mask<rte_flow_item_ipv6>(ip).hdr.src_addr, 16));
  CHECK(allOnes(mask<rte_flow_item_ipv6>(ip).hdr.dst_addr, 16));
  CHECK(spec<rte_flow_item_ipv6>(ip).hdr.proto == 6);
  CHECK(spec<rte_flow_item_ipv6>(ip).has_frag_ext == 0);
  CHECK(mask<rte_flow_item_ipv6>(ip).has_frag_ext == 1);
  CHECK(spec<rte_flow_item_eth>(r.item(RTE_FLOW_ITEM_TYPE_ETH)).hdr.ether_type == rte_cpu_to_be_16(0x86dd));
  const auto* tcp = r.item(RTE_FLOW_ITEM_TYPE_TCP);
  CHECK(spec<rte_flow_item_tcp>(tcp).hdr.src_port == rte_cpu_to_be_16(40000));
  CHECK(mask<rte_flow_item_tcp>(tcp).hdr.dst_port == 0xffff);
}

TEST_CASE("NAT hooks become SET_IPV4 and SET_TP actions in flow order", "[rte_flow][nat]") {
  const RteFlowRule r = build(natFlow());
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 TCP END");
  CHECK(describeActions(r) ==
        "SET_IPV4_DST SET_TP_DST SET_IPV4_SRC SET_TP_SRC DEC_TTL SET_MAC_SRC SET_MAC_DST COUNT REPRESENTED_PORT END");
  const uint8_t backend[4] = {10, 244, 1, 9}, snat[4] = {192, 168, 0, 1};
  CHECK(std::memcmp(&conf<rte_flow_action_set_ipv4>(r.action(RTE_FLOW_ACTION_TYPE_SET_IPV4_DST)).ipv4_addr, backend,
                    4) == 0);
  CHECK(std::memcmp(&conf<rte_flow_action_set_ipv4>(r.action(RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC)).ipv4_addr, snat,
                    4) == 0);
  CHECK(conf<rte_flow_action_set_tp>(r.action(RTE_FLOW_ACTION_TYPE_SET_TP_DST)).port == rte_cpu_to_be_16(8080));
  CHECK(conf<rte_flow_action_set_tp>(r.action(RTE_FLOW_ACTION_TYPE_SET_TP_SRC)).port == rte_cpu_to_be_16(61000));
}

TEST_CASE("IPv6 NAT hooks become SET_IPV6 and SET_TP actions in flow order", "[rte_flow][nat][ipv6]") {
  const RteFlowRule r = build(natFlow6());
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV6 TCP END");
  CHECK(describeActions(r) ==
        "SET_IPV6_DST SET_TP_DST SET_IPV6_SRC SET_TP_SRC DEC_TTL SET_MAC_SRC SET_MAC_DST COUNT REPRESENTED_PORT END");
  const auto backend = v6(9), node = v6(0x11);
  CHECK(std::memcmp(conf<rte_flow_action_set_ipv6>(r.action(RTE_FLOW_ACTION_TYPE_SET_IPV6_DST)).ipv6_addr,
                    backend.data(), 16) == 0);
  CHECK(std::memcmp(conf<rte_flow_action_set_ipv6>(r.action(RTE_FLOW_ACTION_TYPE_SET_IPV6_SRC)).ipv6_addr,
                    node.data(), 16) == 0);
  CHECK(conf<rte_flow_action_set_tp>(r.action(RTE_FLOW_ACTION_TYPE_SET_TP_DST)).port == rte_cpu_to_be_16(8080));
  CHECK(conf<rte_flow_action_set_tp>(r.action(RTE_FLOW_ACTION_TYPE_SET_TP_SRC)).port == rte_cpu_to_be_16(61000));
}

namespace {

// The close punt rules a flow's port holds for the flow's shape, on the
// ethdev ports() gives its input port.
std::vector<RteFlowRule> punts(const dpu::flow::FlowSpec& f, const RteFlowRuleOptions& o = {}) {
  const auto shape = closePuntShape(f);
  REQUIRE(shape.has_value());
  const auto ethdev = ports().ethdev(shape->port);
  REQUIRE(ethdev.has_value());
  return buildClosePuntRules(*shape, *ethdev, o);
}

size_t specSize(rte_flow_item_type type) {
  switch (type) {
    case RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT: return sizeof(rte_flow_item_ethdev);
    case RTE_FLOW_ITEM_TYPE_ETH: return sizeof(rte_flow_item_eth);
    case RTE_FLOW_ITEM_TYPE_VLAN: return sizeof(rte_flow_item_vlan);
    case RTE_FLOW_ITEM_TYPE_IPV4: return sizeof(rte_flow_item_ipv4);
    case RTE_FLOW_ITEM_TYPE_IPV6: return sizeof(rte_flow_item_ipv6);
    case RTE_FLOW_ITEM_TYPE_UDP: return sizeof(rte_flow_item_udp);
    case RTE_FLOW_ITEM_TYPE_TCP: return sizeof(rte_flow_item_tcp);
    case RTE_FLOW_ITEM_TYPE_GENEVE: return sizeof(rte_flow_item_geneve);
    default: return 0;
  }
}

// Every packet of `flow` that carries the punt rule's TCP flag matches the
// punt rule: item by item (the flow's GENEVE_OPT, which the punt rule does
// not look at, aside), the punt rule masks no bit the flow's rule leaves
// open and wants there what the flow's rule wants. The TCP flags are the
// flow's packets' own: checked by the caller.
void checkCovers(const RteFlowRule& punt, const RteFlowRule& flow) {
  std::vector<const rte_flow_item*> flow_items;
  for (const auto& it : flow.pattern) {
    if (it.type != RTE_FLOW_ITEM_TYPE_GENEVE_OPT) flow_items.push_back(&it);
  }
  REQUIRE(punt.pattern.size() == flow_items.size());
  for (size_t i = 0; i + 1 < punt.pattern.size(); ++i) {
    const rte_flow_item& a = punt.pattern[i];
    const rte_flow_item& b = *flow_items[i];
    INFO("item " << i << " " << itemTypeName(a.type));
    REQUIRE(a.type == b.type);
    REQUIRE(a.last == nullptr);
    const size_t n = specSize(a.type);
    REQUIRE(n != 0);
    std::vector<uint8_t> ps(n), pm(n), fs(n), fm(n);
    std::memcpy(ps.data(), a.spec, n);
    std::memcpy(pm.data(), a.mask, n);
    std::memcpy(fs.data(), b.spec, n);
    std::memcpy(fm.data(), b.mask, n);
    if (a.type == RTE_FLOW_ITEM_TYPE_TCP) {
      const size_t flags = offsetof(rte_flow_item_tcp, hdr.tcp_flags);
      ps[flags] = pm[flags] = 0;
    }
    for (size_t k = 0; k < n; ++k) {
      INFO("byte " << k);
      CHECK((pm[k] & ~fm[k]) == 0);
      CHECK((fs[k] & pm[k]) == (ps[k] & pm[k]));
    }
  }
}

// The punt rules of one shape: FIN, SYN, RST in that order, one flag each,
// ahead of the flow rules, every address and port open, back to `ethdev`'s
// representor with nothing rewritten or counted (software counts the packet).
void checkPuntSet(const std::vector<RteFlowRule>& rules, const std::string& pattern, uint16_t ethdev) {
  REQUIRE(rules.size() == 3);
  const uint8_t flags[] = {0x01, 0x02, 0x04};  // FIN, SYN, RST
  for (size_t i = 0; i < rules.size(); ++i) {
    const RteFlowRule& p = rules[i];
    INFO("punt rule " << i);
    CHECK(p.attr.transfer == 1);
    CHECK(p.attr.group == 1);
    CHECK(p.attr.priority == 0);
    CHECK(describePattern(p) == pattern);
    const auto* tcp = p.item(RTE_FLOW_ITEM_TYPE_TCP);
    REQUIRE(tcp != nullptr);
    rte_flow_item_tcp open{};
    open.hdr.tcp_flags = flags[i];
    CHECK(std::memcmp(tcp->spec, &open, sizeof open) == 0);
    CHECK(std::memcmp(tcp->mask, &open, sizeof open) == 0);
    for (auto type : {RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_IPV6}) {
      for (size_t nth = 0; const rte_flow_item* ip = p.item(type, nth); ++nth) {
        if (type == RTE_FLOW_ITEM_TYPE_IPV4) {
          CHECK(mask<rte_flow_item_ipv4>(ip).hdr.src_addr == 0);
          CHECK(mask<rte_flow_item_ipv4>(ip).hdr.dst_addr == 0);
        } else {
          const uint8_t zero[16] = {};
          CHECK(std::memcmp(mask<rte_flow_item_ipv6>(ip).hdr.src_addr, zero, 16) == 0);
          CHECK(std::memcmp(mask<rte_flow_item_ipv6>(ip).hdr.dst_addr, zero, 16) == 0);
        }
      }
    }
    CHECK(describeActions(p) == "PORT_REPRESENTOR END");
    CHECK(conf<rte_flow_action_ethdev>(p.action(RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR)).port_id == ethdev);
    CHECK(p.age == nullptr);
  }
}

}  // namespace

TEST_CASE("a port's close punt rules: one per flag, any addresses, ahead of the flow rules, to its representor",
          "[rte_flow][nat]") {
  const auto flow = natFlow();
  const RteFlowRule rule = build(flow);
  const auto rules = punts(flow);
  checkPuntSet(rules, "REPRESENTED_PORT ETH IPV4 TCP END", 11);  // VF1's representor
  for (const RteFlowRule& p : rules) checkCovers(p, rule);
  // The flow's own rule does not look at the flags.
  CHECK(mask<rte_flow_item_tcp>(rule.item(RTE_FLOW_ITEM_TYPE_TCP)).hdr.tcp_flags == 0);
  // Another connection of the same pod, to another service: the same rules.
  auto other = natFlow();
  other.match.key.l3_dst = v4(10, 96, 0, 99);
  other.match.key.l4_src = 51000;
  REQUIRE(closePuntShape(other) == closePuntShape(flow));
  for (const RteFlowRule& p : rules) checkCovers(p, build(other));
  // Priorities follow the options.
  RteFlowRuleOptions o;
  o.group = 3;
  o.priority = 5;
  o.guard_priority = 2;
  const auto moved = punts(flow, o);
  CHECK(moved[0].attr.group == 3);
  CHECK(moved[0].attr.priority == 2);
}

TEST_CASE("a NAT reply through Geneve is punted to the uplink's representor, still encapsulated",
          "[rte_flow][nat]") {
  const auto flow = natDecapFlow();
  const RteFlowRule rule = build(flow);
  CHECK(describeActions(rule) == "RAW_DECAP SET_IPV4_SRC SET_TP_SRC COUNT REPRESENTED_PORT END");
  // No RAW_DECAP: the dataplane decapsulates it as any packet from the uplink.
  const auto rules = punts(flow);
  checkPuntSet(rules, "REPRESENTED_PORT ETH IPV4 UDP GENEVE ETH IPV4 TCP END", 10);
  for (const RteFlowRule& p : rules) {
    checkCovers(p, rule);
    // Geneve to port 6081 carrying Ethernet, from any peer, any VNI.
    const auto* udp = p.item(RTE_FLOW_ITEM_TYPE_UDP);
    CHECK(spec<rte_flow_item_udp>(udp).hdr.dst_port == rte_cpu_to_be_16(6081));
    CHECK(mask<rte_flow_item_udp>(udp).hdr.src_port == 0);
    const auto* g = p.item(RTE_FLOW_ITEM_TYPE_GENEVE);
    CHECK(spec<rte_flow_item_geneve>(g).protocol == rte_cpu_to_be_16(0x6558));
    CHECK(mask<rte_flow_item_geneve>(g).vni[0] == 0);
  }
}

TEST_CASE("close punt shapes: a VLAN tag and IPv6 have rules of their own that cover their flows", "[rte_flow][nat]") {
  auto tagged = natFlow();
  tagged.match.key.flags |= dpu::overlay::FlowKey::kFlagOuterVlan;
  tagged.match.key.vlan_tci[0] = 100;
  REQUIRE(closePuntShape(tagged)->vlan);
  const auto tagged_rules = punts(tagged);
  checkPuntSet(tagged_rules, "REPRESENTED_PORT ETH VLAN IPV4 TCP END", 11);
  for (const RteFlowRule& p : tagged_rules) {
    checkCovers(p, build(tagged));
    // Any TCI; the tag's inner type and no second tag.
    const auto* vlan = p.item(RTE_FLOW_ITEM_TYPE_VLAN);
    CHECK(mask<rte_flow_item_vlan>(vlan).hdr.vlan_tci == 0);
    CHECK(spec<rte_flow_item_vlan>(vlan).hdr.eth_proto == rte_cpu_to_be_16(0x0800));
    CHECK(mask<rte_flow_item_vlan>(vlan).has_more_vlan == 1);
  }
  // An untagged rule does not take tagged packets (has_vlan = 0 under its mask).
  const auto plain = punts(natFlow());
  CHECK(mask<rte_flow_item_eth>(plain[0].item(RTE_FLOW_ITEM_TYPE_ETH)).has_vlan == 1);
  CHECK(spec<rte_flow_item_eth>(plain[0].item(RTE_FLOW_ITEM_TYPE_ETH)).has_vlan == 0);

  // A tracked IPv6 connection (no rewrite: NetworkPolicy's) over Geneve.
  auto tracked6 = decapFlow(true, false);
  tracked6.match.key.ip_proto = dpu::overlay::ipproto::kTcp;
  tracked6.tracked = true;
  const auto rules6 = punts(tracked6);
  checkPuntSet(rules6, "REPRESENTED_PORT ETH IPV4 UDP GENEVE ETH IPV6 TCP END", 10);
  for (const RteFlowRule& p : rules6) checkCovers(p, build(tracked6));
}

TEST_CASE("flows that are not translated or tracked TCP need no close punt rules", "[rte_flow][nat]") {
  auto udp_nat = natFlow();
  udp_nat.match.key.ip_proto = dpu::overlay::ipproto::kUdp;
  for (const auto& f : {localFlow(), localFlow(false, dpu::overlay::ipproto::kTcp), encapFlow(), decapFlow(),
                        bridgedFlow(kHostPf, kUplink), udp_nat}) {
    CHECK_FALSE(closePuntShape(f).has_value());
  }
}

TEST_CASE("ICMP echo matches type, code and identifier", "[rte_flow]") {
  auto flow = localFlow(false, 1);
  flow.match.key.l4_src = 8 << 8;  // echo request, code 0
  flow.match.key.l4_dst = 0x1234;  // identifier
  const RteFlowRule r = build(flow);
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV4 ICMP END");
  const auto* icmp = r.item(RTE_FLOW_ITEM_TYPE_ICMP);
  CHECK(spec<rte_flow_item_icmp>(icmp).hdr.icmp_type == 8);
  CHECK(spec<rte_flow_item_icmp>(icmp).hdr.icmp_code == 0);
  CHECK(spec<rte_flow_item_icmp>(icmp).hdr.icmp_ident == rte_cpu_to_be_16(0x1234));
  CHECK(mask<rte_flow_item_icmp>(icmp).hdr.icmp_ident == 0xffff);
  CHECK(mask<rte_flow_item_icmp>(icmp).hdr.icmp_seq_nb == 0);
}

TEST_CASE("ICMPv6: type/code match; an echo identifier cannot be matched in 22.11", "[rte_flow][ipv6]") {
  auto flow = localFlow(true, 58);
  flow.match.key.l4_src = 1 << 8;  // destination unreachable
  const RteFlowRule r = build(flow);
  CHECK(describePattern(r) == "REPRESENTED_PORT ETH IPV6 ICMP6 END");
  CHECK(spec<rte_flow_item_icmp6>(r.item(RTE_FLOW_ITEM_TYPE_ICMP6)).type == 1);
  flow.match.key.l4_src = 128 << 8;
  flow.match.key.l4_dst = 7;
  CHECK_THAT(refusal(flow), Catch::Contains("ICMPv6 echo identifier"));
}

TEST_CASE("drop flows: DROP as the fate, counted", "[rte_flow]") {
  auto flow = localFlow();
  flow.actions = {fixtures::act(ActionType::kDrop)};
  const RteFlowRule r = build(flow);
  CHECK(describeActions(r) == "COUNT DROP END");
}

TEST_CASE("COUNT and AGE precede the fate; AGE carries the timeout", "[rte_flow]") {
  RteFlowRuleOptions o;
  o.age_timeout_s = 30;
  const RteFlowRule r = build(localFlow(), o);
  CHECK(describeActions(r) == "DEC_TTL SET_MAC_SRC SET_MAC_DST COUNT AGE REPRESENTED_PORT END");
  REQUIRE(r.age != nullptr);
  CHECK(r.age == r.action(RTE_FLOW_ACTION_TYPE_AGE)->conf);
  CHECK(r.age->timeout == 30);
  o.count = false;
  o.age_timeout_s = 0;
  CHECK(describeActions(build(localFlow(), o)) == "DEC_TTL SET_MAC_SRC SET_MAC_DST REPRESENTED_PORT END");
  o.age_timeout_s = 0x1000000;
  CHECK_FALSE(buildRteFlowRule(localFlow(), ports(), o).ok());
}

TEST_CASE("flows no eswitch takes are refused with a reason", "[rte_flow][refusal]") {
  CHECK_THAT(refusal(espFlow()), Catch::Contains("inline IPsec is not available through DPDK on mlx5"));

  auto frag = localFlow();
  frag.match.key.flags = FlowKey::kFlagFragment;
  CHECK_THAT(refusal(frag), Catch::Contains("fragment"));

  auto arp = localFlow();
  arp.match.key.ethertype = 0x0806;
  CHECK_THAT(refusal(arp), Catch::Contains("0x0806"));

  auto qinq = localFlow();
  qinq.match.key.flags = FlowKey::kFlagOuterVlan | FlowKey::kFlagInnerVlan;
  CHECK_THAT(refusal(qinq), Catch::Contains("QinQ"));

  auto icmp_nat = localFlow(false, 1);
  icmp_nat.match.key.l4_src = 8 << 8;
  auto id = fixtures::act(ActionType::kSetL4Src);
  id.l4_port = 9;
  icmp_nat.actions.insert(icmp_nat.actions.begin(), id);
  CHECK_THAT(refusal(icmp_nat), Catch::Contains("ICMP identifier"));

  auto flood = localFlow();
  flood.actions.push_back(output(kUplink));
  CHECK_THAT(refusal(flood), Catch::Contains("more than one output"));

  auto nofate = localFlow();
  nofate.actions.pop_back();
  CHECK_THAT(refusal(nofate), Catch::Contains("without an output or drop"));

  auto short_decap = decapFlow();
  short_decap.actions[0].decap_bytes = 50;
  CHECK_THAT(refusal(short_decap), Catch::Contains("differs from the matched outer headers"));

  auto untunnelled_decap = decapFlow();
  untunnelled_decap.match.tunnel = {};
  CHECK_THAT(refusal(untunnelled_decap), Catch::Contains("matched no tunnel"));

  auto mac_after_encap = encapFlow();
  mac_after_encap.actions.insert(mac_after_encap.actions.end() - 1,
                                 setMac(ActionType::kSetEthDst, kPod2Mac));
  CHECK_THAT(refusal(mac_after_encap), Catch::Contains("after Geneve encap"));

  auto long_flow = localFlow();
  long_flow.actions.insert(long_flow.actions.begin(), 20, setMac(ActionType::kSetEthSrc, kGatewayMac));
  CHECK_THAT(refusal(long_flow), Catch::Contains("more than 16 actions"));

  auto bad_template = encapFlow();
  bad_template.actions[3].encap_header.resize(20);
  CHECK_THAT(refusal(bad_template), Catch::Contains("encap header"));
  auto long_template = encapFlow();
  long_template.actions[3].encap_header.push_back(0);
  CHECK_THAT(refusal(long_template), Catch::Contains("does not end where its 8 bytes of options end"));
}

TEST_CASE("ports not on the eswitch keep the flow in software", "[rte_flow][refusal]") {
  auto in = localFlow();
  in.match.key.in_port = 9;
  CHECK_THAT(refusal(in), Catch::Contains("input port 9 is not on the eswitch"));
  auto out = localFlow();
  out.actions.back().port = 9;
  CHECK_THAT(refusal(out), Catch::Contains("output port 9 is not on the eswitch"));
}

TEST_CASE("the root table holds one jump per port to the flow group", "[rte_flow]") {
  const RteFlowRule r = buildRootJumpRule(11);
  CHECK(r.attr.group == 0);
  CHECK(r.attr.transfer == 1);
  CHECK(describePattern(r) == "REPRESENTED_PORT END");
  CHECK(spec<rte_flow_item_ethdev>(r.item(RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT)).port_id == 11);
  CHECK(describeActions(r) == "JUMP END");
  CHECK(conf<rte_flow_action_jump>(r.action(RTE_FLOW_ACTION_TYPE_JUMP)).group == 1);
}

TEST_CASE("TTL guards send TTL <= 1 to software ahead of the flow rules", "[rte_flow]") {
  const auto plain = buildTtlGuardRules(11, false);
  REQUIRE(plain.size() == 2);
  CHECK(describePattern(plain[0]) == "REPRESENTED_PORT ETH IPV4 END");
  CHECK(describePattern(plain[1]) == "REPRESENTED_PORT ETH IPV6 END");
  for (const auto& g : plain) {
    CHECK(g.attr.group == 1);
    CHECK(g.attr.priority == 0);
    CHECK(g.attr.transfer == 1);
    CHECK(describeActions(g) == "PORT_REPRESENTOR END");
    CHECK(conf<rte_flow_action_ethdev>(g.action(RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR)).port_id == 11);
  }
  CHECK(spec<rte_flow_item_ipv4>(plain[0].item(RTE_FLOW_ITEM_TYPE_IPV4)).hdr.time_to_live == 0);
  CHECK(mask<rte_flow_item_ipv4>(plain[0].item(RTE_FLOW_ITEM_TYPE_IPV4)).hdr.time_to_live == 0xfe);
  CHECK(mask<rte_flow_item_ipv6>(plain[1].item(RTE_FLOW_ITEM_TYPE_IPV6)).hdr.hop_limits == 0xfe);

  const auto uplink = buildTtlGuardRules(10, true);
  REQUIRE(uplink.size() == 6);
  CHECK(describePattern(uplink[2]) == "REPRESENTED_PORT ETH IPV4 UDP GENEVE ETH IPV4 END");
  CHECK(describePattern(uplink[5]) == "REPRESENTED_PORT ETH IPV6 UDP GENEVE ETH IPV6 END");
  // The inner TTL is the one matched.
  CHECK(mask<rte_flow_item_ipv4>(uplink[2].item(RTE_FLOW_ITEM_TYPE_IPV4, 1)).hdr.time_to_live == 0xfe);
  CHECK(mask<rte_flow_item_ipv4>(uplink[2].item(RTE_FLOW_ITEM_TYPE_IPV4, 0)).hdr.time_to_live == 0);
}
