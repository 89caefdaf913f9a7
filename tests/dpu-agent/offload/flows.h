// Datapath flows of every kind the slow path produces, for the offload tests:
// local VF→VF (routed: MAC rewrite + TTL), VF→Geneve encap, Geneve decap→VF,
// NAT (local, and a reply through Geneve), ESP, the host's traffic bridged with the uplink (north–south), and
// their IPv6 variants. Ports: 0 = uplink, 1 and 2 = representors, 3 = the host
// PF's representor.
#pragma once

#include <cstring>
#include <initializer_list>

#include "flow/flow.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::offload::fixtures {

using flow::ActionType;
using flow::FlowAction;
using flow::FlowSpec;
using flow::Mac;
using overlay::FlowKey;

inline constexpr uint32_t kUplink = 0;
inline constexpr uint32_t kVf1 = 1;
inline constexpr uint32_t kVf2 = 2;
inline constexpr uint32_t kHostPf = 3;
inline const Mac kPod1Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05};
inline const Mac kPod2Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x07};
inline const Mac kGatewayMac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01};
inline const Mac kNodeMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline const Mac kNextHopMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
inline constexpr uint32_t kVni = 0x123456;
inline constexpr uint16_t kIngressKey = 3;
inline constexpr uint16_t kEgressKey = 7;

inline std::array<uint8_t, 16> v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return {a, b, c, d}; }
inline std::array<uint8_t, 16> v6(uint8_t last) {
  return {0xfd, 0x00, 0x10, 0x24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
}

inline FlowAction act(ActionType type) {
  FlowAction a;
  a.type = type;
  return a;
}
inline FlowAction output(uint32_t port) {
  FlowAction a = act(ActionType::kOutput);
  a.port = static_cast<uint16_t>(port);
  return a;
}
inline FlowAction setMac(ActionType type, const Mac& mac) {
  FlowAction a = act(type);
  a.mac = mac;
  return a;
}

// An inner key: pod 1 → pod 2 (or remote), UDP 40000 → 53 unless told otherwise.
inline FlowKey innerKey(uint32_t in_port, bool ipv6 = false, uint8_t proto = overlay::ipproto::kUdp) {
  FlowKey k;
  k.in_port = in_port;
  k.eth_src = kPod1Mac;
  k.eth_dst = kGatewayMac;
  k.ethertype = ipv6 ? overlay::eth::kTypeIpv6 : overlay::eth::kTypeIpv4;
  k.ip_proto = proto;
  k.l3_src = ipv6 ? v6(5) : v4(10, 244, 1, 5);
  k.l3_dst = ipv6 ? v6(7) : v4(10, 244, 2, 7);
  if (proto == overlay::ipproto::kUdp || proto == overlay::ipproto::kTcp) {
    k.l4_src = 40000;
    k.l4_dst = 53;
  }
  return k;
}

// Routed on the node: VF1 → VF2 through the gateway MAC.
inline FlowSpec localFlow(bool ipv6 = false, uint8_t proto = overlay::ipproto::kUdp) {
  FlowSpec f;
  f.match.key = innerKey(kVf1, ipv6, proto);
  f.actions = {act(ActionType::kDecTtl), setMac(ActionType::kSetEthSrc, kGatewayMac),
               setMac(ActionType::kSetEthDst, kPod2Mac), output(kVf2)};
  return f;
}

// The outer headers towards the peer node, as the control plane builds them.
inline std::vector<uint8_t> encapTemplate(bool ipv6_outer = false) {
  overlay::GeneveTunnel t;
  t.src_mac = kNodeMac;
  t.dst_mac = kNextHopMac;
  t.family = ipv6_outer ? overlay::UnderlayFamily::kIpv6 : overlay::UnderlayFamily::kIpv4;
  t.src_ip = ipv6_outer ? v6(0x11) : v4(192, 168, 0, 1);
  t.dst_ip = ipv6_outer ? v6(0x12) : v4(192, 168, 0, 2);
  t.vni = kVni;
  std::array<uint8_t, overlay::kOvnOptionDataLen> storage{};
  overlay::GeneveOption option;
  (void)overlay::makeOvnOption({kIngressKey, kEgressKey}, storage, option);
  t.options = {&option, 1};
  overlay::GeneveEncapTemplate tmpl;
  (void)tmpl.build(t);
  return {tmpl.bytes().begin(), tmpl.bytes().end()};
}

// VF1 → a pod on another node: routed, then Geneve to the peer's tunnel IP.
inline FlowSpec encapFlow(bool ipv6_inner = false, bool ipv6_outer = false) {
  FlowSpec f;
  f.match.key = innerKey(kVf1, ipv6_inner);
  FlowAction encap = act(ActionType::kGeneveEncap);
  encap.encap_header = encapTemplate(ipv6_outer);
  encap.encap_family = ipv6_outer ? 6 : 4;
  f.actions = {act(ActionType::kDecTtl), setMac(ActionType::kSetEthSrc, kGatewayMac),
               setMac(ActionType::kSetEthDst, kPod2Mac), encap, output(kUplink)};
  return f;
}

// From the uplink: Geneve from the peer, decapsulated and delivered to VF2.
inline FlowSpec decapFlow(bool ipv6_inner = false, bool ipv6_outer = false) {
  FlowSpec f;
  f.match.key = innerKey(kUplink, ipv6_inner);
  f.match.key.eth_src = kGatewayMac;  // the sender's gateway already routed it
  f.match.key.eth_dst = kPod2Mac;
  f.match.key.tunnel_id = kVni;
  flow::TunnelMatch& t = f.match.tunnel;
  t.family = ipv6_outer ? 6 : 4;
  t.remote_ip = ipv6_outer ? v6(0x12) : v4(192, 168, 0, 2);
  t.local_ip = ipv6_outer ? v6(0x11) : v4(192, 168, 0, 1);
  t.vni = kVni;
  t.ingress_port_key = kIngressKey;
  t.egress_port_key = kEgressKey;
  FlowAction decap = act(ActionType::kGeneveDecap);
  decap.decap_bytes = static_cast<uint16_t>(14 + (ipv6_outer ? 40 : 20) + 8 + 8 + 8);
  f.actions = {decap, output(kVf2)};
  return f;
}

// North–south: the host's TCP from its node IP to the outside, bridged
// untouched between the host PF and the uplink (`from` → `to`, either way;
// the reverse direction swaps addresses and MACs). One action: the output.
inline const Mac kHostMac{0x02, 0x18, 0x00, 0x00, 0x00, 0x01};
inline const Mac kFabricGatewayMac{0x02, 0x18, 0x00, 0x00, 0x00, 0xfe};
inline FlowSpec bridgedFlow(uint32_t from, uint32_t to) {
  FlowSpec f;
  FlowKey& k = f.match.key;
  k.in_port = from;
  const bool out = from == kHostPf;
  k.eth_src = out ? kHostMac : kFabricGatewayMac;
  k.eth_dst = out ? kFabricGatewayMac : kHostMac;
  k.ethertype = overlay::eth::kTypeIpv4;
  k.ip_proto = overlay::ipproto::kTcp;
  k.l3_src = out ? v4(172, 18, 0, 1) : v4(203, 0, 113, 1);
  k.l3_dst = out ? v4(203, 0, 113, 1) : v4(172, 18, 0, 1);
  k.l4_src = out ? 40000 : 80;
  k.l4_dst = out ? 80 : 40000;
  f.actions = {output(to)};
  return f;
}

// A service flow: DNAT to a backend pod (the NAT hooks), then local delivery.
inline FlowSpec natFlow() {
  FlowSpec f = localFlow(false, overlay::ipproto::kTcp);
  FlowAction dst_ip = act(ActionType::kSetIpv4Dst);
  dst_ip.ipv4 = 0;
  const uint8_t backend[4] = {10, 244, 1, 9};
  std::memcpy(&dst_ip.ipv4, backend, 4);  // network order
  FlowAction dst_port = act(ActionType::kSetL4Dst);
  dst_port.l4_port = 8080;
  FlowAction src_ip = act(ActionType::kSetIpv4Src);
  const uint8_t snat[4] = {192, 168, 0, 1};
  std::memcpy(&src_ip.ipv4, snat, 4);
  FlowAction src_port = act(ActionType::kSetL4Src);
  src_port.l4_port = 61000;
  f.actions.insert(f.actions.begin(), {dst_ip, dst_port, src_ip, src_port});
  return f;
}

// The same over IPv6: DNAT to a backend pod's IPv6 address and SNAT to a
// node address, then local delivery.
inline FlowSpec natFlow6() {
  FlowSpec f = localFlow(true, overlay::ipproto::kTcp);
  FlowAction dst_ip = act(ActionType::kSetIpv6Dst);
  dst_ip.ipv6 = v6(9);
  FlowAction dst_port = act(ActionType::kSetL4Dst);
  dst_port.l4_port = 8080;
  FlowAction src_ip = act(ActionType::kSetIpv6Src);
  src_ip.ipv6 = v6(0x11);
  FlowAction src_port = act(ActionType::kSetL4Src);
  src_port.l4_port = 61000;
  f.actions.insert(f.actions.begin(), {dst_ip, dst_port, src_ip, src_port});
  return f;
}

// A service connection's reply from a backend on another node: Geneve from
// the peer, decapsulated, un-DNATed back to the service (source rewritten)
// and delivered to VF2. TCP, so its close punt rules go to the uplink.
inline FlowSpec natDecapFlow() {
  FlowSpec f = decapFlow();
  f.match.key.ip_proto = overlay::ipproto::kTcp;
  FlowAction src_ip = act(ActionType::kSetIpv4Src);
  const uint8_t vip[4] = {10, 96, 0, 10};
  std::memcpy(&src_ip.ipv4, vip, 4);
  FlowAction src_port = act(ActionType::kSetL4Src);
  src_port.l4_port = 80;
  f.actions.insert(f.actions.begin() + 1, {src_ip, src_port});
  return f;
}

// Geneve under ESP (the IPsec issue's hook).
inline FlowSpec espFlow() {
  FlowSpec f = encapFlow();
  FlowAction esp = act(ActionType::kEspEncrypt);
  esp.sa_index = 1;
  f.actions.insert(f.actions.end() - 1, esp);
  return f;
}

}  // namespace dpu::offload::fixtures
