// NAT and TTL rewrites with RFC 1624 incremental checksum updates (nat.h).
#include "overlay/nat.h"

#include <cstring>

#include "overlay/checksum.h"

namespace dpu::overlay {
namespace {

// Where the checksum that covers the pseudo-header lives, or nullptr if the
// packet has none to patch (no L4 header, a later fragment, ICMP over IPv4).
uint8_t* pseudoHeaderChecksum(uint8_t* base, const ParsedPacket& pkt) {
  if (pkt.fragment == Fragment::kLater) return nullptr;
  uint8_t* l4 = base + pkt.l4_offset;
  switch (pkt.l4) {
    case L4Type::kTcp:
      return l4 + tcp::kChecksumOffset;
    case L4Type::kUdp:
      return l4 + udp::kChecksumOffset;
    case L4Type::kIcmpv6:
      return l4 + icmp6::kChecksumOffset;
    default:
      return nullptr;
  }
}

// Writes an updated L4 checksum. UDP keeps "no checksum" as 0 and never
// produces 0 from arithmetic: it sends 0xffff instead (RFC 768).
template <typename Update>
void patchL4Checksum(uint8_t* field, const ParsedPacket& pkt, Update update) {
  const uint16_t old = load16(field);
  if (pkt.l4 == L4Type::kUdp && old == 0) return;
  uint16_t now = update(old);
  if (pkt.l4 == L4Type::kUdp && now == 0) now = 0xffff;
  store16(field, now);
}

Status setIpv4Address(std::span<uint8_t> frame, const ParsedPacket& pkt, size_t field_offset, uint32_t addr) {
  if (pkt.l3 != L3Type::kIpv4) return Status::kUnsupported;
  uint8_t* base = frame.data();
  uint8_t* ip = base + pkt.l3_offset;
  const uint32_t old = load32(ip + field_offset);
  if (old == addr) return Status::kOk;
  store32(ip + field_offset, addr);
  ipv4::setChecksum(ip, checksumUpdate32(ipv4::checksum(ip), old, addr));
  if (uint8_t* field = pseudoHeaderChecksum(base, pkt)) {
    patchL4Checksum(field, pkt, [&](uint16_t c) { return checksumUpdate32(c, old, addr); });
  }
  return Status::kOk;
}

Status setIpv6Address(std::span<uint8_t> frame, const ParsedPacket& pkt, size_t field_offset,
                      const Ipv6Address& addr) {
  if (pkt.l3 != L3Type::kIpv6) return Status::kUnsupported;
  uint8_t* base = frame.data();
  uint8_t* field_ptr = base + pkt.l3_offset + field_offset;
  uint8_t old[ipv6::kAddrLen];
  std::memcpy(old, field_ptr, sizeof old);
  std::memcpy(field_ptr, addr.data(), addr.size());
  // The destination is in the pseudo-header only if it is the final one (RFC 8200 §8.1).
  const bool in_pseudo_header =
      field_offset == ipv6::kSrcOffset || pkt.pseudo_dst_offset == pkt.l3_offset + ipv6::kDstOffset;
  if (!in_pseudo_header) return Status::kOk;
  if (uint8_t* field = pseudoHeaderChecksum(base, pkt)) {
    patchL4Checksum(field, pkt, [&](uint16_t c) { return checksumUpdateBytes(c, old, addr.data(), sizeof old); });
  }
  return Status::kOk;
}

Status setPort(std::span<uint8_t> frame, const ParsedPacket& pkt, size_t port_offset, uint16_t port) {
  if (pkt.fragment == Fragment::kLater) return Status::kOk;
  uint8_t* l4 = frame.data() + pkt.l4_offset;
  uint8_t* checksum = nullptr;
  switch (pkt.l4) {
    case L4Type::kTcp:
      checksum = l4 + tcp::kChecksumOffset;
      break;
    case L4Type::kUdp:
      checksum = l4 + udp::kChecksumOffset;
      break;
    case L4Type::kIcmp:
      if (!icmp::isEcho(icmp::type(l4))) return Status::kUnsupported;
      port_offset = 4;  // the identifier (RFC 792, "Echo or Echo Reply Message")
      checksum = l4 + icmp::kChecksumOffset;
      break;
    case L4Type::kIcmpv6:
      if (!icmp6::isEcho(icmp6::type(l4))) return Status::kUnsupported;
      port_offset = 4;  // RFC 4443 §4.1
      checksum = l4 + icmp6::kChecksumOffset;
      break;
    case L4Type::kSctp:  // its CRC32c covers the ports: a rewrite would need it recomputed
    case L4Type::kNone:
      return Status::kUnsupported;
  }
  const uint16_t old = load16(l4 + port_offset);
  store16(l4 + port_offset, port);
  patchL4Checksum(checksum, pkt, [&](uint16_t c) { return checksumUpdate16(c, old, port); });
  return Status::kOk;
}

}  // namespace

Status setIpv4Src(std::span<uint8_t> frame, const ParsedPacket& pkt, uint32_t addr) {
  return setIpv4Address(frame, pkt, ipv4::kSrcOffset, addr);
}

Status setIpv4Dst(std::span<uint8_t> frame, const ParsedPacket& pkt, uint32_t addr) {
  return setIpv4Address(frame, pkt, ipv4::kDstOffset, addr);
}

Status setIpv6Src(std::span<uint8_t> frame, const ParsedPacket& pkt, const Ipv6Address& addr) {
  return setIpv6Address(frame, pkt, ipv6::kSrcOffset, addr);
}

Status setIpv6Dst(std::span<uint8_t> frame, const ParsedPacket& pkt, const Ipv6Address& addr) {
  return setIpv6Address(frame, pkt, ipv6::kDstOffset, addr);
}

Status setL4SrcPort(std::span<uint8_t> frame, const ParsedPacket& pkt, uint16_t port) {
  return setPort(frame, pkt, 0, port);
}

Status setL4DstPort(std::span<uint8_t> frame, const ParsedPacket& pkt, uint16_t port) {
  return setPort(frame, pkt, 2, port);
}

Status decrementTtl(std::span<uint8_t> frame, const ParsedPacket& pkt) {
  uint8_t* ip = frame.data() + pkt.l3_offset;
  if (pkt.l3 == L3Type::kIpv4) {
    const uint8_t ttl = ipv4::ttl(ip);
    if (ttl <= 1) return Status::kTtlExpired;
    // TTL shares a 16-bit checksum word with the protocol; RFC 1141 works this very case.
    const uint16_t old_word = load16(ip + 8);
    ipv4::setTtl(ip, static_cast<uint8_t>(ttl - 1));
    ipv4::setChecksum(ip, checksumUpdate16(ipv4::checksum(ip), old_word, load16(ip + 8)));
    return Status::kOk;
  }
  if (pkt.l3 == L3Type::kIpv6) {
    const uint8_t hop_limit = ipv6::hopLimit(ip);
    if (hop_limit <= 1) return Status::kTtlExpired;
    ipv6::setHopLimit(ip, static_cast<uint8_t>(hop_limit - 1));
    return Status::kOk;
  }
  return Status::kUnsupported;
}

}  // namespace dpu::overlay
