// Slow-path replies (replies.h): ARP, neighbor advertisement, ICMP "fragmentation
// needed" and ICMPv6 "packet too big", written into a caller-owned PacketBuffer.
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

Status buildArpRequest(const MacAddress& sender_mac, uint32_t sender_ip, uint32_t target_ip, const MacAddress& dst_mac,
                       PacketBuffer& out) {
  if (!isUnicastMac(sender_mac.data()) || sender_ip == 0) return Status::kUnsupported;
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
  ipv6::setVersionClassFlow(ip, 0, 0);
  ipv6::setPayloadLength(ip, kNaLen);
  ipv6::setNextHeader(ip, ipproto::kIcmpv6);
  ipv6::setHopLimit(ip, icmp6::kNdHopLimit);
  ipv6::setSrc(ip, target);
  ipv6::setDst(ip, dst);

  uint8_t* na = ip + ipv6::kHeaderLen;
  icmp6::setType(na, icmp6::kTypeNeighborAdvert);
  icmp6::setCode(na, 0);
  icmp6::setChecksum(na, 0);
  icmp6::setNaFlags(na, icmp6::kNaFlagRouter | icmp6::kNaFlagOverride | (dad ? 0 : icmp6::kNaFlagSolicited));
  icmp6::setNdTarget(na, target);
  uint8_t* opt = na + icmp6::kNdOptionsOffset;
  opt[0] = icmp6::kNdOptTargetLinkAddr;
  opt[1] = 1;  // in units of 8 bytes
  std::memcpy(opt + 2, gateway_mac.data(), gateway_mac.size());
  const uint32_t sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, ipproto::kIcmpv6, kNaLen);
  icmp6::setChecksum(na, checksumFinish(checksumAdd(na, kNaLen, sum)));
  return Status::kOk;
}

Status buildIcmpFragNeeded(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                           const MacAddress& gateway_mac, uint32_t gateway_ip, uint16_t next_hop_mtu,
                           PacketBuffer& out) {
  const uint8_t* in = offending.data();
  if (pkt.l3 != L3Type::kIpv4 || pkt.fragment == Fragment::kLater) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  if (!ipv4::dontFragment(ip_in) || next_hop_mtu < 68) return Status::kUnsupported;
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
  ipv4::setSrc(ip, gateway_ip);
  ipv4::setDst(ip, sender);
  ipv4::setChecksum(ip, internetChecksum({ip, ipv4::kMinHeaderLen}));

  uint8_t* h = ip + ipv4::kMinHeaderLen;
  icmp::setType(h, icmp::kTypeDestUnreachable);
  icmp::setCode(h, icmp::kCodeFragNeeded);
  icmp::setChecksum(h, 0);
  store16(h + 4, 0);  // unused (RFC 1191 §4)
  icmp::setNextHopMtu(h, next_hop_mtu);
  std::memcpy(h + icmp::kHeaderLen, ip_in, quote);
  icmp::setChecksum(h, internetChecksum({h, icmp_len}));
  return Status::kOk;
}

Status buildIcmp6PacketTooBig(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                              const MacAddress& gateway_mac, const Ipv6Address& gateway_ip, uint32_t mtu,
                              PacketBuffer& out) {
  const uint8_t* in = offending.data();
  if (pkt.l3 != L3Type::kIpv6 || mtu < ipv6::kMinMtu) return Status::kUnsupported;
  if (pkt.l4 == L4Type::kIcmpv6 && icmp6::isError(icmp6::type(in + pkt.l4_offset))) return Status::kUnsupported;
  const uint8_t* ip_in = in + pkt.l3_offset;
  // Unlike other errors, packet too big answers multicast destinations too
  // (RFC 4443 §2.4(e.3)), but never a source that is not one node (§2.4(e.6)).
  if (ipv6::isUnspecified(ipv6::src(ip_in)) || ipv6::isMulticast(ipv6::src(ip_in))) return Status::kUnsupported;

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
  ipv6::setSrc(ip, gateway_ip);
  std::memcpy(ip + ipv6::kDstOffset, ip_in + ipv6::kSrcOffset, ipv6::kAddrLen);

  uint8_t* h = ip + ipv6::kHeaderLen;
  icmp6::setType(h, icmp6::kTypePacketTooBig);
  icmp6::setCode(h, 0);
  icmp6::setChecksum(h, 0);
  icmp6::setMtu(h, mtu);
  std::memcpy(h + icmp6::kHeaderLen, ip_in, quote);
  const uint32_t sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, ipproto::kIcmpv6, icmp_len);
  icmp6::setChecksum(h, checksumFinish(checksumAdd(h, icmp_len, sum)));
  return Status::kOk;
}

}  // namespace dpu::overlay
