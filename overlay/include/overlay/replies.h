// Packets the slow path sends back on behalf of the distributed gateway:
// ARP replies and neighbor advertisements for the gateway's addresses, the
// two "too big" errors path MTU discovery depends on (RFC 1191, RFC 8201) —
// the ones a tunnel or IPsec overhead makes the dataplane send — and the
// refusals of a connection to a service with nothing to serve it.
//
// Each builder reads a packet parsePacket accepted and writes its reply into
// `out`, replacing what `out` held; the reply goes back on the same VLAN(s),
// from `gateway_mac` to the sender. Nothing is allocated: `out` wraps a
// caller-owned array (an mbuf's data room) that must not overlap the input.
// If the reply does not fit, kNoRoom and `out` is unchanged. Replies are not
// padded to the 60-byte Ethernet minimum: NICs pad short frames, as the Linux
// stack relies on too.
//
// The builders refuse (kUnsupported, nothing written) packets a host or router
// must never answer, so a caller's mistake cannot make the gateway amplify or
// loop errors: ICMP errors about ICMP errors, about later fragments, or to
// addresses that are not a single host (RFC 1122 §3.2.2, RFC 4443 §2.4(e)).
// Whether the target is the gateway's own address is the caller's decision.
#pragma once

#include <cstdint>
#include <span>

#include "overlay/buffer.h"
#include "overlay/headers.h"
#include "overlay/parse.h"
#include "overlay/status.h"

namespace dpu::overlay {

// Answers an ARP request (RFC 826): "the target protocol address is at
// gateway_mac", sent to the requester's hardware address. kUnsupported unless
// `pkt` is an ARP request.
Status buildArpReply(std::span<const uint8_t> request, const ParsedPacket& pkt, const MacAddress& gateway_mac,
                     PacketBuffer& out);

// An ARP request (RFC 826) for `target_ip` from `sender_mac` and `sender_ip`
// (host order, as arp:: reads them), untagged, to `dst_mac`: the broadcast
// address to resolve an unknown neighbour, or the neighbour's own MAC to
// confirm a known one (a unicast probe, RFC 1122 §2.3.2.1). The target
// hardware address is zero. kUnsupported when `sender_mac` is not unicast or
// `sender_ip` is 0 (that would be an ARP probe, RFC 5227, not a request).
Status buildArpRequest(const MacAddress& sender_mac, uint32_t sender_ip, uint32_t target_ip, const MacAddress& dst_mac,
                       PacketBuffer& out);

// An ARP probe (RFC 5227 §2.1.1): a broadcast request for `target_ip` from
// `sender_mac` with sender address 0. Linux answers one for an address of its
// own (to `sender_mac`) without learning anything from it, so it asks a host
// which MAC holds an address without claiming an address of our own.
// kUnsupported when `sender_mac` is not unicast or `target_ip` is 0.
Status buildArpProbe(const MacAddress& sender_mac, uint32_t target_ip, PacketBuffer& out);

// A neighbor solicitation (RFC 4861 §4.3, §7.2.2) for `target` from
// `sender_mac` and `sender_ip`, with a source link-layer address option,
// untagged: to the target's solicited-node group when `dst_mac` is multicast
// (resolving an unknown neighbour; the frame goes to the group's MAC), else
// to `target` itself at `dst_mac` (a unicast probe of a known one, §7.3.3).
// kUnsupported when `sender_mac` is not unicast, `sender_ip` is unspecified
// or multicast (that would be duplicate address detection, below), or
// `target` is multicast.
Status buildNeighborSolicit(const MacAddress& sender_mac, const Ipv6Address& sender_ip, const Ipv6Address& target,
                            const MacAddress& dst_mac, PacketBuffer& out);

// A solicitation from the unspecified address (duplicate address detection,
// RFC 4862 §5.4.2) for `target`, to its solicited-node group, with no source
// link-layer option: the IPv6 counterpart of buildArpProbe. A host holding
// `target` answers it with an advertisement to all-nodes carrying its MAC
// (RFC 4861 §7.2.4), learning nothing from it. kUnsupported when `sender_mac`
// is not unicast or `target` is unspecified or multicast.
Status buildNeighborProbe(const MacAddress& sender_mac, const Ipv6Address& target, PacketBuffer& out);

// Answers a neighbor solicitation (RFC 4861 §7.2.4) for its target address with
// a solicited advertisement from that address, flags Router and Override, and
// a target link-layer address option. A solicitation from the unspecified
// address (duplicate address detection) is answered to all-nodes, unsolicited.
// The solicitation is validated first (parseNeighborMessage): its errors are
// returned as they are.
Status buildNeighborAdvert(std::span<const uint8_t> solicitation, const ParsedPacket& pkt,
                           const MacAddress& gateway_mac, PacketBuffer& out);

// ICMP destination unreachable, fragmentation needed (type 3 code 4) with the
// next-hop MTU (RFC 1191 §4), quoting the offending IP header and the first 8
// bytes of its data (RFC 792), from `gateway_ip` to the sender. Only for an
// IPv4 datagram with DF set, and `next_hop_mtu` at least 68 (RFC 791).
Status buildIcmpFragNeeded(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                           const MacAddress& gateway_mac, uint32_t gateway_ip, uint16_t next_hop_mtu,
                           PacketBuffer& out);

// ICMPv6 packet too big (RFC 4443 §3.2) with `mtu` (at least 1280, RFC 8200
// §5), quoting as much of the offending packet as fits in a 1280-byte reply,
// from `gateway_ip` to the sender.
Status buildIcmp6PacketTooBig(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                              const MacAddress& gateway_mac, const Ipv6Address& gateway_ip, uint32_t mtu,
                              PacketBuffer& out);

// The refusal of a connection to an address that answers for itself but has
// nothing behind the port (a service without endpoints, or a port the
// service does not have), as kube-proxy's REJECT answers: ICMP destination
// unreachable, port unreachable (type 3 code 3; ICMPv6 type 1 code 4,
// RFC 4443 §3.1), from the address the packet was sent to. The checks of the
// errors above apply (no error about an error, a later fragment, a multicast
// destination or to a source that is not one host).
Status buildIcmpPortUnreachable(std::span<const uint8_t> offending, const ParsedPacket& pkt,
                                const MacAddress& gateway_mac, PacketBuffer& out);

// The same for TCP: a reset (RFC 793 §3.4, "reset generation") from the
// address and port the segment was sent to, so the client sees "connection
// refused" at once. kUnsupported for a segment that is a reset itself, a
// later fragment, or not between single hosts.
Status buildTcpReset(std::span<const uint8_t> offending, const ParsedPacket& pkt, const MacAddress& gateway_mac,
                     PacketBuffer& out);

// Hop limit / TTL of the replies above that are not neighbor discovery.
inline constexpr uint8_t kReplyTtl = 64;

}  // namespace dpu::overlay
