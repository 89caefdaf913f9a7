// The lcore side of the Engine: receive → (decap) → parse → flow cache →
// compiled actions → per-port tx buffers; misses run the slow path
// (pipeline.cpp) on the same lcore and install one flow, within the
// worker's slow-path budget (miss_budget.h; the rest are dropped as
// MissBudget). No locks,
// allocation, exceptions or logging here; every drop is counted by reason.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <chrono>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "engine_impl.h"
#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/headers.h"
#include "worker_actions.h"
#include "worker_parse.h"

namespace dpu::datapath {
namespace {

// The table hash of the flow key with the per-process keys (HashKeys,
// common/keyed_hash.h; wyhash-style: five multiplies for the 64 bytes, about
// a third of XXH64's instructions; it only places flows in this lcore's
// table, so it need not match overlay's flowHash64). Tunnelled packets add
// their tunnel as one word (`tunnel`, tunnelWord; zero, and compiled away,
// otherwise) to the other operand of the last word's multiply.
inline uint64_t tableHash(const overlay::FlowKey& key, const HashKeys& k, uint64_t tunnel) {
  // Word loads straight from the key (a copy to the stack first costs moves).
  const auto* p = reinterpret_cast<const unsigned char*>(&key);
  uint64_t w[8];
  for (unsigned i = 0; i < 8; ++i) std::memcpy(&w[i], p + 8 * i, 8);
  static_assert(sizeof(overlay::FlowKey) == sizeof w);
  const uint64_t a = mum(w[0] ^ k.word[0], w[1] ^ k.word[1]);
  const uint64_t b = mum(w[2] ^ k.word[2], w[3] ^ k.word[3]);
  const uint64_t c = mum(w[4] ^ k.word[4], w[5] ^ k.word[5]);
  const uint64_t d = mum(w[6] ^ k.word[6], w[7] ^ k.word[7] ^ tunnel);
  return mum(a ^ c ^ 0x85ebca77c2b2ae63ull, b ^ d ^ k.seed);
}

// The same for a compact key (flow_cache.h): three multiplies over the words
// that tell flows apart — port and VNI, ethertype/protocol/IPv4 source, IPv4
// destination and L4 ports. The MACs and VLAN (words 1 and 2) are compared
// on a hit but not hashed: flows that differ only there (one pod's 5-tuple
// sent with many MACs, which port security drops) share a bucket pair and
// crowd only each other, while every other flow of that port or 5-tuple
// still lands elsewhere. Every hashed word goes through a multiply of its
// own before the last one (the ports and addresses fed only to the last
// multiply would move the bucket bits almost linearly: flows with
// neighbouring ports crowd buckets); so does the tunnel, as the key word's
// partner, which costs it one XOR. A long key is hashed whole (its compact
// form is a lossy fold).
inline uint64_t compactHash(const CompactKey& c, const HashKeys& k, uint64_t tunnel) {
  const uint64_t a = mum(c.w[0] ^ k.word[0], c.w[3] ^ k.word[3]);
  const uint64_t d = mum(c.w[4] ^ k.word[4], k.word[5] ^ tunnel);
  return mum(a ^ 0x85ebca77c2b2ae63ull, d ^ k.seed);
}

inline uint64_t packetHash(const PacketContext& pc, const HashKeys& k, uint64_t tunnel) {
  return pc.long_key ? tableHash(pc.key, k, tunnel) : compactHash(pc.ckey, k, tunnel);
}

// A tunnelled packet's tunnel as the hash takes it: its remote's 16 bytes
// as two words and the OVN keys, in one word. An IPv4 remote (the upper
// word zero) fills the low half and the keys the high one, so no two IPv4
// tunnels share a word.
inline uint64_t tunnelWord(uint64_t lo, uint64_t hi, uint16_t ingress, uint16_t egress) {
  return lo ^ (hi << 17 | hi >> 47) ^ (uint64_t{ingress} << 32 | uint64_t{egress} << 48);
}

// A key with its tunnel folded in (flow_cache.h: CompactKey::foldTunnel4;
// never long): the OVN keys are in the hashed words already, and the
// remote is the tunnel word.
inline uint64_t foldedHash(const CompactKey& key, const HashKeys& k) {
  return compactHash(key, k, key.tunnelRemote4());
}

inline uint64_t flowHash(const PacketContext& pc, const HashKeys& k) {
  const TunnelProbe& probe = pc.probe;
  if (probe.family == 0) return packetHash(pc, k, 0);
  if (pc.ckey.folded()) return foldedHash(pc.ckey, k);
  uint64_t lo, hi;
  std::memcpy(&lo, probe.remote.data(), 8);
  std::memcpy(&hi, probe.remote.data() + 8, 8);
  return packetHash(pc, k, tunnelWord(lo, hi, probe.ingress, probe.egress));
}

// The outer headers from the flow's template: 58 bytes (IPv4) or 78 (IPv6),
// copied as two or three overlapping 32-byte moves inline rather than a libc
// memcpy call of a run-time length.
inline void copyTemplate(uint8_t* dst, const uint8_t* src, uint32_t len) {
  if (len < 32 || len > 96) {
    std::memcpy(dst, src, len);
    return;
  }
  // The template and the mbuf's headroom never overlap.
  std::memcpy(dst, src, 32);
  if (len > 64) std::memcpy(dst + 32, src + 32, 32);
  std::memcpy(dst + len - 32, src + len - 32, 32);
}

// A hit's statistics in the flow's hit line: packets (above the source
// port) and bytes.
inline void countHit(FlowEntry& e, const rte_mbuf* m) {
  e.packets_sport += uint64_t{1} << 16;
  bump(e.bytes, m->pkt_len);
}

// Both MACs from the record with one 12-byte copy (it keeps them as the
// frame has them, destination first).
inline void writeMacs(uint8_t* frame, const FlowActions& a) {
  std::memcpy(frame, reinterpret_cast<const uint8_t*>(&a) + offsetof(FlowActions, set_dst), 12);
}

}  // namespace

// prepare, lookupAndApply and applyFlow are called only from processBurst and
// missPath (in this file): inlined there, they save calls per packet with
// their register saves and argument spills; what a hit does not need (a
// miss, revalidation, ICMP replies) stays out of line. Being inline, they
// have no out-of-line copy: a caller in another file gets a link error (move
// it here instead).
#define DPU_HOT_INLINE [[gnu::always_inline]] inline

uint64_t EngineImpl::steadyMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t EngineImpl::now() const {
  if (config_.clock_ms != nullptr) return config_.clock_ms();
  if (tsc_ms_per_tick_ == 0) return steadyMs();
  const uint64_t ticks = rte_get_tsc_cycles() - tsc_base_;
  return ms_base_ + static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * tsc_ms_per_tick_) >> 64);
}

void EngineImpl::drop(WorkerContext& w, rte_mbuf* m, uint16_t rx_port, DropReason reason) {
  bump(w.counters.drops[static_cast<size_t>(reason)]);
  if (rx_port < kMaxPorts) bump(w.counters.ports[rx_port].rx_dropped);
  rte_pktmbuf_free(m);
}

void EngineImpl::txPort(WorkerContext& w, uint16_t port) {
  TxBuffer& tb = w.tx[port];
  uint64_t bytes = tb.bytes;
  // After tx_burst the sent mbufs belong to the driver: their bytes were
  // summed as they were queued.
  const uint16_t sent = rte_eth_tx_burst(ethdevOf(port), static_cast<uint16_t>(w.index_), tb.packets, tb.count);
  for (uint16_t i = sent; i < tb.count; ++i) {
    bytes -= tb.packets[i]->pkt_len;
    rte_pktmbuf_free(tb.packets[i]);
  }
  PortCounters& pc = w.counters.ports[port];
  bump(pc.tx_packets, sent);
  bump(pc.tx_bytes, bytes);
  if (sent < tb.count) {
    bump(pc.tx_dropped, tb.count - sent);
    bump(w.counters.drops[static_cast<size_t>(DropReason::kTxFull)], tb.count - sent);
  }
  tb.count = 0;
  tb.bytes = 0;
  w.tx_pending[port >> 6] &= ~(uint64_t{1} << (port & 63));
}


void EngineImpl::flush(WorkerContext& w) {
  for (unsigned word = 0; word < kPortWords; ++word) {
    uint64_t bits = w.tx_pending[word];
    while (bits != 0) {
      const unsigned port = word * 64 + static_cast<unsigned>(__builtin_ctzll(bits));
      bits &= bits - 1;
      txPort(w, static_cast<uint16_t>(port));
    }
  }
}

namespace {
// The outer headers every IPv4 tunnel has (Ethernet, IPv4, UDP, Geneve
// and the OVN option: overlay/geneve.h): the Encap4 lane writes them with the
// offsets as constants.
constexpr uint32_t kEncap4Length = 14 + 20 + 8 + 8 + 8;
constexpr uint32_t kEncap4Udp = 14 + 20;
constexpr uint32_t kEncap4Ovn = kEncap4Length - 4;

}  // namespace

DPU_HOT_INLINE void EngineImpl::output(WorkerContext& w, uint16_t port, rte_mbuf* m) {
  TxBuffer& tb = w.tx[port];
  tb.bytes += m->pkt_len;
  const uint16_t queued = tb.count;
  tb.packets[queued] = m;
  tb.count = static_cast<uint16_t>(queued + 1);
  if (queued == 0) w.tx_pending[port >> 6] |= uint64_t{1} << (port & 63);
  if (queued + 1 == kBurst) txPort(w, port);
}

void EngineImpl::enqueueTx(WorkerContext& w, uint16_t port, rte_mbuf* m) { output(w, port, m); }

// The Encap action: the template's outer headers in the headroom, then the
// per-packet fields (OVN keys, UDP source port and length, IP length and
// checksum). With kFixedIpv4 (the lane that resolved the record checked the
// template's layout) every offset is a constant and the copy two 32-byte moves.
template <bool kFixedIpv4>
DPU_HOT_INLINE bool EngineImpl::encapGeneve(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m,
                                            uint16_t rx_port) {
  if (!kFixedIpv4 && a.encap == nullptr) [[unlikely]] return drop(w, m, rx_port, DropReason::kNoRoute), false;
  const SnapEncap& t = *a.encap;
  const uint32_t len = kFixedIpv4 ? kEncap4Length : t.length;
  const uint32_t udp_offset = kFixedIpv4 ? kEncap4Udp : t.udp_offset;
  const uint32_t ovn_offset = kFixedIpv4 ? kEncap4Ovn : t.ovn_offset;
  const uint32_t inner_len = m->data_len;
  if (m->data_off < len) [[unlikely]] return drop(w, m, rx_port, DropReason::kNoRoom), false;
  m->data_off = static_cast<uint16_t>(m->data_off - len);
  m->data_len = static_cast<uint16_t>(inner_len + len);
  m->pkt_len += len;
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  if constexpr (kFixedIpv4) {
    std::memcpy(p, t.bytes.data(), 32);
    std::memcpy(p + kEncap4Length - 32, t.bytes.data() + kEncap4Length - 32, 32);
  } else {
    static_assert(sizeof t.bytes <= 96, "copyTemplate copies at most 96 bytes inline");
    copyTemplate(p, t.bytes.data(), len);
  }
  // Port keys are at most 15 bits (the model refuses others): no mask.
  static_assert(kMaxPortKey == overlay::kOvnMaxIngressPortKey);
  overlay::store16(p + ovn_offset, a.encap_ingress);
  overlay::store16(p + ovn_offset + 2, a.encap_egress);
  uint8_t* udp = p + udp_offset;
  const uint32_t udp_len = len - udp_offset + inner_len;
  // RFC 8926 §3.3: the source port from the inner flow hash, kept in the hit line as the header has it.
  const uint16_t sport = e.sportWire();
  std::memcpy(udp, &sport, 2);
  overlay::udp::setLength(udp, static_cast<uint16_t>(udp_len));
  uint8_t* ip = p + overlay::eth::kHeaderLen;
  if (kFixedIpv4 || !t.ipv6) {
    // The header sum without the length was taken when the snapshot was
    // built and is folded to 16 bits: with the length, one more fold suffices.
    const uint32_t ip_len = udp_len + overlay::ipv4::kMinHeaderLen;
    overlay::ipv4::setTotalLength(ip, static_cast<uint16_t>(ip_len));
    uint32_t sum = uint32_t{a.encap_sum} + ip_len;
    sum = (sum & 0xffff) + (sum >> 16);
    overlay::ipv4::setChecksum(ip, static_cast<uint16_t>(~sum));
  } else {
    // RFC 8200 §8.1: UDP over IPv6 always carries a checksum.
    overlay::ipv6::setPayloadLength(ip, static_cast<uint16_t>(udp_len));
    uint32_t sum = overlay::pseudoHeaderSumV6(overlay::ipv6::src(ip), overlay::ipv6::dst(ip), overlay::ipproto::kUdp,
                                              udp_len);
    sum = overlay::checksumAdd(udp, udp_len, sum);
    const uint16_t csum = overlay::checksumFinish(sum);
    overlay::udp::setChecksum(udp, csum == 0 ? 0xffff : csum);
  }
  // The fixed lane is taken only with the next hop known.
  if (!kFixedIpv4 && !a.hop_known) bump(w.counters.events[static_cast<size_t>(Event::kTunnelNextHopUnresolved)]);
  return true;
}

// An outbound SA's verdict on a packet: sent on, or dropped and counted.
DPU_HOT_INLINE bool EngineImpl::espSealed(WorkerContext& w, rte_mbuf* m, uint16_t rx_port, EspVerdict verdict,
                                          overlay::Status status) {
  switch (verdict) {
    case EspVerdict::kOk:
      return true;
    case EspVerdict::kLimit:
      return drop(w, m, rx_port, DropReason::kIpsecSequenceLimit), false;
    default:
      return drop(w, m, rx_port, toDropReason(status)), false;
  }
}

namespace {
// ESP in UDP 4500 (RFC 3948 §2.1): the UDP header in front of the ESP
// packet of `esp_len` bytes, to the port the peer's NAT chose once an
// authenticated packet said so (NatPeer), checksum zero (IPv4).
inline void writeNatT(uint8_t* udp, const SnapEncap& t, uint32_t esp_len) {
  overlay::store16(udp, kNatTPort);
  overlay::store16(udp + 2, t.nat != nullptr ? t.nat->port.load(std::memory_order_relaxed) : kNatTPort);
  overlay::store16(udp + 4, static_cast<uint16_t>(overlay::udp::kHeaderLen + esp_len));
  overlay::store16(udp + 6, 0);
}
}  // namespace

// The Encap and Esp actions of the fixed IPv4 template in one step (the
// EspEncap4 lane): the template's Ethernet and IP headers go in front of the
// room for the ESP header (after a UDP 4500 header with NAT traversal), its
// UDP, Geneve and OVN option headers after that room, so no header is parsed
// or moved again; the ESP itself is the SA's (EspSlot::sealPlaced). It sends
// what encapGeneve<true> and then espProtect send, byte for byte and counter
// for counter (the lanes' test in engine_ipsec_test.cpp), and leaves to them
// a packet without an SA or without the room (their drops and counts).
DPU_HOT_INLINE bool EngineImpl::encapEsp4(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m,
                                          uint16_t rx_port) {
  const SnapEncap& t = *a.encap;  // the lane requires it (ActionsResolve)
  EspSlot* sa = t.esp;
  constexpr uint32_t kOuter = overlay::eth::kHeaderLen + overlay::ipv4::kMinHeaderLen;
  constexpr uint32_t kTail = kEncap4Length - kOuter;  // UDP, Geneve, the OVN option
  const uint32_t inner_len = m->data_len;
  const uint32_t udp_len = kTail + inner_len;
  const uint32_t nat_t = t.esp_nat_t ? overlay::overhead::kNatT : 0;
  const uint32_t esp_front = sa != nullptr ? sa->espHeadroom() : 0;
  const uint32_t gap = nat_t + esp_front;
  if (sa == nullptr || m->data_off < kEncap4Length + gap ||
      rte_pktmbuf_tailroom(m) < sa->espOverhead(udp_len) - esp_front) [[unlikely]] {
    return encapGeneve<true>(w, e, a, m, rx_port) && espProtect(w, a, m, rx_port);
  }
  m->data_off = static_cast<uint16_t>(m->data_off - kEncap4Length - gap);
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  uint8_t* udp = p + kOuter + gap;
  std::memcpy(p, t.bytes.data(), kOuter);
  std::memcpy(udp, t.bytes.data() + kOuter, kTail);
  overlay::store16(udp + (kEncap4Ovn - kOuter), a.encap_ingress);
  overlay::store16(udp + (kEncap4Ovn - kOuter) + 2, a.encap_egress);
  const uint16_t sport = e.sportWire();
  std::memcpy(udp, &sport, 2);
  overlay::udp::setLength(udp, static_cast<uint16_t>(udp_len));
  uint32_t esp_len = 0;
  overlay::Status st = overlay::Status::kOk;
  const EspVerdict v =
      sa->sealPlaced(udp - esp_front, udp_len, overlay::ipv4::kMinHeaderLen + udp_len, esp_len, st, w.index());
  if (!espSealed(w, m, rx_port, v, st)) return false;
  uint8_t* ip = p + overlay::eth::kHeaderLen;
  const uint32_t ip_len = overlay::ipv4::kMinHeaderLen + nat_t + esp_len;
  // The template's header sum (protocol UDP) with the length, and ESP's
  // protocol number in place of UDP's in the low byte of their word.
  uint32_t sum = uint32_t{a.encap_sum} + ip_len;
  if (nat_t != 0) {
    writeNatT(ip + overlay::ipv4::kMinHeaderLen, t, esp_len);
  } else {
    ip[9] = overlay::ipproto::kEsp;
    sum += overlay::ipproto::kEsp - overlay::ipproto::kUdp;
  }
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  overlay::ipv4::setTotalLength(ip, static_cast<uint16_t>(ip_len));
  overlay::ipv4::setChecksum(ip, static_cast<uint16_t>(~sum));
  m->data_len = static_cast<uint16_t>(overlay::eth::kHeaderLen + ip_len);
  m->pkt_len = m->data_len;
  return true;
}

// The Esp action: the outer IP packet (after the Ethernet header) encrypted
// in place under the remote node's outbound SA in force (transport mode:
// outer IP | ESP | UDP 6081 | Geneve | inner), the Ethernet header moved in
// front of the IP header's new place. With NAT traversal the ESP then goes
// inside UDP 4500 -> 4500 (or the port the peer's NAT chose, NatPeer),
// checksum 0 (RFC 3948 §2.1; IPv4 only, the model refuses it on an IPv6
// underlay). False: dropped and counted.
bool EngineImpl::espProtect(WorkerContext& w, const FlowActions& a, rte_mbuf* m, uint16_t rx_port) {
  EspSlot* sa = a.encap != nullptr ? a.encap->esp : nullptr;
  if (sa == nullptr) [[unlikely]] return drop(w, m, rx_port, DropReason::kIpsecNoSa), false;
  constexpr uint32_t kEth = overlay::eth::kHeaderLen;
  uint8_t eth[kEth];
  std::memcpy(eth, rte_pktmbuf_mtod(m, const uint8_t*), kEth);
  overlay::PacketBuffer buf(static_cast<uint8_t*>(m->buf_addr), m->buf_len, m->data_off + kEth, m->data_len - kEth);
  overlay::Status st = overlay::Status::kOk;
  if (!espSealed(w, m, rx_port, sa->encrypt(buf, st, w.index()), st)) return false;
  uint32_t ip_at = buf.headroom();
  if (a.encap->esp_nat_t) {
    if (ip_at < overlay::overhead::kNatT + kEth) [[unlikely]] {
      return drop(w, m, rx_port, DropReason::kNoRoom), false;
    }
    uint8_t* base = static_cast<uint8_t*>(m->buf_addr);
    const uint32_t ihl = overlay::ipv4::headerLen(base + ip_at);
    const uint32_t esp_len = buf.size() - ihl;
    std::memmove(base + ip_at - overlay::overhead::kNatT, base + ip_at, ihl);
    ip_at -= overlay::overhead::kNatT;
    uint8_t* ip = base + ip_at;
    writeNatT(ip + ihl, *a.encap, esp_len);
    ip[9] = overlay::ipproto::kUdp;
    overlay::store16(ip + 2, static_cast<uint16_t>(ihl + overlay::udp::kHeaderLen + esp_len));
    overlay::store16(ip + 10, 0);
    overlay::store16(ip + 10, overlay::ipv4HeaderChecksum(ip, ihl));
  }
  const uint32_t ip_len = buf.size() + (ip_at != buf.headroom() ? overlay::overhead::kNatT : 0);
  // The IP header moved into the headroom over where the Ethernet header was.
  std::memcpy(static_cast<uint8_t*>(m->buf_addr) + ip_at - kEth, eth, kEth);
  m->data_off = static_cast<uint16_t>(ip_at - kEth);
  m->data_len = static_cast<uint16_t>(ip_len + kEth);
  m->pkt_len = m->data_len;
  return true;
}

// ESP on the uplink (before the Geneve decap): an untagged IPv4 or IPv6
// frame whose IP protocol (next header) is 50, or an IPv4 UDP datagram to
// port 4500 (ESP in UDP, RFC 3948; accepted whether or not this node sends
// NAT-T itself, so the setting can change node by node, while it has
// inbound SAs).
namespace {
inline bool isEsp(const rte_mbuf* m) {
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  // IPv4: room for a 20-byte header and a UDP header (a NAT keepalive is 43
  // bytes unpadded, as a veth or af_xdp hands it over); IPv6: its header.
  if (m->data_len < overlay::eth::kHeaderLen + 28) return false;
  const uint16_t type = overlay::load16(f + 12);
  if (type == overlay::eth::kTypeIpv4) {
    const uint8_t proto = f[14 + 9];
    if (proto == overlay::ipproto::kEsp) return true;
    return proto == overlay::ipproto::kUdp && overlay::ipv4::headerLen(f + 14) == overlay::ipv4::kMinHeaderLen &&
           overlay::load16(f + 14 + 20 + 2) == kNatTPort;
  }
  return type == overlay::eth::kTypeIpv6 && m->data_len >= overlay::eth::kHeaderLen + 40 &&
         f[14 + 6] == overlay::ipproto::kEsp;
}
}  // namespace

EngineImpl::EspReceived EngineImpl::espReceive(WorkerContext& w, const Snapshot& snap, rte_mbuf* m, uint16_t rx_port,
                                                bool lane, CompactKey& key, TunnelLanePacket& t) {
  constexpr uint32_t kEth = overlay::eth::kHeaderLen;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const bool v6 = overlay::load16(f + 12) == overlay::eth::kTypeIpv6;
  const uint8_t* ip = f + kEth;
  const uint8_t* src = v6 ? ip + 8 : ip + 12;
  const uint8_t* dst = v6 ? ip + 24 : ip + 16;
  // ESP that is not for our tunnel IP is not ours (the host's, north–south).
  if (!snap.has_tunnel_ip || (v6 ? 6 : 4) != snap.tunnel_family || !sameAddress(dst, snap.tunnel_ip.data(), v6)) {
    return EspReceived::kNotOurs;
  }
  uint16_t nat_sport = 0;  // ESP in UDP: its UDP source port
  if (!v6 && ip[9] == overlay::ipproto::kUdp) {
    // A node without inbound SAs (IPsec off) leaves UDP 4500 as any UDP.
    if (!snap.any_inbound_sa) return EspReceived::kNotOurs;
    // ESP in UDP 4500: a NAT keepalive (one 0xff byte) is counted apart; a
    // non-ESP marker (four zero bytes: IKE) is not for us; otherwise the UDP header
    // goes and the IP header says ESP (RFC 3948 §3.1), then as any ESP.
    constexpr uint32_t kIp = overlay::ipv4::kMinHeaderLen;
    constexpr uint32_t kUdp = overlay::udp::kHeaderLen;
    const uint32_t udp_len = overlay::load16(ip + kIp + 4);
    if (udp_len == kUdp + 1 && kEth + kIp + udp_len <= m->data_len && ip[kIp + kUdp] == 0xff) {
      return drop(w, m, rx_port, DropReason::kIpsecNatKeepalive), EspReceived::kDropped;
    }
    if (udp_len < kUdp + overlay::overhead::kEspHeader || kEth + kIp + udp_len > m->data_len ||
        overlay::load32(ip + kIp + kUdp) == 0) {
      return drop(w, m, rx_port, DropReason::kIpsecNatTNonEsp), EspReceived::kDropped;
    }
    nat_sport = overlay::load16(ip + kIp);
    uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
    std::memmove(frame + kUdp, frame, kEth + kIp);
    m->data_off = static_cast<uint16_t>(m->data_off + kUdp);
    m->data_len = static_cast<uint16_t>(m->data_len - kUdp);
    m->pkt_len = m->data_len;
    uint8_t* h = frame + kUdp + kEth;
    h[9] = overlay::ipproto::kEsp;
    overlay::store16(h + 2, static_cast<uint16_t>(overlay::load16(h + 2) - kUdp));
    overlay::store16(h + 10, 0);
    overlay::store16(h + 10, overlay::ipv4HeaderChecksum(h, kIp));
    f = rte_pktmbuf_mtod(m, const uint8_t*);
    ip = f + kEth;
    src = ip + 12;
  }
  uint32_t spi = 0;
  overlay::EspLayout layout;
  const overlay::Status peek = overlay::espParse({ip, m->data_len - kEth}, layout, spi);
  if (peek != overlay::Status::kOk) return drop(w, m, rx_port, toDropReason(peek)), EspReceived::kDropped;
  const size_t peer_len = v6 ? 16 : 4;
  WorkerContext::LastInboundSa& last = w.last_inbound_sa;
  EspSlot* sa = nullptr;
  NatPeer* nat = nullptr;
  if (last.snap == &snap && last.spi == spi && last.v6 == v6 && sameAddress(last.peer.data(), src, v6)) {
    sa = last.slot;
    nat = last.nat;
  } else if (const Snapshot::InboundSa* in = snap.inboundSa(src, v6, spi); in != nullptr) {
    sa = in->slot.get();
    nat = in->nat;
    last.snap = &snap;
    std::memcpy(last.peer.data(), src, peer_len);
    last.spi = spi;
    last.v6 = v6;
    last.slot = sa;
    last.nat = nat;
  }
  if (sa == nullptr) {
    Ip16 peer{};
    std::memcpy(peer.data(), src, v6 ? 16 : 4);
    const DropReason why =
        snap.peer_by_ip.count(peer) != 0 ? DropReason::kIpsecUnknownSpi : DropReason::kIpsecUnknownPeer;
    return drop(w, m, rx_port, why), EspReceived::kDropped;
  }
  overlay::PacketBuffer buf(static_cast<uint8_t*>(m->buf_addr), m->buf_len, m->data_off + kEth, m->data_len - kEth);
  overlay::Status st = overlay::Status::kOk;
  overlay::EspOpened opened;
  if (sa->decryptPlaced(buf, layout, opened, st, w.index()) != EspVerdict::kOk) {
    return drop(w, m, rx_port, toDropReason(st)), EspReceived::kDropped;
  }
  // Authenticated: the port its NAT sends from is where replies go
  // (RFC 3948 §3.1: never learned from a packet that did not authenticate).
  if (nat != nullptr && nat_sport != 0 && nat->port.load(std::memory_order_relaxed) != nat_sport) [[unlikely]] {
    nat->port.store(nat_sport, std::memory_order_relaxed);
  }
  // The NIC's L4 verdict was about the ESP packet (or its UDP 4500). Its
  // verdict that the IPv4 header sums right still holds: the strip patches
  // the checksum incrementally (RFC 1624), which keeps a right header right
  // (NAT-T rewrote it whole, right), so the Geneve decap need not sum it
  // again. Any other verdict goes: a wrong header stays wrong for the decap
  // to drop.
  const uint64_t ip_verdict = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  m->ol_flags &= ~(RTE_MBUF_F_RX_L4_CKSUM_MASK |
                   (ip_verdict == RTE_MBUF_F_RX_IP_CKSUM_GOOD ? 0 : RTE_MBUF_F_RX_IP_CKSUM_MASK));
  // The uplink's lane, on the decrypted UDP datagram where it lies: what
  // tunnelLaneParse takes once the ESP header is stripped (an IPv4 header
  // without options, not a fragment, that sums right, to our tunnel IP,
  // carrying UDP; the rest is geneveLaneParse's), so the outer headers,
  // dropped whole, are not moved first.
  const uint8_t* const h = buf.data();
  if (lane && !v6 && layout.header_len == overlay::ipv4::kMinHeaderLen && opened.front != 0 &&
      opened.next_header == overlay::ipproto::kUdp && h[0] == 0x45 &&
      (overlay::ipv4::fragField(h) & (overlay::ipv4::kFlagMf | overlay::ipv4::kFragOffsetMask)) == 0 &&
      (ip_verdict == RTE_MBUF_F_RX_IP_CKSUM_GOOD || overlay::ipv4HeaderChecksumOk(h))) {
    const uint32_t udp_at = overlay::ipv4::kMinHeaderLen + opened.front;
    uint32_t remote;
    std::memcpy(&remote, h + 12, 4);
    if (geneveLaneParse(h + udp_at, buf.size() - udp_at, false, remote, rx_port, key, t)) [[likely]] {
      m->data_off = static_cast<uint16_t>(buf.headroom() + udp_at + (kTunnelLaneOuterLen - kEth - 20));
      return EspReceived::kLane;
    }
  }
  overlay::EspInboundSa::stripPlaced(buf, layout, opened);
  // The IP header moved forward; the Ethernet header follows it (read whole
  // before it is written: the two places may overlap).
  uint8_t eth[kEth];
  std::memcpy(eth, rte_pktmbuf_mtod(m, const uint8_t*), kEth);
  std::memcpy(static_cast<uint8_t*>(m->buf_addr) + buf.headroom() - kEth, eth, kEth);
  m->data_off = static_cast<uint16_t>(buf.headroom() - kEth);
  m->data_len = static_cast<uint16_t>(buf.size() + kEth);
  m->pkt_len = m->data_len;
  return EspReceived::kDecrypted;
}

// With IPsec on, plaintext Geneve from a node that has an inbound SA with
// us is refused: it must come as ESP, unless the agent says that node does
// not encrypt to us yet (IpsecSa.plaintext_accepted, a rollout).
bool EngineImpl::plaintextRefused(const Snapshot& snap, const TunnelProbe& probe) const {
  auto it = snap.peer_by_ip.find(probe.remote);
  return it != snap.peer_by_ip.end() && it->second->inbound_sas && !it->second->plaintext_accepted;
}

template <ActionKind kKind>
DPU_HOT_INLINE Applied EngineImpl::applyActions(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m,
                                                uint16_t rx_port, const PacketShape& shape, bool punt) {
  // A lane knows its ops and its packet's shape at compile time: only its
  // steps are compiled, untested; the general routine tests each.
  constexpr Lane kLane = laneOf(kKind);
  constexpr bool kGeneral = kKind == kActionsGeneral;
  constexpr uint16_t kMay = kLane.ops;
  constexpr bool kIpv4 = kLane.shape == LaneShape::kIpv4;
  const uint16_t ops = kGeneral ? a.ops : kMay;
  const auto has = [&](uint16_t bit) { return (kMay & bit) != 0 && (ops & bit) != 0; };
  const overlay::L3Type l3 = kIpv4 ? overlay::L3Type::kIpv4 : shape.l3;
  const uint32_t l3_offset = kIpv4 ? overlay::eth::kHeaderLen : shape.l3_offset;
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);

  // Encap's MTU check comes before anything is changed or counted.
  if (has(op::kEncap) && shape.l3_len > a.mtu) [[unlikely]] return Applied::kTooBig;
  // A tracked connection's TCP SYN, FIN and RST go through conntrack, so
  // that it sees the connection open, close and be reused (conntrack.h):
  // a translated one's (kNat) and one tracked for NetworkPolicy only.
  if ((has(op::kNat) || a.tracked) && punt) {
    const uint8_t* ip = frame + l3_offset;
    const uint8_t proto = l3 == overlay::L3Type::kIpv4 ? ip[9] : ip[6];
    if (proto == overlay::ipproto::kTcp &&
        (frame[(kIpv4 ? overlay::eth::kHeaderLen + 20 : shape.l4_offset) + 13] &
         (overlay::tcp::kFlagSyn | overlay::tcp::kFlagFin | overlay::tcp::kFlagRst)) != 0) [[unlikely]] {
      return Applied::kPunt;
    }
  }
  countHit(e, m);
  if (has(op::kDrop)) return drop(w, m, rx_port, static_cast<DropReason>(a.drop_reason)), Applied::kDone;
  // Decap was done before the lookup (prepare).
  if (has(op::kDecTtl)) {
    uint8_t* ip = frame + l3_offset;
    if (l3 == overlay::L3Type::kIpv4) {
      if (!decrementLiveIpv4Ttl(ip)) [[unlikely]] return drop(w, m, rx_port, DropReason::kTtlExpired), Applied::kDone;
    } else if (l3 == overlay::L3Type::kIpv6) {
      const uint8_t hops = overlay::ipv6::hopLimit(ip);
      if (hops <= 1) return drop(w, m, rx_port, DropReason::kTtlExpired), Applied::kDone;
      overlay::ipv6::setHopLimit(ip, static_cast<uint8_t>(hops - 1));
    }
  }
  if (has(op::kSetEthSrc) && has(op::kSetEthDst)) {
    writeMacs(frame, a);
  } else {
    if (has(op::kSetEthSrc)) overlay::eth::setSrc(frame, a.set_src);
    if (has(op::kSetEthDst)) overlay::eth::setDst(frame, a.set_dst);
  }
  if (has(op::kNat)) {
    applyNat(frame + l3_offset, frame + (kIpv4 ? overlay::eth::kHeaderLen + 20 : shape.l4_offset), a.nat);
  }
  if constexpr (kLane.encap == LaneEncap::kFixedIpv4 && (kMay & op::kEsp) != 0) {
    // Both at once around the fixed template (encapEsp4).
    if (!encapEsp4(w, e, a, m, rx_port)) return Applied::kDone;
  } else {
    if (has(op::kEncap) && !encapGeneve<kLane.encap == LaneEncap::kFixedIpv4>(w, e, a, m, rx_port)) {
      return Applied::kDone;
    }
    // ESP transport mode around the outer UDP packet the encap just built.
    if (has(op::kEsp) && !espProtect(w, a, m, rx_port)) return Applied::kDone;
  }
  if (has(op::kOutput)) output(w, a.out_port, m);
  return Applied::kDone;
}

// The lanes' tests in the order of actions.def (the common ones first), a
// compare each, over the lanes that can be the record's: those with Decap
// for a decapsulated packet (its record has it), the others otherwise; and
// a lane of IPv4 shape only for such a packet.
template <bool kDecapped>
DPU_HOT_INLINE Applied EngineImpl::applyLane(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m,
                                             uint16_t rx_port, bool ipv4_at_14, const PacketShape& shape) {
  Applied applied = Applied::kNoLane;
  [&]<size_t... kI>(std::index_sequence<kI...>) __attribute__((always_inline)) {
    (void)(((((kLanes[kI].ops & op::kDecap) != 0) == kDecapped &&
             (kLanes[kI].shape == LaneShape::kAny || ipv4_at_14) && a.kind == kLanes[kI].kind &&
             (applied = applyActions<kLanes[kI].kind>(w, e, a, m, rx_port, shape, true), true)) ||
            ...));
  }(std::make_index_sequence<std::size(kLanes)>{});
  return applied;
}

DPU_HOT_INLINE void EngineImpl::applyFlow(WorkerContext& w, const Snapshot& snap, uint32_t index, FlowEntry& e,
                                          const FlowActions& a, PacketContext& pc, bool tracked) {
  // The NAT step reads the L4 header, which the hit path's fast parse does not place.
  if (a.ops & op::kNat) completeParse(pc);
  const PacketShape shape{pc.parsed.l3, pc.parsed.l3_offset, pc.parsed.l4_offset,
                          static_cast<uint32_t>(pc.parsed.l3_end - pc.parsed.l3_offset)};
  switch (applyActions<kActionsGeneral>(w, e, a, pc.mbuf, pc.rx_port, shape, !tracked)) {
    case Applied::kTooBig:
      countHit(e, pc.mbuf);
      completeParse(pc);
      return tooBig(w, snap, a, pc);
    case Applied::kPunt:
      return punt(w, snap, index, pc);
    default:
      return;
  }
}

void EngineImpl::processBurst(WorkerContext& w, uint16_t rx_port, rte_mbuf** packets, uint16_t count) {
  // Acquire pairs with the control thread's release swap: the tables behind
  // the pointer are complete. The pointer is used only until quiescent().
  const Snapshot& snap = *current_.load(std::memory_order_acquire);
  w.now_ms = now();
  if (rx_port >= kMaxPorts) {
    bump(w.counters.drops[static_cast<size_t>(DropReason::kUnboundPort)], count);
    rte_pktmbuf_free_bulk(packets, count);
    return;
  }
  PortCounters& port_counters = w.counters.ports[rx_port];
  bump(port_counters.rx_packets, count);
  // What holds for the whole burst is decided once.
  const PortSlot& slot = snap.slots[rx_port];
  if (!snap.programmed || !slot.bound) {
    uint64_t rx_bytes = 0;
    for (uint16_t i = 0; i < count; ++i) rx_bytes += packets[i]->pkt_len;
    bump(port_counters.rx_bytes, rx_bytes);
    const DropReason reason = !snap.programmed ? DropReason::kNotProgrammed : DropReason::kUnboundPort;
    bump(w.counters.drops[static_cast<size_t>(reason)], count);
    bump(port_counters.rx_dropped, count);
    rte_pktmbuf_free_bulk(packets, count);
    return;
  }
  w.hits = 0;
  const bool uplink = slot.role == PortRole::kUplink;
  uint64_t rx_bytes;
  if (w.table.cacheResident()) {
    rx_bytes = uplink ? runBurst<true, false>(w, snap, rx_port, packets, count)
                      : runBurst<false, false>(w, snap, rx_port, packets, count);
  } else {
    rx_bytes = uplink ? runBurst<true, true>(w, snap, rx_port, packets, count)
                      : runBurst<false, true>(w, snap, rx_port, packets, count);
  }
  bump(port_counters.rx_bytes, rx_bytes);
  bump(w.counters.events[static_cast<size_t>(Event::kFlowHit)], w.hits);
}

// The burst loop, compiled once for the uplink (decapsulation, tunnel
// matches) and once for the other ports, so that neither tests the port's
// role per packet; and once each for a table that stays in the core's
// caches and one that does not (kLagged: the second prefetch below).
// Returns the bytes received.
template <bool kUplink, bool kLagged>
uint64_t EngineImpl::runBurst(WorkerContext& w, const Snapshot& snap, uint16_t rx_port, rte_mbuf** packets,
                              uint16_t count) {
  // Three passes over at most kBurst packets, so that the memory each needs
  // is fetched while the others are worked on (rte_hash's bulk lookup does
  // the same): parse + hash + prefetch the bucket and the preferred way's
  // entry; prefetch the other candidate entries (a flow not in its
  // preferred way: flow_cache.h); then look up and act.
  uint64_t rx_bytes = 0;
  const uint32_t stamp = snap.stamp;
  while (count > 0) {
    const uint16_t n = count < kBurst ? count : static_cast<uint16_t>(kBurst);
    w.burst_n = n;
    // The frames, all at once (a NIC's DMA leaves them out of the core's
    // caches), and the bytes, as the mbufs are read here anyway.
    for (uint16_t i = 0; i < n; ++i) {
      const rte_mbuf* m = packets[i];
      rx_bytes += m->pkt_len;
      rte_prefetch0(rte_pktmbuf_mtod(m, const void*));
    }
    uint32_t alive = 0;  // bit i: packet i takes the general path and is still ours
    // Ports other than the uplink: most packets take the fast lane
    // (LanePacket, laneParse, laneApply); the rest the general path. A lane
    // packet has its mbuf in w.lane[i], any other packet a null one there.
    unsigned lanes = 0;
    // A large table's other matching entries are prefetched kLag packets
    // behind the bucket and the preferred way (flow_cache.h), so the bucket
    // line has arrived by then and those entries by the third pass.
    constexpr uint16_t kLag = 6;
    FlowTable& table = w.table;
    // A lane packet has one segment; with the lanes off (EngineConfig::lanes)
    // none qualifies (no mbuf has 0): the test costs nothing more.
    const uint16_t lane_segs = config_.lanes ? 1 : 0;
    // The uplink: ESP for our tunnel IP first (authenticated, anti-replayed
    // and decrypted); then, what it carried as any frame, the uplink's lane:
    // an IPv4 Geneve frame for our tunnel IP around an inner packet the lane
    // takes (worker_parse.h: tunnelLaneParse), decapsulated here and looked
    // up with its tunnel folded into its key (laneApply). With IPsec on,
    // plaintext Geneve from a peer that must encrypt is refused on either
    // path.
    const bool tunnel_lane = kUplink && snap.tunnel_lane;
    const bool refuse_plaintext = kUplink && snap.ipsec && snap.any_inbound_sa;
    uint32_t tunnel_ip = 0;
    if (kUplink) std::memcpy(&tunnel_ip, snap.tunnel_ip.data(), 4);
    for (uint16_t i = 0; i < n; ++i) {
      if (kLagged && i >= kLag) prefetchEntries<kUplink>(w, i - kLag, alive);
      rte_mbuf* m = packets[i];
      bool decrypted = false;
      if constexpr (kUplink) {
        LanePacket& lp = w.lane[i];
        lp.mbuf = nullptr;
        // The lane first: it takes no ESP (its protocol is UDP to 6081),
        // and what it refuses is offered to isEsp only then (plain Geneve
        // pays no test for ESP, ESP the lane's first compares). ESP goes to
        // espReceive, which offers what it decrypted to the lane where it
        // lies (geneveLaneParse), and leaves what the lane does not take to
        // the general path.
        TunnelLanePacket t;
        bool lane = tunnel_lane && m->nb_segs == lane_segs &&
                    tunnelLaneParse(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, tunnel_ip,
                                    (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD,
                                    (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD,
                                    rx_port, lp.key, t);
        if (!lane && m->nb_segs == 1 && isEsp(m)) [[unlikely]] {
          // Its own lane fields: `t`, whose address is not taken, stays in registers.
          TunnelLanePacket et;
          const EspReceived received =
              espReceive(w, snap, m, rx_port, tunnel_lane && m->nb_segs == lane_segs, lp.key, et);
          if (received == EspReceived::kDropped) continue;
          decrypted = received == EspReceived::kDecrypted || received == EspReceived::kLane;
          lane = received == EspReceived::kLane;
          if (lane) t = et;
        }
        if (lane) [[likely]] {
          if (refuse_plaintext && !decrypted) [[unlikely]] {
            if (plaintextRefused(snap, lp.key.tunnelProbe())) {
              drop(w, m, rx_port, DropReason::kIpsecPlaintext);
              continue;
            }
          }
          // What ESP carried is there already (espReceive).
          if (!decrypted) m->data_off = static_cast<uint16_t>(m->data_off + kTunnelLaneOuterLen);
          m->data_len = t.inner_len;
          m->pkt_len = t.inner_len;
          lp.mbuf = m;
          lp.ip_len = t.ip_len;
          lp.hash = foldedHash(lp.key, hash_keys_);
          lp.slot = table.prefetchSlot(lp.hash);
          ++lanes;
          continue;
        }
      } else {
        LanePacket& lp = w.lane[i];
        if (m->nb_segs == lane_segs &&
            laneParse(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, rx_port, lp.key, lp.ip_len)) [[likely]] {
          lp.mbuf = m;
          lp.hash = compactHash(lp.key, hash_keys_, 0);
          lp.slot = table.prefetchSlot(lp.hash);
          ++lanes;
          continue;
        }
        lp.mbuf = nullptr;
      }
      PacketContext& pc = w.burst[i];
      if (!prepare(w, snap, m, rx_port, kUplink, decrypted, pc)) continue;
      pc.hash = kUplink ? flowHash(pc, hash_keys_) : packetHash(pc, hash_keys_, 0);
      pc.slot = table.prefetchSlot(pc.hash);
      const bool cold_tunnel = kUplink && pc.probe.family != 0 && !pc.ckey.folded();
      if (cold_tunnel || pc.long_key) table.prefetchColdOf(pc.slot, cold_tunnel, pc.long_key);
      alive |= 1u << i;
    }
    if constexpr (kLagged) {
      for (uint16_t i = n > kLag ? static_cast<uint16_t>(n - kLag) : 0; i < n; ++i) {
        prefetchEntries<kUplink>(w, i, alive);
      }
    }
    // In arrival order, lane or not: a flow's packets leave in the order they came.
    if (lanes == n) {
      // A large table: two packets ahead, the action record of the entry
      // each will check first (the entry's line has come in since the
      // passes above). A table the caches hold has its records there too.
      constexpr unsigned kAhead = 2;
      for (unsigned i = 0; i < n; ++i) {
        if (kLagged && i + kAhead < n) table.prefetchActionsOf(w.lane[i + kAhead].slot);
        laneApply<kUplink>(w, snap, stamp, rx_port, i);
      }
    } else {
      for (unsigned i = 0; i < n; ++i) {
        if (w.lane[i].mbuf != nullptr) {
          laneApply<kUplink>(w, snap, stamp, rx_port, i);
        } else if (alive & (1u << i)) {
          lookupAndApply<kUplink>(w, snap, w.burst[i]);
        }
      }
    }
    packets += n;
    count = static_cast<uint16_t>(count - n);
  }
  return rx_bytes;
}

DPU_HOT_INLINE bool EngineImpl::prepare(WorkerContext& w, const Snapshot& snap, rte_mbuf* m, uint16_t rx_port,
                                        bool uplink, bool decrypted, PacketContext& pc) {
  if (m->nb_segs != 1) return drop(w, m, rx_port, DropReason::kMultiSegment), false;

  pc.mbuf = m;
  pc.rx_port = rx_port;
  TunnelProbe& probe = pc.probe;
  probe.family = 0;
  uint32_t vni = 0;
  if (uplink) {
    // What the uplink's lane did not take (runBurst: ESP was received there).
    const bool check_plaintext = snap.ipsec && snap.any_inbound_sa && !decrypted;
    // North–south (north_south.h): with a host PF bound, a frame that is not
    // addressed to our tunnel IP is the fabric's: it is parsed as it is, for
    // the host or dropped by the slow path (slowPathFromFabric).
    if (snap.north_south.host_pf_port < 0 ||
        addressedTo(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, snap.tunnel_family, snap.tunnel_ip.data())) {
      overlay::PacketBuffer buf(static_cast<uint8_t*>(m->buf_addr), m->buf_len, m->data_off, m->data_len);
      overlay::GeneveDecapConfig cfg;
      cfg.ipv4_checksum_verified = (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
      cfg.udp_checksum_verified = (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
      overlay::GeneveHeaders& gh = w.geneve;
      const overlay::Status st = overlay::decapGeneve(buf, cfg, gh);
      if (st != overlay::Status::kOk) return drop(w, m, rx_port, toDropReason(st)), false;
      const uint8_t family = gh.family == overlay::UnderlayFamily::kIpv4 ? 4 : 6;
      if (!snap.has_tunnel_ip || family != snap.tunnel_family || gh.dst_ip != snap.tunnel_ip) {
        return drop(w, m, rx_port, DropReason::kWrongTunnelDestination), false;
      }
      if (gh.oam) return drop(w, m, rx_port, DropReason::kGeneveOam), false;
      if (!gh.ovn) return drop(w, m, rx_port, DropReason::kGeneveNoOvnOption), false;
      probe.family = family;
      probe.remote = gh.src_ip;
      if (check_plaintext && plaintextRefused(snap, probe)) [[unlikely]] {
        return drop(w, m, rx_port, DropReason::kIpsecPlaintext), false;
      }
      probe.ingress = gh.ovn->ingress;
      probe.egress = gh.ovn->egress;
      vni = gh.vni;
      pc.decap_len = static_cast<uint8_t>(gh.inner_offset);
      m->data_off = static_cast<uint16_t>(buf.headroom());
      m->data_len = static_cast<uint16_t>(buf.size());
      m->pkt_len = buf.size();
    } else {
      // The probe is matched whole on the uplink (flow_cache.h): no tunnel, no
      // fields left from the burst's previous packet.
      probe.remote = {};
      probe.ingress = 0;
      probe.egress = 0;
      pc.decap_len = 0;
    }
  }
  const std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  pc.parsed_full = !fastParse<false>(frame, pc.parsed, pc.key, pc.ckey, pc.long_key, rx_port, vni);
  if (pc.parsed_full) {
    const overlay::Status st = overlay::parsePacket(frame, pc.parsed);
    if (st != overlay::Status::kOk) return drop(w, m, rx_port, toDropReason(st)), false;
    // Constructed in place (guaranteed copy elision): a copy of the returned
    // key stalls on store forwarding.
    new (&pc.key) overlay::FlowKey(overlay::extractFlowKey(frame, pc.parsed, rx_port, vni));
    pc.ckey = CompactKey::from(pc.key, pc.long_key);
  }
  // An IPv4 tunnel's packet with a key that takes the fold carries its
  // tunnel in it, as the lane's and the installed flow's do (flow_cache.h).
  if (probe.family == 4 && !pc.long_key) pc.ckey.tryFoldTunnel4(probe.remote, probe.ingress, probe.egress);
  return true;
}

void EngineImpl::completeParse(PacketContext& pc) {
  if (pc.parsed_full) return;
  pc.parsed_full = true;
  // The frame is as the fast parse saw it (the actions have not run), so the
  // full fast parse takes it too and writes the same key.
  rte_mbuf* m = pc.mbuf;
  const std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  // The compact key's first word is in_port | tunnel_id << 32 (with the
  // egress key beside the port when the tunnel is folded: the port is
  // rx_port). The compact key it writes is the unfolded one: the lookup's
  // is kept.
  const CompactKey looked_up = pc.ckey;
  (void)fastParse<true>(frame, pc.parsed, pc.key, pc.ckey, pc.long_key, pc.rx_port,
                        static_cast<uint32_t>(pc.ckey.w[0] >> 32));
  pc.ckey = looked_up;
}

namespace {
// The flow cache's callbacks for action records (flow_cache.h): still
// valid under the snapshot, and the snapshot's encap template they use.
struct ActionsValid {
  const Snapshot& snap;
  bool operator()(const FlowActions& a) const { return snap.depsValid(a.stamp, a.dep_in, a.dep_out, a.dep_nat); }
};
struct ActionsResolve {
  const Snapshot& snap;
  bool lanes;  // EngineConfig::lanes
  void operator()(FlowActions& a) const {
    a.encap = nullptr;
    a.hop_known = 0;
    a.encap_sum = 0;
    a.kind = kActionsGeneral;
    if (a.ops & op::kEncap) {
      const SnapRemoteNode* node = snap.remoteByDep(a.dep_out);
      if (node != nullptr && a.encap_subnet < node->subnets.size()) {
        a.encap = &node->subnets[a.encap_subnet].encap;
        a.hop_known = node->next_hop_known;
        if (!a.encap->ipv6) a.encap_sum = static_cast<uint16_t>(a.encap->ipv4_sum);
      }
    }
    if (!lanes) return;
    for (const Lane& lane : kLanes) {
      if (lane.ops != a.ops) continue;
      // An unresolved next hop takes the general routine, which counts it.
      if (lane.encap == LaneEncap::kFixedIpv4 &&
          !(a.encap != nullptr && a.hop_known && !a.encap->ipv6 && a.encap->length == kEncap4Length &&
            a.encap->udp_offset == kEncap4Udp && a.encap->ovn_offset == kEncap4Ovn)) {
        continue;
      }
      a.kind = lane.kind;
      return;
    }
  }
};
}  // namespace

bool EngineImpl::revalidate(WorkerContext& w, const Snapshot& snap, uint32_t index, FlowActions& a) {
  if (FlowTable::revalidate(a, snap.stamp, ActionsValid{snap}, ActionsResolve{snap, config_.lanes})) return true;
  w.table.remove(index);
  bump(w.counters.events[static_cast<size_t>(Event::kFlowInvalidated)]);
  return false;
}

// The lagged prefetch of a burst's packet i (a large table): the entries
// whose signature matches, and the one to check first.
template <bool kUplink>
DPU_HOT_INLINE void EngineImpl::prefetchEntries(WorkerContext& w, unsigned i, uint32_t alive) {
  LanePacket& lp = w.lane[i];
  if (lp.mbuf != nullptr) {
    // The uplink's lane too: its tunnel is in its key.
    lp.slot = w.table.prefetchMatches(lp.hash, false, false);
    return;
  }
  if (!(alive & (1u << i))) return;
  PacketContext& pc = w.burst[i];
  pc.slot = w.table.prefetchMatches(pc.hash, kUplink && pc.probe.family != 0 && !pc.ckey.folded(), pc.long_key);
}

// A lane packet as the general path has it (for its rarer actions, a miss,
// or an ICMP reply): the fields fastParse<false> gives an IPv4 packet, and
// for the uplink's lane those prepare gives a packet its lane decapsulated.
template <bool kUplink>
PacketContext& EngineImpl::laneContext(WorkerContext& w, uint16_t rx_port, unsigned i) {
  const LanePacket& lp = w.lane[i];
  PacketContext& pc = w.burst[i];
  pc.mbuf = lp.mbuf;
  pc.hash = lp.hash;
  pc.slot = lp.slot;
  pc.ckey = lp.key;
  pc.long_key = false;
  pc.parsed_full = false;
  pc.parsed.l3 = overlay::L3Type::kIpv4;
  pc.parsed.l3_offset = overlay::eth::kHeaderLen;
  pc.parsed.l3_end = static_cast<uint16_t>(overlay::eth::kHeaderLen + lp.ip_len);
  pc.rx_port = rx_port;
  if constexpr (kUplink) {
    pc.probe = lp.key.tunnelProbe();
    pc.decap_len = static_cast<uint8_t>(kTunnelLaneOuterLen);
  } else {
    pc.probe.family = 0;
    pc.decap_len = 0;
  }
  return pc;
}

template <bool kUplink>
DPU_HOT_INLINE void EngineImpl::laneApply(WorkerContext& w, const Snapshot& snap, uint32_t stamp, uint16_t rx_port,
                                          unsigned i) {
  FlowTable& table = w.table;
  const LanePacket& lp = w.lane[i];
  uint32_t index = lp.slot;
  // The uplink's lane has its tunnel folded into its key: one compare for
  // either lane. Not in its preferred way (about one flow in six): the
  // bucket's others; the general path's context only for a miss.
  if (!table.compactHit(index, lp.key)) [[unlikely]] {
    index = table.scanCompact(lp.hash, index, lp.key);
    if (index == UINT32_MAX) return missPath(w, snap, laneContext<kUplink>(w, rx_port, i));
  }
  FlowEntry& e = table.entry(index);
  FlowActions& a = table.compactActionsOf(e);
  if (a.stamp != stamp && !revalidate(w, snap, index, a)) [[unlikely]] {
    return missPath(w, snap, laneContext<kUplink>(w, rx_port, i));
  }
  FlowTable::touch(e, static_cast<uint32_t>(w.now_ms));
  ++w.hits;
  const PacketShape shape{overlay::L3Type::kIpv4, overlay::eth::kHeaderLen, overlay::eth::kHeaderLen + 20,
                          lp.ip_len};
  switch (applyLane<kUplink>(w, e, a, lp.mbuf, rx_port, true, shape)) {
    case Applied::kDone:
      return;
    case Applied::kPunt:
      return punt(w, snap, index, laneContext<kUplink>(w, rx_port, i));
    default:
      return applyFlow(w, snap, index, e, a, laneContext<kUplink>(w, rx_port, i), false);
  }
}

template <bool kUplink>
DPU_HOT_INLINE void EngineImpl::lookupAndApply(WorkerContext& w, const Snapshot& snap, PacketContext& pc) {
  FlowTable& table = w.table;
  // No "same flow as the previous packet" shortcut: with many flows it never
  // pays for its compares, and with one flow the lookup below hits lines
  // already in L1.
  const uint32_t index = table.lookupFrom<kUplink>(pc.hash, pc.slot, pc.ckey, pc.long_key, pc.key, pc.probe);
  if (index != UINT32_MAX) [[likely]] {
    FlowEntry& e = table.entry(index);
    FlowActions& a = table.actionsOf(e);
    if (a.stamp == snap.stamp || revalidate(w, snap, index, a)) [[likely]] {
      // In the line the statistics below write anyway.
      FlowTable::touch(e, static_cast<uint32_t>(w.now_ms));
      ++w.hits;  // summed into the counter once per burst
      // A packet the fast parse took as IPv4 (untagged, no options: its
      // header at 14) takes any lane; others only the lanes of any shape.
      const overlay::ParsedPacket& p = pc.parsed;
      const PacketShape shape{p.l3, p.l3_offset, p.l4_offset, static_cast<uint32_t>(p.l3_end - p.l3_offset)};
      switch (applyLane<kUplink>(w, e, a, pc.mbuf, pc.rx_port, !pc.parsed_full && !pc.long_key, shape)) {
        case Applied::kDone:
          return;
        case Applied::kPunt:
          return punt(w, snap, index, pc);
        default:
          return applyFlow(w, snap, index, e, a, pc, false);
      }
    }
  }
  missPath(w, snap, pc);
}

void EngineImpl::prefetchNextConnection(WorkerContext& w, const Snapshot& snap, const PacketContext& pc) const {
  const auto at = reinterpret_cast<uintptr_t>(&pc), first = reinterpret_cast<uintptr_t>(&w.burst[0]);
  if (at < first || at >= first + sizeof w.burst) return;  // not a burst packet
  const size_t next = (at - first) / sizeof(PacketContext) + 1;
  // A lane packet: an IPv4 TCP or UDP packet, its key compact.
  if (next >= w.burst_n || w.lane[next].mbuf == nullptr) return;
  const conntrack::Tuple t = connectionTuple(w.lane[next].key.expand(), false);
  conntrack_->prefetch(t);
  // To a service: the backend Maglev gives it, and the bucket its reply
  // tuple will be linked into (the insert's other miss).
  const SnapFrontend* fe = snap.frontend(t.dst.data(), false, t.dst_port, t.protocol);
  if (fe == nullptr) return;
  const SnapBackend* backend = fe->maglevPick(t.src.data(), t.dst.data(), 4, t.src_port, t.dst_port, t.protocol);
  if (backend == nullptr) return;
  w.next_pick = {&snap, fe, t, backend};
  conntrack::Tuple reply;
  reply.family = 4;
  reply.protocol = t.protocol;
  reply.src = backend->ip;
  reply.src_port = backend->port;
  reply.dst = t.src;
  reply.dst_port = t.src_port;
  conntrack_->prefetch(reply);
}

[[gnu::noinline]] void EngineImpl::missPath(WorkerContext& w, const Snapshot& snap, PacketContext& pc) {
  w.pick = w.next_pick;  // made for this packet while the previous one's miss was decided, if it was
  w.next_pick.snap = nullptr;
  prefetchNextConnection(w, snap, pc);
  // The budget first: a miss over it costs a drop, not a slow path (miss_budget.h).
  const MissBudget::Admission admission =
      w.miss.admit(pc.rx_port, readCounter(w.counters.events[static_cast<size_t>(Event::kFlowHit)]));
  if (admission == MissBudget::Admission::kDrop) {
    bump(w.counters.ports[pc.rx_port].miss_budget_dropped);
    return drop(w, pc.mbuf, pc.rx_port, DropReason::kMissBudget);
  }
  // While other traffic waits, the run is charged what it costs, however it ends.
  struct Charge {
    const EngineImpl& engine;
    MissBudget& budget;
    const bool timed;
    const uint64_t start = timed ? engine.cycles() : 0;
    ~Charge() {
      if (timed) budget.charge(engine.cycles() - start);
    }
  } charge{*this, w.miss, admission == MissBudget::Admission::kRunTimed};
  FlowTable& table = w.table;
  const uint32_t now32 = static_cast<uint32_t>(w.now_ms);
  completeParse(pc);
  // Miss: the logical pipeline decides, on this lcore.
  bump(w.counters.events[static_cast<size_t>(Event::kFlowMiss)]);
  FlowRecord& candidate = w.candidate;
  std::memset(static_cast<void*>(&candidate), 0, sizeof candidate);
  candidate.key = pc.key;
  candidate.tun_family = pc.probe.family;
  if (pc.probe.family != 0) {
    candidate.tun_remote = pc.probe.remote;
    candidate.tun_ingress = pc.probe.ingress;
    candidate.tun_egress = pc.probe.egress;
    candidate.decap_len = pc.decap_len;
  }
  candidate.stamp = snap.stamp;
  candidate.dep_in = kDepNode;
  candidate.dep_out = kDepNode;
  w.related = false;
  w.policy_tracked = false;
  Decision d = slowPath(w, snap, pc, candidate);
  if (w.related && d.kind == Decision::kFlow) d.kind = Decision::kOnce;
  candidate.tracked = w.policy_tracked && !(candidate.ops & op::kNat);
  if (d.kind == Decision::kSent) return;
  if (d.kind == Decision::kReplied) {
    rte_pktmbuf_free(pc.mbuf);
    return;
  }
  if (d.kind == Decision::kDrop) return drop(w, pc.mbuf, pc.rx_port, d.reason);

  uint32_t index = UINT32_MAX;
  if (d.kind == Decision::kFlow) [[likely]] {
    bool evicted = false;
    candidate.created_s = static_cast<uint32_t>(w.now_ms / 1000);
    index = table.insert(pc.hash, candidate, now32, evicted, ActionsValid{snap}, ActionsResolve{snap, config_.lanes});
    if (evicted) bump(w.counters.events[static_cast<size_t>(Event::kFlowEvicted)]);
    // Every action record is in use: this packet is forwarded as decided,
    // and the next one of the flow runs the slow path again.
    if (index == UINT32_MAX) [[unlikely]] bump(w.counters.events[static_cast<size_t>(Event::kFlowNotCached)]);
    // The connection's entry learns where its flow is. Gone meanwhile
    // (another core's new connection took its place: conntrack.h, early
    // drop), the flow would translate for no entry: it goes, and this
    // packet is forwarded as decided.
    if (index != UINT32_MAX && ((candidate.ops & op::kNat) || w.policy_tracked) &&
        !noteConnectionFlow(w, pc, index)) [[unlikely]] {
      table.remove(index);
      index = UINT32_MAX;
    }
  }
  if (index == UINT32_MAX) [[unlikely]] {
    // A decision for this packet only (kOnce), or no room to cache it.
    FlowActions& a = w.uncached_actions;
    a = FlowActions::from(candidate);
    ActionsResolve{snap, config_.lanes}(a);
    FlowEntry& e = w.uncached;
    std::memset(static_cast<void*>(&e), 0, sizeof e);
    e.setPacketsSport(0, candidate.encap_sport);
    return applyFlow(w, snap, UINT32_MAX, e, a, pc, true);
  }
  bump(w.counters.events[static_cast<size_t>(Event::kFlowInstalled)]);
  if (config_.offload != nullptr) {
    if (!w.offload_ring.push(uint64_t{index} << 32 | table.extra(index).flow_id)) {
      bump(w.counters.events[static_cast<size_t>(Event::kOffloadQueueFull)]);
    }
  }
  FlowEntry& e = table.entry(index);
  applyFlow(w, snap, index, e, table.actionsOf(e), pc, true);
}

// Out of line: a rare packet (services.cpp says what punting is for).
[[gnu::noinline]] void EngineImpl::punt(WorkerContext& w, const Snapshot& snap, uint32_t index, PacketContext& pc) {
  completeParse(pc);
  bump(w.counters.events[static_cast<size_t>(Event::kConntrackPunt)]);
  FlowTable& table = w.table;
  const bool v6 = pc.parsed.l3 == overlay::L3Type::kIpv6;
  const conntrack::Tuple t = connectionTuple(pc.key, v6);
  const uint8_t flags = tcpFlagsOf(pc);
  conntrack::Entry before;
  const auto found = conntrack_->find(t, &before);
  const bool reopen = found && found->dir == conntrack::Dir::kOriginal &&
                      (flags & (conntrack::kTcpSyn | conntrack::kTcpAck)) == conntrack::kTcpSyn &&
                      (before.state == conntrack::State::kTimeWait || before.state == conntrack::State::kClose);
  if (!found || reopen) {
    // Gone (expired, flushed) or reused by a new connection: decided anew.
    table.remove(index);
    bump(w.counters.events[static_cast<size_t>(Event::kConntrackClosed)]);
    return missPath(w, snap, pc);
  }
  conntrack::Entry after;
  (void)conntrack_->track(t, flags, w.now_ms, &after);
  FlowEntry& e = table.entry(index);
  const FlowActions& a = table.actionsOf(e);
  // Forwarded as the flow says; a reset connection then loses its flow, so
  // whatever follows on that 5-tuple is decided again.
  applyFlow(w, snap, index, e, a, pc, true);
  if (after.state == conntrack::State::kClose) {
    table.remove(index);
    bump(w.counters.events[static_cast<size_t>(Event::kConntrackClosed)]);
  }
}

void EngineImpl::quiescent(WorkerContext& w) {
  w.last_inbound_sa.snap = nullptr;  // the snapshots they point into may be retired after this
  w.pick.snap = nullptr;
  w.next_pick.snap = nullptr;
  // The end of a poll iteration: the slow-path budget's accounts (miss_budget.h).
  w.miss.endIteration(w.miss.needsTime() ? cycles() : MissBudget::kNoTime,
                      readCounter(w.counters.events[static_cast<size_t>(Event::kFlowHit)]));
  // The aging sweep reads the current snapshot too, before the report.
  if ((++w.quiescent_calls & 15) == 0 || config_.clock_ms != nullptr) {
    const uint64_t t = now();
    if (t != w.last_sweep_ms) {
      const uint64_t elapsed = t - w.last_sweep_ms;
      w.last_sweep_ms = t;
      w.now_ms = t;
      // The whole table every quarter of the idle timeout.
      const uint64_t buckets = w.table.bucketCount();
      uint64_t n = elapsed * buckets * 4 / config_.flow_idle_timeout_ms;
      if (n == 0) n = 1;
      if (n > buckets) n = buckets;
      sweep(w, *current_.load(std::memory_order_acquire), static_cast<uint32_t>(n));
    }
  }
  w.quiescent_epoch.store(epoch_.load(std::memory_order_acquire), std::memory_order_release);
}

void EngineImpl::sweep(WorkerContext& w, const Snapshot& snap, uint32_t buckets) {
  FlowTable& table = w.table;
  const uint32_t now32 = static_cast<uint32_t>(w.now_ms);
  const uint32_t mask = table.bucketCount() - 1;
  for (uint32_t i = 0; i < buckets; ++i) {
    const uint32_t b = w.sweep_cursor;
    w.sweep_cursor = (w.sweep_cursor + 1) & mask;
    FlowBucket& bk = table.bucket(b);
    for (unsigned way = 0; way < FlowBucket::kWays; ++way) {
      if (bk.sig[way] == 0) continue;
      const uint32_t index = b * FlowBucket::kWays + way;
      const FlowEntry& e = table.entry(index);
      uint32_t idle = now32 - __atomic_load_n(&e.used_ms, __ATOMIC_RELAXED);
      if (!w.offload.empty()) {
        const OffloadSlot& s = w.offload[index];
        if (__atomic_load_n(&s.flow_id, __ATOMIC_RELAXED) == table.extra(index).flow_id &&
            __atomic_load_n(&s.state, __ATOMIC_RELAXED) == OffloadSlot::kInHw) {
          const uint32_t hw_idle = now32 - __atomic_load_n(&s.hw_used_ms, __ATOMIC_RELAXED);
          if (hw_idle < idle) idle = hw_idle;
        }
      }
      if (idle > config_.flow_idle_timeout_ms) {
        table.remove(index);
        bump(w.counters.events[static_cast<size_t>(Event::kFlowAged)]);
      } else if (const FlowActions& a = table.actionsOf(e);
                 a.stamp != snap.stamp && !snap.depsValid(a.stamp, a.dep_in, a.dep_out, a.dep_nat)) {
        table.remove(index);
        bump(w.counters.events[static_cast<size_t>(Event::kFlowInvalidated)]);
      }
    }
  }
}

}  // namespace dpu::datapath
