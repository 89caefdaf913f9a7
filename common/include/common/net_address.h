// IP addresses, prefixes and MAC addresses as the control plane handles them:
// parsed from and printed to text (configs, CNI results, REST bodies, the
// logical model), compared, and walked for IPAM. Not for the per-packet path,
// which reads raw header bytes (overlay/headers.h).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dpu {

struct IpAddress {
  enum class Family : uint8_t { kV4 = 4, kV6 = 6 };
  Family family = Family::kV4;
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 uses the first 4

  static Result<IpAddress> parse(std::string_view text);
  static IpAddress v4(uint32_t host_order);
  std::string str() const;
  bool isV4() const { return family == Family::kV4; }
  size_t size() const { return isV4() ? 4 : 16; }
  uint32_t v4HostOrder() const;
  // 127.0.0.0/8 or ::1: reachable only from this host.
  bool isLoopback() const;
  // The address n further on (wraps within the family's width).
  IpAddress plus(uint64_t n) const;
  auto operator<=>(const IpAddress&) const = default;
};

struct IpPrefix {
  IpAddress address;  // host bits cleared
  uint8_t length = 0;

  // "10.244.1.0/24". Refuses host bits set unless allow_host_bits.
  static Result<IpPrefix> parse(std::string_view text, bool allow_host_bits = false);
  std::string str() const;
  bool contains(const IpAddress& a) const;
  bool overlaps(const IpPrefix& other) const;
  // Number of addresses, saturating at 2^63.
  uint64_t size() const;
  IpAddress at(uint64_t offset) const { return address.plus(offset); }
  auto operator<=>(const IpPrefix&) const = default;
};

// An address with its prefix length, as in "10.244.1.5/24" (CNI ips[].address).
struct IpInterfaceAddress {
  IpAddress address;
  uint8_t length = 0;
  static Result<IpInterfaceAddress> parse(std::string_view text);
  IpPrefix network() const;
  std::string str() const;
  auto operator<=>(const IpInterfaceAddress&) const = default;
};

struct MacAddress {
  std::array<uint8_t, 6> bytes{};
  static Result<MacAddress> parse(std::string_view text);  // "0a:58:0a:f4:01:05"
  std::string str() const;
  bool isZero() const;
  bool isMulticast() const { return bytes[0] & 1; }
  // OVN-Kubernetes' convention: 0a:58 followed by the IPv4 address (for IPv6,
  // 0a:58 and the last four bytes). Locally administered, unicast.
  static MacAddress fromIp(const IpAddress& ip);
  auto operator<=>(const MacAddress&) const = default;
};

}  // namespace dpu
