// The lcore's parse of the common packet — untagged IPv4 (no options) or IPv6
// (no extension headers), not fragmented, TCP or UDP — in one pass that
// writes the flow key as whole 64-bit words. parsePacket + extractFlowKey
// write the key field by field, and the hash then reads it as words: a
// store-forwarding stall on every packet (OVS's miniflow_extract builds its
// key in words for the same reason).
//
// Contract: when it returns true, `pkt` and `key` are exactly what
// parsePacket and extractFlowKey give for the frame (engine tests check this
// on packets of every kind); for anything else it returns false and the
// caller runs the general parser, which then decides and reports the Status.
// It also gives the key's compact form (flow_cache.h) and whether it is long.
// With kFull false (the lcore's hit path) only the compact key, the full key
// when it is long (IPv6), and the ParsedPacket fields the compiled actions
// read (l3, l3_offset, l3_end) are written; the miss path completes the rest
// with kFull true (same frame, same answer) before the pipeline reads it.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

#include "flow_cache.h"
#include "overlay/checksum.h"
#include "overlay/flow_key.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"
#include "overlay/parse.h"

#if defined(__SSSE3__)
#include <tmmintrin.h>
#endif

namespace dpu::datapath {

template <bool kFull = true>
inline bool fastParse(std::span<const uint8_t> frame, overlay::ParsedPacket& pkt, overlay::FlowKey& key,
                      CompactKey& ckey, bool& long_key, uint32_t in_port, uint32_t tunnel_id) {
  if constexpr (std::endian::native != std::endian::little) return false;
  namespace ov = overlay;
  const uint8_t* p = frame.data();
  const size_t n = frame.size();
  if (n < 14 + 20 || n > 0xffff) return false;
  const uint16_t type = ov::load16(p + 12);
  const uint8_t* ip = p + 14;
  const size_t avail = n - 14;
  uint32_t l3_end, l4_offset;
  uint8_t proto;
  uint64_t w3, w4 = 0, w5, w6 = 0, w7 = 0;
  if (type == ov::eth::kTypeIpv4) {
    if (ip[0] != 0x45) return false;  // version 4, no options
    const size_t total = ov::ipv4::totalLength(ip);
    if (total < 20 || total > avail) return false;
    if (ov::ipv4::fragField(ip) & (ov::ipv4::kFlagMf | ov::ipv4::kFragOffsetMask)) return false;
    proto = ov::ipv4::protocol(ip);
    l3_end = static_cast<uint32_t>(14 + total);
    l4_offset = 34;
    uint32_t src, dst;
    std::memcpy(&src, ip + 12, 4);
    std::memcpy(&dst, ip + 16, 4);
    w3 = uint64_t{type} | uint64_t{proto} << 16 | uint64_t{src} << 32;
    w5 = uint64_t{dst} << 32;
    pkt.l3 = ov::L3Type::kIpv4;
    if constexpr (kFull) pkt.pseudo_dst_offset = 14 + 16;
  } else if (type == ov::eth::kTypeIpv6) {
    if (avail < 40 || (ip[0] >> 4) != 6) return false;
    const size_t total = 40 + size_t{ov::ipv6::payloadLength(ip)};
    if (total > avail) return false;
    proto = ov::ipv6::nextHeader(ip);
    l3_end = static_cast<uint32_t>(14 + total);
    l4_offset = 54;
    uint64_t s[2], d[2];
    std::memcpy(s, ip + 8, 16);
    std::memcpy(d, ip + 24, 16);
    // l3_src at key bytes 28..43, l3_dst at 44..59.
    w3 = uint64_t{type} | uint64_t{proto} << 16 | (s[0] << 32);
    w4 = (s[0] >> 32) | (s[1] << 32);
    w5 = (s[1] >> 32) | (d[0] << 32);
    w6 = (d[0] >> 32) | (d[1] << 32);
    w7 = d[1] >> 32;
    pkt.l3 = ov::L3Type::kIpv6;
    if constexpr (kFull) pkt.pseudo_dst_offset = 14 + 24;
  } else {
    return false;
  }
  const uint8_t* l4 = p + l4_offset;
  const uint32_t l4_avail = l3_end - l4_offset;
  uint32_t payload_offset;
  if (proto == ov::ipproto::kUdp) {
    if (l4_avail < 8) return false;
    const uint16_t len = ov::udp::length(l4);
    if (len < 8 || len > l4_avail) return false;
    if constexpr (kFull) pkt.l4 = ov::L4Type::kUdp;
    payload_offset = l4_offset + 8;
  } else if (proto == ov::ipproto::kTcp) {
    if (l4_avail < 20) return false;
    const uint32_t hl = uint32_t{static_cast<uint8_t>(l4[12] >> 4)} * 4;
    if (hl < 20 || hl > l4_avail) return false;
    if constexpr (kFull) pkt.l4 = ov::L4Type::kTcp;
    payload_offset = l4_offset + hl;
  } else {
    return false;
  }
  const uint64_t ports = uint64_t{ov::load16(l4)} | uint64_t{ov::load16(l4 + 2)} << 16;
  w7 |= ports << 32;
  pkt.l3_end = l3_end;
  pkt.l3_offset = 14;
  if constexpr (kFull) {
    pkt.frame_len = static_cast<uint32_t>(n);
    pkt.ethertype = type;
    pkt.vlan_count = 0;
    pkt.vlan_tpid[0] = pkt.vlan_tpid[1] = 0;
    pkt.vlan_tci[0] = pkt.vlan_tci[1] = 0;
    pkt.l4_offset = static_cast<uint16_t>(l4_offset);
    pkt.payload_offset = static_cast<uint16_t>(payload_offset);
    pkt.ip_proto = proto;
    pkt.fragment = ov::Fragment::kNone;
  } else {
    (void)payload_offset;
  }

  // FlowKey bytes: 0 in_port, 4 tunnel_id, 8 eth_dst, 14 eth_src, 20 vlan_tci,
  // 24 ethertype, 26 ip_proto, 27 flags, 28 l3_src, 44 l3_dst, 60 l4_src, 62 l4_dst.
  uint64_t eth0, eth1 = 0;
  std::memcpy(&eth0, p, 8);
  std::memcpy(&eth1, p + 8, 4);
  const uint64_t w0 = uint64_t{in_port} | uint64_t{tunnel_id} << 32;
  // Stored word by word (a staging array copied with 16-byte moves would
  // stall on forwarding from its 8-byte stores).
  ckey.w[0] = w0;
  ckey.w[1] = eth0;
  ckey.w[2] = eth1;
  ckey.w[3] = w3;
  long_key = type != ov::eth::kTypeIpv4;
  if (!long_key) {
    ckey.w[4] = (w5 >> 32) | (w7 & 0xffffffff00000000ull);
    if constexpr (!kFull) return true;  // the full key follows from the compact one
  } else {
    const uint64_t k[8] = {w0, eth0, eth1, w3, w4, w5, w6, w7};
    ckey.w[4] = CompactKey::fromWords(k, long_key).w[4];
  }
  auto* out = reinterpret_cast<unsigned char*>(&key);
  std::memcpy(out, &w0, 8);
  std::memcpy(out + 8, &eth0, 8);
  std::memcpy(out + 16, &eth1, 8);
  std::memcpy(out + 24, &w3, 8);
  std::memcpy(out + 32, &w4, 8);
  std::memcpy(out + 40, &w5, 8);
  std::memcpy(out + 48, &w6, 8);
  std::memcpy(out + 56, &w7, 8);
  static_assert(sizeof(overlay::FlowKey) == 64);
  return true;
}

// The fast lane's parse (ports other than the uplink): what nearly every
// packet from a pod is, an untagged IPv4 packet without options, not a
// fragment, TCP or UDP, read with a few wide loads straight into its compact
// key (flow_cache.h). Contract: true exactly when fastParse takes the frame
// as IPv4, with the same compact key (never long), l3_offset 14 and l3_end
// 14 + ip_len (the IPv4 total length; engine tests check this); false hands
// the packet to the general path.
//
// kShuffle (x86 with SSSE3, which the build's baseline has) builds the key's
// last four words with two 16-byte loads, a byte shuffle and a mask instead
// of a dozen shifts and masks; the scalar form (other CPUs) gives the same
// key, and the engine tests and the fuzz target check both.
#if defined(__SSSE3__)
inline constexpr bool kLaneShuffle = true;
#else
inline constexpr bool kLaneShuffle = false;
#endif

template <bool kShuffle = kLaneShuffle>
[[gnu::always_inline]] inline bool laneParse(const uint8_t* p, uint32_t n, uint32_t in_port, CompactKey& key,
                                              uint16_t& ip_len) {
  if constexpr (std::endian::native != std::endian::little) return false;
  // Ethernet + IPv4 + 8 bytes: the least a UDP packet has (TCP's 20 are checked below).
  if (n < 14 + 20 + 8) return false;
  uint16_t type;
  std::memcpy(&type, p + 12, 2);
  if (type != 0x0008) return false;  // 0x0800 in network order
  uint64_t h0;
  std::memcpy(&h0, p + 14, 8);  // version/IHL, TOS, total length, id, flags/fragment offset
  // Version 4 without options; neither more fragments nor an offset.
  if ((h0 & 0xff3f0000000000ffull) != 0x45) return false;
  const uint32_t total = __builtin_bswap16(static_cast<uint16_t>(h0 >> 16));
  if (total > n - 14) return false;
  // Negative when the total length is below the header's 20 bytes: the
  // checks below then fail for both protocols.
  const int32_t l4_avail = static_cast<int32_t>(total) - 20;
  const uint8_t proto = p[23];
  if (proto == overlay::ipproto::kUdp) {
    uint16_t len;
    std::memcpy(&len, p + 38, 2);
    len = __builtin_bswap16(len);
    if (len < 8 || len > l4_avail) return false;
  } else if (proto == overlay::ipproto::kTcp) {
    if (l4_avail < 20) return false;
    const int32_t hl = (p[46] >> 4) * 4;
    if (hl < 20 || hl > l4_avail) return false;
  } else {
    return false;
  }
  key.w[0] = in_port;
#if defined(__SSSE3__)
  if constexpr (kShuffle) {
    // Bytes 0-11 (the MACs) are words 1 and 2 as they are. From bytes 22-37:
    // the ethertype (host order), protocol, flags (0) and source, then the
    // destination and both ports in host order.
    const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 22));
    const __m128i macs = _mm_and_si128(head, _mm_set_epi32(0, -1, -1, -1));
    const __m128i order = _mm_setr_epi8(-1, -1, 1, -1, 4, 5, 6, 7, 8, 9, 10, 11, 13, 12, 15, 14);
    const __m128i words = _mm_or_si128(_mm_shuffle_epi8(tail, order), _mm_setr_epi8(0, 8, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                                      0, 0, 0, 0, 0, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&key.w[1]), macs);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&key.w[3]), words);
    ip_len = static_cast<uint16_t>(total);
    return true;
  }
#endif
  uint64_t eth0, h1;
  uint32_t eth1, dst, ports;
  std::memcpy(&eth0, p, 8);
  std::memcpy(&eth1, p + 8, 4);
  std::memcpy(&h1, p + 22, 8);  // TTL, protocol, checksum, source
  std::memcpy(&dst, p + 30, 4);
  std::memcpy(&ports, p + 34, 4);
  // Both ports in host order, as the FlowKey has them.
  const uint32_t ports_host = ((ports & 0x00ff00ffu) << 8) | ((ports >> 8) & 0x00ff00ffu);
  key.w[1] = eth0;
  key.w[2] = eth1;
  key.w[3] = uint64_t{overlay::eth::kTypeIpv4} | uint64_t{proto} << 16 | (h1 & 0xffffffff00000000ull);
  key.w[4] = uint64_t{dst} | uint64_t{ports_host} << 32;
  ip_len = static_cast<uint16_t>(total);
  return true;
}

// The uplink's lane: a Geneve packet as our peers send it (outer IPv4
// without options or VLAN, not a fragment, UDP to 6081 without a checksum to
// verify, Geneve version 0 carrying exactly the OVN option and an Ethernet
// frame, not OAM) around an inner packet laneParse takes. Contract: true only
// when parseGeneve (the OVN option understood; the checksum flags as given)
// accepts the frame as IPv4 to `tunnel_ip` (its 4 bytes as stored), without
// OAM, with the OVN option and the inner frame at 58, and fastParse takes
// that inner frame (to the end of the outer IP packet) as IPv4 with port
// `in_port` (below 65,536) and the VNI: the same compact key with the
// tunnel (outer source, OVN keys) folded into it (flow_cache.h:
// CompactKey::tryFoldTunnel4), and the same lengths (engine tests and the
// lane-parse fuzz target check this). False hands the packet to the general
// decap, which decides it.
struct TunnelLanePacket {
  uint16_t inner_len;  // bytes of the inner frame
  uint16_t ip_len;     // its IPv4 total length
};

inline constexpr uint32_t kTunnelLaneOuterLen = 14 + 20 + 8 + 8 + 8;

// The part of the uplink's lane after the outer IPv4 header: the UDP
// datagram at `udp` (its `udp_total` bytes are the rest of the outer IP
// packet, all readable), to 6081, its length `udp_total`, no checksum unless
// `udp_checksum_verified`; Geneve, the OVN option and an inner frame
// laneParse takes; `remote` is the outer IPv4 source (as stored) and
// `in_port` below 65,536. Fills what tunnelLaneParse fills.
[[gnu::always_inline]] inline bool geneveLaneParse(const uint8_t* udp, uint32_t udp_total, bool udp_checksum_verified,
                                                   uint32_t remote, uint32_t in_port, CompactKey& key,
                                                   TunnelLanePacket& t) {
  namespace ov = overlay;
  constexpr uint32_t kUdpGeneve = kTunnelLaneOuterLen - 14 - 20;  // UDP, Geneve, the OVN option
  if (udp_total < kTunnelLaneOuterLen - 20) return false;
  // The fixed fields compared a word at a time, in the order they sit
  // (little-endian words of network-order bytes: byte 0 is the lowest).
  auto word = [udp](uint32_t at) {
    uint64_t v;
    std::memcpy(&v, udp + at, 8);
    return v;
  };
  // UDP: destination port 6081, the length the IP header implies, no
  // checksum unless the NIC verified it.
  const uint64_t udp_want = uint64_t{__builtin_bswap16(static_cast<uint16_t>(udp_total))} << 32 |
                            uint64_t{__builtin_bswap16(ov::kGeneveUdpPort)} << 16;
  const uint64_t udp_mask = udp_checksum_verified ? 0x0000ffffffff0000ull : 0xffffffffffff0000ull;
  if ((word(0) & udp_mask) != udp_want) return false;
  // Geneve (8): version 0 with 8 bytes of options (2 words), not OAM (the
  // C and reserved bits are ignored, as parseGeneve ignores them), carrying
  // Ethernet; then the VNI and a reserved byte.
  const uint64_t g = word(8);
  constexpr uint64_t kGeneveWant = 0x02 | uint64_t{__builtin_bswap16(ov::kGeneveProtocolEthernet)} << 16;
  if ((g & 0xffff80ffull) != kGeneveWant) return false;
  // The OVN option (16) with 4 bytes of data (its three R bits are ignored
  // on receipt), then its data: the port keys.
  const uint64_t o = word(16);
  constexpr uint64_t kOptionWant = uint64_t{__builtin_bswap16(ov::kOvnOptionClass)} |
                                   uint64_t{ov::kOvnOptionType} << 16 | uint64_t{1} << 24;
  if ((o & 0x1fffffffull) != kOptionWant) return false;
  const uint32_t inner_len = udp_total - kUdpGeneve;
  if (!laneParse(udp + kUdpGeneve, inner_len, in_port, key, t.ip_len)) return false;
  key.w[0] = uint64_t{in_port} | uint64_t{__builtin_bswap32(static_cast<uint32_t>(g >> 32)) >> 8} << 32;
  // The option data's two big-endian keys at once: each half byte-swapped,
  // the ingress key's top bit (reserved) cleared.
  const uint32_t data = static_cast<uint32_t>(o >> 32);
  const uint32_t keys = (((data & 0x00ff00ffu) << 8) | ((data >> 8) & 0x00ff00ffu)) &
                        (0xffff0000u | ov::kOvnMaxIngressPortKey);
  key.foldTunnel4(remote, static_cast<uint16_t>(keys), static_cast<uint16_t>(keys >> 16));
  t.inner_len = static_cast<uint16_t>(inner_len);
  return true;
}

inline bool tunnelLaneParse(const uint8_t* p, uint32_t n, uint32_t tunnel_ip, bool ipv4_checksum_verified,
                            bool udp_checksum_verified, uint32_t in_port, CompactKey& key, TunnelLanePacket& t) {
  if constexpr (std::endian::native != std::endian::little) return false;
  namespace ov = overlay;
  if (n < kTunnelLaneOuterLen + 14 + 20 + 8) return false;
  uint16_t type;
  std::memcpy(&type, p + 12, 2);
  uint64_t h0;  // version/IHL, TOS, total length, id, flags/fragment offset
  std::memcpy(&h0, p + 14, 8);
  // IPv4, untagged; version 4 without options; neither more fragments nor an offset; UDP.
  if (type != 0x0008 || (h0 & 0xff3f0000000000ffull) != 0x45 || p[23] != ov::ipproto::kUdp) return false;
  const uint32_t total = __builtin_bswap16(static_cast<uint16_t>(h0 >> 16));
  if (total > n - 14 || total < 20) return false;
  if (!ipv4_checksum_verified && !ov::ipv4HeaderChecksumOk(p + 14)) return false;
  uint32_t src, dst;
  std::memcpy(&dst, p + 30, 4);
  if (dst != tunnel_ip || in_port > 0xffff) return false;
  std::memcpy(&src, p + 26, 4);
  return geneveLaneParse(p + 34, total - 20, udp_checksum_verified, src, in_port, key, t);
}

}  // namespace dpu::datapath
