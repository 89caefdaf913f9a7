// Text ↔ binary for IP addresses, prefixes and MACs (see net_address.h).
#include "common/net_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace dpu {

Result<IpAddress> IpAddress::parse(std::string_view text) {
  std::string s(text);
  IpAddress a;
  if (s.find(':') == std::string::npos) {
    if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
      a.family = Family::kV4;
      return a;
    }
  } else if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = Family::kV6;
    return a;
  }
  return Error{"\"" + s + "\" is not an IPv4 or IPv6 address"};
}

IpAddress IpAddress::v4(uint32_t h) {
  IpAddress a;
  a.bytes[0] = static_cast<uint8_t>(h >> 24);
  a.bytes[1] = static_cast<uint8_t>(h >> 16);
  a.bytes[2] = static_cast<uint8_t>(h >> 8);
  a.bytes[3] = static_cast<uint8_t>(h);
  return a;
}

bool IpAddress::isLoopback() const {
  if (isV4()) return bytes[0] == 127;
  static constexpr std::array<uint8_t, 16> kV6Loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return bytes == kV6Loopback;
}

uint32_t IpAddress::v4HostOrder() const {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

std::string IpAddress::str() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(isV4() ? AF_INET : AF_INET6, bytes.data(), buf, sizeof buf);
  return buf;
}

IpAddress IpAddress::plus(uint64_t n) const {
  IpAddress out = *this;
  int i = static_cast<int>(size()) - 1;
  unsigned carry = 0;
  while (i >= 0 && (n != 0 || carry != 0)) {
    unsigned sum = out.bytes[i] + static_cast<unsigned>(n & 0xff) + carry;
    out.bytes[i] = static_cast<uint8_t>(sum);
    carry = sum >> 8;
    n >>= 8;
    --i;
  }
  return out;
}

namespace {

Result<std::pair<IpAddress, uint8_t>> splitPrefix(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    return Error{"\"" + std::string(text) + "\" has no prefix length (expected address/length, e.g. 10.244.1.0/24)"};
  }
  auto addr = IpAddress::parse(text.substr(0, slash));
  if (!addr) return std::move(addr).takeError();
  std::string len(text.substr(slash + 1));
  unsigned max = addr->isV4() ? 32 : 128;
  if (len.empty() || len.size() > 3 || len.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(len) > max) {
    return Error{"\"" + std::string(text) + "\" has a bad prefix length (0.." + std::to_string(max) + ")"};
  }
  return std::make_pair(*addr, static_cast<uint8_t>(std::stoul(len)));
}

IpAddress masked(IpAddress a, uint8_t length) {
  for (size_t i = 0; i < a.size(); ++i) {
    int bits = static_cast<int>(length) - static_cast<int>(i * 8);
    if (bits >= 8) continue;
    a.bytes[i] &= bits <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - bits));
  }
  return a;
}

}  // namespace

Result<IpPrefix> IpPrefix::parse(std::string_view text, bool allow_host_bits) {
  auto parts = splitPrefix(text);
  if (!parts) return std::move(parts).takeError();
  IpPrefix p{masked(parts->first, parts->second), parts->second};
  if (!allow_host_bits && p.address != parts->first) {
    return Error{"\"" + std::string(text) + "\" has host bits set (did you mean " + p.str() + "?)"};
  }
  return p;
}

std::string IpPrefix::str() const { return address.str() + "/" + std::to_string(length); }

bool IpPrefix::contains(const IpAddress& a) const {
  // masked(a, length) == address, without building the masked copy (the
  // slow path asks this of every new connection's addresses): the bits under
  // the prefix compared, the address's host bits zero, and the bytes past an
  // IPv4 address's four compared as they are.
  if (a.family != address.family) return false;
  auto be64 = [](const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
    return v;
  };
  auto mask = [](unsigned bits, unsigned width) -> uint64_t {  // the top `bits` of a `width`-bit word
    if (bits == 0) return 0;
    const uint64_t all = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    return bits >= width ? all : all & ~((uint64_t{1} << (width - bits)) - 1);
  };
  if (a.isV4()) {
    const uint64_t x = be64(a.bytes.data()) >> 32, y = be64(address.bytes.data()) >> 32;
    // The last 12 bytes as two words (std::equal here is a libc memcmp call).
    uint64_t r8, s8;
    uint32_t r4, s4;
    std::memcpy(&r8, a.bytes.data() + 4, 8);
    std::memcpy(&s8, address.bytes.data() + 4, 8);
    std::memcpy(&r4, a.bytes.data() + 12, 4);
    std::memcpy(&s4, address.bytes.data() + 12, 4);
    return (x & mask(length, 32)) == y && r8 == s8 && r4 == s4;
  }
  const unsigned hi_bits = length < 64 ? length : 64, lo_bits = length > 64 ? length - 64u : 0u;
  return (be64(a.bytes.data()) & mask(hi_bits, 64)) == be64(address.bytes.data()) &&
         (be64(a.bytes.data() + 8) & mask(lo_bits, 64)) == be64(address.bytes.data() + 8);
}

bool IpPrefix::overlaps(const IpPrefix& other) const {
  if (other.address.family != address.family) return false;
  uint8_t shorter = std::min(length, other.length);
  return masked(address, shorter) == masked(other.address, shorter);
}

uint64_t IpPrefix::size() const {
  unsigned host_bits = (address.isV4() ? 32u : 128u) - length;
  if (host_bits >= 63) return uint64_t{1} << 63;
  return uint64_t{1} << host_bits;
}

Result<IpInterfaceAddress> IpInterfaceAddress::parse(std::string_view text) {
  auto parts = splitPrefix(text);
  if (!parts) return std::move(parts).takeError();
  return IpInterfaceAddress{parts->first, parts->second};
}

IpPrefix IpInterfaceAddress::network() const { return IpPrefix{masked(address, length), length}; }
std::string IpInterfaceAddress::str() const { return address.str() + "/" + std::to_string(length); }

Result<MacAddress> MacAddress::parse(std::string_view text) {
  MacAddress m;
  unsigned v[6];
  char tail;
  std::string s(text);
  if (s.size() != 17 ||
      std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) {
    return Error{"\"" + s + "\" is not a MAC address (expected six hex bytes: 0a:58:0a:f4:01:05)"};
  }
  for (int i = 0; i < 6; ++i) m.bytes[i] = static_cast<uint8_t>(v[i]);
  return m;
}

std::string MacAddress::str() const {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3], bytes[4],
                bytes[5]);
  return buf;
}

bool MacAddress::isZero() const {
  for (auto b : bytes) {
    if (b) return false;
  }
  return true;
}

MacAddress MacAddress::fromIp(const IpAddress& ip) {
  MacAddress m;
  m.bytes[0] = 0x0a;
  m.bytes[1] = 0x58;
  size_t off = ip.size() - 4;
  for (int i = 0; i < 4; ++i) m.bytes[2 + i] = ip.bytes[off + i];
  return m;
}

}  // namespace dpu
