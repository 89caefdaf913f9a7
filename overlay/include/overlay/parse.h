// The packet parser: one pass from the Ethernet header down to L4 that records
// where every header starts, for the flow key, the NAT rewrites and the slow
// path. Plus the checks the fast path skips (IPv4 header and L4 checksums,
// neighbor discovery validity), which the slow path runs before it trusts a
// packet enough to answer it or to install a flow for it.
//
// Contract of every function here: it reads only inside `frame`, never writes,
// allocates, throws, locks or logs, and reports malformed input with a
// specific Status (status.def) so each drop has a counted reason. Offsets in
// ParsedPacket are relative to the first byte of `frame` (the Ethernet
// destination address); they stay valid for a copy of the frame.
#pragma once

#include <cstdint>
#include <span>

#include "overlay/headers.h"
#include "overlay/status.h"

namespace dpu::overlay {

enum class L3Type : uint8_t { kNone, kArp, kIpv4, kIpv6 };
enum class L4Type : uint8_t { kNone, kTcp, kUdp, kIcmp, kIcmpv6, kSctp };

// IPv4 fragments (MF set or offset non-zero) and IPv6 packets with a fragment
// header, except atomic fragments (offset 0, M clear), which RFC 8200 §4.5 and
// RFC 6946 process as whole packets. Only the first fragment has an L4 header.
enum class Fragment : uint8_t { kNone, kFirst, kLater };

// IPv6 extension headers skipped before giving up (RFC 8200 §4.1 defines
// six kinds, each at most once or twice; more is an attack on the parser).
inline constexpr int kMaxIpv6ExtHeaders = 8;

struct ParsedPacket {
  uint32_t frame_len = 0;  // bytes given to the parser
  // Offset just past the ARP body or the IP datagram (IPv4 total length, IPv6
  // 40 + payload length). Bytes from here to frame_len are Ethernet padding.
  uint32_t l3_end = 0;
  uint16_t ethertype = 0;  // after the VLAN tags
  uint8_t vlan_count = 0;
  L3Type l3 = L3Type::kNone;
  uint16_t vlan_tpid[vlan::kMaxTags] = {};  // outer tag first
  uint16_t vlan_tci[vlan::kMaxTags] = {};
  uint16_t l3_offset = 0;  // 14 + 4 * vlan_count
  // Start of the upper-layer header: after the IPv4 options or the IPv6
  // extension headers. Set for every IP packet, also when l4 == kNone.
  uint16_t l4_offset = 0;
  // After the TCP/UDP/ICMP header; equal to l4_offset when l4 == kNone.
  uint16_t payload_offset = 0;
  // Where the destination address of the L4 pseudo-header is: the IP header's
  // destination, or the final one in an IPv6 routing header that still has
  // segments left (RFC 8200 §8.1). 0 when the routing type is unknown.
  uint16_t pseudo_dst_offset = 0;
  uint8_t ip_proto = 0;  // IPv4 protocol or the last IPv6 next header
  L4Type l4 = L4Type::kNone;
  Fragment fragment = Fragment::kNone;

  bool isIp() const { return l3 == L3Type::kIpv4 || l3 == L3Type::kIpv6; }
  // Offset of VLAN tag i (its TPID), 0 <= i < vlan_count.
  static constexpr uint16_t vlanOffset(unsigned i) { return static_cast<uint16_t>(12 + 4 * i); }
  // Bytes from the upper-layer header to the end of the IP datagram.
  uint32_t l4Length() const { return l3_end - l4_offset; }
  // Bytes after the L4 header to the end of the IP datagram.
  uint32_t payloadLength() const { return l3_end - payload_offset; }
};

// Parses an Ethernet frame (without FCS). Accepts up to two VLAN tags of either
// TPID; ARP (Ethernet/IPv4 only), IPv4, IPv6; TCP, UDP, ICMP (over IPv4) and
// ICMPv6 (over IPv6). Other EtherTypes and IP protocols parse as kOk with
// l3 or l4 == kNone, so L2 switching and IP forwarding still work for them;
// IEEE 802.3 length-field frames (LLC) give kUnsupported. IPv4 options are
// skipped, not interpreted (forwarding carries them unchanged). IPv6 jumbograms
// (payload length 0, RFC 2675) are not supported and fail as malformed.
// On error `out` is left partly filled and must not be used.
Status parsePacket(std::span<const uint8_t> frame, ParsedPacket& out);

// kOk if the IPv4 header checksum verifies, kBadIpv4Checksum if not,
// kUnsupported for a packet that is not IPv4.
Status verifyIpv4Checksum(std::span<const uint8_t> frame, const ParsedPacket& pkt);

// Verifies the TCP, UDP, ICMP or ICMPv6 checksum over the whole L4 segment
// (with the pseudo-header for all but ICMP). kBadL4Checksum on mismatch;
// kUnsupported for fragments (the checksum covers the reassembled datagram),
// for packets without a parsed L4 header and for IPv6 routing headers of
// unknown type with segments left. A zero UDP checksum over IPv4 means "none"
// and passes (RFC 768); over IPv6 it fails (RFC 8200 §8.1).
Status verifyL4Checksum(std::span<const uint8_t> frame, const ParsedPacket& pkt);

// A neighbor solicitation or advertisement (RFC 4861 §4.3, §4.4) with its
// link-layer address option: source LLA for NS, target LLA for NA.
struct NeighborMessage {
  uint16_t target_offset = 0;  // the 16-byte target address, in the frame
  bool has_link_addr = false;
  MacAddress link_addr = {};
};

// Validates an NS or NA as a receiver must (RFC 4861 §7.1.1, §7.1.2): hop limit
// 255, code 0, at least 24 bytes, every option non-empty and inside the
// message, target not multicast; an NS from the unspecified address (duplicate
// address detection) carries no source LLA option. kBadL4Header if any fails,
// kBadL4Checksum if the ICMPv6 checksum does not verify, kUnsupported if `pkt`
// is not an unfragmented ICMPv6 NS or NA.
Status parseNeighborMessage(std::span<const uint8_t> frame, const ParsedPacket& pkt, NeighborMessage& out);

}  // namespace dpu::overlay
