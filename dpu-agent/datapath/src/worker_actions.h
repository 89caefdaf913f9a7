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

}  // namespace dpu::datapath
