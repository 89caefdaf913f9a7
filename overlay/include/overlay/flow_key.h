// FlowKey: the exact-match key of the datapath flow cache, extracted from a
// parsed packet, and its hash, which also picks the Geneve outer UDP source
// port (RFC 8926 §3.3: flowHash32 is the inner flow hash geneveSourcePort in
// geneve.h takes) so that ECMP in the underlay keeps a flow on one path.
//
// The key is 64 bytes, one cache line, with no padding: zero-initialised
// fields are the only way to build it, so two keys are equal exactly when
// their bytes are (memcmp, operator== and the hash agree). Fields a packet
// does not have stay zero.
//
// The hash is deliberately NOT symmetric: the flow cache keys each direction
// separately (its actions differ: the reply of a DNATed flow is SNATed), and
// for the Geneve source port each direction is a different outer flow anyway
// (A's DPU to B's vs B's to A's), so symmetry would buy nothing while a
// symmetric mix (xor/sum of both addresses) throws away entropy and collides
// every flow with its reverse. It is XXH64 of the key's 64 bytes read as
// little-endian words: well mixed (full avalanche), ~20 multiplies, and the
// same result on x86-64 and on the Arm cores of a DPU. The flow cache should
// pass a random per-process seed so that remote hosts cannot aim collisions
// at one bucket; the Geneve source port may use any fixed seed.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "overlay/headers.h"
#include "overlay/parse.h"

namespace dpu::overlay {

struct FlowKey {
  static constexpr uint8_t kFlagFragment = 0x01;       // any fragment
  static constexpr uint8_t kFlagLaterFragment = 0x02;  // no L4 fields
  static constexpr uint8_t kFlagOuterVlan = 0x04;      // vlan_tci[0] is a tag
  static constexpr uint8_t kFlagInnerVlan = 0x08;      // vlan_tci[1] is a tag
  static constexpr uint8_t kFlagOuterQinq = 0x10;      // the outer tag's TPID is 802.1ad

  uint32_t in_port = 0;    // datapath port the packet came in on (caller's numbering)
  uint32_t tunnel_id = 0;  // Geneve VNI or other tunnel metadata; 0 for untunnelled packets
  MacAddress eth_dst = {};
  MacAddress eth_src = {};
  uint16_t vlan_tci[vlan::kMaxTags] = {};  // outer first, PCP and DEI included
  uint16_t ethertype = 0;                  // after the tags
  uint8_t ip_proto = 0;                    // IP protocol; ARP: the opcode's low byte
  uint8_t flags = 0;                       // kFlag*
  // IPv6 addresses, or IPv4 (ARP: sender and target protocol) addresses in the
  // first 4 bytes, network order, the rest zero.
  std::array<uint8_t, 16> l3_src = {};
  std::array<uint8_t, 16> l3_dst = {};
  // TCP/UDP ports. ICMP/ICMPv6: l4_src = type << 8 | code, l4_dst = the echo
  // identifier for echo request/reply, else 0.
  uint16_t l4_src = 0;
  uint16_t l4_dst = 0;

  bool operator==(const FlowKey&) const = default;
};
static_assert(sizeof(FlowKey) == 64, "FlowKey must stay one cache line");
static_assert(std::has_unique_object_representations_v<FlowKey>, "FlowKey must have no padding");

// Fills a key from a packet parsePacket accepted. `in_port` and `tunnel_id` are
// metadata only the caller knows (the port, the VNI of a decapsulated packet).
FlowKey extractFlowKey(std::span<const uint8_t> frame, const ParsedPacket& pkt, uint32_t in_port,
                       uint32_t tunnel_id = 0);

namespace detail {
inline constexpr uint64_t kPrime1 = 0x9e3779b185ebca87ull;
inline constexpr uint64_t kPrime2 = 0xc2b2ae3d27d4eb4full;
inline constexpr uint64_t kPrime3 = 0x165667b19e3779f9ull;
inline constexpr uint64_t kPrime4 = 0x85ebca77c2b2ae63ull;
inline uint64_t xxhRound(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = std::rotl(acc, 31);
  return acc * kPrime1;
}
inline uint64_t xxhMerge(uint64_t h, uint64_t lane) {
  h ^= xxhRound(0, lane);
  return h * kPrime1 + kPrime4;
}
inline uint64_t loadLe64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return std::endian::native == std::endian::little ? v : __builtin_bswap64(v);
}
}  // namespace detail

// XXH64 of the key's bytes (see the top of this file).
inline uint64_t flowHash64(const FlowKey& key, uint64_t seed = 0) {
  using namespace detail;
  uint8_t bytes[sizeof(FlowKey)];
  std::memcpy(bytes, &key, sizeof bytes);
  uint64_t v1 = seed + kPrime1 + kPrime2;
  uint64_t v2 = seed + kPrime2;
  uint64_t v3 = seed;
  uint64_t v4 = seed - kPrime1;
  for (size_t i = 0; i < sizeof bytes; i += 32) {
    v1 = xxhRound(v1, loadLe64(bytes + i));
    v2 = xxhRound(v2, loadLe64(bytes + i + 8));
    v3 = xxhRound(v3, loadLe64(bytes + i + 16));
    v4 = xxhRound(v4, loadLe64(bytes + i + 24));
  }
  uint64_t h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
  h = xxhMerge(h, v1);
  h = xxhMerge(h, v2);
  h = xxhMerge(h, v3);
  h = xxhMerge(h, v4);
  h += sizeof bytes;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

// 32 bits for tables indexed by a 32-bit hash and for the Geneve source port;
// every bit is well mixed.
inline uint32_t flowHash32(const FlowKey& key, uint64_t seed = 0) {
  const uint64_t h = flowHash64(key, seed);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

}  // namespace dpu::overlay
