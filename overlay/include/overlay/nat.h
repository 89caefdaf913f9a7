// NAT and forwarding rewrites of a parsed packet, in place: addresses, L4
// ports (the ICMP echo identifier for ICMP queries), and the TTL/hop-limit
// decrement every routed hop does.
//
// Checksums are patched incrementally (RFC 1624 eqn. 3, checksum.h) from the
// old and new field values alone, never re-summed over the packet, so the cost
// does not grow with the payload and a first fragment is patched correctly
// although its checksum covers bytes in later fragments. Consequences:
//  - a checksum that was wrong stays exactly as wrong (the receiver still drops it);
//  - a UDP checksum of 0 ("none", RFC 768) stays 0, and a computed 0 is sent
//    as 0xffff; IPv6 zero-checksum UDP tunnels (RFC 6935) stay 0 as well;
//  - later fragments carry no L4 header: only their IP header is rewritten,
//    and port rewrites are a no-op returning kOk, so one action list fits
//    every fragment of a flow.
//
// Preconditions: `pkt` is the kOk result of parsePacket on these same bytes
// (or a copy). The functions only touch bytes the parser validated; they do not
// allocate, throw, lock or log. A function that does not apply to the packet
// (an IPv6 rewrite on IPv4, a port on a protocol without ports) returns
// kUnsupported and changes nothing.
#pragma once

#include <cstdint>
#include <span>

#include "overlay/headers.h"
#include "overlay/parse.h"
#include "overlay/status.h"

namespace dpu::overlay {

// IPv4 source/destination: the header checksum, and the TCP/UDP checksums over
// the pseudo-header. ICMP has no pseudo-header, so its checksum is unchanged.
Status setIpv4Src(std::span<uint8_t> frame, const ParsedPacket& pkt, uint32_t addr);
Status setIpv4Dst(std::span<uint8_t> frame, const ParsedPacket& pkt, uint32_t addr);

// IPv6 source/destination: the TCP, UDP or ICMPv6 checksum (pseudo-header,
// RFC 8200 §8.1). When a routing header still has segments left, the
// destination field is not the one the pseudo-header uses, so setIpv6Dst
// leaves the L4 checksum alone.
Status setIpv6Src(std::span<uint8_t> frame, const ParsedPacket& pkt, const Ipv6Address& addr);
Status setIpv6Dst(std::span<uint8_t> frame, const ParsedPacket& pkt, const Ipv6Address& addr);

// TCP/UDP source or destination port. For ICMP and ICMPv6 echo request/reply
// both rewrite the identifier, the one "port" a query has (as Linux conntrack
// treats it); other ICMP types give kUnsupported.
Status setL4SrcPort(std::span<uint8_t> frame, const ParsedPacket& pkt, uint16_t port);
Status setL4DstPort(std::span<uint8_t> frame, const ParsedPacket& pkt, uint16_t port);

// Decrements the IPv4 TTL (patching the header checksum) or the IPv6 hop limit.
// kTtlExpired, with nothing changed, when it is 0 or 1: the packet must not be
// forwarded (RFC 791; RFC 8200 §3) and the slow path may answer "time exceeded".
Status decrementTtl(std::span<uint8_t> frame, const ParsedPacket& pkt);

}  // namespace dpu::overlay
