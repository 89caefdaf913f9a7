// Geneve (RFC 8926) encapsulation and decapsulation over PacketBuffer, with TLV
// options and the OVN option that carries logical port keys.
//
// Sending: the control plane builds one GeneveEncapTemplate per tunnel (outer
// Ethernet, IPv4 or IPv6, UDP, Geneve header and options), the same bytes an
// rte_flow RAW_ENCAP action takes; per packet the dataplane copies it in front
// of the inner frame and patches lengths, the UDP source port and checksums.
// Receiving: parseGeneve() validates every outer header and the option list,
// decapGeneve() also strips them. Both run on the per-packet path: no
// exceptions, allocation, locks or logging; a non-Ok Status is a drop reason.
//
// Wire format (RFC 8926 §3.4, §3.5):
//   Ver(2) OptLen(6) O(1) C(1) Rsvd(6) | Protocol Type(16) | VNI(24) Rsvd(8)
//   option: Class(16) | Type(8) | R(3) Length(5) | data (Length * 4 bytes)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "overlay/buffer.h"
#include "overlay/bytes.h"
#include "overlay/mtu.h"
#include "overlay/status.h"

namespace dpu::overlay {

inline constexpr uint16_t kGeneveUdpPort = 6081;            // IANA (RFC 8926 §3.3)
inline constexpr uint16_t kGeneveProtocolEthernet = 0x6558;  // Transparent Ethernet Bridging
inline constexpr uint32_t kGeneveHeaderLen = 8;
inline constexpr uint32_t kGeneveOptionHeaderLen = 4;
inline constexpr uint32_t kGeneveMaxOptionDataLen = 124;  // 5-bit length in 4-byte words
inline constexpr uint32_t kGeneveMaxOptionsLen = 252;     // 6-bit Opt Len in 4-byte words
inline constexpr uint32_t kGeneveMaxVni = 0xffffff;
// Options a received packet may carry before it is dropped with
// kGeneveTooManyOptions. They are recorded in a fixed array, and we send at
// most one (docs/hardware.md: mlx5 matches a single option), so 16 is generous.
inline constexpr uint32_t kGeneveMaxOptions = 16;
// RFC 8926 §3.3: the source port comes from a hash of the inner headers and
// lies in the ephemeral range, so ECMP in the underlay and RSS at the receiver
// spread flows while each flow stays on one path.
inline constexpr uint16_t kGeneveSourcePortMin = 49152;
inline constexpr uint16_t kGeneveSourcePortMax = 65535;

// One TLV option. On send `data` is the caller's; on receive it views the
// packet. Its size is a multiple of 4 and at most kGeneveMaxOptionDataLen.
struct GeneveOption {
  uint16_t option_class = 0;
  uint8_t type = 0;
  std::span<const uint8_t> data{};

  // RFC 8926 §3.5: the high bit of the type marks an option a receiver must
  // understand, or drop the packet.
  constexpr bool critical() const { return (type & 0x80) != 0; }
  // Bytes on the wire, header included.
  constexpr uint32_t wireLength() const { return kGeneveOptionHeaderLen + static_cast<uint32_t>(data.size()); }
};

// Identifies an option kind: what a receiver declares it understands.
struct GeneveOptionKey {
  uint16_t option_class = 0;
  uint8_t type = 0;
  friend constexpr bool operator==(const GeneveOptionKey&, const GeneveOptionKey&) = default;
};

// ---------------------------------------------------------------------------
// The OVN option (ovn-architecture(7), "Tunnel Encapsulations"): class 0x0102,
// type 0x80 (critical), 4 bytes: 1 reserved bit, a 15-bit ingress logical port
// key and a 16-bit egress logical port key.
inline constexpr uint16_t kOvnOptionClass = 0x0102;
inline constexpr uint8_t kOvnOptionType = 0x80;
inline constexpr uint32_t kOvnOptionDataLen = 4;
inline constexpr uint32_t kOvnOptionWireLen = kGeneveOptionHeaderLen + kOvnOptionDataLen;
inline constexpr uint16_t kOvnMaxIngressPortKey = 0x7fff;
inline constexpr GeneveOptionKey kOvnOptionKey{kOvnOptionClass, kOvnOptionType};
// The default set of options a receiver understands: the OVN option only.
inline constexpr std::array<GeneveOptionKey, 1> kGeneveOvnOnly{kOvnOptionKey};

struct OvnPortKeys {
  uint16_t ingress = 0;  // 15 bits
  uint16_t egress = 0;   // 16 bits
  friend constexpr bool operator==(const OvnPortKeys&, const OvnPortKeys&) = default;
};

// Writes the 4 data bytes; kBadGeneveOption (and nothing written) when the
// ingress key does not fit 15 bits.
Status encodeOvnOption(OvnPortKeys keys, std::span<uint8_t, kOvnOptionDataLen> data);
// Encodes into `storage` and points `option` at it, ready for GeneveTunnel::options.
Status makeOvnOption(OvnPortKeys keys, std::array<uint8_t, kOvnOptionDataLen>& storage, GeneveOption& option);
// Reads an option that must be the OVN option with exactly 4 data bytes
// (kBadGeneveOption otherwise). The reserved bit is ignored on receipt, as
// RFC 8926 asks of reserved fields.
// Inline: it runs on every received packet.
inline Status decodeOvnOption(const GeneveOption& option, OvnPortKeys& keys) {
  if (option.option_class != kOvnOptionClass || option.type != kOvnOptionType ||
      option.data.size() != kOvnOptionDataLen) {
    return Status::kBadGeneveOption;
  }
  keys.ingress = load16(option.data.data()) & kOvnMaxIngressPortKey;
  keys.egress = load16(option.data.data() + 2);
  return Status::kOk;
}

// The UDP source port for an inner flow hash (RFC 8926 §3.3). The high half of
// the hash is folded in so that hashes with weak low bits still spread.
constexpr uint16_t geneveSourcePort(uint32_t inner_flow_hash) {
  const uint32_t h = inner_flow_hash ^ (inner_flow_hash >> 16);
  return static_cast<uint16_t>(kGeneveSourcePortMin | (h & 0x3fff));
}

// ---------------------------------------------------------------------------
// Sending.

// A tunnel towards one peer, as the control plane knows it. Addresses are in
// network byte order; an IPv4 address uses the first 4 bytes.
struct GeneveTunnel {
  std::array<uint8_t, 6> src_mac{};
  std::array<uint8_t, 6> dst_mac{};  // the underlay next hop
  UnderlayFamily family = UnderlayFamily::kIpv4;
  std::array<uint8_t, 16> src_ip{};
  std::array<uint8_t, 16> dst_ip{};
  uint8_t ttl = 64;  // IPv4 TTL or IPv6 hop limit
  uint8_t tos = 0;   // IPv4 TOS or IPv6 traffic class
  uint32_t vni = 0;  // 24 bits: the logical datapath key
  bool oam = false;  // O bit: a control message, never forwarded by the receiver (RFC 8926 §3.4)
  // Over IPv4 the UDP checksum is zero by default, as RFC 8926 §3.3 allows:
  // the mlx5 encap offload cannot compute it (docs/hardware.md), and software and
  // hardware must produce the same packets. Over IPv6 it is always computed
  // (RFC 8200 §8.1), whatever this says.
  bool udp_checksum = false;
  // Sent in this order; the C bit is set when any of them is critical.
  std::span<const GeneveOption> options{};
};

// The outer headers of one tunnel, built once and prepended per packet.
// Outer IPv4: no options, DF set, ID 0 (RFC 6864 §4.1 permits a fixed ID on
// atomic datagrams, and the DF bit keeps the underlay from fragmenting).
// Outer IPv6: flow label 0, no extension headers.
class GeneveEncapTemplate {
 public:
  static constexpr uint32_t kMaxLength = 14 + 40 + 8 + kGeneveHeaderLen + kGeneveMaxOptionsLen;

  // Validates and builds. kUnsupported for a VNI beyond 24 bits, kBadGeneveOption
  // for an option whose data is not a multiple of 4 or longer than 124 bytes,
  // kGeneveOptionsTooLong beyond 252 bytes of options. On failure the template
  // is left as it was.
  Status build(const GeneveTunnel& tunnel);

  // The outer headers with the per-packet fields (IP length and checksum, UDP
  // source port, length and checksum) zero: the RAW_ENCAP data for rte_flow and
  // the RAW_DECAP length on the receiving side. Empty until built.
  std::span<const uint8_t> bytes() const { return {header_.data(), length_}; }
  uint32_t length() const { return length_; }
  UnderlayFamily family() const { return family_; }

  // Prepends the outer headers to the inner Ethernet frame in `packet`.
  // kNoRoom when the headroom is short, kGeneveTooBig when the outer IP length
  // would exceed 65535, kUnsupported if never built; the packet is unchanged on
  // any failure. The UDP checksum, when on, reads the whole inner frame.
  Status encap(PacketBuffer& packet, uint32_t inner_flow_hash) const;

 private:
  std::array<uint8_t, kMaxLength> header_{};
  uint16_t length_ = 0;
  uint8_t udp_offset_ = 0;
  UnderlayFamily family_ = UnderlayFamily::kIpv4;
  bool udp_checksum_ = false;
  // IPv4 header sum with total length and checksum zero.
  uint32_t ipv4_sum_ = 0;
  // Pseudo-header addresses and protocol, UDP destination port, and the
  // Geneve header with its options: everything of the UDP checksum that does
  // not change per packet.
  uint32_t udp_sum_ = 0;
};

// One-call encapsulation through a template built on the stack: for tools,
// tests and the slow path; the dataplane keeps templates per tunnel.
Status encapGeneve(PacketBuffer& packet, const GeneveTunnel& tunnel, uint32_t inner_flow_hash);

// ---------------------------------------------------------------------------
// Receiving.

struct GeneveDecapConfig {
  // The options this receiver understands (RFC 8926 §3.5): an option not in
  // this list with the critical bit set drops the packet.
  std::span<const GeneveOptionKey> understood = kGeneveOvnOnly;
  // The NIC already verified the outer IPv4 header checksum or the UDP
  // checksum (RTE_MBUF_F_RX_IP_CKSUM_GOOD / RTE_MBUF_F_RX_L4_CKSUM_GOOD): skip
  // the software check.
  bool ipv4_checksum_verified = false;
  bool udp_checksum_verified = false;
};

// What a received Geneve packet says about itself. Option data views point
// into the packet bytes: valid while those bytes are (decapGeneve leaves them
// in the headroom, where the next prepend overwrites them).
struct GeneveHeaders {
  // Outer Ethernet.
  std::array<uint8_t, 6> dst_mac{};
  std::array<uint8_t, 6> src_mac{};
  bool vlan = false;
  uint16_t vlan_tci = 0;
  // Outer IP: the dataplane checks src_ip against the tunnel peer.
  UnderlayFamily family = UnderlayFamily::kIpv4;
  std::array<uint8_t, 16> src_ip{};  // IPv4: first 4 bytes, rest zero
  std::array<uint8_t, 16> dst_ip{};
  uint8_t ttl = 0;
  uint8_t tos = 0;
  // Outer UDP.
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  bool udp_checksum = false;  // non-zero on the wire (and verified unless the NIC did)
  // Geneve.
  uint32_t vni = 0;
  bool oam = false;       // O bit: the receiver must not forward the payload (RFC 8926 §3.4)
  bool critical = false;  // C bit as received
  uint32_t options_len = 0;
  uint32_t option_count = 0;
  std::array<GeneveOption, kGeneveMaxOptions> options{};
  std::optional<OvnPortKeys> ovn;  // the decoded OVN option, if present
  // The inner Ethernet frame: offset from the start of the outer frame, and
  // length (the outer IP length decides; Ethernet padding is not part of it).
  uint32_t inner_offset = 0;
  uint32_t inner_length = 0;

  std::span<const GeneveOption> optionList() const { return {options.data(), option_count}; }
};

// Validates an outer Ethernet frame (at most one VLAN tag) carrying IPv4 or
// IPv6, UDP to port 6081 and Geneve with an inner Ethernet frame, and fills
// `out`. Statuses: kTruncated, kBadEthernet, kTooManyVlans, kNotGeneve (not IP,
// not UDP, not port 6081), kBadIpVersion, kBadIpv4HeaderLength,
// kBadIpv4TotalLength, kBadIpv4Checksum, kGeneveFragment, kBadIpv6PayloadLength,
// kUnsupported (IPv6 extension headers), kBadL4Header (UDP length),
// kBadL4Checksum (mismatch, or zero over IPv6), kBadGeneveVersion,
// kBadGeneveLength, kBadGeneveProtocol, kBadGeneveOption (an option overruns
// the option area, or a malformed or repeated OVN option),
// kGeneveCriticalOption, kGeneveTooManyOptions. `out` is unspecified on failure.
Status parseGeneve(std::span<const uint8_t> frame, const GeneveDecapConfig& config, GeneveHeaders& out);

// parseGeneve(), then strips the outer headers (and any Ethernet padding after
// the outer IP packet) so that `packet` holds the inner Ethernet frame. The
// packet is unchanged on failure.
Status decapGeneve(PacketBuffer& packet, const GeneveDecapConfig& config, GeneveHeaders& out);

}  // namespace dpu::overlay
