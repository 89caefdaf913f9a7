// The per-lcore flow cache: an exact-match table of flows, 8-way set
// associative with a second bucket per flow, whose hit path reads one cache
// line per packet.
//
// A flow is split by who reads it:
// - the hit line (FlowEntry, 64 bytes): the match in compact form, the
//   statistics, the last-used time and the index of the flow's actions;
// - its actions (FlowActions), interned: flows that do the same thing (all
//   the connections from one pod to one remote subnet, say) share one
//   record, which stays in cache however many flows use it. The record also
//   carries what the flow depends on and the snapshot stamp it was last
//   checked against, so a model change revalidates a record once, not each
//   of its flows;
// - the cold part (the tunnel match, the flow id and the install time),
//   read on a hit only for tunnelled packets whose tunnel is not folded
//   into the compact key (CompactKey::foldTunnel4: nearly every packet from
//   an IPv4 peer has it there);
// - the key's tail (the 32 bytes of the full key the compact form folds),
//   written and read only for keys that have no compact form.
// The compact key is lossless for every key whose addresses are IPv4 (or
// ARP's): 40 bytes instead of 64, and nothing else of the key is kept. Other
// keys (IPv6) keep a lossy 40-byte fold in the hit line, marked, and compare
// the tail on a hit (the fold's first 32 bytes are the key's own). The tails
// are zero pages until a long key is written: a table of IPv4 flows never
// touches them (bytesPerSlot counts them; bytesPerCompactSlot does not).
//
// A flow usually sits in its preferred way (from the hash), so a lookup in a
// cache-resident table checks that entry first, without the bucket; only
// when it does not match are the bucket's signatures read (as DPDK's
// rte_hash signatures and OVS's EMC do). A larger table reads the bucket
// first and fetches only the entries it names (prefetchMatches). A flow
// whose bucket is full goes to its second bucket (another
// one, from other bits of the hash), and only when both are full is the
// least recently used of their sixteen flows replaced. With one bucket, the
// few buckets that draw more than eight of the live flows (about 1 % of
// 100,000 flows in 262,144 entries) thrash: LRU replacement under a cyclic
// traffic pattern evicts every one of them before it is hit again. Two
// choices make a full pair rare until the table is nearly full, and the
// second bucket is read only by its few flows and by misses.
//
// Owned by one lcore, which alone inserts, updates and removes. The control
// thread reads flows concurrently (dump-flows, offload) with seqlock-style
// consistency: flow_id is 0 while a flow is being written and a new, never
// reused, id afterwards (release); a reader that sees the same non-zero id
// before and after copying a flow has a consistent copy. An action record
// is reused only after every flow that named it is gone, which changes
// their ids first.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/zeroed_pages.h"
#include "overlay/bytes.h"
#include "overlay/flow_key.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

namespace dpu::datapath {

struct SnapEncap;

// A prefetch the compiler keeps: GCC 12 dropped __builtin_prefetch of the
// bucket and the hit line from the burst loop (the loads that follow a
// burst later were all it saw), and every lookup at 100,000 flows then
// waited on memory. As DPDK's rte_prefetch0.
inline void prefetchLine(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %[p]" : : [p] "m"(*static_cast<const volatile char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// What the compiled actions do: one bit per action of actions.def, in the
// order a fused flow applies them.
namespace op {
namespace detail {
enum : unsigned {
#define ACTION(name, text) k##name,
#include "actions.def"
#undef ACTION
  kCount
};
}  // namespace detail
#define ACTION(name, text) inline constexpr uint16_t k##name = 1u << detail::k##name;
#include "actions.def"
#undef ACTION
inline constexpr uint16_t kAll = (1u << detail::kCount) - 1;
static_assert(detail::kCount <= 16, "an action record keeps its ops in 16 bits");
}  // namespace op

// The tunnel part of a packet's match (zero family: not tunnelled).
struct TunnelProbe {
  std::array<uint8_t, 16> remote;
  uint16_t ingress;
  uint16_t egress;
  uint8_t family;

  // An IPv4 remote (network order) and the zeros after it, in one 16-byte
  // store: the hash and the match read the remote back as two 8-byte words
  // a few instructions later, and a load that spans a zeroing store and a
  // narrower one after it cannot be forwarded from the store buffer (it
  // waits for both to retire, about 15 cycles a packet on the uplink).
  void setRemote4(uint32_t ip) {
    uint64_t w[2] = {0, 0};
    std::memcpy(w, &ip, sizeof ip);
    std::memcpy(remote.data(), w, sizeof w);
  }
};

using overlay::sameAddress;  // overlay/bytes.h

// A flow key in 40 bytes. With the FlowKey's eight words w0..w7 (bytes 0-7,
// 8-15, ...): w0..w3 as they are (port, VNI, MACs, VLANs, ethertype,
// protocol, flags, IPv4 source), then the IPv4 destination and the L4 ports
// in one word. Lossless when w4 and w6 and the low halves of w5 and w7 are
// zero (every key with IPv4 or no addresses); any other key is folded and
// marked `long` (the table then compares the full key too).
struct CompactKey {
  uint64_t w[5];

  static CompactKey fromWords(const uint64_t (&k)[8], bool& is_long) {
    is_long = (k[4] | k[6] | (k[5] & 0xffffffffu) | (k[7] & 0xffffffffu)) != 0;
    CompactKey c;
    c.w[0] = k[0];
    c.w[1] = k[1];
    c.w[2] = k[2];
    c.w[3] = k[3];
    c.w[4] = (k[5] >> 32 | (k[7] & 0xffffffff00000000ull)) ^ k[4] ^ (k[6] * 0x9e3779b185ebca87ull) ^
             (k[5] << 32) ^ (k[7] & 0xffffffffu) * 0xc2b2ae3d27d4eb4full;
    return c;
  }
  static CompactKey from(const overlay::FlowKey& key, bool& is_long) {
    uint64_t k[8];
    std::memcpy(k, &key, sizeof k);
    return fromWords(k, is_long);
  }
  // The full key of a lossless compact key (a folded one's without its tunnel).
  overlay::FlowKey expand() const {
    const CompactKey c = unfolded();
    const uint64_t k[8] = {c.w[0], c.w[1], c.w[2], c.w[3], 0, w[4] << 32, 0, w[4] & 0xffffffff00000000ull};
    overlay::FlowKey key;
    std::memcpy(&key, k, sizeof key);
    return key;
  }
  bool operator==(const CompactKey&) const = default;

  // The tunnel folded into the key: a packet decapsulated from an IPv4
  // tunnel whose inner frame is untagged IPv4 (nearly every packet from a
  // peer) has three slots of its key that say nothing — the upper half of
  // the 32-bit port, the VLAN tags (zero) and the ethertype (0x0800) — and
  // they hold its tunnel exactly: the OVN egress key beside the port, the
  // remote (as the header has it) in the tags' place, the ingress key in
  // the ethertype's. The flags byte's top bit, which no parse sets, marks
  // the fold, so a folded key never equals an unfolded one. Such a flow's
  // hit is one compare of the hit line, without its cold part. The lane,
  // the general path and the insert fold alike (tryFoldTunnel4), and only
  // keys foldable by these rules; every other tunnelled flow (ARP, IPv6,
  // tagged) matches its tunnel in the cold part.
  static constexpr uint64_t kTunnelFolded = uint64_t{0x80} << 24;  // in w[3]: the flags byte's top bit
  static constexpr uint64_t kEthertypeIpv4 = 0x0800;                // w[3]'s low 16 bits, host order

  bool folded() const { return (w[3] & kTunnelFolded) != 0; }
  // Folds the tunnel (remote: the IPv4 source as the header has it) when
  // the key takes one; false otherwise (the key is left as it is).
  bool tryFoldTunnel4(uint32_t remote, uint16_t ingress, uint16_t egress) {
    if ((w[3] & (0xffff | kTunnelFolded)) != kEthertypeIpv4 || (w[2] >> 32) != 0 || (w[0] & 0xffff0000u) != 0) {
      return false;
    }
    foldTunnel4(remote, ingress, egress);
    return true;
  }
  // The same for a tunnel's 16-byte remote (an IPv4 one in its first 4 bytes).
  bool tryFoldTunnel4(const std::array<uint8_t, 16>& remote, uint16_t ingress, uint16_t egress) {
    uint32_t r;
    std::memcpy(&r, remote.data(), sizeof r);
    return tryFoldTunnel4(r, ingress, egress);
  }
  // The same for a key known to take it (the uplink's lane: untagged IPv4,
  // a 16-bit port, never folded before).
  void foldTunnel4(uint32_t remote, uint16_t ingress, uint16_t egress) {
    w[0] |= uint64_t{egress} << 16;
    w[2] |= uint64_t{remote} << 32;
    w[3] ^= (kEthertypeIpv4 ^ ingress) | kTunnelFolded;
  }
  uint32_t tunnelRemote4() const { return static_cast<uint32_t>(w[2] >> 32); }
  uint16_t tunnelIngress() const { return static_cast<uint16_t>(w[3]); }
  uint16_t tunnelEgress() const { return static_cast<uint16_t>(w[0] >> 16); }
  // A folded key's tunnel as the flow table's tunnel match has it.
  TunnelProbe tunnelProbe() const {
    TunnelProbe p;
    p.family = 4;
    p.setRemote4(tunnelRemote4());
    p.ingress = tunnelIngress();
    p.egress = tunnelEgress();
    return p;
  }
  // The key without its tunnel (the key itself when not folded).
  CompactKey unfolded() const {
    if (!folded()) return *this;
    CompactKey c = *this;
    c.w[0] &= ~uint64_t{0xffff0000u};
    c.w[2] &= 0xffffffffu;
    c.w[3] = (w[3] & ~(0xffff | kTunnelFolded)) | kEthertypeIpv4;
    return c;
  }
};
static_assert(sizeof(overlay::FlowKey) == 64 && sizeof(CompactKey) == 40);

// What a long key's compact form does not keep as it is: the FlowKey's words
// w4..w7 (the rest of the addresses and the L4 ports). With the compact
// form's w0..w3 (the key's own) it is the whole key.
struct KeyTail {
  uint64_t w[4];

  static KeyTail of(const overlay::FlowKey& key) {
    KeyTail t;
    std::memcpy(t.w, reinterpret_cast<const uint8_t*>(&key) + 32, sizeof t.w);
    return t;
  }
  bool matches(const overlay::FlowKey& key) const {
    uint64_t k[4];
    std::memcpy(k, reinterpret_cast<const uint8_t*>(&key) + 32, sizeof k);
    return ((w[0] ^ k[0]) | (w[1] ^ k[1]) | (w[2] ^ k[2]) | (w[3] ^ k[3])) == 0;
  }
  // The full key of a long compact key and its tail.
  static overlay::FlowKey join(const CompactKey& head, const KeyTail& tail) {
    const uint64_t k[8] = {head.w[0], head.w[1], head.w[2], head.w[3], tail.w[0], tail.w[1], tail.w[2], tail.w[3]};
    overlay::FlowKey key;
    std::memcpy(&key, k, sizeof key);
    return key;
  }
};
static_assert(sizeof(KeyTail) == 32);

// One cached flow's hit line.
struct alignas(64) FlowEntry {
  static constexpr uint32_t kLongKey = 1u << 31;  // in `actions`: compare the full key too
  static constexpr uint32_t kIndexMask = kLongKey - 1;

  CompactKey key;
  uint64_t packets_sport;  // packets << 16 | outer UDP source port as the header has it (network order;
                           // encap; from the inner flow hash): setPacketsSport, sport, sportWire
  uint64_t bytes;
  uint32_t used_ms;        // engine clock at the last hit, ms (wraps; compared by difference)
  uint32_t actions;        // index of the FlowActions (0: no flow) | kLongKey

  uint64_t packets() const { return packets_sport >> 16; }
  uint16_t sport() const { return wire16(sportWire()); }
  // The two bytes the outer UDP header carries, copied as they are.
  uint16_t sportWire() const { return static_cast<uint16_t>(packets_sport); }
  void setPacketsSport(uint64_t packets, uint16_t sport) { packets_sport = packets << 16 | wire16(sport); }
  // Host to network order and back (the same swap).
  static uint16_t wire16(uint16_t v) {
    return std::endian::native == std::endian::little ? __builtin_bswap16(v) : v;
  }
  uint32_t actionIndex() const { return actions & kIndexMask; }

  // 40 bytes compared inline: two 16-byte XORs and one 8-byte one folded
  // into one test (a libc memcmp call costs more than the compare).
  static bool keyEqual(const CompactKey& a, const CompactKey& b) {
#if defined(__SSE2__)
    auto x = [&a, &b](unsigned i) {
      return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.w + i)),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.w + i)));
    };
    const __m128i d = _mm_or_si128(x(0), x(2));
#if defined(__SSE4_1__)
    return _mm_testz_si128(d, d) && a.w[4] == b.w[4];
#else
    return _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) == 0xffff && a.w[4] == b.w[4];
#endif
#else
    return a == b;
#endif
  }
};
static_assert(sizeof(FlowEntry) == 64, "a cached flow's hit path is one cache line");

// The Nat action's rewrite (worker_actions.h: applyNat): the new addresses
// and ports, and the ones' complement amounts that update the checksums for
// exactly this change (RFC 1624 eqn. 3, taken from the flow's own old
// values by the slow path: every packet of an exact-match flow has them).
struct NatRewrite {
  static constexpr uint8_t kSrcIp = 1, kDstIp = 2, kSrcPort = 4, kDstPort = 8;
  static constexpr uint8_t kIcmpId = 16;  // ICMP echo: the identifier is the "port" (src_port's value)
  uint8_t fields = 0;
  uint8_t v6 = 0;
  uint8_t l4_checksum = 0;   // offset of the L4 checksum in the L4 header; 0: none to update
  uint8_t udp = 0;           // a zero UDP checksum (IPv4: none) stays zero
  uint16_t l3_add = 0;       // added to the IPv4 header checksum
  uint16_t l4_add = 0;       // added to the L4 checksum
  uint16_t src_port = 0;     // as the header has them (network order)
  uint16_t dst_port = 0;
  std::array<uint8_t, 16> src_ip{};  // network order; IPv4 in the first 4 bytes
  std::array<uint8_t, 16> dst_ip{};
  bool operator==(const NatRewrite&) const = default;
};
static_assert(sizeof(NatRewrite) == 44);

// A whole cached flow, every field under its own name: what the slow path
// fills and the control thread reads (FlowTable::read).
struct FlowRecord {
  overlay::FlowKey key;            // in_port = DPDK port, tunnel_id = VNI for decapsulated packets
  uint32_t flow_id;
  uint32_t stamp;
  uint32_t dep_in;
  uint32_t dep_out;
  uint32_t dep_nat;                // the service a translated flow balances for (kDepNode: none)
  uint32_t used_ms;
  uint16_t ops;
  uint16_t out_port;
  uint16_t mtu;
  uint16_t encap_sport;
  uint16_t encap_ingress;
  uint16_t encap_egress;
  uint8_t drop_reason;
  uint8_t encap_subnet;
  overlay::MacAddress set_src;
  overlay::MacAddress set_dst;
  uint8_t tun_family;
  uint8_t decap_len;
  uint64_t packets;
  uint64_t bytes;
  std::array<uint8_t, 16> tun_remote;
  uint16_t tun_ingress;
  uint16_t tun_egress;
  uint32_t created_s;
  NatRewrite nat;                  // ops has kNat
  // What let the flow through NetworkPolicy at each end (snapshot.h:
  // PolicyNames indexes, kAllowedNone when the end is no local pod port).
  uint16_t allowed_egress;
  uint16_t allowed_ingress;
  // The flow's connection is in conntrack without a translation (tracked
  // for NetworkPolicy): its TCP SYN, FIN and RST are punted to conntrack as a
  // translated connection's are (ops has kNat).
  uint8_t tracked;
};

// A flow's actions and dependencies, shared by every flow that has the same
// (interned by the table). `stamp`, `encap` and `node` are refreshed when
// the record is revalidated against a newer snapshot: the hit path uses
// them only while `stamp` is the current snapshot's.
struct alignas(64) FlowActions {
  uint32_t stamp;                  // snapshot stamp the deps were last checked against
  uint32_t dep_in;                 // dependency ids (snapshot.h); kDepNode when unused
  uint32_t dep_out;
  uint16_t ops;                    // op::*
  uint16_t out_port;
  uint16_t mtu;                    // encap: largest inner IP packet
  uint16_t encap_ingress;          // OVN ingress key (the source port's key)
  uint8_t drop_reason;             // DropReason when ops has kDrop
  uint8_t encap_subnet;            // index of the remote subnet in the node dep_out
  uint8_t decap_len;               // outer header bytes stripped (for offload's raw decap)
  uint8_t linked;                  // found by interning (else only its flows still name it)
  overlay::MacAddress set_dst;     // the two MACs as the frame has them (destination first):
  overlay::MacAddress set_src;     // the hit path writes both with one 12-byte copy
  uint32_t refs;                   // flows naming it
  uint32_t identity_hash;
  // Resolved with the snapshot of `stamp` (the engine's ActionsResolve):
  uint8_t kind;                    // ActionKind: which of the hit path's routines applies them
  uint8_t hop_known;               // kEncap: the tunnel's next hop MAC is known
  uint16_t encap_sum;              // kActionsEncap4: the template's folded IPv4 header sum (SnapEncap::ipv4_sum)
  const SnapEncap* encap;          // kEncap: the template
  // Decided by the slow path, like the fields above `refs`; kept here, where
  // the record had room: the OVN egress key (the destination port's key, or
  // the router's 0x8000 when the remote node published none for it).
  uint16_t encap_egress;
  uint8_t tracked;                 // FlowRecord::tracked
  uint8_t reserved;
  uint32_t dep_nat;                // the service it balances for (kDepNode: none)
  // The second line, read only by records with kNat.
  alignas(64) NatRewrite nat;

  // The record a slow-path decision asks for (refs, pointers and hash unset).
  static FlowActions from(const FlowRecord& r) {
    FlowActions a{};
    a.stamp = r.stamp;
    a.dep_in = r.dep_in;
    a.dep_out = r.dep_out;
    a.ops = r.ops;
    a.out_port = r.out_port;
    a.mtu = r.mtu;
    a.encap_ingress = r.encap_ingress;
    a.encap_egress = r.encap_egress;
    a.dep_nat = r.dep_nat;
    a.drop_reason = r.drop_reason;
    a.encap_subnet = r.encap_subnet;
    a.decap_len = r.decap_len;
    a.set_src = r.set_src;
    a.set_dst = r.set_dst;
    a.tracked = r.tracked;
    if (r.ops & op::kNat) a.nat = r.nat;
    return a;
  }
  // The inverse: the record's fields a flow's FlowRecord shows.
  void fill(FlowRecord& r) const {
    r.stamp = stamp;
    r.dep_in = dep_in;
    r.dep_out = dep_out;
    r.ops = ops;
    r.out_port = out_port;
    r.mtu = mtu;
    r.encap_ingress = encap_ingress;
    r.encap_egress = encap_egress;
    r.dep_nat = dep_nat;
    r.drop_reason = drop_reason;
    r.encap_subnet = encap_subnet;
    r.decap_len = decap_len;
    r.set_src = set_src;
    r.set_dst = set_dst;
    r.tracked = tracked;
    r.nat = nat;
  }
  // Everything but stamp, refs and the resolved pointers: what interning compares.
  bool sameAs(const FlowActions& o) const {
    return dep_in == o.dep_in && dep_out == o.dep_out && dep_nat == o.dep_nat && ops == o.ops && out_port == o.out_port &&
           mtu == o.mtu && encap_ingress == o.encap_ingress && encap_egress == o.encap_egress &&
           drop_reason == o.drop_reason && tracked == o.tracked &&
           encap_subnet == o.encap_subnet && decap_len == o.decap_len && set_src == o.set_src &&
           set_dst == o.set_dst && (!(ops & op::kNat) || nat == o.nat);
  }
};
static_assert(sizeof(FlowActions) == 128, "an action record's hit reads one line; NAT the second");
static_assert(offsetof(FlowActions, nat) == 64);
static_assert(offsetof(FlowActions, set_src) == offsetof(FlowActions, set_dst) + 6);

// Which routine applies a record's actions (engine_datapath.cpp:
// applyActions), decided when the record is resolved against a snapshot:
// one of the lanes of actions.def, or the general routine.
enum class LaneShape : uint8_t { kAny, kIpv4 };
enum class LaneEncap : uint8_t { kNone, kFixedIpv4 };
enum ActionKind : uint8_t {
  kActionsGeneral = 0,
#define LANE(name, ops, packet, encap) kActions##name,
#include "actions.def"
#undef LANE
};
struct Lane {
  ActionKind kind;
  uint16_t ops;
  LaneShape shape;
  LaneEncap encap;
};
inline constexpr Lane kLanes[] = {
#define LANE(name, ops, packet, encap) {kActions##name, ops, packet, encap},
#include "actions.def"
#undef LANE
};
// The lane of a kind (its ops: exactly these); the general routine's is a
// lane of every op, of any shape, without the fixed template. A value, not
// a pointer into kLanes: a pointer's comparison is not a constant expression
// under the sanitizers' instrumentation.
inline constexpr Lane kGeneralLane{kActionsGeneral, op::kAll, LaneShape::kAny, LaneEncap::kNone};
constexpr Lane laneOf(ActionKind kind) {
  for (const Lane& l : kLanes)
    if (l.kind == kind) return l;
  return kGeneralLane;
}

// The cold part of a flow.
struct alignas(32) FlowExtra {
  std::array<uint8_t, 16> tun_remote;  // outer source; IPv4 in the first 4 bytes
  uint16_t tun_ingress;            // OVN option keys as received
  uint16_t tun_egress;
  uint32_t created_s;              // seconds of the engine clock at install
  uint32_t flow_id;                // seqlock and identity; 0 = being written or empty
  uint8_t tun_family;              // 0 (not tunnelled), 4 or 6
  // FlowRecord's allowed_egress and allowed_ingress, 12 bits each.
  uint8_t allowed[3];
  void setAllowed(uint16_t egress, uint16_t ingress) {
    allowed[0] = static_cast<uint8_t>(egress);
    allowed[1] = static_cast<uint8_t>((egress >> 8 & 0x0f) | (ingress & 0x0f) << 4);
    allowed[2] = static_cast<uint8_t>(ingress >> 4);
  }
  uint16_t allowedEgress() const { return static_cast<uint16_t>(allowed[0] | (allowed[1] & 0x0f) << 8); }
  uint16_t allowedIngress() const { return static_cast<uint16_t>(allowed[1] >> 4 | allowed[2] << 4); }

  bool matchesTunnel(const TunnelProbe& probe) const {
    return tun_family == probe.family && sameAddress(tun_remote.data(), probe.remote.data(), true) &&
           tun_ingress == probe.ingress && tun_egress == probe.egress;
  }
};
static_assert(sizeof(FlowExtra) == 32, "two per cache line");

// 16-bit signatures: a bucket is a quarter of a cache line, so a table's
// buckets (2 bytes a flow) stay in the core's caches next to the packets. A
// signature matching another flow's (1 in 65,535) costs one key compare.
struct alignas(16) FlowBucket {
  static constexpr unsigned kWays = 8;
  uint16_t sig[kWays];   // 0 = empty way
};
static_assert(sizeof(FlowBucket) == 16, "four buckets per cache line");

class FlowTable {
 public:
  // `entries` rounded up to a power of two, at least one bucket; room for
  // half as many distinct action records (at least 4).
  explicit FlowTable(uint32_t entries);

  uint32_t capacity() const { return mask_ + 1; }
  uint32_t bucketCount() const { return (mask_ + 1) / FlowBucket::kWays; }
  uint32_t actionCapacity() const { return action_capacity_; }
  // Small enough (hit lines and buckets within 1 MiB) to stay in the core's
  // caches under load: prefetchSlot alone, without prefetchMatches after it.
  bool cacheResident() const { return cache_resident_; }
  // Read by the control thread too.
  uint32_t actionsInUse() const { return __atomic_load_n(&actions_in_use_, __ATOMIC_RELAXED); }
  // Bytes of table per flow slot, action records and their index included.
  static size_t bytesPerSlot();
  // The same without the key tails: what a slot costs while no long key
  // (IPv6) was ever cached, the tails' pages untouched.
  static size_t bytesPerCompactSlot();
  static uint16_t signature(uint64_t hash) { return static_cast<uint16_t>(hash >> 32) | 1u; }
  uint32_t bucketOf(uint64_t hash) const { return static_cast<uint32_t>(hash) & bucket_mask_; }
  // The second bucket: the first one XOR an odd number from the hash's high
  // bits (independent of the low ones), so it differs whenever there are two
  // buckets and is spread evenly over the others.
  uint32_t secondBucketOf(uint64_t hash) const {
    return (bucketOf(hash) ^ (static_cast<uint32_t>(hash >> 40) | 1u)) & bucket_mask_;
  }
  // A flow's preferred way in its bucket, from the hash: insert() uses it when
  // free (most of the time below full load), and a lookup checks it first.
  static unsigned preferredWay(uint64_t hash) { return static_cast<unsigned>(hash >> 61); }

  FlowBucket& bucket(uint32_t b) { return buckets_[b]; }
  const FlowBucket& bucket(uint32_t b) const { return buckets_[b]; }
  FlowEntry& entry(uint32_t index) { return entries_[index]; }
  const FlowEntry& entry(uint32_t index) const { return entries_[index]; }
  FlowActions& actions(uint32_t action_index) { return actions_[action_index]; }
  const FlowActions& actionsOf(const FlowEntry& e) const { return actions_[e.actionIndex()]; }
  FlowActions& actionsOf(const FlowEntry& e) { return actions_[e.actionIndex()]; }
  // The same for an entry compactHit or scanCompact found: no long-key mark to strip.
  FlowActions& compactActionsOf(const FlowEntry& e) { return actions_[e.actions]; }
  const FlowExtra& extra(uint32_t index) const { return extras_[index]; }

  // What a lookup reads, fetched before it runs (the engine's burst loop,
  // engine_datapath.cpp): the bucket and the preferred way's entry at once
  // (prefetchSlot), where most flows are. In a cache-resident table that is
  // all: the rest are a bucket scan away in the core's caches. A larger
  // table also fetches, a few packets later when the bucket has arrived,
  // exactly the entries whose signature matches (prefetchMatches). Fetching
  // the preferred way blindly costs a memory access for nothing for a flow
  // not in it (one in six at the bench's load), but for the other five it
  // puts the bucket and the entry in flight together instead of one after
  // the other: a decap hit at 100,000 flows went from about 120 to 108
  // cycles (datapath_engine_bench).
  // Both return the entry the lookup should check first (lookupFrom).
  uint32_t prefetchSlot(uint64_t hash) const {
    const uint32_t b = bucketOf(hash);
    prefetchLine(&buckets_[b]);
    const uint32_t index = b * FlowBucket::kWays + preferredWay(hash);
    prefetchLine(&entries_[index]);
    return index;
  }
  // `tunnel`, `long_key`: the cold part (a tunnelled packet whose key does
  // not carry its tunnel folded in) or the key's tail (a long key) of the
  // matching entries too. Without a match: the preferred way (a miss, or a
  // flow in its second bucket).
  uint32_t prefetchMatches(uint64_t hash, bool tunnel, bool long_key) const {
    const uint32_t b = bucketOf(hash);
    uint32_t m = matchMask(buckets_[b], signature(hash));
    const unsigned way = m != 0 ? static_cast<unsigned>(__builtin_ctz(m)) : preferredWay(hash);
    const uint32_t first = b * FlowBucket::kWays + way;
    for (; m != 0; m &= m - 1) {
      const uint32_t index = b * FlowBucket::kWays + static_cast<uint32_t>(__builtin_ctz(m));
      prefetchLine(&entries_[index]);
      prefetchCold(index, tunnel, long_key);
    }
    return first;
  }
  // The same for a resident table's slot.
  void prefetchColdOf(uint32_t index, bool tunnel, bool long_key) const { prefetchCold(index, tunnel, long_key); }
  // The action record of the flow in entry `index` (prefetched before, so
  // the entry is in the caches by now): a hit reads it right after the
  // entry, and would otherwise wait on the two one after the other when
  // flows have records of their own (a translated connection's rewrite).
  void prefetchActionsOf(uint32_t index) const {
    prefetchLine(&actions_[entries_[index].actions & FlowEntry::kIndexMask]);
  }

  // Bit w set: way w of the bucket holds signature `sig`. Eight compares in
  // a few SSE2 instructions instead of a loop of eight branches.
  static uint32_t matchMask(const FlowBucket& bk, uint16_t sig) {
#if defined(__SSE2__)
    const __m128i eq = _mm_cmpeq_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(bk.sig)),
                                       _mm_set1_epi16(static_cast<short>(sig)));
    return static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(eq, _mm_setzero_si128())));
#else
    uint32_t m = 0;
    for (unsigned w = 0; w < FlowBucket::kWays; ++w) m |= uint32_t{bk.sig[w] == sig} << w;
    return m;
#endif
  }

  // The full key a compact key's lookup passes (never read: not long).
  static inline const overlay::FlowKey kNoFullKey{};

  // Index of the matching entry, or UINT32_MAX. `long_key`: the packet's key
  // has no compact form (`full`'s tail is then compared); `kTunnel`: the packet
  // came through a tunnel (`probe` is compared with the cold part).
  template <bool kTunnel>
  uint32_t lookup(uint64_t hash, const CompactKey& key, bool long_key, const overlay::FlowKey& full,
                  const TunnelProbe& probe) const {
    return lookupFrom<kTunnel>(hash, bucketOf(hash) * FlowBucket::kWays + preferredWay(hash), key, long_key, full,
                               probe);
  }
  // The same, checking the entry `first` (a way of the hash's bucket: from
  // prefetchSlot or prefetchMatches) before the bucket's other ways.
  template <bool kTunnel>
  uint32_t lookupFrom(uint64_t hash, uint32_t first, const CompactKey& key, bool long_key,
                      const overlay::FlowKey& full, const TunnelProbe& probe) const {
    if (matches<kTunnel>(first, key, long_key, full, probe)) [[likely]] return first;
    return scan<kTunnel>(hash, first, key, long_key, full, probe);
  }
  // A compact key, untunnelled or with its tunnel folded in (the uplink's
  // lane), `first` as above: the common hit inline (compactHit), the rest
  // out of line (scanCompact).
  bool compactHit(uint32_t first, const CompactKey& key) const {
    const FlowEntry& e = entries_[first];
    // A flow (action index not 0) with a compact key (no kLongKey): one compare.
    return e.actions - 1u < FlowEntry::kLongKey - 1u && FlowEntry::keyEqual(e.key, key);
  }
  uint32_t scanCompact(uint64_t hash, uint32_t first, const CompactKey& key) const {
    static const TunnelProbe kNoTunnel{};
    return scan<false>(hash, first, key, false, kNoFullKey, kNoTunnel);
  }
  // The bucket's ways other than `first` whose signature matches, then the
  // second bucket.
  template <bool kTunnel>
  uint32_t scan(uint64_t hash, uint32_t first, const CompactKey& key, bool long_key, const overlay::FlowKey& full,
                const TunnelProbe& probe) const {
    const uint32_t b = bucketOf(hash);
    const uint16_t sig = signature(hash);
    for (uint32_t m = matchMask(buckets_[b], sig) & ~(1u << (first % FlowBucket::kWays)); m != 0; m &= m - 1) {
      const uint32_t index = b * FlowBucket::kWays + static_cast<uint32_t>(__builtin_ctz(m));
      if (matches<kTunnel>(index, key, long_key, full, probe)) return index;
    }
    return lookupSecond<kTunnel>(hash, sig, key, long_key, full, probe);
  }
  // The second bucket, for the flows a full first bucket sent there (and
  // for misses): out of line, so the hit path stays short.
  template <bool kTunnel>
  [[gnu::noinline]] uint32_t lookupSecond(uint64_t hash, uint16_t sig, const CompactKey& key, bool long_key,
                                          const overlay::FlowKey& full, const TunnelProbe& probe) const {
    const uint32_t b = secondBucketOf(hash);
    if (b == bucketOf(hash)) return UINT32_MAX;  // a table of one bucket
    for (uint32_t m = matchMask(buckets_[b], sig); m != 0; m &= m - 1) {
      const uint32_t index = b * FlowBucket::kWays + static_cast<uint32_t>(__builtin_ctz(m));
      if (matches<kTunnel>(index, key, long_key, full, probe)) return index;
    }
    return UINT32_MAX;
  }
  template <bool kTunnel>
  bool matches(uint32_t index, const CompactKey& key, bool long_key, const overlay::FlowKey& full,
               const TunnelProbe& probe) const {
    const FlowEntry& e = entries_[index];
    // An empty way has actions 0, and a flow's long mark must be the packet's.
    if (e.actionIndex() == 0 || ((e.actions & FlowEntry::kLongKey) != 0) != long_key ||
        !FlowEntry::keyEqual(e.key, key)) {
      return false;
    }
    if (long_key && !tails_[index].matches(full)) return false;
    // A folded key (flow_cache.h: CompactKey) carries its tunnel: equal keys, equal tunnels.
    return !kTunnel || key.folded() || extras_[index].matchesTunnel(probe);
  }

  // Installs the slow path's flow: an empty way of its bucket (the preferred
  // one first), else of its second bucket, else in place of the least
  // recently used flow of the two (`evicted` set). Its actions are interned
  // (`record.stamp` is the current snapshot's; `valid` checks an existing
  // record with an older stamp against it; `resolve` fills a new or
  // revalidated record's encap pointers). Returns the entry's index, or
  // UINT32_MAX when no action record is free (the flow is not cached).
  template <typename Valid, typename Resolve>
  uint32_t insert(uint64_t hash, const FlowRecord& record, uint32_t now_ms, bool& evicted, Valid&& valid,
                  Resolve&& resolve);
  // Revalidates an action record against the current snapshot (stamp
  // `stamp`): true (stamp and pointers refreshed) or false (the record is
  // stale, and so is every flow that names it).
  template <typename Valid, typename Resolve>
  static bool revalidate(FlowActions& a, uint32_t stamp, Valid&& valid, Resolve&& resolve) {
    if (!valid(a)) return false;
    a.stamp = stamp;
    resolve(a);
    return true;
  }
  // A hit's last-used time (single writer: the lcore; read by dump-flows).
  static void touch(FlowEntry& e, uint32_t now_ms) { __atomic_store_n(&e.used_ms, now_ms, __ATOMIC_RELAXED); }
  void remove(uint32_t index);

  static uint32_t loadFlowId(const FlowExtra& x) { return __atomic_load_n(&x.flow_id, __ATOMIC_ACQUIRE); }
  // A consistent copy of a whole flow for a reader on another thread; false
  // if the slot is empty or changed meanwhile.
  bool read(uint32_t index, FlowRecord& out) const;

 private:
  // Interning: the record for `want` (refs + 1), or 0 when none is free.
  template <typename Valid, typename Resolve>
  uint32_t intern(const FlowActions& want, Valid&& valid, Resolve&& resolve);
  void release(uint32_t action_index);
  void unlink(uint32_t action_index);
  static uint32_t identityHash(const FlowActions& a);
  void prefetchCold(uint32_t index, bool tunnel, bool long_key) const {
    if (tunnel) prefetchLine(&extras_[index]);
    if (long_key) prefetchLine(&tails_[index]);
  }

  uint32_t mask_;
  uint32_t bucket_mask_;
  uint32_t next_flow_id_ = 0;
  uint32_t action_capacity_;      // records 1..action_capacity_ (0 means none)
  uint32_t action_slots_mask_;    // interning index: open addressing, linear probing
  uint32_t actions_in_use_ = 0;
  bool cache_resident_ = false;
  std::vector<uint32_t> free_actions_;  // reserved once: never grows on the lcore
  // Allocated with transparent huge pages where the kernel allows (madvise):
  // a large table is otherwise a TLB miss per lookup.
  ZeroedArray<FlowBucket> buckets_mem_;
  ZeroedArray<FlowEntry> entries_mem_;
  ZeroedArray<FlowExtra> extras_mem_;
  ZeroedArray<KeyTail> tails_mem_;
  ZeroedArray<FlowActions> actions_mem_;
  ZeroedArray<uint32_t> action_slots_mem_;
  FlowBucket* buckets_ = nullptr;
  FlowEntry* entries_ = nullptr;
  FlowExtra* extras_ = nullptr;
  KeyTail* tails_ = nullptr;  // written only for long keys
  FlowActions* actions_ = nullptr;
  uint32_t* action_slots_ = nullptr;
};

// --- templates ---

template <typename Valid, typename Resolve>
uint32_t FlowTable::intern(const FlowActions& want, Valid&& valid, Resolve&& resolve) {
  const uint32_t h = identityHash(want);
  for (uint32_t s = h & action_slots_mask_;; s = (s + 1) & action_slots_mask_) {
    const uint32_t i = action_slots_[s];
    if (i == 0) break;
    FlowActions& a = actions_[i];
    if (a.identity_hash != h || !a.sameAs(want)) continue;
    if (a.stamp == want.stamp || revalidate(a, want.stamp, valid, resolve)) {
      ++a.refs;
      return i;
    }
    // Stale: its flows go as they are hit or swept; new flows get a new record.
    unlink(i);
    break;
  }
  if (free_actions_.empty()) return 0;
  const uint32_t i = free_actions_.back();
  free_actions_.pop_back();
  __atomic_store_n(&actions_in_use_, actions_in_use_ + 1, __ATOMIC_RELAXED);
  FlowActions& a = actions_[i];
  a = want;
  a.refs = 1;
  a.identity_hash = h;
  a.linked = 1;
  resolve(a);
  uint32_t s = h & action_slots_mask_;
  while (action_slots_[s] != 0) s = (s + 1) & action_slots_mask_;
  action_slots_[s] = i;
  return i;
}

template <typename Valid, typename Resolve>
uint32_t FlowTable::insert(uint64_t hash, const FlowRecord& r, uint32_t now_ms, bool& evicted, Valid&& valid,
                           Resolve&& resolve) {
  const FlowActions want = FlowActions::from(r);

  // The slot first: evicting a flow may free the record this one needs.
  const uint32_t first = bucketOf(hash);
  const uint32_t second = secondBucketOf(hash);
  const unsigned preferred = preferredWay(hash);
  uint32_t index = UINT32_MAX;  // an empty way, else the least recently used one
  uint32_t oldest_idle = 0;
  bool empty = false;
  for (const uint32_t b : {first, second}) {
    const FlowBucket& bk = buckets_[b];
    for (unsigned i = 0; i < FlowBucket::kWays && !empty; ++i) {
      const unsigned w = (preferred + i) % FlowBucket::kWays;
      const uint32_t slot = b * FlowBucket::kWays + w;
      const uint32_t idle = now_ms - entries_[slot].used_ms;
      empty = bk.sig[w] == 0;
      if (empty || index == UINT32_MAX || idle > oldest_idle) {
        index = slot;
        oldest_idle = idle;
      }
    }
    if (empty) break;
  }
  FlowBucket& bk = buckets_[index / FlowBucket::kWays];
  const unsigned way = index % FlowBucket::kWays;
  evicted = bk.sig[way] != 0;
  if (evicted) remove(index);

  const uint32_t action = intern(want, valid, resolve);
  if (action == 0) return UINT32_MAX;  // an evicted flow stays evicted (and counted)
  bool is_long = false;
  FlowEntry& e = entries_[index];
  e.key = CompactKey::from(r.key, is_long);
  if (!is_long && r.tun_family == 4) e.key.tryFoldTunnel4(r.tun_remote, r.tun_ingress, r.tun_egress);
  e.setPacketsSport(0, r.encap_sport);
  e.bytes = 0;
  e.used_ms = now_ms;
  e.actions = action | (is_long ? FlowEntry::kLongKey : 0u);
  if (is_long) tails_[index] = KeyTail::of(r.key);
  FlowExtra& x = extras_[index];
  x.tun_remote = r.tun_remote;
  x.tun_ingress = r.tun_ingress;
  x.tun_egress = r.tun_egress;
  x.tun_family = r.tun_family;
  x.created_s = r.created_s;
  x.setAllowed(r.allowed_egress, r.allowed_ingress);
  if (++next_flow_id_ == 0) next_flow_id_ = 1;
  __atomic_store_n(&x.flow_id, next_flow_id_, __ATOMIC_RELEASE);
  bk.sig[way] = signature(hash);
  return index;
}

}  // namespace dpu::datapath
