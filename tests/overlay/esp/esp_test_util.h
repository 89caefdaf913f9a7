// Helpers shared by the ESP tests: a packet buffer with room on both sides,
// tiny IPv4/IPv6 packet builders (local, so these tests do not depend on the
// packet library's API) and SA configurations.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/esp.h"

namespace dpu::test {

using overlay::PacketBuffer;

// Owns the bytes of a PacketBuffer with `headroom` bytes before the packet
// and `tailroom` after it.
struct TestPacket {
  explicit TestPacket(const std::vector<uint8_t>& bytes, uint32_t headroom = 128, uint32_t tailroom = 64)
      : mem(headroom + bytes.size() + tailroom, 0xee) {
    std::copy(bytes.begin(), bytes.end(), mem.begin() + headroom);
    buf = PacketBuffer(mem.data(), static_cast<uint32_t>(mem.size()), headroom, static_cast<uint32_t>(bytes.size()));
  }
  TestPacket(const TestPacket&) = delete;
  std::vector<uint8_t> bytes() const { return {buf.data(), buf.data() + buf.size()}; }

  std::vector<uint8_t> mem;
  PacketBuffer buf;
};

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 7 * i);
  return v;
}

// IPv4 + UDP with `payload_len` bytes of payload and `options_len` (multiple of
// 4) bytes of IPv4 options (NOPs ended by EOL).
inline std::vector<uint8_t> ipv4Udp(size_t payload_len, size_t options_len = 0, uint8_t tos = 0) {
  const size_t ihl = 20 + options_len;
  std::vector<uint8_t> p(ihl + 8 + payload_len);
  p[0] = static_cast<uint8_t>(0x40 | ihl / 4);
  p[1] = tos;
  overlay::store16(&p[2], static_cast<uint16_t>(p.size()));
  overlay::store16(&p[4], 0x1234);
  overlay::store16(&p[6], 0x4000);
  p[8] = 64;
  p[9] = 17;
  const uint8_t src[4] = {10, 0, 0, 1}, dst[4] = {10, 0, 0, 2};
  std::copy(src, src + 4, &p[12]);
  std::copy(dst, dst + 4, &p[16]);
  for (size_t i = 0; i < options_len; ++i) p[20 + i] = i + 1 == options_len ? 0 : 1;
  overlay::store16(&p[10], overlay::internetChecksum({p.data(), ihl}));
  overlay::store16(&p[ihl], 40000);
  overlay::store16(&p[ihl + 2], 6081);
  overlay::store16(&p[ihl + 4], static_cast<uint16_t>(8 + payload_len));
  auto data = pattern(payload_len, static_cast<uint8_t>(payload_len));
  std::copy(data.begin(), data.end(), p.begin() + ihl + 8);
  return p;
}

// IPv6 + (optional hop-by-hop + destination options) + UDP.
inline std::vector<uint8_t> ipv6Udp(size_t payload_len, bool ext_headers = false, uint8_t tc = 0) {
  const size_t ext = ext_headers ? 16 : 0;
  std::vector<uint8_t> p(40 + ext + 8 + payload_len);
  overlay::store32(&p[0], 6u << 28 | uint32_t{tc} << 20 | 0x12345);
  overlay::store16(&p[4], static_cast<uint16_t>(p.size() - 40));
  p[6] = ext_headers ? 0 : 17;
  p[7] = 64;
  for (int i = 0; i < 16; ++i) {
    p[8 + i] = static_cast<uint8_t>(0x20 + i);
    p[24 + i] = static_cast<uint8_t>(0x40 + i);
  }
  if (ext_headers) {
    // Hop-by-hop (PadN) then destination options (PadN), 8 bytes each.
    p[40] = 60;
    p[41] = 0;
    p[42] = 1;
    p[43] = 4;
    p[48] = 17;
    p[49] = 0;
    p[50] = 1;
    p[51] = 4;
  }
  const size_t udp = 40 + ext;
  overlay::store16(&p[udp], 40001);
  overlay::store16(&p[udp + 2], 6081);
  overlay::store16(&p[udp + 4], static_cast<uint16_t>(8 + payload_len));
  auto data = pattern(payload_len, static_cast<uint8_t>(payload_len + 1));
  std::copy(data.begin(), data.end(), p.begin() + udp + 8);
  return p;
}

inline overlay::EspSaConfig espConfig(size_t key_size, overlay::EspMode mode, bool esn, overlay::EspIvMode iv_mode,
                                      overlay::AeadBackend backend, bool outer_v6 = false) {
  overlay::EspSaConfig c;
  c.spi = 0x1000abcd;
  c.key = pattern(key_size, 0x5a);
  c.salt = {0xca, 0xfe, 0xba, 0xbe};
  c.mode = mode;
  c.esn = esn;
  c.iv_mode = iv_mode;
  c.backend = backend;
  if (outer_v6) {
    std::array<uint8_t, 16> s{}, d{};
    s[0] = d[0] = 0xfd;
    s[15] = 1;
    d[15] = 2;
    c.tunnel = overlay::EspTunnelConfig::v6(s, d);
  } else {
    c.tunnel = overlay::EspTunnelConfig::v4({192, 0, 2, 1}, {192, 0, 2, 2});
  }
  return c;
}

inline std::string backendName(overlay::AeadBackend b) { return std::string(overlay::aeadBackendName(b)); }

}  // namespace dpu::test
