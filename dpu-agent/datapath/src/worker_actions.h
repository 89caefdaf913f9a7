// Per-packet header rewrites of the lcore's compiled actions that are worth a
// name of their own (and a unit test against the general routine they stand
// in for).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "flow_cache.h"
#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/flow_key.h"

namespace dpu::datapath {

// Decrements the TTL of an IPv4 header whose TTL is above 1 and updates its
// checksum. RFC 1624 eqn. 3 for this change reduces to the ones' complement
// sum of the checksum and 0x0100 (Linux's ip_decrease_ttl), and a ones'
// complement sum does not depend on byte order, so it works on the stored
// bytes: the same result as overlay::checksumUpdate16 for every checksum, TTL
// and protocol (engine tests check all checksums), in a quarter of the
// instructions.
inline void decrementIpv4Ttl(uint8_t* ip) {
  ip[8] = static_cast<uint8_t>(ip[8] - 1);
  uint16_t raw;
  std::memcpy(&raw, ip + 10, 2);
  const uint32_t sum = uint32_t{raw} + (std::endian::native == std::endian::little ? 0x0001u : 0x0100u);
  raw = static_cast<uint16_t>(sum + (sum >= 0xffff));
  std::memcpy(ip + 10, &raw, 2);
}

// The same for a header whose TTL may be 0 or 1: false, nothing changed,
// when it is. The TTL, protocol and checksum are one 32-bit word, and for
// every checksum but 0xfffe and 0xffff (its stored bytes read
// little-endian) the update is one add to it: the TTL's -1 and the
// checksum's +1 carry into nothing else. Those two take decrementIpv4Ttl's
// end-around carry.
inline bool decrementLiveIpv4Ttl(uint8_t* ip) {
  uint32_t word;
  std::memcpy(&word, ip + 8, 4);
  if constexpr (std::endian::native == std::endian::little) {
    if ((word & 0xff) <= 1) return false;
    if (word >= 0xfffe0000u) [[unlikely]] {
      decrementIpv4Ttl(ip);
      return true;
    }
    word += 0xffff;
    std::memcpy(ip + 8, &word, 4);
    return true;
  } else {
    if (ip[8] <= 1) return false;
    decrementIpv4Ttl(ip);
    return true;
  }
}

// Adds `add` to the checksum stored at `p` in ones' complement (RFC 1624
// eqn. 3, HC' = ~(~HC + m) with m the precomputed change).
inline void addToChecksum(uint8_t* p, uint16_t add) {
  uint32_t sum = static_cast<uint16_t>(~overlay::load16(p));
  sum += add;
  overlay::store16(p, overlay::checksumFinish(sum));
}

// The Nat action on one packet: the IP header at `ip`, its L4 header at
// `l4`. Everything it computes per packet is two checksum additions; the
// amounts were taken by makeNatRewrite from the flow's old values.
inline void applyNat(uint8_t* ip, uint8_t* l4, const NatRewrite& n) {
  if (!n.v6) {
    if (n.fields & NatRewrite::kSrcIp) std::memcpy(ip + 12, n.src_ip.data(), 4);
    if (n.fields & NatRewrite::kDstIp) std::memcpy(ip + 16, n.dst_ip.data(), 4);
    if (n.fields & (NatRewrite::kSrcIp | NatRewrite::kDstIp)) addToChecksum(ip + 10, n.l3_add);
  } else {
    if (n.fields & NatRewrite::kSrcIp) std::memcpy(ip + 8, n.src_ip.data(), 16);
    if (n.fields & NatRewrite::kDstIp) std::memcpy(ip + 24, n.dst_ip.data(), 16);
  }
  if (n.fields & NatRewrite::kSrcPort) std::memcpy(l4, &n.src_port, 2);
  if (n.fields & NatRewrite::kDstPort) std::memcpy(l4 + 2, &n.dst_port, 2);
  if (n.fields & NatRewrite::kIcmpId) std::memcpy(l4 + 4, &n.src_port, 2);
  if (n.l4_checksum != 0) {
    uint8_t* c = l4 + n.l4_checksum;
    // A UDP checksum of 0 over IPv4 means "none" (RFC 768): it stays 0; a
    // computed 0 goes out as 0xffff.
    if (n.udp && overlay::load16(c) == 0) return;
    addToChecksum(c, n.l4_add);
    if (n.udp && overlay::load16(c) == 0) overlay::store16(c, 0xffff);
  }
}

// The rewrite that takes a packet of flow `key` (protocol `protocol`: 6, 17,
// 132, 1 or 58) to the new addresses and ports given (in the key's layout:
// 4 or 16 bytes, ports in host order). Fields equal to the old ones are left
// out. For ICMP echo the "port" is the identifier (a src_port change).
inline NatRewrite makeNatRewrite(const overlay::FlowKey& key, bool v6, uint8_t protocol, const uint8_t* new_src,
                                 const uint8_t* new_dst, uint16_t new_sport, uint16_t new_dport) {
  NatRewrite n;
  n.v6 = v6;
  const size_t len = v6 ? 16 : 4;
  uint32_t l3 = 0, l4 = 0;
  auto addressChange = [&](const uint8_t* old_a, const uint8_t* new_a, uint8_t bit, std::array<uint8_t, 16>& slot) {
    if (sameAddress(old_a, new_a, v6)) return;
    n.fields |= bit;
    std::memcpy(slot.data(), new_a, len);
    for (size_t i = 0; i < len; i += 2) {
      const uint32_t d = static_cast<uint16_t>(~overlay::load16(old_a + i)) + uint32_t{overlay::load16(new_a + i)};
      l3 += d;
      l4 += d;
    }
  };
  addressChange(key.l3_src.data(), new_src, NatRewrite::kSrcIp, n.src_ip);
  addressChange(key.l3_dst.data(), new_dst, NatRewrite::kDstIp, n.dst_ip);
  auto wire = [](uint16_t host) { return std::endian::native == std::endian::little ? __builtin_bswap16(host) : host; };
  const bool icmp = protocol == overlay::ipproto::kIcmp || protocol == overlay::ipproto::kIcmpv6;
  if (icmp) {
    // The echo identifier is the key's l4_dst (flow_key.h); the rewrite puts
    // new_sport there. ICMPv4 has no pseudo-header: only the id counts.
    if (!v6) l4 = 0;
    if (key.l4_dst != new_sport) {
      n.fields |= NatRewrite::kIcmpId;
      n.src_port = wire(new_sport);
      l4 += static_cast<uint16_t>(~key.l4_dst) + uint32_t{new_sport};
    }
    n.l4_checksum = 2;
  } else {
    if (key.l4_src != new_sport) {
      n.fields |= NatRewrite::kSrcPort;
      n.src_port = wire(new_sport);
      l4 += static_cast<uint16_t>(~key.l4_src) + uint32_t{new_sport};
    }
    if (key.l4_dst != new_dport) {
      n.fields |= NatRewrite::kDstPort;
      n.dst_port = wire(new_dport);
      l4 += static_cast<uint16_t>(~key.l4_dst) + uint32_t{new_dport};
    }
    // SCTP's CRC32c covers its ports but no pseudo-header: a port rewrite of
    // SCTP is refused by the caller; an address rewrite needs no update.
    n.l4_checksum = protocol == overlay::ipproto::kTcp ? 16 : protocol == overlay::ipproto::kUdp ? 6 : 0;
    n.udp = protocol == overlay::ipproto::kUdp && !v6;
  }
  auto fold = [](uint32_t x) {
    x = (x & 0xffff) + (x >> 16);
    x = (x & 0xffff) + (x >> 16);
    return static_cast<uint16_t>(x);
  };
  n.l3_add = fold(l3);
  n.l4_add = fold(l4);
  return n;
}

}  // namespace dpu::datapath
