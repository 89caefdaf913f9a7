// Geneve encapsulation: building the per-tunnel outer headers once, and the
// per-packet copy-and-patch that the dataplane runs for every packet it sends
// to another node in software.
#include <cstring>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::overlay {
namespace {

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
  eth::setDst(p, tunnel.dst_mac);
  eth::setSrc(p, tunnel.src_mac);
  uint32_t off = eth::kHeaderLen;
  if (tunnel.family == UnderlayFamily::kIpv4) {
    eth::setType(p, eth::kTypeIpv4);
    uint8_t* ip = p + off;
    ipv4::setVersionIhl(ip, ipv4::kMinHeaderLen);
    ipv4::setTos(ip, tunnel.tos);
    ipv4::setTotalLength(ip, 0);  // per packet
    ipv4::setId(ip, 0);           // RFC 6864 §4.1
    ipv4::setFragField(ip, ipv4::kFlagDf);
    ipv4::setTtl(ip, tunnel.ttl);
    ipv4::setProtocol(ip, ipproto::kUdp);
    ipv4::setChecksum(ip, 0);  // per packet
    std::memcpy(ip + ipv4::kSrcOffset, tunnel.src_ip.data(), 4);
    std::memcpy(ip + ipv4::kDstOffset, tunnel.dst_ip.data(), 4);
    t.ipv4_sum_ = checksumAdd(ip, overhead::kIpv4);
    off += overhead::kIpv4;
  } else {
    eth::setType(p, eth::kTypeIpv6);
    uint8_t* ip = p + off;
    ipv6::setVersionClassFlow(ip, tunnel.tos, 0);
    ipv6::setPayloadLength(ip, 0);  // per packet
    ipv6::setNextHeader(ip, ipproto::kUdp);
    ipv6::setHopLimit(ip, tunnel.ttl);
    ipv6::setSrc(ip, tunnel.src_ip);
    ipv6::setDst(ip, tunnel.dst_ip);
    off += overhead::kIpv6;
  }

  t.udp_offset_ = static_cast<uint8_t>(off);
  uint8_t* udp = p + off;
  udp::setSrcPort(udp, 0);  // per packet, from the inner flow hash
  udp::setDstPort(udp, kGeneveUdpPort);
  udp::setLength(udp, 0);
  udp::setChecksum(udp, 0);
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
                       ? pseudoHeaderSumV4(tunnel.src_ip.data(), tunnel.dst_ip.data(), ipproto::kUdp, 0)
                       : pseudoHeaderSumV6(tunnel.src_ip.data(), tunnel.dst_ip.data(), ipproto::kUdp, 0);
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
  udp::setSrcPort(udp, src_port);
  udp::setLength(udp, static_cast<uint16_t>(udp_len));
  uint8_t* ip = p + eth::kHeaderLen;
  if (family_ == UnderlayFamily::kIpv4) {
    ipv4::setTotalLength(ip, static_cast<uint16_t>(ip_len));
    ipv4::setChecksum(ip, checksumFinish(ipv4_sum_ + ip_len));
  } else {
    ipv6::setPayloadLength(ip, static_cast<uint16_t>(ip_len));
  }
  if (udp_checksum_) {
    // The length appears twice: in the pseudo-header and in the UDP header.
    // The inner frame starts at an even offset from the UDP header (8 + 8 +
    // 4n), so its sum chains onto the precomputed one.
    uint32_t sum = udp_sum_ + 2 * udp_len + src_port;
    sum = checksumAdd(p + length_, packet.size() - length_, sum);
    uint16_t csum = checksumFinish(sum);
    // RFC 768: a computed zero is sent as all ones; zero means "no checksum".
    udp::setChecksum(udp, csum == 0 ? 0xffff : csum);
  }
  return Status::kOk;
}

Status encapGeneve(PacketBuffer& packet, const GeneveTunnel& tunnel, uint32_t inner_flow_hash) {
  GeneveEncapTemplate t;
  if (Status s = t.build(tunnel); s != Status::kOk) return s;
  return t.encap(packet, inner_flow_hash);
}

}  // namespace dpu::overlay
