// Geneve encapsulation: building the per-tunnel outer headers once, and the
// per-packet copy-and-patch that the dataplane runs for every packet it sends
// to another node in software.
#include <cstring>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"

namespace dpu::overlay {
namespace {

constexpr uint32_t kEthernetLen = 14;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint16_t kIpv4DontFragment = 0x4000;
constexpr uint32_t kMaxIpLength = 0xffff;

}  // namespace

Status GeneveEncapTemplate::build(const GeneveTunnel& tunnel) {
  if (tunnel.vni > kGeneveMaxVni) return Status::kUnsupported;
  uint32_t options_len = 0;
  bool critical = false;
  for (const GeneveOption& option : tunnel.options) {
    // RFC 8926 §3.5: the length counts 4-byte words in 5 bits.
    if (option.data.size() % 4 != 0 || option.data.size() > kGeneveMaxOptionDataLen) {
      return Status::kBadGeneveOption;
    }
    options_len += option.wireLength();
    if (options_len > kGeneveMaxOptionsLen) return Status::kGeneveOptionsTooLong;
    critical = critical || option.critical();
  }

  GeneveEncapTemplate t;
  uint8_t* p = t.header_.data();
  std::memcpy(p, tunnel.dst_mac.data(), 6);
  std::memcpy(p + 6, tunnel.src_mac.data(), 6);
  uint32_t off = kEthernetLen;
  if (tunnel.family == UnderlayFamily::kIpv4) {
    store16(p + 12, kEtherTypeIpv4);
    uint8_t* ip = p + off;
    ip[0] = 0x45;
    ip[1] = tunnel.tos;
    store16(ip + 2, 0);  // total length: per packet
    store16(ip + 4, 0);  // identification (RFC 6864 §4.1)
    store16(ip + 6, kIpv4DontFragment);
    ip[8] = tunnel.ttl;
    ip[9] = kIpProtoUdp;
    store16(ip + 10, 0);  // checksum: per packet
    std::memcpy(ip + 12, tunnel.src_ip.data(), 4);
    std::memcpy(ip + 16, tunnel.dst_ip.data(), 4);
    t.ipv4_sum_ = checksumAdd(ip, overhead::kIpv4);
    off += overhead::kIpv4;
  } else {
    store16(p + 12, kEtherTypeIpv6);
    uint8_t* ip = p + off;
    store32(ip, (6u << 28) | (uint32_t{tunnel.tos} << 20));
    store16(ip + 4, 0);  // payload length: per packet
    ip[6] = kIpProtoUdp;
    ip[7] = tunnel.ttl;
    std::memcpy(ip + 8, tunnel.src_ip.data(), 16);
    std::memcpy(ip + 24, tunnel.dst_ip.data(), 16);
    off += overhead::kIpv6;
  }

  t.udp_offset_ = static_cast<uint8_t>(off);
  uint8_t* udp = p + off;
  store16(udp, 0);  // source port: per packet, from the inner flow hash
  store16(udp + 2, kGeneveUdpPort);
  store16(udp + 4, 0);
  store16(udp + 6, 0);
  off += overhead::kUdp;

  uint8_t* geneve = p + off;
  geneve[0] = static_cast<uint8_t>(options_len / 4);  // version 0
  // RFC 8926 §3.4: C must be set when any option is critical, so that a
  // receiver that skips options knows it may not.
  geneve[1] = static_cast<uint8_t>((tunnel.oam ? 0x80 : 0) | (critical ? 0x40 : 0));
  store16(geneve + 2, kGeneveProtocolEthernet);
  store32(geneve + 4, tunnel.vni << 8);
  off += kGeneveHeaderLen;
  for (const GeneveOption& option : tunnel.options) {
    uint8_t* o = p + off;
    store16(o, option.option_class);
    o[2] = option.type;
    o[3] = static_cast<uint8_t>(option.data.size() / 4);  // R bits zero
    if (!option.data.empty()) std::memcpy(o + kGeneveOptionHeaderLen, option.data.data(), option.data.size());
    off += option.wireLength();
  }
  t.length_ = static_cast<uint16_t>(off);
  t.family_ = tunnel.family;
  t.udp_checksum_ = tunnel.udp_checksum || tunnel.family == UnderlayFamily::kIpv6;
  if (t.udp_checksum_) {
    uint32_t sum = tunnel.family == UnderlayFamily::kIpv4
                       ? pseudoHeaderSumV4(tunnel.src_ip.data(), tunnel.dst_ip.data(), kIpProtoUdp, 0)
                       : pseudoHeaderSumV6(tunnel.src_ip.data(), tunnel.dst_ip.data(), kIpProtoUdp, 0);
    sum += kGeneveUdpPort;
    t.udp_sum_ = checksumAdd(geneve, off - (t.udp_offset_ + overhead::kUdp), sum);
  }
  *this = t;
  return Status::kOk;
}

Status GeneveEncapTemplate::encap(PacketBuffer& packet, uint32_t inner_flow_hash) const {
  if (length_ == 0) return Status::kUnsupported;
  const uint32_t udp_len = length_ - udp_offset_ + packet.size();
  const uint32_t ip_len = family_ == UnderlayFamily::kIpv4 ? udp_len + overhead::kIpv4 : udp_len;
  if (ip_len > kMaxIpLength) return Status::kGeneveTooBig;
  uint8_t* p = packet.prepend(length_);
  if (p == nullptr) return Status::kNoRoom;
  std::memcpy(p, header_.data(), length_);

  const uint16_t src_port = geneveSourcePort(inner_flow_hash);
  uint8_t* udp = p + udp_offset_;
  store16(udp, src_port);
  store16(udp + 4, static_cast<uint16_t>(udp_len));
  if (family_ == UnderlayFamily::kIpv4) {
    store16(p + kEthernetLen + 2, static_cast<uint16_t>(ip_len));
    store16(p + kEthernetLen + 10, checksumFinish(ipv4_sum_ + ip_len));
  } else {
    store16(p + kEthernetLen + 4, static_cast<uint16_t>(ip_len));
  }
  if (udp_checksum_) {
    // The length appears twice: in the pseudo-header and in the UDP header.
    // The inner frame starts at an even offset from the UDP header (8 + 8 +
    // 4n), so its sum chains onto the precomputed one.
    uint32_t sum = udp_sum_ + 2 * udp_len + src_port;
    sum = checksumAdd(p + length_, packet.size() - length_, sum);
    uint16_t csum = checksumFinish(sum);
    // RFC 768: a computed zero is sent as all ones; zero means "no checksum".
    store16(udp + 6, csum == 0 ? 0xffff : csum);
  }
  return Status::kOk;
}

Status encapGeneve(PacketBuffer& packet, const GeneveTunnel& tunnel, uint32_t inner_flow_hash) {
  GeneveEncapTemplate t;
  if (Status s = t.build(tunnel); s != Status::kOk) return s;
  return t.encap(packet, inner_flow_hash);
}

}  // namespace dpu::overlay
