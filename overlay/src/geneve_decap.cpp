// Geneve decapsulation: validation of every outer header of a packet received
// on the uplink, the option list walk with the RFC 8926 §3.5 critical-option
// rule, and the strip that leaves the inner Ethernet frame. The bytes come from
// the network: every length is checked before it is used.
#include <algorithm>
#include <cstring>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::overlay {
namespace {

bool understands(std::span<const GeneveOptionKey> understood, uint16_t option_class, uint8_t type) {
  for (const GeneveOptionKey& k : understood) {
    if (k.option_class == option_class && k.type == type) return true;
  }
  return false;
}

// The option area [p, p + len): every option header and its data must lie
// inside it, and the last option must end exactly at its end (RFC 8926 §3.4:
// Opt Len covers the options and nothing else).
Status parseOptions(const uint8_t* p, uint32_t len, const GeneveDecapConfig& config, GeneveHeaders& out) {
  uint32_t off = 0;
  const bool ovn_understood = len != 0 && understands(config.understood, kOvnOptionClass, kOvnOptionType);
  while (off < len) {
    if (len - off < kGeneveOptionHeaderLen) return Status::kBadGeneveOption;
    const uint8_t* o = p + off;
    GeneveOption option;
    option.option_class = load16(o);
    option.type = o[2];
    // The three R bits are reserved and ignored on receipt (RFC 8926 §3.5).
    const uint32_t data_len = (o[3] & 0x1fu) * 4;
    if (len - off - kGeneveOptionHeaderLen < data_len) return Status::kBadGeneveOption;
    option.data = {o + kGeneveOptionHeaderLen, data_len};
    off += kGeneveOptionHeaderLen + data_len;

    if (option.option_class == kOvnOptionClass && option.type == kOvnOptionType && ovn_understood) {
      // Two OVN options would name two logical ports: which one a receiver
      // honours is ambiguous (and the NIC matches one), so refuse the packet.
      if (out.ovn) return Status::kBadGeneveOption;
      OvnPortKeys keys;
      if (Status s = decodeOvnOption(option, keys); s != Status::kOk) return s;
      out.ovn = keys;
    } else if (option.critical() && !understands(config.understood, option.option_class, option.type)) {
      // RFC 8926 §3.5: an endpoint that does not understand a critical option
      // MUST drop the packet.
      return Status::kGeneveCriticalOption;
    }
    if (out.option_count == kGeneveMaxOptions) return Status::kGeneveTooManyOptions;
    out.options[out.option_count++] = option;
  }
  return Status::kOk;
}

}  // namespace

Status parseGeneve(std::span<const uint8_t> frame, const GeneveDecapConfig& config, GeneveHeaders& out) {
  const uint8_t* p = frame.data();
  const size_t size = frame.size();
  out.ovn.reset();
  out.option_count = 0;

  // Outer Ethernet, at most one VLAN tag.
  if (size < eth::kHeaderLen) return Status::kTruncated;
  std::memcpy(out.dst_mac.data(), p, eth::kAddrLen);
  std::memcpy(out.src_mac.data(), p + eth::kAddrLen, eth::kAddrLen);
  uint32_t off = 12;  // the EtherType, or the TPID of a tag
  uint16_t ether_type = load16(p + off);
  out.vlan = false;
  out.vlan_tci = 0;
  if (vlan::isTpid(ether_type)) {
    if (size < eth::kHeaderLen + vlan::kTagLen) return Status::kTruncated;
    out.vlan = true;
    out.vlan_tci = vlan::tci(p + off);
    off += vlan::kTagLen;
    ether_type = load16(p + off);
    if (vlan::isTpid(ether_type)) return Status::kTooManyVlans;
  }
  off += 2;

  // Outer IP. `ip_end` is where the IP packet ends: anything after it is
  // Ethernet padding of a short frame.
  uint32_t ip_end = 0;
  uint32_t l4_len = 0;
  // The outer IP header, for the UDP pseudo-header: summed only when the
  // checksum is present (never, between our DPUs over IPv4).
  const uint8_t* pseudo_ip = nullptr;
  if (ether_type == eth::kTypeIpv4) {
    out.family = UnderlayFamily::kIpv4;
    if (size - off < ipv4::kMinHeaderLen) return Status::kTruncated;
    const uint8_t* ip = p + off;
    if (ipv4::version(ip) != 4) return Status::kBadIpVersion;
    const auto ihl = static_cast<uint32_t>(ipv4::headerLen(ip));
    if (ihl < ipv4::kMinHeaderLen || ihl > size - off) return Status::kBadIpv4HeaderLength;
    const uint32_t total = ipv4::totalLength(ip);
    if (total < ihl || total > size - off) return Status::kBadIpv4TotalLength;
    if (!config.ipv4_checksum_verified && ipv4HeaderChecksum(ip, ihl) != 0) return Status::kBadIpv4Checksum;
    if (ipv4::protocol(ip) != ipproto::kUdp) return Status::kNotGeneve;
    // A fragment cannot be decapsulated alone, and we do not reassemble: our
    // peers send with DF, so a fragment means an underlay MTU misconfiguration.
    if ((ipv4::fragField(ip) & (ipv4::kFlagMf | ipv4::kFragOffsetMask)) != 0) return Status::kGeneveFragment;
    out.tos = ipv4::tos(ip);
    out.ttl = ipv4::ttl(ip);
    out.src_ip = {};
    out.dst_ip = {};
    std::memcpy(out.src_ip.data(), ip + ipv4::kSrcOffset, 4);
    std::memcpy(out.dst_ip.data(), ip + ipv4::kDstOffset, 4);
    off += ihl;
    ip_end = off - ihl + total;
    l4_len = total - ihl;
    pseudo_ip = ip;
  } else if (ether_type == eth::kTypeIpv6) {
    out.family = UnderlayFamily::kIpv6;
    if (size - off < ipv6::kHeaderLen) return Status::kTruncated;
    const uint8_t* ip = p + off;
    if (ipv6::version(ip) != 6) return Status::kBadIpVersion;
    const uint32_t payload = ipv6::payloadLength(ip);
    // Zero would be a jumbogram (RFC 2675), which a 6081 tunnel never sends.
    if (payload == 0 || payload > size - off - ipv6::kHeaderLen) return Status::kBadIpv6PayloadLength;
    switch (ipv6::nextHeader(ip)) {
      case ipproto::kUdp:
        break;
      case ipproto::kFragment:
        return Status::kGeneveFragment;
      case ipproto::kHopByHop:
      case ipproto::kRouting:
      case ipproto::kDestOptions:
        return Status::kUnsupported;
      default:
        return Status::kNotGeneve;
    }
    out.tos = ipv6::trafficClass(ip);
    out.ttl = ipv6::hopLimit(ip);
    out.src_ip = ipv6::srcAddress(ip);
    out.dst_ip = ipv6::dstAddress(ip);
    off += ipv6::kHeaderLen;
    ip_end = off + payload;
    l4_len = payload;
    pseudo_ip = ip;
  } else {
    return Status::kNotGeneve;
  }

  // Outer UDP: the length must be the IP payload exactly.
  if (l4_len < udp::kHeaderLen) return Status::kBadL4Header;
  const uint8_t* udp = p + off;
  out.src_port = udp::srcPort(udp);
  out.dst_port = udp::dstPort(udp);
  if (out.dst_port != kGeneveUdpPort) return Status::kNotGeneve;
  if (udp::length(udp) != l4_len) return Status::kBadL4Header;
  const uint16_t udp_csum = udp::checksum(udp);
  out.udp_checksum = udp_csum != 0;
  if (udp_csum == 0) {
    // RFC 8200 §8.1: IPv6 receivers discard a zero UDP checksum. RFC 6935
    // would allow it for tunnels, but our peers always compute it over IPv6.
    if (out.family == UnderlayFamily::kIpv6) return Status::kBadL4Checksum;
  } else if (!config.udp_checksum_verified) {
    const uint32_t pseudo_sum =
        out.family == UnderlayFamily::kIpv4
            ? pseudoHeaderSumV4(pseudo_ip + ipv4::kSrcOffset, pseudo_ip + ipv4::kDstOffset, ipproto::kUdp,
                                static_cast<uint16_t>(l4_len))
            : pseudoHeaderSumV6(ipv6::src(pseudo_ip), ipv6::dst(pseudo_ip), ipproto::kUdp, l4_len);
    if (checksumFinish(checksumAdd(udp, l4_len, pseudo_sum)) != 0) return Status::kBadL4Checksum;
  }
  off += udp::kHeaderLen;

  // Geneve header (RFC 8926 §3.4).
  const uint32_t geneve_len = l4_len - udp::kHeaderLen;
  if (geneve_len < kGeneveHeaderLen) return Status::kTruncated;
  const uint8_t* g = p + off;
  // §3.4: packets with an unknown version MUST be dropped.
  if ((g[0] >> 6) != 0) return Status::kBadGeneveVersion;
  out.options_len = (g[0] & 0x3fu) * 4;
  if (out.options_len > geneve_len - kGeneveHeaderLen) return Status::kBadGeneveLength;
  out.oam = (g[1] & 0x80) != 0;
  out.critical = (g[1] & 0x40) != 0;
  if (load16(g + 2) != kGeneveProtocolEthernet) return Status::kBadGeneveProtocol;
  out.vni = load32(g + 4) >> 8;
  off += kGeneveHeaderLen;
  // Options are parsed even when C is clear: we are the endpoint and want the
  // OVN option; a critical option is dropped whatever the C bit says.
  if (Status s = parseOptions(p + off, out.options_len, config, out); s != Status::kOk) return s;
  off += out.options_len;

  if (ip_end - off < eth::kHeaderLen) return Status::kTruncated;
  out.inner_offset = off;
  out.inner_length = ip_end - off;
  return Status::kOk;
}

Status decapGeneve(PacketBuffer& packet, const GeneveDecapConfig& config, GeneveHeaders& out) {
  if (Status s = parseGeneve(packet.bytes(), config, out); s != Status::kOk) return s;
  // Cannot fail: parseGeneve checked both bounds against this packet.
  packet.trim(packet.size() - out.inner_offset - out.inner_length);
  packet.adj(out.inner_offset);
  return Status::kOk;
}

}  // namespace dpu::overlay
