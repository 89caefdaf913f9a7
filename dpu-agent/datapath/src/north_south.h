// North–south: the node's own traffic, which on a BlueField crosses the DPU
// through the host PF's representor (pf0hpf, the engine's kHostPf port; the
// node IP lives on the host PF). The dataplane bridges it between that port
// and the uplink, untouched, except what the cluster network owns (the
// services work adds NodePort/externalIP load balancing and SNAT of pod
// traffic leaving the cluster on top of this):
//  - host PF → uplink: every frame whose source is a host MAC leaves on the
//    uplink as it came (a cached flow, plain Output);
//  - uplink → host PF: a frame that is not for our tunnel address and is
//    unicast to a host MAC (a cached flow, plain Output), or an ARP or IPv6
//    neighbour solicitation for a node IP, broadcast included (forwarded by
//    the slow path each time, so that every one is learned from).
//
// The host's MACs are learned, as a bridge learns them, from the source MAC
// of frames arriving on the host PF port, not configured: the host PF's MAC is
// the host's to set (bonding, macvlan, a VM bridge on it use more than one),
// the DPU cannot read it from the host, and a MAC learned from frames that
// only the host PF can send is exactly the set the fabric must deliver there.
// What the host may not claim is refused (HostMacRefused): multicast and zero
// MACs, the router MAC, a pod port's MAC, the uplink's. The table is bounded
// (EngineConfig::max_host_macs, HostMacTableFull beyond it), aged
// (host_mac_ageing_ms without a frame in the slow path and without a used
// cached flow from it: a long transfer keeps its MAC) and counted
// (HostMacLearned, HostMacAged; dpuctl neighbours lists them). A dataplane
// restart forgets them until the host sends again (its ARP, any new flow).
//
// Neighbours on the node network (what the services work's SNAT needs: the
// MAC of the gateway, or of an on-link destination) are learned from the ARP
// and IPv6 neighbour discovery the dataplane sees: replies and requests to a
// node IP from an on-link sender (added), and any other ARP or advertisement
// from a known neighbour (updated, as Linux updates an entry from a
// gratuitous ARP). An address needed and not known is asked for with an ARP
// request (IPv6: a solicitation to its solicited-node group) from the node
// IP and the host's MAC for it (rate-limited per worker and address); the
// reply comes to the host's MAC, is bridged to the host, and is learned on
// the way. Entries are bounded (the least recently confirmed evicted) and
// never expire: one not confirmed for neighbour_stale_ms is still used, and
// probed (a unicast request or solicitation) when a new flow uses it. Which
// host MAC holds a node IP comes from the host's own ARP and neighbour
// discovery, or from asking it (an ARP probe; a solicitation from ::).
//
// Lcores learn nothing themselves: they push observations on a per-worker
// single-producer ring, and the control thread (northSouthUpdate, woken by an
// eventfd when something new arrives, and from maintain()) keeps the tables
// and publishes them in the next snapshot. A neighbour's entry has a
// dependency id (snapshot.h) whose version changes with its MAC and with the
// node address and host MAC it is reached from, so a flow that recorded it
// is retired when any of them changes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/net_address.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"

namespace dpu::datapath {

// Whether an Ethernet frame (up to two VLAN tags) carries an IP packet to
// `ip` (family 4: its first 4 bytes, else 16): the uplink's test of "our
// tunnel traffic" (prepare). With a host PF, everything else on the uplink
// is the fabric's.
inline bool addressedTo(const uint8_t* frame, uint32_t len, uint8_t family, const uint8_t* ip) {
  uint32_t off = 12;
  if (len < off + 2) return false;
  uint16_t type = overlay::load16(frame + off);
  for (unsigned tags = 0; tags < overlay::vlan::kMaxTags && overlay::vlan::isTpid(type); ++tags) {
    off += overlay::vlan::kTagLen;
    if (len < off + 2) return false;
    type = overlay::load16(frame + off);
  }
  off += 2;
  if (family == 4) {
    return type == overlay::eth::kTypeIpv4 && len >= off + 20 && std::memcmp(frame + off + 16, ip, 4) == 0;
  }
  return type == overlay::eth::kTypeIpv6 && len >= off + 40 && std::memcmp(frame + off + 24, ip, 16) == 0;
}

// A MAC as a 48-bit integer (sorted tables, hashing).
inline uint64_t macKey(const overlay::MacAddress& m) {
  uint64_t k = 0;
  for (uint8_t b : m) k = k << 8 | b;
  return k;
}

// An address of either family as the tables key it.
struct IpAddressHash {
  size_t operator()(const IpAddress& a) const {
    uint64_t lo, hi;
    std::memcpy(&lo, a.bytes.data(), 8);
    std::memcpy(&hi, a.bytes.data() + 8, 8);
    // Every output bit depends on every input bit (a multiply alone leaves
    // the low bits to the first byte's): the low bits pick a slot.
    uint64_t x = lo * 0x9e3779b97f4a7c15ull ^ hi * 0xc2b2ae3d27d4eb4full ^ uint64_t(a.family);
    x ^= x >> 32;
    x *= 0xff51afd7ed558ccdull;
    return static_cast<size_t>(x ^ x >> 29);
  }
};

// The address at `a` (4 or 16 bytes, network order).
inline IpAddress ipAt(const uint8_t* a, bool v6) {
  IpAddress ip;
  ip.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
  std::memcpy(ip.bytes.data(), a, v6 ? 16 : 4);
  return ip;
}

// A node IP of either family.
struct SnapNodeIp {
  IpAddress ip;
  uint8_t length = 0;  // its prefix
  bool has_mac = false;
  overlay::MacAddress mac{};  // the host's MAC for it (its ARP or ND, or the only host MAC)
  bool v6() const { return !ip.isV4(); }
  // Whether `a` (of the node IP's family) is on its prefix.
  bool onLink(const uint8_t* a) const {
    unsigned bits = length;
    const uint8_t* n = ip.bytes.data();
    for (; bits >= 8; bits -= 8, ++a, ++n)
      if (*a != *n) return false;
    return bits == 0 || ((*a ^ *n) & static_cast<uint8_t>(0xff00u >> bits)) == 0;
  }
};

struct SnapNeighbour {
  IpAddress ip;
  overlay::MacAddress mac{};
  uint32_t dep = 0;             // what a flow using it records (snapshot.h)
  uint64_t confirmed_ms = 0;    // engine clock: the last ARP or ND from it
};

// The north–south part of a Snapshot (immutable once published).
struct SnapNorthSouth {
  int32_t host_pf_port = -1;  // the bound kHostPf port; -1: none, the uplink carries only tunnel traffic
  uint32_t dep = 0;           // the bridging flows' dependency: host PF binding, node addresses, host MACs
  std::vector<SnapNodeIp> node_ips;
  bool has_gw[2] = {};        // by family: [0] IPv4, [1] IPv6
  IpAddress gw[2];
  std::vector<uint64_t> host_macs;     // sorted macKey()s
  std::vector<uint64_t> refused_macs;  // sorted: what the host may not claim (router, pods, uplink)
  uint32_t max_host_macs = 0;
  uint64_t stale_ms = 0;
  std::unordered_map<IpAddress, SnapNeighbour, IpAddressHash> neighbours;

  bool isHostMac(const overlay::MacAddress& m) const;
  bool refusedMac(const overlay::MacAddress& m) const;
  bool hasNodeIp(bool v6) const;
  const SnapNodeIp* nodeIp(const uint8_t* a, bool v6) const;
  // The node IP whose prefix holds `a` (on-link on the node network), or nullptr.
  const SnapNodeIp* onLink(const uint8_t* a, bool v6) const;
  const IpAddress* gateway(bool v6) const { return has_gw[v6] ? &gw[v6] : nullptr; }
  const SnapNeighbour* neighbour(const IpAddress& ip) const {
    auto it = neighbours.find(ip);
    return it == neighbours.end() ? nullptr : &it->second;
  }
};

// How a packet from a node IP leaves through the uplink towards a
// destination off the cluster (EngineImpl::northSouthRoute): the services
// work's SNAT builds its flow from this.
struct NorthSouthRoute {
  IpAddress next_hop;                 // the gateway, or the destination itself when on-link
  IpAddress node_ip;                  // the node IP on the next hop's network: the SNAT source
  overlay::MacAddress host_mac{};     // the host's MAC for that node IP: the Ethernet source
  overlay::MacAddress next_hop_mac{}; // the Ethernet destination
  uint16_t out_port = 0;              // the uplink
  uint32_t dep = 0;                   // record it in the flow (dep_in or dep_out): it changes with any of the above
};

// What an lcore reports to the control thread.
struct NorthSouthObservation {
  enum Kind : uint8_t {
    kHostMac,      // a frame from `mac` on the host PF
    kNodeIpClaim,  // the host's ARP or ND says node IP `ip` is at `mac`
    kNeighbour,    // an ARP or ND from `ip` at `mac` (source: how it was seen)
    kWanted,       // `ip` was needed and is not known (an ARP request or solicitation went out when `requested`)
    kProbed,       // a stale `ip` was probed
  };
  enum Source : uint8_t { kReplyToHost, kRequestToHost, kOtherArp };
  uint8_t kind = kHostMac;
  uint8_t source = 0;
  uint8_t requested = 0;
  uint8_t v6 = 0;  // the family of `ip`
  overlay::MacAddress mac{};
  uint8_t pad[6] = {};
  std::array<uint8_t, 16> ip{};  // network order (IPv4: the first 4 bytes)

  IpAddress address() const { return ipAt(ip.data(), v6 != 0); }
  void setAddress(const IpAddress& a) {
    v6 = !a.isV4();
    ip = a.bytes;
  }
};
static_assert(sizeof(NorthSouthObservation) == 32);

// One lcore's north–south state (WorkerContext::north_south).
struct NorthSouthWorker {
  static constexpr uint32_t kRing = 1024;  // observations between two drains
  // Single producer (the lcore), single consumer (the control thread).
  std::unique_ptr<NorthSouthObservation[]> ring{new NorthSouthObservation[kRing]};
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  // 1 once the lcore signalled the engine's eventfd; the control thread
  // clears it before it drains, so one signal covers a burst of news.
  alignas(64) std::atomic<uint32_t> wake{0};

  // ARP requests this worker sent, by address (direct-mapped), and in the
  // current second overall: at most one per address per second, and
  // kArpPerSecond in all, so a flood of new destinations cannot turn the
  // dataplane into an ARP storm.
  static constexpr uint32_t kArpPerSecond = 64;
  struct Asked {
    IpAddress ip;
    bool sent = false;  // a request went out (else it was only reported wanted)
    uint64_t ms = 0;
  };
  Asked asked[64];
  uint64_t arp_window_ms = 0;
  uint32_t arp_in_window = 0;
  // Host MACs reported in the last second (direct-mapped): a busy host's new
  // flows do not fill the ring with the same news.
  struct Seen {
    uint64_t mac = UINT64_MAX;
    uint64_t ms = 0;
  };
  Seen seen[16];

  bool push(const NorthSouthObservation& o) {
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (h - tail.load(std::memory_order_acquire) >= kRing) return false;
    ring[h % kRing] = o;
    head.store(h + 1, std::memory_order_release);
    return true;
  }
  bool pop(NorthSouthObservation& o) {
    const uint64_t t = tail.load(std::memory_order_relaxed);
    if (t == head.load(std::memory_order_acquire)) return false;
    o = ring[t % kRing];
    tail.store(t + 1, std::memory_order_release);
    return true;
  }
};

// The control thread's tables, from which each snapshot's SnapNorthSouth is built.
struct NorthSouthTables {
  struct HostMac {
    uint64_t learned_ms = 0;
    uint64_t seen_ms = 0;
    std::set<IpAddress> node_ips;  // claimed in its ARP or ND
  };
  struct Neighbour {
    bool complete = false;          // false: asked for, no answer yet
    MacAddress mac;
    uint64_t learned_ms = 0;
    uint64_t confirmed_ms = 0;      // complete: the last ARP or ND from it; else the first request
    uint64_t requests = 0;          // ARP requests or solicitations sent for it (and probes)
    uint64_t wanted_ms = 0;         // last time a flow needed it
    std::string learned_from;
  };
  std::map<MacAddress, HostMac> host_macs;
  std::map<IpAddress, Neighbour> neighbours;
  std::map<IpAddress, MacAddress> node_ip_owner;
  uint32_t max_host_macs = 16;
  uint64_t host_mac_ageing_ms = 300000;
  uint32_t max_neighbours = 1024;
  uint64_t stale_ms = 60000;
};

}  // namespace dpu::datapath
