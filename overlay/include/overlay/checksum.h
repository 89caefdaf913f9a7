// The Internet checksum (RFC 1071), its pseudo-headers, and incremental updates
// (RFC 1624) for rewrites that must not re-read the whole packet (NAT, TTL).
//
// Conventions: a "checksum" is the 16-bit field value as load16() returns it
// (host order of the big-endian field). A "sum" is an unfolded 32-bit ones'
// complement accumulator that callers may chain (pseudo-header + payload)
// before folding it once with checksumFinish().
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace dpu::overlay {

// Adds the bytes (as big-endian 16-bit words; an odd last byte is padded with
// zero) to `sum`. Returns an unfolded sum.
uint32_t checksumAdd(const uint8_t* data, size_t len, uint32_t sum = 0);

// The checksum of an IPv4 header (its checksum field included): 0 when valid.
// The option-less 20-byte header, the case on every tunnel packet, is summed
// inline as five 32-bit words; longer headers take the general loop.
inline uint16_t ipv4HeaderChecksum(const uint8_t* header, size_t len);

// Folds a sum to 16 bits and complements it: the value to store in a header.
inline uint16_t checksumFinish(uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The checksum of a byte range (e.g. an IPv4 header with its checksum field zero).
inline uint16_t internetChecksum(std::span<const uint8_t> bytes) {
  return checksumFinish(checksumAdd(bytes.data(), bytes.size()));
}

namespace detail {
// The five native 32-bit words of a 20-byte header, summed: read as two
// 64-bit words and one 32-bit word, so they stay in registers (an array of
// five is copied to the stack and read back).
inline uint64_t sumWords20(const uint8_t* header) {
  uint64_t a, b;
  uint32_t c;
  std::memcpy(&a, header, 8);
  std::memcpy(&b, header + 8, 8);
  std::memcpy(&c, header + 16, 4);
  return (a & 0xffffffff) + (a >> 32) + (b & 0xffffffff) + (b >> 32) + c;
}

// Folds a 64-bit accumulator of native-order 32-bit words to the 16-bit
// big-endian-view sum: the ones' complement sum is byte-order independent up
// to one final swap (RFC 1071 §2(B)).
inline uint16_t foldNative(uint64_t acc) {
  acc = (acc & 0xffffffff) + (acc >> 32);
  acc = (acc & 0xffffffff) + (acc >> 32);
  uint32_t folded = static_cast<uint32_t>(acc);
  folded = (folded & 0xffff) + (folded >> 16);
  folded = (folded & 0xffff) + (folded >> 16);
  uint16_t native = static_cast<uint16_t>(folded);
  if constexpr (std::endian::native == std::endian::little) native = __builtin_bswap16(native);
  return native;
}
}  // namespace detail

inline uint16_t ipv4HeaderChecksum(const uint8_t* header, size_t len) {
  if (len != 20) return checksumFinish(checksumAdd(header, len));
  return static_cast<uint16_t>(~detail::foldNative(detail::sumWords20(header)));
}

// Whether a 20-byte header's checksum verifies (ipv4HeaderChecksum would be
// 0), without folding: its 16-bit words' ones' complement sum is all ones
// exactly when their integer sum is a non-zero multiple of 0xffff, and so is
// the sum of its native 32-bit words (2^16 is 1 modulo 0xffff, and a byte
// swap multiplies by 256, which is invertible modulo 0xffff). The compiler
// turns the remainder into a multiply and a shift.
inline bool ipv4HeaderChecksumOk(const uint8_t* header) {
  const uint64_t acc = detail::sumWords20(header);
  return acc != 0 && acc % 0xffff == 0;
}

// Pseudo-header sums for TCP/UDP/ICMPv6 (RFC 768, RFC 793, RFC 8200 §8.1).
// Addresses point at the 4 or 16 address bytes in network order.
uint32_t pseudoHeaderSumV4(const uint8_t* src, const uint8_t* dst, uint8_t proto, uint16_t l4_len);
uint32_t pseudoHeaderSumV6(const uint8_t* src, const uint8_t* dst, uint8_t next_header, uint32_t l4_len);

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). Returns the new checksum after a
// 16-bit word of the covered data changed from `old_word` to `new_word`.
inline uint16_t checksumUpdate16(uint16_t checksum, uint16_t old_word, uint16_t new_word) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint16_t>(~old_word);
  sum += new_word;
  return checksumFinish(sum);
}

// The same for a 32-bit field (an IPv4 address), as two 16-bit words.
inline uint16_t checksumUpdate32(uint16_t checksum, uint32_t old_value, uint32_t new_value) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint16_t>(~(old_value >> 16));
  sum += static_cast<uint16_t>(~(old_value & 0xffff));
  sum += new_value >> 16;
  sum += new_value & 0xffff;
  return checksumFinish(sum);
}

// The same for a byte range of even length that changed from `old_bytes` to
// `new_bytes` (an IPv6 address, a MAC-sized field inside covered data).
uint16_t checksumUpdateBytes(uint16_t checksum, const uint8_t* old_bytes, const uint8_t* new_bytes,
                             size_t len);

}  // namespace dpu::overlay
