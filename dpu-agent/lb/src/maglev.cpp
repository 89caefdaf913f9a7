// Maglev table population (maglev.h) and the fixed-seed hashes it and the
// connection choice use.
#include "lb/maglev.h"

#include <algorithm>
#include <cstring>

namespace dpu::lb {
namespace {

// splitmix64's finaliser: every output bit depends on every input bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Bytes folded 8 at a time through mix() with a seed.
uint64_t hashBytes(const uint8_t* p, size_t n, uint64_t seed) {
  uint64_t h = mix(seed ^ n);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix(h ^ w);
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  return mix(h ^ tail ^ 0x9e3779b97f4a7c15ull);
}

// Primes near 2^k·0.98 (and 251): each a valid Maglev size, from small
// services to the largest table a 16-bit backend index allows.
constexpr uint32_t kSizes[] = {251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521};

}  // namespace

uint32_t MaglevTable::sizeFor(size_t backends) {
  for (uint32_t m : kSizes) {
    if (m >= 100 * backends) return m;
  }
  return kSizes[std::size(kSizes) - 1];
}

MaglevTable::MaglevTable(std::span<const BackendId> backends, uint32_t size) {
  const size_t n = std::min(backends.size(), kMaxBackends);
  if (n == 0) return;
  const uint32_t m = size != 0 ? size : sizeFor(n);
  // The backends in a canonical order (their identity bytes), so the table
  // does not depend on the order they were listed in; ties on the turn order
  // are broken the same way on every DPU.
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const BackendId& x = backends[a];
    const BackendId& y = backends[b];
    if (x.addr_len != y.addr_len) return x.addr_len < y.addr_len;
    if (int c = std::memcmp(x.addr, y.addr, sizeof x.addr); c != 0) return c < 0;
    return x.port < y.port;
  });
  std::vector<uint32_t> offset(n), skip(n), next(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const BackendId& b = backends[order[k]];
    const size_t len = b.addr_len == 4 ? 4 : 16;
    uint8_t bytes[18];
    std::memcpy(bytes, b.addr, len);
    bytes[len] = static_cast<uint8_t>(b.port >> 8);
    bytes[len + 1] = static_cast<uint8_t>(b.port);
    offset[k] = static_cast<uint32_t>(hashBytes(bytes, len + 2, 0x6d61676c65763031ull) % m);
    skip[k] = static_cast<uint32_t>(hashBytes(bytes, len + 2, 0x736b697070657232ull) % (m - 1)) + 1;
  }
  entries_.assign(m, kNone);
  uint32_t filled = 0;
  while (true) {
    for (size_t k = 0; k < n; ++k) {
      // The backend's next preferred entry that is still free.
      uint32_t c = static_cast<uint32_t>((offset[k] + uint64_t{next[k]} * skip[k]) % m);
      while (entries_[c] != kNone) {
        ++next[k];
        c = static_cast<uint32_t>((offset[k] + uint64_t{next[k]} * skip[k]) % m);
      }
      entries_[c] = static_cast<uint16_t>(order[k]);
      ++next[k];
      if (++filled == m) return;
    }
  }
}

std::vector<double> MaglevTable::shares(size_t backends) const {
  std::vector<double> out(backends, 0.0);
  if (entries_.empty()) return out;
  for (uint16_t e : entries_) {
    if (e < backends) out[e] += 1.0;
  }
  for (double& s : out) s /= static_cast<double>(entries_.size());
  return out;
}

uint64_t tupleHash(const uint8_t* src, const uint8_t* dst, size_t addr_len, uint16_t src_port, uint16_t dst_port,
                   uint8_t protocol) {
  uint8_t b[40];
  std::memcpy(b, src, addr_len);
  std::memcpy(b + addr_len, dst, addr_len);
  size_t n = 2 * addr_len;
  b[n++] = static_cast<uint8_t>(src_port >> 8);
  b[n++] = static_cast<uint8_t>(src_port);
  b[n++] = static_cast<uint8_t>(dst_port >> 8);
  b[n++] = static_cast<uint8_t>(dst_port);
  b[n++] = protocol;
  return hashBytes(b, n, 0x636f6e6e65637431ull);
}

uint64_t addressHash(const uint8_t* addr, size_t addr_len) { return hashBytes(addr, addr_len, 0x636c69656e746970ull); }

}  // namespace dpu::lb
