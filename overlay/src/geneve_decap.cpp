// Geneve decapsulation: validation of every outer header of a packet received
// on the uplink, the option list walk with the RFC 8926 §3.5 critical-option
// rule, and the strip that leaves the inner Ethernet frame. The bytes come from
// the network: every length is checked before it is used.
#include <algorithm>
#include <cstring>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"

namespace dpu::overlay {
namespace {

constexpr uint32_t kEthernetLen = 14;
constexpr uint32_t kVlanTagLen = 4;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
constexpr uint16_t kEtherTypeVlan = 0x8100;   // IEEE 802.1Q
constexpr uint16_t kEtherTypeQinQ = 0x88a8;   // IEEE 802.1ad
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint8_t kIpv6HopByHop = 0;
constexpr uint8_t kIpv6Routing = 43;
constexpr uint8_t kIpv6Fragment = 44;
constexpr uint8_t kIpv6DestOptions = 60;
constexpr uint16_t kIpv4MoreFragments = 0x2000;
constexpr uint16_t kIpv4FragmentOffset = 0x1fff;

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
  if (size < kEthernetLen) return Status::kTruncated;
  std::memcpy(out.dst_mac.data(), p, 6);
  std::memcpy(out.src_mac.data(), p + 6, 6);
  uint32_t off = 12;
  uint16_t ether_type = load16(p + off);
  out.vlan = false;
  out.vlan_tci = 0;
  if (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) {
    if (size < kEthernetLen + kVlanTagLen) return Status::kTruncated;
    out.vlan = true;
    out.vlan_tci = load16(p + off + 2);
    off += kVlanTagLen;
    ether_type = load16(p + off);
    if (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) return Status::kTooManyVlans;
  }
  off += 2;

  // Outer IP. `ip_end` is where the IP packet ends: anything after it is
  // Ethernet padding of a short frame.
  uint32_t ip_end = 0;
  uint32_t l4_len = 0;
  // The outer IP header, for the UDP pseudo-header: summed only when the
  // checksum is present (never, between our DPUs over IPv4).
  const uint8_t* pseudo_ip = nullptr;
  if (ether_type == kEtherTypeIpv4) {
    out.family = UnderlayFamily::kIpv4;
    if (size - off < overhead::kIpv4) return Status::kTruncated;
    const uint8_t* ip = p + off;
    if ((ip[0] >> 4) != 4) return Status::kBadIpVersion;
    const uint32_t ihl = (ip[0] & 0x0fu) * 4;
    if (ihl < overhead::kIpv4 || ihl > size - off) return Status::kBadIpv4HeaderLength;
    const uint32_t total = load16(ip + 2);
    if (total < ihl || total > size - off) return Status::kBadIpv4TotalLength;
    if (!config.ipv4_checksum_verified && ipv4HeaderChecksum(ip, ihl) != 0) return Status::kBadIpv4Checksum;
    if (ip[9] != kIpProtoUdp) return Status::kNotGeneve;
    // A fragment cannot be decapsulated alone, and we do not reassemble: our
    // peers send with DF, so a fragment means an underlay MTU misconfiguration.
    if ((load16(ip + 6) & (kIpv4MoreFragments | kIpv4FragmentOffset)) != 0) return Status::kGeneveFragment;
    out.tos = ip[1];
    out.ttl = ip[8];
    out.src_ip = {};
    out.dst_ip = {};
    std::memcpy(out.src_ip.data(), ip + 12, 4);
    std::memcpy(out.dst_ip.data(), ip + 16, 4);
    off += ihl;
    ip_end = off - ihl + total;
    l4_len = total - ihl;
    pseudo_ip = ip;
  } else if (ether_type == kEtherTypeIpv6) {
    out.family = UnderlayFamily::kIpv6;
    if (size - off < overhead::kIpv6) return Status::kTruncated;
    const uint8_t* ip = p + off;
    if ((ip[0] >> 4) != 6) return Status::kBadIpVersion;
    const uint32_t payload = load16(ip + 4);
    // Zero would be a jumbogram (RFC 2675), which a 6081 tunnel never sends.
    if (payload == 0 || payload > size - off - overhead::kIpv6) return Status::kBadIpv6PayloadLength;
    switch (ip[6]) {
      case kIpProtoUdp:
        break;
      case kIpv6Fragment:
        return Status::kGeneveFragment;
      case kIpv6HopByHop:
      case kIpv6Routing:
      case kIpv6DestOptions:
        return Status::kUnsupported;
      default:
        return Status::kNotGeneve;
    }
    out.tos = static_cast<uint8_t>(load16(ip) >> 4);
    out.ttl = ip[7];
    std::memcpy(out.src_ip.data(), ip + 8, 16);
    std::memcpy(out.dst_ip.data(), ip + 24, 16);
    off += overhead::kIpv6;
    ip_end = off + payload;
    l4_len = payload;
    pseudo_ip = ip;
  } else {
    return Status::kNotGeneve;
  }

  // Outer UDP: the length must be the IP payload exactly.
  if (l4_len < overhead::kUdp) return Status::kBadL4Header;
  const uint8_t* udp = p + off;
  out.src_port = load16(udp);
  out.dst_port = load16(udp + 2);
  if (out.dst_port != kGeneveUdpPort) return Status::kNotGeneve;
  if (load16(udp + 4) != l4_len) return Status::kBadL4Header;
  const uint16_t udp_csum = load16(udp + 6);
  out.udp_checksum = udp_csum != 0;
  if (udp_csum == 0) {
    // RFC 8200 §8.1: IPv6 receivers discard a zero UDP checksum. RFC 6935
    // would allow it for tunnels, but our peers always compute it over IPv6.
    if (out.family == UnderlayFamily::kIpv6) return Status::kBadL4Checksum;
  } else if (!config.udp_checksum_verified) {
    const uint32_t pseudo_sum =
        out.family == UnderlayFamily::kIpv4
            ? pseudoHeaderSumV4(pseudo_ip + 12, pseudo_ip + 16, kIpProtoUdp, static_cast<uint16_t>(l4_len))
            : pseudoHeaderSumV6(pseudo_ip + 8, pseudo_ip + 24, kIpProtoUdp, l4_len);
    if (checksumFinish(checksumAdd(udp, l4_len, pseudo_sum)) != 0) return Status::kBadL4Checksum;
  }
  off += overhead::kUdp;

  // Geneve header (RFC 8926 §3.4).
  const uint32_t geneve_len = l4_len - overhead::kUdp;
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

  if (ip_end - off < kEthernetLen) return Status::kTruncated;
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
