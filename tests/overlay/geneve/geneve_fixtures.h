// Shared fixtures of the Geneve tests: tunnels matching the scapy goldens
// (gen_geneve.py), inner frames, a packet in a buffer with headroom, and an
// outer-checksum fixer for tests that corrupt a field on purpose and want only
// that field to be wrong.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "golden.h"
#include "overlay/buffer.h"
#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"

namespace dpu::test {

using overlay::GeneveTunnel;
using overlay::PacketBuffer;
using overlay::UnderlayFamily;

inline constexpr const char* kGeneveGolden = "tests/overlay/golden/geneve.golden";
inline constexpr uint32_t kGoldenFlowHash = 0x12345678;  // source port 0xc44c in the goldens
inline constexpr uint32_t kGoldenVni = 0x123456;

inline GeneveTunnel goldenTunnel(UnderlayFamily family) {
  GeneveTunnel t;
  t.src_mac = {0x0c, 0x42, 0xa1, 0x00, 0x00, 0x01};
  t.dst_mac = {0x0c, 0x42, 0xa1, 0x00, 0x00, 0x02};
  t.family = family;
  if (family == UnderlayFamily::kIpv4) {
    t.src_ip = {192, 0, 2, 1};
    t.dst_ip = {192, 0, 2, 2};
  } else {
    t.src_ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    t.dst_ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  }
  t.ttl = 64;
  t.vni = kGoldenVni;
  return t;
}

// An inner Ethernet frame of `size` bytes (at least 14) with recognisable content.
inline std::vector<uint8_t> innerFrame(size_t size, uint8_t seed = 0) {
  std::vector<uint8_t> f(size);
  for (size_t i = 0; i < size; ++i) f[i] = static_cast<uint8_t>(seed + i * 13);
  const uint8_t hdr[14] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00};
  std::memcpy(f.data(), hdr, size < 14 ? size : 14);
  return f;
}

// A packet in its own array with room in front; not copyable (the buffer
// points into the array).
class TestPacket {
 public:
  explicit TestPacket(const std::vector<uint8_t>& bytes, uint32_t headroom = 512, uint32_t tailroom = 64)
      : storage_(headroom + bytes.size() + tailroom, 0xee),
        buffer_(storage_.data(), static_cast<uint32_t>(storage_.size()), headroom,
                static_cast<uint32_t>(bytes.size())) {
    if (!bytes.empty()) std::memcpy(storage_.data() + headroom, bytes.data(), bytes.size());
  }
  TestPacket(const TestPacket&) = delete;
  TestPacket& operator=(const TestPacket&) = delete;

  PacketBuffer& buffer() { return buffer_; }
  std::vector<uint8_t> bytes() const { return {buffer_.data(), buffer_.data() + buffer_.size()}; }

 private:
  std::vector<uint8_t> storage_;
  PacketBuffer buffer_;
};

// Recomputes the outer IPv4 header checksum and, when it is non-zero or the
// underlay is IPv6, the UDP checksum of an untagged outer frame. A length
// field corrupted on purpose leaves the UDP checksum alone.
inline void fixOuterChecksums(std::vector<uint8_t>& pkt) {
  using namespace overlay;
  uint8_t* ip = pkt.data() + 14;
  if (load16(pkt.data() + 12) == 0x0800) {
    const uint32_t ihl = (ip[0] & 0xf) * 4;
    store16(ip + 10, 0);
    store16(ip + 10, internetChecksum({ip, ihl}));
    uint8_t* udp = ip + ihl;
    if (load16(udp + 6) == 0 || load16(ip + 2) < ihl + 8u || 14u + load16(ip + 2) > pkt.size()) return;
    const uint16_t len = static_cast<uint16_t>(load16(ip + 2) - ihl);
    store16(udp + 6, 0);
    uint16_t c = checksumFinish(checksumAdd(udp, len, pseudoHeaderSumV4(ip + 12, ip + 16, 17, len)));
    store16(udp + 6, c == 0 ? 0xffff : c);
  } else {
    uint8_t* udp = ip + 40;
    const uint16_t len = load16(ip + 4);
    if (len < 8 || 54u + len > pkt.size()) return;
    store16(udp + 6, 0);
    uint16_t c = checksumFinish(checksumAdd(udp, len, pseudoHeaderSumV6(ip + 8, ip + 24, 17, len)));
    store16(udp + 6, c == 0 ? 0xffff : c);
  }
}

}  // namespace dpu::test
