// Wire formats of the headers the datapath reads and writes: Ethernet with
// 802.1Q/802.1ad tags, ARP, IPv4 (with options), IPv6 and its extension
// headers, ICMP, ICMPv6 (with neighbor discovery), UDP and TCP.
//
// Each header is a namespace of constants (lengths, field offsets, well-known
// values) and inline accessors over a byte pointer to the first byte of that
// header: getters take `const uint8_t*`, setters `uint8_t*`. Multi-byte fields
// go through load16/store16 and friends, never through a struct cast, because
// packet headers are unaligned (see bytes.h). Accessors do no bounds checks:
// they are meant for headers the parser (parse.h) has already validated, or for
// builders that sized the buffer themselves. Values are in host order, the
// convention of checksum.h: an IPv4 address is the uint32_t that load32 reads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "overlay/bytes.h"

namespace dpu::overlay {

using MacAddress = std::array<uint8_t, 6>;
using Ipv6Address = std::array<uint8_t, 16>;

// IANA protocol numbers, shared by the IPv4 protocol field and the IPv6 next header.
namespace ipproto {
inline constexpr uint8_t kHopByHop = 0;  // RFC 8200 §4.3
inline constexpr uint8_t kIcmp = 1;
inline constexpr uint8_t kIpv4 = 4;  // IPv4 in IP (RFC 2003), as ESP tunnel mode carries it (RFC 4303 §2.6)
inline constexpr uint8_t kTcp = 6;
inline constexpr uint8_t kUdp = 17;
inline constexpr uint8_t kIpv6 = 41;  // IPv6 in IP (RFC 2473), likewise for ESP tunnel mode
inline constexpr uint8_t kRouting = 43;   // RFC 8200 §4.4
inline constexpr uint8_t kFragment = 44;  // RFC 8200 §4.5
inline constexpr uint8_t kEsp = 50;       // RFC 4303
inline constexpr uint8_t kAh = 51;        // RFC 4302
inline constexpr uint8_t kIcmpv6 = 58;
inline constexpr uint8_t kNoNext = 59;    // RFC 8200 §4.7
inline constexpr uint8_t kDestOptions = 60;  // RFC 8200 §4.6
inline constexpr uint8_t kSctp = 132;      // RFC 9260
}  // namespace ipproto

namespace eth {
inline constexpr size_t kHeaderLen = 14;
inline constexpr size_t kAddrLen = 6;
inline constexpr uint16_t kTypeIpv4 = 0x0800;
inline constexpr uint16_t kTypeArp = 0x0806;
inline constexpr uint16_t kTypeVlan = 0x8100;  // IEEE 802.1Q C-tag
inline constexpr uint16_t kTypeQinq = 0x88a8;  // IEEE 802.1ad S-tag
inline constexpr uint16_t kTypeIpv6 = 0x86dd;
// Values below this are IEEE 802.3 length fields, not EtherTypes (802.3 §3.2.6);
// 1501..1535 are neither.
inline constexpr uint16_t kMinType = 0x0600;
inline constexpr uint16_t kMaxLength = 1500;
inline constexpr MacAddress kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline MacAddress dst(const uint8_t* h) {
  MacAddress m;
  std::memcpy(m.data(), h, kAddrLen);
  return m;
}
inline MacAddress src(const uint8_t* h) {
  MacAddress m;
  std::memcpy(m.data(), h + 6, kAddrLen);
  return m;
}
inline uint16_t type(const uint8_t* h) { return load16(h + 12); }
inline void setDst(uint8_t* h, const MacAddress& m) { std::memcpy(h, m.data(), kAddrLen); }
inline void setSrc(uint8_t* h, const MacAddress& m) { std::memcpy(h + 6, m.data(), kAddrLen); }
inline void setType(uint8_t* h, uint16_t v) { store16(h + 12, v); }
// IPv6 multicast maps to 33:33 + the low 32 bits of the group (RFC 2464 §7).
inline MacAddress ipv6MulticastMac(const uint8_t* group) {
  return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}
}  // namespace eth

// One VLAN tag as it sits after the MAC addresses: TPID, then TCI. A tagged
// frame's EtherType follows the last tag.
namespace vlan {
inline constexpr size_t kTagLen = 4;
inline constexpr size_t kMaxTags = 2;  // an 802.1ad S-tag and an 802.1Q C-tag
inline constexpr uint16_t kVidMask = 0x0fff;
inline uint16_t tpid(const uint8_t* tag) { return load16(tag); }
inline uint16_t tci(const uint8_t* tag) { return load16(tag + 2); }
inline uint16_t vid(const uint8_t* tag) { return tci(tag) & kVidMask; }
inline uint8_t pcp(const uint8_t* tag) { return tag[2] >> 5; }
inline void setTpid(uint8_t* tag, uint16_t v) { store16(tag, v); }
inline void setTci(uint8_t* tag, uint16_t v) { store16(tag + 2, v); }
inline bool isTpid(uint16_t type) { return type == eth::kTypeVlan || type == eth::kTypeQinq; }
}  // namespace vlan

// ARP for IPv4 over Ethernet (RFC 826); the only form the parser accepts.
namespace arp {
inline constexpr size_t kLen = 28;
inline constexpr uint16_t kHtypeEthernet = 1;
inline constexpr uint16_t kOpRequest = 1;
inline constexpr uint16_t kOpReply = 2;
inline uint16_t htype(const uint8_t* h) { return load16(h); }
inline uint16_t ptype(const uint8_t* h) { return load16(h + 2); }
inline uint8_t hlen(const uint8_t* h) { return h[4]; }
inline uint8_t plen(const uint8_t* h) { return h[5]; }
inline uint16_t op(const uint8_t* h) { return load16(h + 6); }
inline MacAddress senderMac(const uint8_t* h) {
  MacAddress m;
  std::memcpy(m.data(), h + 8, 6);
  return m;
}
inline constexpr size_t kSenderIpOffset = 14;
inline constexpr size_t kTargetIpOffset = 24;
inline uint32_t senderIp(const uint8_t* h) { return load32(h + kSenderIpOffset); }
inline MacAddress targetMac(const uint8_t* h) {
  MacAddress m;
  std::memcpy(m.data(), h + 18, 6);
  return m;
}
inline uint32_t targetIp(const uint8_t* h) { return load32(h + kTargetIpOffset); }
inline void setOp(uint8_t* h, uint16_t v) { store16(h + 6, v); }
inline void setSenderMac(uint8_t* h, const MacAddress& m) { std::memcpy(h + 8, m.data(), 6); }
inline void setSenderIp(uint8_t* h, uint32_t v) { store32(h + 14, v); }
inline void setTargetMac(uint8_t* h, const MacAddress& m) { std::memcpy(h + 18, m.data(), 6); }
inline void setTargetIp(uint8_t* h, uint32_t v) { store32(h + 24, v); }
// Writes the fixed part for Ethernet/IPv4: htype 1, ptype 0x0800, hlen 6, plen 4.
inline void setEthernetIpv4(uint8_t* h) {
  store16(h, kHtypeEthernet);
  store16(h + 2, eth::kTypeIpv4);
  h[4] = 6;
  h[5] = 4;
}
}  // namespace arp

// IPv4 (RFC 791). Options, when IHL > 5, sit between byte 20 and headerLen().
namespace ipv4 {
inline constexpr size_t kMinHeaderLen = 20;
inline constexpr size_t kMaxHeaderLen = 60;
inline constexpr uint16_t kFlagDf = 0x4000;
inline constexpr uint16_t kFlagMf = 0x2000;
inline constexpr uint16_t kFragOffsetMask = 0x1fff;  // in 8-byte units
inline constexpr size_t kProtocolOffset = 9;
inline constexpr size_t kChecksumOffset = 10;
inline constexpr size_t kSrcOffset = 12;
inline constexpr size_t kDstOffset = 16;
inline constexpr uint8_t kOptionEnd = 0;  // RFC 791 option "End of Option List"
inline constexpr uint8_t kOptionNop = 1;

inline uint8_t version(const uint8_t* h) { return h[0] >> 4; }
inline uint8_t ihl(const uint8_t* h) { return h[0] & 0x0f; }
inline size_t headerLen(const uint8_t* h) { return size_t{ihl(h)} * 4; }
inline uint8_t tos(const uint8_t* h) { return h[1]; }
inline uint16_t totalLength(const uint8_t* h) { return load16(h + 2); }
inline uint16_t id(const uint8_t* h) { return load16(h + 4); }
// Flags and fragment offset as one 16-bit field; see kFlag* and kFragOffsetMask.
inline uint16_t fragField(const uint8_t* h) { return load16(h + 6); }
inline bool dontFragment(const uint8_t* h) { return fragField(h) & kFlagDf; }
inline bool moreFragments(const uint8_t* h) { return fragField(h) & kFlagMf; }
inline uint16_t fragOffset(const uint8_t* h) { return fragField(h) & kFragOffsetMask; }
inline uint8_t ttl(const uint8_t* h) { return h[8]; }
inline uint8_t protocol(const uint8_t* h) { return h[kProtocolOffset]; }
inline uint16_t checksum(const uint8_t* h) { return load16(h + kChecksumOffset); }
inline uint32_t src(const uint8_t* h) { return load32(h + kSrcOffset); }
inline uint32_t dst(const uint8_t* h) { return load32(h + kDstOffset); }
inline const uint8_t* options(const uint8_t* h) { return h + kMinHeaderLen; }
inline size_t optionsLen(const uint8_t* h) { return headerLen(h) - kMinHeaderLen; }

// Version 4 and the IHL in one byte; `header_len` is a multiple of 4 in [20, 60].
inline void setVersionIhl(uint8_t* h, size_t header_len) {
  h[0] = static_cast<uint8_t>(0x40 | (header_len / 4));
}
inline void setTos(uint8_t* h, uint8_t v) { h[1] = v; }
inline void setTotalLength(uint8_t* h, uint16_t v) { store16(h + 2, v); }
inline void setId(uint8_t* h, uint16_t v) { store16(h + 4, v); }
inline void setFragField(uint8_t* h, uint16_t v) { store16(h + 6, v); }
inline void setTtl(uint8_t* h, uint8_t v) { h[8] = v; }
inline void setProtocol(uint8_t* h, uint8_t v) { h[kProtocolOffset] = v; }
inline void setChecksum(uint8_t* h, uint16_t v) { store16(h + kChecksumOffset, v); }
inline void setSrc(uint8_t* h, uint32_t v) { store32(h + kSrcOffset, v); }
inline void setDst(uint8_t* h, uint32_t v) { store32(h + kDstOffset, v); }

// 224.0.0.0/4 (RFC 5771), 255.255.255.255 and 0.0.0.0: addresses an ICMP error
// must never be sent to (RFC 1122 §3.2.2).
inline bool isMulticast(uint32_t a) { return (a >> 28) == 0xe; }
inline bool isLimitedBroadcast(uint32_t a) { return a == 0xffffffff; }
}  // namespace ipv4

// IPv6 (RFC 8200) fixed header and the extension headers the parser skips.
namespace ipv6 {
inline constexpr size_t kHeaderLen = 40;
inline constexpr size_t kAddrLen = 16;
inline constexpr size_t kNextHeaderOffset = 6;
inline constexpr size_t kSrcOffset = 8;
inline constexpr size_t kDstOffset = 24;
inline constexpr size_t kMinMtu = 1280;  // RFC 8200 §5
// Every extension header is at least 8 bytes and a multiple of 8 (AH: of 4).
inline constexpr size_t kExtMinLen = 8;
inline constexpr size_t kFragmentHeaderLen = 8;
inline constexpr uint16_t kFragMore = 0x0001;
inline constexpr uint16_t kFragOffsetMask = 0xfff8;  // offset in 8-byte units, shifted left by 3

inline uint8_t version(const uint8_t* h) { return h[0] >> 4; }
inline uint8_t trafficClass(const uint8_t* h) { return static_cast<uint8_t>(load16(h) >> 4); }
inline uint32_t flowLabel(const uint8_t* h) { return load32(h) & 0x000fffff; }
inline uint16_t payloadLength(const uint8_t* h) { return load16(h + 4); }
inline uint8_t nextHeader(const uint8_t* h) { return h[kNextHeaderOffset]; }
inline uint8_t hopLimit(const uint8_t* h) { return h[7]; }
inline const uint8_t* src(const uint8_t* h) { return h + kSrcOffset; }
inline const uint8_t* dst(const uint8_t* h) { return h + kDstOffset; }
inline Ipv6Address srcAddress(const uint8_t* h) {
  Ipv6Address a;
  std::memcpy(a.data(), h + kSrcOffset, kAddrLen);
  return a;
}
inline Ipv6Address dstAddress(const uint8_t* h) {
  Ipv6Address a;
  std::memcpy(a.data(), h + kDstOffset, kAddrLen);
  return a;
}

inline void setVersionClassFlow(uint8_t* h, uint8_t traffic_class, uint32_t flow_label) {
  store32(h, 0x60000000u | uint32_t{traffic_class} << 20 | (flow_label & 0x000fffff));
}
inline void setPayloadLength(uint8_t* h, uint16_t v) { store16(h + 4, v); }
inline void setNextHeader(uint8_t* h, uint8_t v) { h[kNextHeaderOffset] = v; }
inline void setHopLimit(uint8_t* h, uint8_t v) { h[7] = v; }
inline void setSrc(uint8_t* h, const Ipv6Address& a) { std::memcpy(h + kSrcOffset, a.data(), kAddrLen); }
inline void setDst(uint8_t* h, const Ipv6Address& a) { std::memcpy(h + kDstOffset, a.data(), kAddrLen); }

// ff00::/8 (RFC 4291 §2.7) and :: (§2.5.2).
inline bool isMulticast(const uint8_t* a) { return a[0] == 0xff; }
inline bool isUnspecified(const uint8_t* a) {
  static constexpr uint8_t kZero[kAddrLen] = {};
  return std::memcmp(a, kZero, kAddrLen) == 0;
}
inline constexpr Ipv6Address kAllNodes = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
// The solicited-node group of `a` (RFC 4291 §2.7.1): ff02::1:ff + its low 24 bits.
inline Ipv6Address solicitedNode(const uint8_t* a) {
  return {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, a[13], a[14], a[15]};
}

// Extension headers (RFC 8200 §4): byte 0 is the next header; the length rules differ.
inline bool isExtensionHeader(uint8_t next_header) {
  return next_header == ipproto::kHopByHop || next_header == ipproto::kRouting ||
         next_header == ipproto::kFragment || next_header == ipproto::kDestOptions ||
         next_header == ipproto::kAh;
}
inline uint8_t extNextHeader(const uint8_t* ext) { return ext[0]; }
// The whole length of the extension header of type `type` at `ext`: 8 for a
// fragment header (§4.5, its second byte is reserved), (len + 2) * 4 for AH
// (RFC 4302 §2.2), (len + 1) * 8 otherwise (§4.3, §4.4, §4.6).
inline size_t extLength(uint8_t type, const uint8_t* ext) {
  if (type == ipproto::kFragment) return kFragmentHeaderLen;
  if (type == ipproto::kAh) return (size_t{ext[1]} + 2) * 4;
  return (size_t{ext[1]} + 1) * 8;
}
// Routing header (§4.4).
inline uint8_t routingType(const uint8_t* ext) { return ext[2]; }
inline uint8_t segmentsLeft(const uint8_t* ext) { return ext[3]; }
// Fragment header (§4.5).
inline uint16_t fragOffset(const uint8_t* ext) { return load16(ext + 2) >> 3; }  // 8-byte units
inline bool fragMore(const uint8_t* ext) { return load16(ext + 2) & kFragMore; }
inline uint32_t fragId(const uint8_t* ext) { return load32(ext + 4); }
}  // namespace ipv6

// ICMP for IPv4 (RFC 792). Every message has at least the 8-byte header.
namespace icmp {
inline constexpr size_t kHeaderLen = 8;
inline constexpr uint8_t kTypeEchoReply = 0;
inline constexpr uint8_t kTypeDestUnreachable = 3;
inline constexpr uint8_t kCodePortUnreachable = 3;
inline constexpr uint8_t kCodeFragNeeded = 4;  // with the next-hop MTU of RFC 1191 §4
inline constexpr uint8_t kTypeRedirect = 5;
inline constexpr uint8_t kTypeEchoRequest = 8;
inline constexpr uint8_t kTypeTimeExceeded = 11;
inline constexpr uint8_t kTypeParamProblem = 12;
inline constexpr size_t kChecksumOffset = 2;

inline uint8_t type(const uint8_t* h) { return h[0]; }
inline uint8_t code(const uint8_t* h) { return h[1]; }
inline uint16_t checksum(const uint8_t* h) { return load16(h + 2); }
inline uint16_t echoId(const uint8_t* h) { return load16(h + 4); }
inline uint16_t echoSeq(const uint8_t* h) { return load16(h + 6); }
inline uint16_t nextHopMtu(const uint8_t* h) { return load16(h + 6); }
inline void setType(uint8_t* h, uint8_t v) { h[0] = v; }
inline void setCode(uint8_t* h, uint8_t v) { h[1] = v; }
inline void setChecksum(uint8_t* h, uint16_t v) { store16(h + 2, v); }
inline void setEchoId(uint8_t* h, uint16_t v) { store16(h + 4, v); }
inline void setEchoSeq(uint8_t* h, uint16_t v) { store16(h + 6, v); }
inline void setNextHopMtu(uint8_t* h, uint16_t v) { store16(h + 6, v); }
inline bool isEcho(uint8_t t) { return t == kTypeEchoRequest || t == kTypeEchoReply; }
// Error messages, which must never cause another error (RFC 1122 §3.2.2).
inline bool isError(uint8_t t) {
  return t == kTypeDestUnreachable || t == 4 /* source quench */ || t == kTypeRedirect ||
         t == kTypeTimeExceeded || t == kTypeParamProblem;
}
}  // namespace icmp

// ICMPv6 (RFC 4443) and neighbor discovery (RFC 4861). The parser requires the
// 8 bytes every RFC 4443 message has.
namespace icmp6 {
inline constexpr size_t kHeaderLen = 8;
inline constexpr uint8_t kTypeDestUnreachable = 1;
inline constexpr uint8_t kCodePortUnreachable = 4;  // with kTypeDestUnreachable
inline constexpr uint8_t kTypePacketTooBig = 2;
inline constexpr uint8_t kTypeTimeExceeded = 3;
inline constexpr uint8_t kTypeParamProblem = 4;
inline constexpr uint8_t kTypeEchoRequest = 128;
inline constexpr uint8_t kTypeEchoReply = 129;
inline constexpr uint8_t kTypeRouterSolicit = 133;
inline constexpr uint8_t kTypeRouterAdvert = 134;
inline constexpr uint8_t kTypeNeighborSolicit = 135;
inline constexpr uint8_t kTypeNeighborAdvert = 136;
inline constexpr size_t kChecksumOffset = 2;
// NS and NA: 4 bytes of reserved/flags after the header word, then the target.
inline constexpr size_t kNdTargetOffset = 8;
inline constexpr size_t kNdOptionsOffset = 24;
inline constexpr uint32_t kNaFlagRouter = 0x80000000;     // RFC 4861 §4.4
inline constexpr uint32_t kNaFlagSolicited = 0x40000000;
inline constexpr uint32_t kNaFlagOverride = 0x20000000;
inline constexpr uint8_t kNdOptSourceLinkAddr = 1;  // RFC 4861 §4.6.1
inline constexpr uint8_t kNdOptTargetLinkAddr = 2;
inline constexpr size_t kNdLinkAddrOptionLen = 8;
inline constexpr uint8_t kNdHopLimit = 255;  // RFC 4861 §7.1.1: proves the sender is on-link

inline uint8_t type(const uint8_t* h) { return h[0]; }
inline uint8_t code(const uint8_t* h) { return h[1]; }
inline uint16_t checksum(const uint8_t* h) { return load16(h + 2); }
inline uint16_t echoId(const uint8_t* h) { return load16(h + 4); }
inline uint16_t echoSeq(const uint8_t* h) { return load16(h + 6); }
inline uint32_t mtu(const uint8_t* h) { return load32(h + 4); }  // packet too big
inline uint32_t naFlags(const uint8_t* h) { return load32(h + 4); }
inline const uint8_t* ndTarget(const uint8_t* h) { return h + kNdTargetOffset; }
inline void setType(uint8_t* h, uint8_t v) { h[0] = v; }
inline void setCode(uint8_t* h, uint8_t v) { h[1] = v; }
inline void setChecksum(uint8_t* h, uint16_t v) { store16(h + 2, v); }
inline void setEchoId(uint8_t* h, uint16_t v) { store16(h + 4, v); }
inline void setEchoSeq(uint8_t* h, uint16_t v) { store16(h + 6, v); }
inline void setMtu(uint8_t* h, uint32_t v) { store32(h + 4, v); }
inline void setNaFlags(uint8_t* h, uint32_t v) { store32(h + 4, v); }
inline void setNdTarget(uint8_t* h, const Ipv6Address& a) {
  std::memcpy(h + kNdTargetOffset, a.data(), a.size());
}
inline bool isEcho(uint8_t t) { return t == kTypeEchoRequest || t == kTypeEchoReply; }
// Types below 128 are errors (RFC 4443 §2.1); none may cause another (§2.4(e.1)).
inline bool isError(uint8_t t) { return t < 128; }
}  // namespace icmp6

// UDP (RFC 768).
namespace udp {
inline constexpr size_t kHeaderLen = 8;
inline constexpr size_t kChecksumOffset = 6;
inline uint16_t srcPort(const uint8_t* h) { return load16(h); }
inline uint16_t dstPort(const uint8_t* h) { return load16(h + 2); }
inline uint16_t length(const uint8_t* h) { return load16(h + 4); }
inline uint16_t checksum(const uint8_t* h) { return load16(h + 6); }
inline void setSrcPort(uint8_t* h, uint16_t v) { store16(h, v); }
inline void setDstPort(uint8_t* h, uint16_t v) { store16(h + 2, v); }
inline void setLength(uint8_t* h, uint16_t v) { store16(h + 4, v); }
inline void setChecksum(uint8_t* h, uint16_t v) { store16(h + 6, v); }
}  // namespace udp

// DHCPv4 (RFC 2131 §2): the fixed BOOTP header a server's answer begins
// with, after the UDP header. The client's hardware address (chaddr) says
// whose answer it is, also when it is broadcast (a client without an address
// may ask for that: the BROADCAST flag).
namespace dhcp {
inline constexpr uint16_t kServerPort = 67;
inline constexpr uint16_t kClientPort = 68;
inline constexpr uint8_t kOpReply = 2;    // BOOTREPLY
inline constexpr uint8_t kHtypeEthernet = 1;
inline constexpr size_t kChaddrOffset = 28;
inline constexpr size_t kMinReplyLen = kChaddrOffset + 6;  // through an Ethernet chaddr
// The chaddr of a server's answer to an Ethernet client, or null when the
// `len` bytes at `h` are not one.
inline const uint8_t* replyClientMac(const uint8_t* h, size_t len) {
  if (len < kMinReplyLen || h[0] != kOpReply || h[1] != kHtypeEthernet || h[2] != 6) return nullptr;
  return h + kChaddrOffset;
}
}  // namespace dhcp

// SCTP common header (RFC 9260 §3.1): ports, verification tag, CRC32c over
// the whole packet (no pseudo-header: an address rewrite leaves it valid, a
// port rewrite does not).
namespace sctp {
inline constexpr size_t kHeaderLen = 12;
inline uint16_t srcPort(const uint8_t* h) { return load16(h); }
inline uint16_t dstPort(const uint8_t* h) { return load16(h + 2); }
}  // namespace sctp

// TCP (RFC 9293). Options sit between byte 20 and headerLen().
namespace tcp {
inline constexpr size_t kMinHeaderLen = 20;
inline constexpr size_t kMaxHeaderLen = 60;
inline constexpr size_t kChecksumOffset = 16;
inline constexpr uint8_t kFlagFin = 0x01;
inline constexpr uint8_t kFlagSyn = 0x02;
inline constexpr uint8_t kFlagRst = 0x04;
inline constexpr uint8_t kFlagPsh = 0x08;
inline constexpr uint8_t kFlagAck = 0x10;
inline constexpr uint8_t kFlagUrg = 0x20;
inline constexpr uint8_t kFlagEce = 0x40;
inline constexpr uint8_t kFlagCwr = 0x80;
inline constexpr uint8_t kOptionEnd = 0;
inline constexpr uint8_t kOptionNop = 1;
inline constexpr uint8_t kOptionMss = 2;
inline constexpr uint8_t kOptionWindowScale = 3;
inline constexpr uint8_t kOptionSackPermitted = 4;
inline constexpr uint8_t kOptionTimestamps = 8;

inline uint16_t srcPort(const uint8_t* h) { return load16(h); }
inline uint16_t dstPort(const uint8_t* h) { return load16(h + 2); }
inline uint32_t seq(const uint8_t* h) { return load32(h + 4); }
inline uint32_t ack(const uint8_t* h) { return load32(h + 8); }
inline uint8_t dataOffset(const uint8_t* h) { return h[12] >> 4; }
inline size_t headerLen(const uint8_t* h) { return size_t{dataOffset(h)} * 4; }
inline uint8_t flags(const uint8_t* h) { return h[13]; }
inline uint16_t window(const uint8_t* h) { return load16(h + 14); }
inline uint16_t checksum(const uint8_t* h) { return load16(h + kChecksumOffset); }
inline uint16_t urgentPointer(const uint8_t* h) { return load16(h + 18); }
inline void setSrcPort(uint8_t* h, uint16_t v) { store16(h, v); }
inline void setDstPort(uint8_t* h, uint16_t v) { store16(h + 2, v); }
inline void setSeq(uint8_t* h, uint32_t v) { store32(h + 4, v); }
inline void setAck(uint8_t* h, uint32_t v) { store32(h + 8, v); }
// `header_len` is a multiple of 4 in [20, 60]; the reserved bits are cleared.
inline void setHeaderLen(uint8_t* h, size_t header_len) { h[12] = static_cast<uint8_t>((header_len / 4) << 4); }
inline void setFlags(uint8_t* h, uint8_t v) { h[13] = v; }
inline void setWindow(uint8_t* h, uint16_t v) { store16(h + 14, v); }
inline void setChecksum(uint8_t* h, uint16_t v) { store16(h + kChecksumOffset, v); }
inline void setUrgentPointer(uint8_t* h, uint16_t v) { store16(h + 18, v); }
}  // namespace tcp

}  // namespace dpu::overlay
