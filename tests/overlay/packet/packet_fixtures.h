// Shared fixtures of the packet-library tests: the addresses gen_packets.py
// uses, golden-packet loading, parse helpers, and Catch2 printing of Status.
#pragma once

#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "golden.h"
#include "overlay/headers.h"
#include "overlay/parse.h"
#include "overlay/status.h"

namespace Catch {
template <>
struct StringMaker<dpu::overlay::Status> {
  static std::string convert(dpu::overlay::Status s) { return std::string(dpu::overlay::statusName(s)); }
};
}  // namespace Catch

namespace dpu::test {

using overlay::Ipv6Address;
using overlay::MacAddress;

inline constexpr MacAddress kPodMac = {0x02, 0, 0, 0, 0, 0x01};
inline constexpr MacAddress kPeerMac = {0x02, 0, 0, 0, 0, 0x02};
inline constexpr MacAddress kGwMac = {0x02, 0, 0, 0, 0, 0xfe};
inline constexpr MacAddress kZeroMac = {};

inline uint32_t v4(const char* text) {
  in_addr a{};
  if (inet_pton(AF_INET, text, &a) != 1) throw std::invalid_argument(text);
  return ntohl(a.s_addr);
}

inline Ipv6Address v6(const char* text) {
  Ipv6Address a{};
  if (inet_pton(AF_INET6, text, a.data()) != 1) throw std::invalid_argument(text);
  return a;
}

inline const std::vector<uint8_t> kPayload = {'h', 'e', 'l', 'l', 'o', ' ', 'o', 'v', 'e', 'r', 'l', 'a', 'y'};

// gen_packets.py's pattern(): bytes (seed + 7 * i) mod 256.
inline std::vector<uint8_t> pattern(size_t n, uint8_t seed = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 7 * i);
  return v;
}

inline std::vector<uint8_t> packet(const std::string& name) {
  return golden("tests/overlay/golden/packets.golden", name);
}

inline overlay::ParsedPacket parseOk(std::span<const uint8_t> frame) {
  overlay::ParsedPacket p;
  const overlay::Status s = overlay::parsePacket(frame, p);
  REQUIRE(s == overlay::Status::kOk);
  return p;
}

// The outcome of parsing exactly these bytes, from a heap copy of exactly
// their size so ASan sees any read past the end.
inline overlay::Status parseStatus(std::span<const uint8_t> frame) {
  std::vector<uint8_t> exact(frame.begin(), frame.end());
  overlay::ParsedPacket p;
  return overlay::parsePacket({exact.data(), exact.size()}, p);
}

}  // namespace dpu::test
