// Per-packet header rewrites of the lcore's compiled actions that are worth a
// name of their own (and a unit test against the general routine they stand
// in for).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

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

}  // namespace dpu::datapath
