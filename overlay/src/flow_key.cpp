// Flow key extraction (flow_key.h). Reads only headers parsePacket validated.
#include "overlay/flow_key.h"

namespace dpu::overlay {

FlowKey extractFlowKey(std::span<const uint8_t> frame, const ParsedPacket& pkt, uint32_t in_port,
                       uint32_t tunnel_id) {
  FlowKey key;
  const uint8_t* base = frame.data();
  key.in_port = in_port;
  key.tunnel_id = tunnel_id;
  key.eth_dst = eth::dst(base);
  key.eth_src = eth::src(base);
  key.ethertype = pkt.ethertype;
  if (pkt.vlan_count >= 1) {
    key.vlan_tci[0] = pkt.vlan_tci[0];
    key.flags |= FlowKey::kFlagOuterVlan;
    if (pkt.vlan_tpid[0] == eth::kTypeQinq) key.flags |= FlowKey::kFlagOuterQinq;
  }
  if (pkt.vlan_count >= 2) {
    key.vlan_tci[1] = pkt.vlan_tci[1];
    key.flags |= FlowKey::kFlagInnerVlan;
  }

  const uint8_t* l3 = base + pkt.l3_offset;
  switch (pkt.l3) {
    case L3Type::kArp:
      key.ip_proto = static_cast<uint8_t>(arp::op(l3));
      store32(key.l3_src.data(), arp::senderIp(l3));
      store32(key.l3_dst.data(), arp::targetIp(l3));
      return key;
    case L3Type::kIpv4:
      std::memcpy(key.l3_src.data(), l3 + ipv4::kSrcOffset, 4);
      std::memcpy(key.l3_dst.data(), l3 + ipv4::kDstOffset, 4);
      break;
    case L3Type::kIpv6:
      std::memcpy(key.l3_src.data(), l3 + ipv6::kSrcOffset, ipv6::kAddrLen);
      std::memcpy(key.l3_dst.data(), l3 + ipv6::kDstOffset, ipv6::kAddrLen);
      break;
    case L3Type::kNone:
      return key;
  }
  key.ip_proto = pkt.ip_proto;
  if (pkt.fragment != Fragment::kNone) key.flags |= FlowKey::kFlagFragment;
  if (pkt.fragment == Fragment::kLater) {
    key.flags |= FlowKey::kFlagLaterFragment;
    return key;
  }

  const uint8_t* l4 = base + pkt.l4_offset;
  switch (pkt.l4) {
    case L4Type::kTcp:
    case L4Type::kUdp:
      // TCP and UDP put both ports in the same place.
      key.l4_src = udp::srcPort(l4);
      key.l4_dst = udp::dstPort(l4);
      break;
    case L4Type::kSctp:
      key.l4_src = sctp::srcPort(l4);
      key.l4_dst = sctp::dstPort(l4);
      break;
    case L4Type::kIcmp:
      key.l4_src = static_cast<uint16_t>(icmp::type(l4) << 8 | icmp::code(l4));
      if (icmp::isEcho(icmp::type(l4))) key.l4_dst = icmp::echoId(l4);
      break;
    case L4Type::kIcmpv6:
      key.l4_src = static_cast<uint16_t>(icmp6::type(l4) << 8 | icmp6::code(l4));
      if (icmp6::isEcho(icmp6::type(l4))) key.l4_dst = icmp6::echoId(l4);
      break;
    case L4Type::kNone:
      break;
  }
  return key;
}

}  // namespace dpu::overlay
