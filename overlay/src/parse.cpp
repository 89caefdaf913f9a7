// The packet parser and the slow-path verifiers declared in parse.h.
//
// Every length read from the packet is checked against what is left before it
// is used as a bound, in the order the headers nest: the Ethernet frame bounds
// the IP datagram, the datagram's own length (not the frame) bounds the
// extension headers and L4, so Ethernet padding is never mistaken for payload.
#include "overlay/parse.h"

#include <cstring>
#include <limits>

#include "overlay/checksum.h"

namespace dpu::overlay {
namespace {

// TCP, UDP, SCTP, ICMP or ICMPv6 at out.l4_offset, bounded by out.l3_end. A first
// fragment must carry the whole L4 header too (RFC 1858 §3, RFC 7112).
Status parseL4(const uint8_t* base, ParsedPacket& out) {
  const uint8_t* h = base + out.l4_offset;
  const uint32_t avail = out.l3_end - out.l4_offset;
  const bool v4 = out.l3 == L3Type::kIpv4;
  switch (out.ip_proto) {
    case ipproto::kTcp: {
      if (avail < tcp::kMinHeaderLen) return Status::kBadL4Header;
      const size_t hl = tcp::headerLen(h);
      if (hl < tcp::kMinHeaderLen || hl > avail) return Status::kBadL4Header;
      out.l4 = L4Type::kTcp;
      out.payload_offset = static_cast<uint16_t>(out.l4_offset + hl);
      return Status::kOk;
    }
    case ipproto::kUdp: {
      if (avail < udp::kHeaderLen) return Status::kBadL4Header;
      const uint16_t len = udp::length(h);
      // A first fragment's UDP length covers the reassembled datagram. A length
      // shorter than the IP payload is allowed: the rest is the UDP options
      // surplus area (draft-ietf-tsvwg-udp-options), as the Linux stack trims it.
      if (len < udp::kHeaderLen) return Status::kBadL4Header;
      if (out.fragment == Fragment::kNone && len > avail) return Status::kBadL4Header;
      out.l4 = L4Type::kUdp;
      out.payload_offset = static_cast<uint16_t>(out.l4_offset + udp::kHeaderLen);
      return Status::kOk;
    }
    case ipproto::kSctp:
      // A later fragment has no common header; the first must hold it whole.
      if (out.fragment == Fragment::kLater) return Status::kOk;
      if (avail < sctp::kHeaderLen) return Status::kBadL4Header;
      out.l4 = L4Type::kSctp;
      out.payload_offset = static_cast<uint16_t>(out.l4_offset + sctp::kHeaderLen);
      return Status::kOk;
    case ipproto::kIcmp:
      if (!v4) return Status::kOk;  // ICMPv4 inside IPv6 is just an unknown protocol
      if (avail < icmp::kHeaderLen) return Status::kBadL4Header;
      out.l4 = L4Type::kIcmp;
      out.payload_offset = static_cast<uint16_t>(out.l4_offset + icmp::kHeaderLen);
      return Status::kOk;
    case ipproto::kIcmpv6:
      if (v4) return Status::kOk;
      if (avail < icmp6::kHeaderLen) return Status::kBadL4Header;
      out.l4 = L4Type::kIcmpv6;
      out.payload_offset = static_cast<uint16_t>(out.l4_offset + icmp6::kHeaderLen);
      return Status::kOk;
    default:
      return Status::kOk;
  }
}

Status parseIpv4(const uint8_t* base, size_t frame_len, ParsedPacket& out) {
  const uint8_t* ip = base + out.l3_offset;
  const size_t avail = frame_len - out.l3_offset;
  if (avail < ipv4::kMinHeaderLen) return Status::kTruncated;
  if (ipv4::version(ip) != 4) return Status::kBadIpVersion;
  const size_t hl = ipv4::headerLen(ip);
  if (hl < ipv4::kMinHeaderLen || hl > avail) return Status::kBadIpv4HeaderLength;
  const size_t total = ipv4::totalLength(ip);
  if (total < hl || total > avail) return Status::kBadIpv4TotalLength;
  out.l3 = L3Type::kIpv4;
  out.l3_end = static_cast<uint32_t>(out.l3_offset + total);
  out.ip_proto = ipv4::protocol(ip);
  out.l4_offset = static_cast<uint16_t>(out.l3_offset + hl);
  out.payload_offset = out.l4_offset;
  out.pseudo_dst_offset = static_cast<uint16_t>(out.l3_offset + ipv4::kDstOffset);
  if (ipv4::fragOffset(ip) != 0) {
    out.fragment = Fragment::kLater;
    return Status::kOk;
  }
  if (ipv4::moreFragments(ip)) out.fragment = Fragment::kFirst;
  return parseL4(base, out);
}

// The address a routing header names as the final destination when it still
// has segments left, or 0 when its type is unknown (RFC 8200 §8.1).
uint16_t finalDestination(const uint8_t* ext, size_t ext_offset, size_t ext_len) {
  switch (ipv6::routingType(ext)) {
    case 0:  // RFC 2460 type 0 (deprecated by RFC 5095): the last address listed
      if (ext_len >= 8 + ipv6::kAddrLen && (ext_len - 8) % ipv6::kAddrLen == 0)
        return static_cast<uint16_t>(ext_offset + ext_len - ipv6::kAddrLen);
      return 0;
    case 2:  // RFC 6275 §6.4: the home address
    case 4:  // RFC 8754 §2: Segment List[0] is the last segment
      if (ext_len >= 8 + ipv6::kAddrLen) return static_cast<uint16_t>(ext_offset + 8);
      return 0;
    default:
      return 0;
  }
}

Status parseIpv6(const uint8_t* base, size_t frame_len, ParsedPacket& out) {
  const uint8_t* ip = base + out.l3_offset;
  const size_t avail = frame_len - out.l3_offset;
  if (avail < ipv6::kHeaderLen) return Status::kTruncated;
  if (ipv6::version(ip) != 6) return Status::kBadIpVersion;
  const size_t total = ipv6::kHeaderLen + ipv6::payloadLength(ip);
  if (total > avail) return Status::kBadIpv6PayloadLength;
  out.l3 = L3Type::kIpv6;
  out.l3_end = static_cast<uint32_t>(out.l3_offset + total);
  out.pseudo_dst_offset = static_cast<uint16_t>(out.l3_offset + ipv6::kDstOffset);

  uint8_t next = ipv6::nextHeader(ip);
  size_t pos = out.l3_offset + ipv6::kHeaderLen;
  bool seen_fragment = false;
  for (int count = 0; ipv6::isExtensionHeader(next); ++count) {
    if (count == kMaxIpv6ExtHeaders) return Status::kBadIpv6ExtHeader;
    // Hop-by-hop options may only follow the IPv6 header (RFC 8200 §4.1).
    if (next == ipproto::kHopByHop && count != 0) return Status::kBadIpv6ExtHeader;
    if (out.l3_end - pos < ipv6::kExtMinLen) return Status::kBadIpv6ExtHeader;
    const uint8_t* ext = base + pos;
    const size_t len = ipv6::extLength(next, ext);
    if (len > out.l3_end - pos) return Status::kBadIpv6ExtHeader;
    // Over IPv6, AH keeps the 8-byte alignment of every extension header (RFC 4302 §2.2).
    if (next == ipproto::kAh && len % 8 != 0) return Status::kBadIpv6ExtHeader;
    if (next == ipproto::kFragment) {
      // One fragment header per packet: a second is either an attack or a
      // fragment of a fragment, which nothing legitimate sends.
      if (seen_fragment) return Status::kBadIpv6ExtHeader;
      seen_fragment = true;
      if (ipv6::fragOffset(ext) != 0) {
        out.fragment = Fragment::kLater;
        out.ip_proto = ipv6::extNextHeader(ext);
        out.l4_offset = static_cast<uint16_t>(pos + len);
        out.payload_offset = out.l4_offset;
        return Status::kOk;
      }
      if (ipv6::fragMore(ext)) out.fragment = Fragment::kFirst;
    }
    if (next == ipproto::kRouting && ipv6::segmentsLeft(ext) > 0) {
      out.pseudo_dst_offset = finalDestination(ext, pos, len);
    }
    next = ipv6::extNextHeader(ext);
    pos += len;
  }
  out.ip_proto = next;
  out.l4_offset = static_cast<uint16_t>(pos);
  out.payload_offset = out.l4_offset;
  return parseL4(base, out);
}

}  // namespace

Status parsePacket(std::span<const uint8_t> frame, ParsedPacket& out) {
  out = ParsedPacket{};
  const uint8_t* p = frame.data();
  const size_t n = frame.size();
  if (n < eth::kHeaderLen) return Status::kTruncated;
  if (n > std::numeric_limits<uint32_t>::max()) return Status::kUnsupported;
  out.frame_len = static_cast<uint32_t>(n);

  size_t type_offset = 12;
  uint16_t type = load16(p + type_offset);
  while (vlan::isTpid(type)) {
    if (out.vlan_count == vlan::kMaxTags) return Status::kTooManyVlans;
    // The tag and the EtherType after it.
    if (n < type_offset + vlan::kTagLen + 2) return Status::kTruncated;
    out.vlan_tpid[out.vlan_count] = type;
    out.vlan_tci[out.vlan_count] = load16(p + type_offset + 2);
    ++out.vlan_count;
    type_offset += vlan::kTagLen;
    type = load16(p + type_offset);
  }
  out.ethertype = type;
  out.l3_offset = static_cast<uint16_t>(type_offset + 2);
  if (type < eth::kMinType) {
    // 802.3 length field (LLC/SNAP, e.g. STP): not carried by this network.
    return type <= eth::kMaxLength ? Status::kUnsupported : Status::kBadEthernet;
  }

  switch (type) {
    case eth::kTypeArp: {
      if (n - out.l3_offset < arp::kLen) return Status::kTruncated;
      const uint8_t* a = p + out.l3_offset;
      if (arp::htype(a) != arp::kHtypeEthernet || arp::ptype(a) != eth::kTypeIpv4 || arp::hlen(a) != 6 ||
          arp::plen(a) != 4) {
        return Status::kBadArp;
      }
      out.l3 = L3Type::kArp;
      out.l3_end = static_cast<uint32_t>(out.l3_offset + arp::kLen);
      return Status::kOk;
    }
    case eth::kTypeIpv4:
      return parseIpv4(p, n, out);
    case eth::kTypeIpv6:
      return parseIpv6(p, n, out);
    default:
      // Unknown EtherTypes (LLDP, MPLS, ...) still switch at L2.
      out.l3_end = out.frame_len;
      return Status::kOk;
  }
}

Status verifyIpv4Checksum(std::span<const uint8_t> frame, const ParsedPacket& pkt) {
  if (pkt.l3 != L3Type::kIpv4) return Status::kUnsupported;
  const uint8_t* ip = frame.data() + pkt.l3_offset;
  // A header that includes its correct checksum sums to 0xffff (RFC 1071 §1).
  return checksumFinish(checksumAdd(ip, ipv4::headerLen(ip))) == 0 ? Status::kOk : Status::kBadIpv4Checksum;
}

Status verifyL4Checksum(std::span<const uint8_t> frame, const ParsedPacket& pkt) {
  // SCTP's is a CRC32c over the packet, not verified here.
  if (pkt.l4 == L4Type::kNone || pkt.l4 == L4Type::kSctp || pkt.fragment != Fragment::kNone) {
    return Status::kUnsupported;
  }
  const uint8_t* base = frame.data();
  const uint8_t* l4 = base + pkt.l4_offset;
  uint32_t len = pkt.l4Length();
  if (pkt.l4 == L4Type::kUdp) {
    len = udp::length(l4);
    if (udp::checksum(l4) == 0) return pkt.l3 == L3Type::kIpv4 ? Status::kOk : Status::kBadL4Checksum;
  }
  uint32_t sum = 0;
  if (pkt.l4 != L4Type::kIcmp) {
    const uint8_t* ip = base + pkt.l3_offset;
    if (pkt.l3 == L3Type::kIpv4) {
      sum = pseudoHeaderSumV4(ip + ipv4::kSrcOffset, base + pkt.pseudo_dst_offset, pkt.ip_proto,
                              static_cast<uint16_t>(len));
    } else {
      if (pkt.pseudo_dst_offset == 0) return Status::kUnsupported;
      sum = pseudoHeaderSumV6(ip + ipv6::kSrcOffset, base + pkt.pseudo_dst_offset, pkt.ip_proto, len);
    }
  }
  sum = checksumAdd(l4, len, sum);
  return checksumFinish(sum) == 0 ? Status::kOk : Status::kBadL4Checksum;
}

Status parseNeighborMessage(std::span<const uint8_t> frame, const ParsedPacket& pkt, NeighborMessage& out) {
  out = NeighborMessage{};
  if (pkt.l4 != L4Type::kIcmpv6 || pkt.fragment != Fragment::kNone) return Status::kUnsupported;
  const uint8_t* base = frame.data();
  const uint8_t* ip = base + pkt.l3_offset;
  const uint8_t* h = base + pkt.l4_offset;
  const uint8_t type = icmp6::type(h);
  if (type != icmp6::kTypeNeighborSolicit && type != icmp6::kTypeNeighborAdvert) return Status::kUnsupported;
  const uint32_t len = pkt.l4Length();
  if (ipv6::hopLimit(ip) != icmp6::kNdHopLimit || icmp6::code(h) != 0 || len < icmp6::kNdOptionsOffset) {
    return Status::kBadL4Header;
  }
  if (Status s = verifyL4Checksum(frame, pkt); s != Status::kOk) return s;
  if (ipv6::isMulticast(h + icmp6::kNdTargetOffset)) return Status::kBadL4Header;

  const bool ns = type == icmp6::kTypeNeighborSolicit;
  const uint8_t wanted = ns ? icmp6::kNdOptSourceLinkAddr : icmp6::kNdOptTargetLinkAddr;
  for (uint32_t pos = icmp6::kNdOptionsOffset; pos < len;) {
    if (len - pos < 2) return Status::kBadL4Header;
    const uint32_t opt_len = uint32_t{h[pos + 1]} * 8;  // RFC 4861 §4.6: units of 8 bytes, 0 invalid
    if (opt_len == 0 || opt_len > len - pos) return Status::kBadL4Header;
    if (h[pos] == wanted) {
      // On Ethernet the link-layer address option is exactly 8 bytes (RFC 2464 §6).
      if (opt_len != icmp6::kNdLinkAddrOptionLen) return Status::kBadL4Header;
      out.has_link_addr = true;
      std::memcpy(out.link_addr.data(), h + pos + 2, out.link_addr.size());
    }
    pos += opt_len;
  }

  const uint8_t* src = ip + ipv6::kSrcOffset;
  const uint8_t* dst = ip + ipv6::kDstOffset;
  if (ns && ipv6::isUnspecified(src)) {
    // Duplicate address detection goes to the solicited-node group ff02::1:ffXX:XXXX
    // and carries no source link-layer address (RFC 4861 §7.1.1).
    static constexpr uint8_t kSolicitedNodePrefix[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
    if (out.has_link_addr || std::memcmp(dst, kSolicitedNodePrefix, sizeof kSolicitedNodePrefix) != 0) {
      return Status::kBadL4Header;
    }
  }
  if (!ns && ipv6::isMulticast(dst) && (icmp6::naFlags(h) & icmp6::kNaFlagSolicited)) {
    return Status::kBadL4Header;  // RFC 4861 §7.1.2
  }
  out.target_offset = static_cast<uint16_t>(pkt.l4_offset + icmp6::kNdTargetOffset);
  return Status::kOk;
}

}  // namespace dpu::overlay
