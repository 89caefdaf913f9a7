// PacketBuilder: composes whole frames layer by layer for tests, tools (dpuctl
// trace, the lab's packet injector) and fuzz seeds, then fills in what a
// sender computes: EtherTypes and next-header chains, IP and UDP lengths,
// and the IPv4, TCP, UDP, ICMP and ICMPv6 checksums.
//
// Not for the datapath: it allocates and throws std::invalid_argument on
// misuse (a layer where it cannot go). The dataplane's own replies use the
// allocation-free builders in replies.h.
//
//   auto frame = PacketBuilder()
//                    .ethernet(dst_mac, src_mac)
//                    .vlan(100)
//                    .ipv4({.src = 0x0a000001, .dst = 0x0a000002})
//                    .udp(1234, 80)
//                    .payload(bytes)
//                    .build();
//
// Every field not given is zero except where noted; a layer's "next" field
// (EtherType, IPv4 protocol, IPv6 next header) is taken from the layer after
// it unless set explicitly. Lengths count everything after the header to the
// end of the frame, payload included. To build a malformed packet, build a
// valid one and change its bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "overlay/headers.h"

namespace dpu::overlay {

class PacketBuilder {
 public:
  struct Ipv4Fields {
    uint32_t src = 0;
    uint32_t dst = 0;
    uint8_t ttl = 64;
    uint8_t tos = 0;
    uint16_t id = 0;
    uint16_t frag_field = 0;  // flags and fragment offset, see ipv4::kFlag*
    std::optional<uint8_t> protocol = std::nullopt;
    std::vector<uint8_t> options = {};  // padded with End of Option List to a multiple of 4
  };
  struct Ipv6Fields {
    Ipv6Address src = {};
    Ipv6Address dst = {};
    uint8_t hop_limit = 64;
    uint8_t traffic_class = 0;
    uint32_t flow_label = 0;
    std::optional<uint8_t> next_header = std::nullopt;
  };
  struct TcpFields {
    uint16_t src_port = 0;
    uint16_t dst_port = 0;
    uint32_t seq = 0;
    uint32_t ack = 0;
    uint8_t flags = tcp::kFlagSyn;
    uint16_t window = 8192;
    uint16_t urgent = 0;
    std::vector<uint8_t> options = {};  // padded with End of Option List to a multiple of 4
  };

  // `type` is used only when no layer follows that implies one.
  PacketBuilder& ethernet(const MacAddress& dst, const MacAddress& src, uint16_t type = 0);
  PacketBuilder& vlan(uint16_t tci, uint16_t tpid = eth::kTypeVlan);
  PacketBuilder& arp(uint16_t op, const MacAddress& sender_mac, uint32_t sender_ip, const MacAddress& target_mac,
                     uint32_t target_ip);
  PacketBuilder& ipv4(const Ipv4Fields& fields);
  PacketBuilder& ipv6(const Ipv6Fields& fields);
  // A hop-by-hop, routing, destination options or AH header: `body` is what
  // follows the next-header and length bytes, sized so the whole header is a
  // multiple of 8 bytes (the caller writes the Pad1/PadN options).
  PacketBuilder& ipv6Extension(uint8_t type, std::span<const uint8_t> body);
  PacketBuilder& ipv6Fragment(uint16_t offset_units, bool more, uint32_t id);
  PacketBuilder& icmp(uint8_t type, uint8_t code, uint32_t rest = 0);
  PacketBuilder& icmpEcho(uint8_t type, uint16_t id, uint16_t seq);
  PacketBuilder& icmpv6(uint8_t type, uint8_t code, uint32_t rest = 0);
  PacketBuilder& icmpv6Echo(uint8_t type, uint16_t id, uint16_t seq);
  PacketBuilder& neighborSolicit(const Ipv6Address& target, std::optional<MacAddress> source_link_addr);
  PacketBuilder& neighborAdvert(uint32_t flags, const Ipv6Address& target,
                                std::optional<MacAddress> target_link_addr);
  // `checksum` false leaves the UDP checksum 0 ("none", IPv4 only).
  PacketBuilder& udp(uint16_t src_port, uint16_t dst_port, bool checksum = true);
  PacketBuilder& tcp(const TcpFields& fields);
  PacketBuilder& payload(std::span<const uint8_t> bytes);
  // A DHCP server's answer (RFC 2131) as the UDP payload: BOOTREPLY to the
  // Ethernet client `client` offering `your_ip`, the BROADCAST flag set, and
  // the DHCP message type option (2 OFFER, 5 ACK).
  PacketBuilder& dhcpReply(const MacAddress& client, uint32_t your_ip, uint8_t message_type = 2);

  std::vector<uint8_t> build() const;

 private:
  enum class Kind : uint8_t { kEthernet, kVlan, kArp, kIpv4, kIpv6, kIpv6Ext, kIcmp, kIcmpv6, kUdp, kTcp, kPayload };
  struct Layer {
    Kind kind;
    size_t offset;
    uint16_t code;  // what the previous layer's "next" field must say: EtherType, TPID or protocol
    bool fill = true;  // compute this layer's "next" field (or the UDP checksum)
  };
  uint8_t* push(Kind kind, size_t len, uint16_t code, bool fill = true);
  void requireAfter(std::initializer_list<Kind> allowed, const char* what, bool may_start = false) const;

  std::vector<uint8_t> bytes_;
  std::vector<Layer> layers_;
};

}  // namespace dpu::overlay
