// Internet checksum arithmetic. The summing loop reads native 32-bit words into
// a 64-bit accumulator (no carry handling per word) and swaps the folded result
// once on little-endian machines: the ones' complement sum is byte-order
// independent up to that final swap (RFC 1071 §2(B)).
#include "overlay/checksum.h"

#include <bit>
#include <cstring>

#include "overlay/bytes.h"

namespace dpu::overlay {

uint32_t checksumAdd(const uint8_t* data, size_t len, uint32_t sum) {
  uint64_t acc = 0;
  while (len >= 16) {
    uint32_t w[4];
    std::memcpy(w, data, sizeof w);
    acc += uint64_t{w[0]} + w[1] + w[2] + w[3];
    data += 16;
    len -= 16;
  }
  while (len >= 4) {
    uint32_t w;
    std::memcpy(&w, data, sizeof w);
    acc += w;
    data += 4;
    len -= 4;
  }
  if (len >= 2) {
    uint16_t w;
    std::memcpy(&w, data, sizeof w);
    acc += w;
    data += 2;
    len -= 2;
  }
  if (len == 1) {
    // The odd byte is the high byte of a big-endian word padded with zero.
    uint8_t pad[2] = {data[0], 0};
    uint16_t w;
    std::memcpy(&w, pad, sizeof w);
    acc += w;
  }
  const uint16_t native = detail::foldNative(acc);
  uint64_t total = uint64_t{sum} + native;
  total = (total & 0xffffffff) + (total >> 32);
  return static_cast<uint32_t>(total);
}

uint32_t pseudoHeaderSumV4(const uint8_t* src, const uint8_t* dst, uint8_t proto, uint16_t l4_len) {
  uint32_t sum = 0;
  sum += load16(src) + load16(src + 2);
  sum += load16(dst) + load16(dst + 2);
  sum += proto;
  sum += l4_len;
  return sum;
}

uint32_t pseudoHeaderSumV6(const uint8_t* src, const uint8_t* dst, uint8_t next_header, uint32_t l4_len) {
  uint32_t sum = checksumAdd(src, 16);
  sum = checksumAdd(dst, 16, sum);
  uint64_t total = uint64_t{sum} + (l4_len >> 16) + (l4_len & 0xffff) + next_header;
  total = (total & 0xffffffff) + (total >> 32);
  return static_cast<uint32_t>(total);
}

uint16_t checksumUpdateBytes(uint16_t checksum, const uint8_t* old_bytes, const uint8_t* new_bytes,
                             size_t len) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  for (size_t i = 0; i + 1 < len; i += 2) {
    sum += static_cast<uint16_t>(~load16(old_bytes + i));
    sum += load16(new_bytes + i);
  }
  return checksumFinish(sum);
}

}  // namespace dpu::overlay
