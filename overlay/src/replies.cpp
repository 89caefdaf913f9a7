// Slow-path replies (replies.h): ARP, neighbor advertisement, the ICMP and
// ICMPv6 errors and TCP resets, written into a caller-owned PacketBuffer.
#include "overlay/replies.h"

#include <algorithm>
#include <cstring>

#include "overlay/checksum.h"

namespace dpu::overlay {
namespace {

// Makes `out` exactly `len` bytes long, or returns nullptr leaving it unchanged.
uint8_t* resize(PacketBuffer& out, uint32_t len) {
  if (uint64_t{out.size()} + out.tailroom() < len) return nullptr;
  out.trim(out.size());
  return out.append(len);
}

// The request's L2 header with the addresses replaced: VLAN tags and EtherType
// are copied as they were, so the reply goes back on the same VLANs.
void writeL2(uint8_t* o, const uint8_t* in, const ParsedPacket& pkt, const MacAddress& dst, const MacAddress& src) {
  eth::setDst(o, dst);
  eth::setSrc(o, src);
  std::memcpy(o + 12, in + 12, pkt.l3_offset - 12u);
}

bool isUnicastMac(const uint8_t* mac) { return (mac[0] & 0x01) == 0; }

// Neighbour discovery (RFC 4861 §4.3, §4.4): at `ip`, the IPv6 header (hop
// limit 255) and a solicitation or advertisement of `len` bytes with
// `flags` (an advertisement's; 0, a solicitation's reserved word) for
// `target`, its checksum 0 until ndChecksum. Returns the ICMPv6 header.
uint8_t* ndMessage(uint8_t* ip, const Ipv6Address& src, const Ipv6Address& dst, uint32_t len, uint8_t type,
                   uint32_t flags, const Ipv6Address& target) {
  ipv6::setVersionClassFlow(ip, 0, 0);
  ipv6::setPayloadLength(ip, static_cast<uint16_t>(len));
  ipv6::setNextHeader(ip, ipproto::kIcmpv6);
  ipv6::setHopLimit(ip, icmp6::kNdHopLimit);
  ipv6::setSrc(ip, src);
  ipv6::setDst(ip, dst);
  uint8_t* m = ip + ipv6::kHeaderLen;
  icmp6::setType(m, type);
  icmp6::setCode(m, 0);
  icmp6::setChecksum(m, 0);
  icmp6::setNaFlags(m, flags);
  icmp6::setNdTarget(m, target);
  return m;
}

// The message's one option: a source or target link-layer address.
void ndLinkAddrOption(uint8_t* message, uint8_t type, const MacAddress& mac) {
  uint8_t* opt = message + icmp6::kNdOptionsOffset;
  opt[0] = type;
  opt[1] = 1;  // in units of 8 bytes
  std::memcpy(opt + 2, mac.data(), mac.size());
}

void ndChecksum(const uint8_t* ip, uint8_t* message, uint32_t len) {
  const uint32_t sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, ipproto::kIcmpv6, len);
  icmp6::setChecksum(message, checksumFinish(checksumAdd(message, len, sum)));
}

// A source an IPv4 error may be sent to: one host (RFC 1122 §3.2.2 and §3.2.1.3:
// not 0.0.0.0, loopback, class D or E, or the limited broadcast).
bool isSingleHostV4(uint32_t a) { return a != 0 && (a >> 24) != 127 && (a >> 28) < 0xe; }

}  // namespace

Status buildArpReply(std::span<const uint8_t> request, const ParsedPacket& pkt, const MacAddress& gateway_mac,
                     PacketBuffer& out) {
  const uint8_t* in = request.data();
  if (pkt.l3 != L3Type::kArp) return Status::kUnsupported;
  const uint8_t* a = in + pkt.l3_offset;
  if (arp::op(a) != arp::kOpRequest) return Status::kUnsupported;
  const MacAddress requester = arp::senderMac(a);
  if (!isUnicastMac(requester.data())) return Status::kUnsupported;
  uint8_t* o = resize(out, pkt.l3_offset + uint32_t{arp::kLen});
  if (o == nullptr) return Status::kNoRoom;
  writeL2(o, in, pkt, requester, gateway_mac);
  uint8_t* r = o + pkt.l3_offset;
  arp::setEthernetIpv4(r);
  arp::setOp(r, arp::kOpReply);
  arp::setSenderMac(r, gateway_mac);
  arp::setSenderIp(r, arp::targetIp(a));
  arp::setTargetMac(r, requester);
  arp::setTargetIp(r, arp::senderIp(a));
  return Status::kOk;
}

namespace {

Status arpRequestFrame(const MacAddress& sender_mac, uint32_t sender_ip, uint32_t target_ip, const MacAddress& dst_mac,
                       PacketBuffer& out) {
  uint8_t* o = resize(out, uint32_t{eth::kHeaderLen} + uint32_t{arp::kLen});
  if (o == nullptr) return Status::kNoRoom;
  eth::setDst(o, dst_mac);
  eth::setSrc(o, sender_mac);
  store16(o + 12, eth::kTypeArp);
  uint8_t* r = o + eth::kHeaderLen;
  arp::setEthernetIpv4(r);
  arp::setOp(r, arp::kOpRequest);
  arp::setSenderMac(r, sender_mac);
  arp::setSenderIp(r, sender_ip);
  arp::setTargetMac(r, MacAddress{});
  arp::setTargetIp(r, target_ip);
  return Status::kOk;
}

}  // namespace

Status buildArpRequest(const MacAddress& sender_mac, uint32_t sender_ip, uint32_t target_ip, const MacAddress& dst_mac,
                       PacketBuffer& out) {
  if (!isUnicastMac(sender_mac.data()) || sender_ip == 0) return Status::kUnsupported;
  return arpRequestFrame(sender_mac, sender_ip, target_ip, dst_mac, out);
}

Status buildArpProbe(const MacAddress& sender_mac, uint32_t target_ip, PacketBuffer& out) {
  if (!isUnicastMac(sender_mac.data()) || target_ip == 0) return Status::kUnsupported;
  return arpRequestFrame(sender_mac, 0, target_ip, eth::kBroadcast, out);
}

namespace {

Status solicitFrame(const MacAddress& sender_mac, const Ipv6Address& sender_ip, const Ipv6Address& target,
                    const MacAddress& dst_mac, PacketBuffer& out) {
  const bool dad = ipv6::isUnspecified(sender_ip.data());
  const uint32_t ns_len = icmp6::kNdOptionsOffset + (dad ? 0 : icmp6::kNdLinkAddrOptionLen);
  uint8_t* o = resize(out, uint32_t{eth::kHeaderLen} + uint32_t{ipv6::kHeaderLen} + ns_len);
  if (o == nullptr) return Status::kNoRoom;
  const bool multicast = !isUnicastMac(dst_mac.data());
  const Ipv6Address dst = multicast ? ipv6::solicitedNode(target.data()) : target;
  eth::setDst(o, multicast ? eth::ipv6MulticastMac(dst.data()) : dst_mac);
  eth::setSrc(o, sender_mac);
  eth::setType(o, eth::kTypeIpv6);
  uint8_t* ip = o + eth::kHeaderLen;
  uint8_t* ns = ndMessage(ip, sender_ip, dst, ns_len, icmp6::kTypeNeighborSolicit, 0, target);
  if (!dad) ndLinkAddrOption(ns, icmp6::kNdOptSourceLinkAddr, sender_mac);
  ndChecksum(ip, ns, ns_len);
  return Status::kOk;
}

}  // namespace

Status buildNeighborSolicit(const MacAddress& sender_mac, const Ipv6Address& sender_ip, const Ipv6Address& target,
                            const MacAddress& dst_mac, PacketBuffer& out) {
  if (!isUnicastMac(sender_mac.data()) || ipv6::isUnspecified(sender_ip.data()) ||
      ipv6::isMulticast(sender_ip.data()) || ipv6::isMulticast(target.data())) {
    return Status::kUnsupported;
  }
  return solicitFrame(sender_mac, sender_ip, target, dst_mac, out);
}

Status buildNeighborProbe(const MacAddress& sender_mac, const Ipv6Address& target, PacketBuffer& out) {
  if (!isUnicastMac(sender_mac.data()) || ipv6::isUnspecified(target.data()) || ipv6::isMulticast(target.data())) {
    return Status::kUnsupported;
  }
  return solicitFrame(sender_mac, Ipv6Address{}, target, eth::ipv6MulticastMac(ipv6::kAllNodes.data()), out);
}

Status buildNeighborAdvert(std::span<const uint8_t> solicitation, const ParsedPacket& pkt,
                           const MacAddress& gateway_mac, PacketBuffer& out) {
  const uint8_t* in = solicitation.data();
  NeighborMessage ns;
  if (Status s = parseNeighborMessage(solicitation, pkt, ns); s != Status::kOk) return s;
  if (icmp6::type(in + pkt.l4_offset) != icmp6::kTypeNeighborSolicit) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  // A multicast source is never valid (RFC 4291 §2.7); answering it would flood.
  if (ipv6::isMulticast(ipv6::src(ip_in))) return Status::kUnsupported;

  constexpr uint32_t kNaLen = icmp6::kNdOptionsOffset + icmp6::kNdLinkAddrOptionLen;
  uint8_t* o = resize(out, pkt.l3_offset + uint32_t{ipv6::kHeaderLen} + kNaLen);
  if (o == nullptr) return Status::kNoRoom;

  // Duplicate address detection: the asker has no address yet, so the answer
  // goes to all-nodes and is not "solicited" (RFC 4861 §7.2.4).
  const bool dad = ipv6::isUnspecified(ipv6::src(ip_in));
  const Ipv6Address dst = dad ? ipv6::kAllNodes : ipv6::srcAddress(ip_in);
  MacAddress dst_mac = ns.has_link_addr ? ns.link_addr : eth::src(in);
  if (dad) dst_mac = eth::ipv6MulticastMac(dst.data());
  Ipv6Address target;
  std::memcpy(target.data(), in + ns.target_offset, target.size());

  writeL2(o, in, pkt, dst_mac, gateway_mac);
  uint8_t* ip = o + pkt.l3_offset;
  const uint32_t flags = icmp6::kNaFlagRouter | icmp6::kNaFlagOverride | (dad ? 0 : icmp6::kNaFlagSolicited);
  uint8_t* na = ndMessage(ip, target, dst, kNaLen, icmp6::kTypeNeighborAdvert, flags, target);
  ndLinkAddrOption(na, icmp6::kNdOptTargetLinkAddr, gateway_mac);
  ndChecksum(ip, na, kNaLen);
  return Status::kOk;
}

namespace {

// An ICMP error (RFC 792) about `in`: type, code and the header's second word
// (`rest`), quoting the offending IP header and the first 8 bytes of its data,
// from `from` to the sender. The checks every ICMPv4 error needs (never about
// an ICMP error, a later fragment, or to a source that is not one host).
Status icmp4Error(const uint8_t* in, const ParsedPacket& pkt, const MacAddress& gateway_mac, uint32_t from,
                  uint8_t type, uint8_t code, uint32_t rest, PacketBuffer& out) {
  if (pkt.l3 != L3Type::kIpv4 || pkt.fragment == Fragment::kLater) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  if (pkt.l4 == L4Type::kIcmp && icmp::isError(icmp::type(in + pkt.l4_offset))) return Status::kUnsupported;
  const uint32_t sender = ipv4::src(ip_in);
  const uint32_t dst = ipv4::dst(ip_in);
  if (!isSingleHostV4(sender) || ipv4::isMulticast(dst) || ipv4::isLimitedBroadcast(dst) || !isUnicastMac(in)) {
    return Status::kUnsupported;
  }

  // RFC 792: the internet header plus the first 64 bits of the datagram's data.
  const uint32_t quote = std::min<uint32_t>(static_cast<uint32_t>(ipv4::headerLen(ip_in)) + 8,
                                            pkt.l3_end - pkt.l3_offset);
  const uint32_t icmp_len = icmp::kHeaderLen + quote;
  const uint32_t ip_len = ipv4::kMinHeaderLen + icmp_len;
  uint8_t* o = resize(out, pkt.l3_offset + ip_len);
  if (o == nullptr) return Status::kNoRoom;

  writeL2(o, in, pkt, eth::src(in), gateway_mac);
  uint8_t* ip = o + pkt.l3_offset;
  ipv4::setVersionIhl(ip, ipv4::kMinHeaderLen);
  ipv4::setTos(ip, 0);
  ipv4::setTotalLength(ip, static_cast<uint16_t>(ip_len));
  ipv4::setId(ip, 0);
  ipv4::setFragField(ip, 0);
  ipv4::setTtl(ip, kReplyTtl);
  ipv4::setProtocol(ip, ipproto::kIcmp);
  ipv4::setChecksum(ip, 0);
  ipv4::setSrc(ip, from);
  ipv4::setDst(ip, sender);
  ipv4::setChecksum(ip, internetChecksum({ip, ipv4::kMinHeaderLen}));

  uint8_t* h = ip + ipv4::kMinHeaderLen;
  icmp::setType(h, type);
  icmp::setCode(h, code);
  icmp::setChecksum(h, 0);
  store32(h + 4, rest);
  std::memcpy(h + icmp::kHeaderLen, ip_in, quote);
  icmp::setChecksum(h, internetChecksum({h, icmp_len}));
  return Status::kOk;
}

// An ICMPv6 error (RFC 4443 §2.1) about `in`, quoting as much of it as fits
// in a 1280-byte reply, from `from` to the sender. `to_multicast`: the error
// may answer a packet sent to a multicast address (packet too big may).
Status icmp6Error(const uint8_t* in, const ParsedPacket& pkt, const MacAddress& gateway_mac, const uint8_t* from,
                  uint8_t type, uint8_t code, uint32_t rest, bool to_multicast, PacketBuffer& out) {
  if (pkt.l3 != L3Type::kIpv6) return Status::kUnsupported;
  if (pkt.l4 == L4Type::kIcmpv6 && icmp6::isError(icmp6::type(in + pkt.l4_offset))) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  // Never to a source that is not one node (RFC 4443 §2.4(e.6)); about a
  // multicast destination only where §2.4(e.3) allows it.
  if (ipv6::isUnspecified(ipv6::src(ip_in)) || ipv6::isMulticast(ipv6::src(ip_in))) return Status::kUnsupported;
  if (!to_multicast && (ipv6::isMulticast(ipv6::dst(ip_in)) || !isUnicastMac(in))) return Status::kUnsupported;

  constexpr uint32_t kMaxQuote = ipv6::kMinMtu - ipv6::kHeaderLen - icmp6::kHeaderLen;
  const uint32_t quote = std::min(kMaxQuote, pkt.l3_end - pkt.l3_offset);
  const uint32_t icmp_len = icmp6::kHeaderLen + quote;
  uint8_t* o = resize(out, pkt.l3_offset + uint32_t{ipv6::kHeaderLen} + icmp_len);
  if (o == nullptr) return Status::kNoRoom;

  writeL2(o, in, pkt, eth::src(in), gateway_mac);
  uint8_t* ip = o + pkt.l3_offset;
  ipv6::setVersionClassFlow(ip, 0, 0);
  ipv6::setPayloadLength(ip, static_cast<uint16_t>(icmp_len));
  ipv6::setNextHeader(ip, ipproto::kIcmpv6);
  ipv6::setHopLimit(ip, kReplyTtl);
  std::memcpy(ip + ipv6::kSrcOffset, from, ipv6::kAddrLen);
  std::memcpy(ip + ipv6::kDstOffset, ip_in + ipv6::kSrcOffset, ipv6::kAddrLen);

  uint8_t* h = ip + ipv6::kHeaderLen;
  icmp6::setType(h, type);
  icmp6::setCode(h, code);
  icmp6::setChecksum(h, 0);
  store32(h + 4, rest);
  std::memcpy(h + icmp6::kHeaderLen, ip_in, quote);
  const uint32_t sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, ipproto::kIcmpv6, icmp_len);
  icmp6::setChecksum(h, checksumFinish(checksumAdd(h, icmp_len, sum)));
  return Status::kOk;
}

}  // namespace

Status buildIcmpFragNeeded(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                           const MacAddress& gateway_mac, uint32_t gateway_ip, uint16_t next_hop_mtu,
                           PacketBuffer& out) {
  const uint8_t* in = offending.data();
  if (pkt.l3 != L3Type::kIpv4) return Status::kUnsupported;
  if (!ipv4::dontFragment(in + pkt.l3_offset) || next_hop_mtu < 68) return Status::kUnsupported;
  // The second word: unused (0) and the next-hop MTU (RFC 1191 §4).
  return icmp4Error(in, pkt, gateway_mac, gateway_ip, icmp::kTypeDestUnreachable, icmp::kCodeFragNeeded,
                    next_hop_mtu, out);
}

Status buildIcmp6PacketTooBig(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                              const MacAddress& gateway_mac, const Ipv6Address& gateway_ip, uint32_t mtu,
                              PacketBuffer& out) {
  if (mtu < ipv6::kMinMtu) return Status::kUnsupported;
  // Unlike other errors, packet too big answers multicast destinations too
  // (RFC 4443 §2.4(e.3)).
  return icmp6Error(offending.data(), pkt, gateway_mac, gateway_ip.data(), icmp6::kTypePacketTooBig, 0, mtu, true,
                    out);
}

Status buildIcmpPortUnreachable(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                                const MacAddress& gateway_mac, PacketBuffer& out) {
  const uint8_t* in = offending.data();
  if (pkt.l3 == L3Type::kIpv4) {
    return icmp4Error(in, pkt, gateway_mac, ipv4::dst(in + pkt.l3_offset), icmp::kTypeDestUnreachable,
                      icmp::kCodePortUnreachable, 0, out);
  }
  return icmp6Error(in, pkt, gateway_mac, ipv6::dst(in + pkt.l3_offset), icmp6::kTypeDestUnreachable,
                    icmp6::kCodePortUnreachable, 0, false, out);
}

Status buildTcpReset(std::span<const uint8_t> offending, const ParsedPacket& pkt, const MacAddress& gateway_mac,
                     PacketBuffer& out) {
  const uint8_t* in = offending.data();
  if (pkt.l4 != L4Type::kTcp || pkt.fragment == Fragment::kLater || !isUnicastMac(in)) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  const uint8_t* tcp_in = in + pkt.l4_offset;
  const uint8_t f = tcp::flags(tcp_in);
  // RFC 793 §3.4: a reset is never answered with a reset.
  if (f & tcp::kFlagRst) return Status::kUnsupported;
  const bool v4 = pkt.l3 == L3Type::kIpv4;
  if (v4 ? (!isSingleHostV4(ipv4::src(ip_in)) || ipv4::isMulticast(ipv4::dst(ip_in)) ||
            ipv4::isLimitedBroadcast(ipv4::dst(ip_in)))
         : (ipv6::isUnspecified(ipv6::src(ip_in)) || ipv6::isMulticast(ipv6::src(ip_in)) ||
            ipv6::isMulticast(ipv6::dst(ip_in)))) {
    return Status::kUnsupported;
  }
  const uint32_t ip_len = v4 ? ipv4::kMinHeaderLen : ipv6::kHeaderLen;
  uint8_t* o = resize(out, pkt.l3_offset + ip_len + tcp::kMinHeaderLen);
  if (o == nullptr) return Status::kNoRoom;
  writeL2(o, in, pkt, eth::src(in), gateway_mac);
  uint8_t* ip = o + pkt.l3_offset;
  uint8_t* t = ip + ip_len;
  uint32_t sum;
  if (v4) {
    ipv4::setVersionIhl(ip, ipv4::kMinHeaderLen);
    ipv4::setTos(ip, 0);
    ipv4::setTotalLength(ip, static_cast<uint16_t>(ipv4::kMinHeaderLen + tcp::kMinHeaderLen));
    ipv4::setId(ip, 0);
    ipv4::setFragField(ip, ipv4::kFlagDf);
    ipv4::setTtl(ip, kReplyTtl);
    ipv4::setProtocol(ip, ipproto::kTcp);
    ipv4::setChecksum(ip, 0);
    ipv4::setSrc(ip, ipv4::dst(ip_in));
    ipv4::setDst(ip, ipv4::src(ip_in));
    ipv4::setChecksum(ip, internetChecksum({ip, ipv4::kMinHeaderLen}));
    sum = pseudoHeaderSumV4(ip + ipv4::kSrcOffset, ip + ipv4::kDstOffset, ipproto::kTcp, tcp::kMinHeaderLen);
  } else {
    ipv6::setVersionClassFlow(ip, 0, 0);
    ipv6::setPayloadLength(ip, static_cast<uint16_t>(tcp::kMinHeaderLen));
    ipv6::setNextHeader(ip, ipproto::kTcp);
    ipv6::setHopLimit(ip, kReplyTtl);
    std::memcpy(ip + ipv6::kSrcOffset, ip_in + ipv6::kDstOffset, ipv6::kAddrLen);
    std::memcpy(ip + ipv6::kDstOffset, ip_in + ipv6::kSrcOffset, ipv6::kAddrLen);
    sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, ipproto::kTcp, tcp::kMinHeaderLen);
  }
  std::memset(t, 0, tcp::kMinHeaderLen);
  store16(t, tcp::dstPort(tcp_in));
  store16(t + 2, tcp::srcPort(tcp_in));
  if (f & tcp::kFlagAck) {
    // <SEQ=SEG.ACK><CTL=RST>
    store32(t + 4, tcp::ack(tcp_in));
    t[13] = tcp::kFlagRst;
  } else {
    // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>; SYN and FIN each count one.
    const uint32_t seg_len = pkt.l3_end - pkt.payload_offset + ((f & tcp::kFlagSyn) ? 1 : 0) +
                             ((f & tcp::kFlagFin) ? 1 : 0);
    store32(t + 8, tcp::seq(tcp_in) + seg_len);
    t[13] = tcp::kFlagRst | tcp::kFlagAck;
  }
  t[12] = static_cast<uint8_t>((tcp::kMinHeaderLen / 4) << 4);
  store16(t + tcp::kChecksumOffset, checksumFinish(checksumAdd(t, tcp::kMinHeaderLen, sum)));
  return Status::kOk;
}

}  // namespace dpu::overlay
