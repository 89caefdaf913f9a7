// Network-byte-order loads and stores on unaligned byte pointers, and
// address comparison.
//
// Packet bytes are never cast to structs: headers in a received buffer are not
// aligned (an IPv4 header behind a 14-byte Ethernet header sits at offset 14),
// and reading them through memcpy keeps the code free of strict-aliasing and
// alignment undefined behaviour while compiling to single loads.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace dpu::overlay {

inline uint16_t load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return std::endian::native == std::endian::little ? __builtin_bswap16(v) : v;
}

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return std::endian::native == std::endian::little ? __builtin_bswap32(v) : v;
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return std::endian::native == std::endian::little ? __builtin_bswap64(v) : v;
}

inline void store16(uint8_t* p, uint16_t v) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap16(v);
  std::memcpy(p, &v, sizeof v);
}

inline void store32(uint8_t* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
  std::memcpy(p, &v, sizeof v);
}

inline void store64(uint8_t* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof v);
}

// Two addresses as the headers have them, IPv4 (4 bytes) or IPv6 (16),
// compared inline as words (a memcmp of a size chosen at run time, or of
// two std::arrays, is a libc call).
inline bool sameAddress(const uint8_t* a, const uint8_t* b, bool v6) {
  if (v6) {
    uint64_t x[2], y[2];
    std::memcpy(x, a, 16);
    std::memcpy(y, b, 16);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
  }
  uint32_t x, y;
  std::memcpy(&x, a, 4);
  std::memcpy(&y, b, 4);
  return x == y;
}

}  // namespace dpu::overlay
