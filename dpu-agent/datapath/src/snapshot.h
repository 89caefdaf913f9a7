// Snapshot: the immutable forwarding tables the lcores read, built on the
// control thread from the validated model, the port bindings and the tunnel
// next hops, and published by an atomic pointer swap (engine.h, RCU).
//
// Dependency versions: every model object a flow decision can read has a
// stable id (ports and remote nodes by name, plus two global objects) and a
// version taken from one counter whenever its content changes. A snapshot's
// stamp is that counter after the build. A flow installed under stamp S is
// valid in a later snapshot exactly when none of the objects it used has a
// version above S; a deleted object's version is kVersionDeleted. Flows that
// read nothing that changed keep forwarding, untouched, across a resync.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "counters.h"
#include "datapath/engine.h"
#include "ipsec_sas.h"
#include "lb/maglev.h"
#include "model/model.h"
#include "model/policy_match.h"
#include "north_south.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"

namespace dpu::datapath {

// The validated model in force (dpu-agent/model): what a snapshot is built from.
using model::kMaxDatapathKey;
using model::kMaxPortKey;
using model::kRouterEgressPortKey;
using model::Model;
using model::ModelPort;
using model::ModelRemoteNode;
using model::ModelSubnet;

inline constexpr uint32_t kDepNode = 0;     // node settings, local subnets, the uplink binding
inline constexpr uint32_t kDepRouting = 1;  // which destinations exist: for "no route" style drops
inline constexpr uint32_t kDepServices = 2;  // which service addresses and ports exist: drops and refusals of them
inline constexpr uint32_t kVersionDeleted = UINT32_MAX;

using Ip16 = std::array<uint8_t, 16>;  // IPv4 in the first 4 bytes
struct Ip16Hash {
  size_t operator()(const Ip16& a) const {
    uint64_t lo, hi;
    __builtin_memcpy(&lo, a.data(), 8);
    __builtin_memcpy(&hi, a.data() + 8, 8);
    uint64_t h = (lo ^ (hi * 0x9e3779b97f4a7c15ull)) * 0xc2b2ae3d27d4eb4full;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
// Equality inline (overlay/bytes.h): std::array's == is a call of libc's
// memcmp, paid on every lookup of the maps a packet's address indexes.
inline bool sameIp16(const Ip16& a, const Ip16& b) { return overlay::sameAddress(a.data(), b.data(), true); }
struct Ip16Eq {
  bool operator()(const Ip16& a, const Ip16& b) const { return sameIp16(a, b); }
};
inline Ip16 toIp16(const IpAddress& a) {
  Ip16 out{};
  for (size_t i = 0; i < a.size(); ++i) out[i] = a.bytes[i];
  return out;
}

// NetworkPolicy (policy.cpp). A policy name is known to the lcores by its
// index in the engine's PolicyNames, which only grows, so an index means the
// same policy in every snapshot; flows and the per-policy drop counters keep
// indexes. The first indexes are not policies: what let a flow through when
// no rule had to.
static_assert(kMaxPolicyNames <= 4096, "a flow keeps a policy index in 12 bits");
inline constexpr uint16_t kAllowedNone = 0;         // no local pod port at that end
inline constexpr uint16_t kAllowedNotIsolated = 1;
inline constexpr uint16_t kAllowedConnection = 2;   // a packet of a connection allowed when it began
inline constexpr uint16_t kAllowedFromNode = 3;     // from the host's management port (the node: kubelet probes)
inline constexpr uint16_t kPolicyNamesOverflow = kMaxPolicyNames - 1;

class PolicyNames {
 public:
  PolicyNames();
  // The index of `name`, added when new (kPolicyNamesOverflow once full).
  uint16_t intern(const std::string& name);
  const std::string& name(uint16_t index) const;
  // The index of a name interned before (kPolicyNamesOverflow: none).
  uint16_t find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? kPolicyNamesOverflow : it->second;
  }
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint16_t> index_;
};

struct SnapPolicyDirection {
  model::PolicyMatcher matcher;
  std::vector<uint16_t> rule_names;  // per rule: its policy's name index
  std::vector<uint16_t> policies;    // the isolating policies' name indexes (a denial counts against each)
};

// One port's PortPolicy, built once for its content and shared by the
// snapshots that follow while it is unchanged.
struct SnapPolicy {
  std::string content;
  uint64_t content_hash = 0;  // hashText(content): the port's version takes this, not the content
  SnapPolicyDirection ingress;
  SnapPolicyDirection egress;
};

struct SnapPort {
  std::string name;
  std::shared_ptr<const SnapPolicy> policy;  // nullptr: not isolated either way
  uint32_t dep = 0;
  uint16_t key = 0;
  bool management = false;
  overlay::MacAddress mac{};
  std::vector<uint32_t> ipv4;  // host order (overlay's convention)
  std::vector<overlay::Ipv6Address> ipv6;
  uint32_t datapath_key = 0;
  int32_t dpdk_port = -1;
  bool has_gw4 = false;
  uint32_t gw4 = 0;
  bool has_gw6 = false;
  overlay::Ipv6Address gw6{};
  // The port's local subnet (its datapath key). The attach API gives pods an
  // address with the subnet's prefix, so a pod ARPs (solicits) its neighbours
  // on the node directly: the responder answers those with the router MAC too
  // and the neighbours are reached routed through the gateway.
  bool has_net4 = false;
  uint32_t net4 = 0;  // host order, masked
  uint32_t mask4 = 0;
  bool has_net6 = false;
  overlay::Ipv6Address net6{};  // masked
  uint8_t len6 = 0;

  bool hasIpv4(uint32_t a) const {
    for (uint32_t x : ipv4)
      if (x == a) return true;
    return false;
  }
  bool hasIpv6(const uint8_t* a) const {
    for (const auto& x : ipv6)
      if (__builtin_memcmp(x.data(), a, 16) == 0) return true;
    return false;
  }
  bool inSubnet4(uint32_t a) const { return has_net4 && (a & mask4) == net4; }
  bool inSubnet6(const uint8_t* a) const {
    if (!has_net6) return false;
    for (unsigned i = 0; i < 16; ++i) {
      const unsigned bits = len6 > i * 8 ? std::min(8u, len6 - i * 8u) : 0u;
      const uint8_t mask = static_cast<uint8_t>(bits ? 0xff << (8 - bits) : 0);
      if ((a[i] & mask) != net6[i]) return false;
    }
    return true;
  }
};

// ESP in UDP (RFC 3948 §2.1): the port both ends use, and where a peer is
// sent to until it says otherwise.
inline constexpr uint16_t kNatTPort = 4500;

// ESP in UDP to one remote node (docs/ipsec.md "NAT traversal"): the UDP
// port it is sent to, 4500 until an ESP in UDP packet from it authenticated
// with another source port (a NAT that maps ports: its replies must go to the
// port it chose). Any worker stores it, only when it differs, after the
// packet's ICV checked (relaxed: a port is a whole value and a packet sent to
// the old one for a moment is what the NAT had until then); every encrypting
// worker loads it. One per remote node name, owned by the engine and never
// freed while it lives (snapshots and lcores hold the pointer); `address`
// (control thread only) is the address it was learned for: a new one starts
// again at 4500.
struct NatPeer {
  std::atomic<uint16_t> port{kNatTPort};
  IpAddress address;
};

// The outer headers towards one remote subnet (VNI = its datapath key), OVN
// option with ingress key 0 and the router egress key (both patched per
// packet with the flow's keys); per-packet fields zero, as
// GeneveEncapTemplate::bytes() gives them.
struct SnapEncap {
  std::array<uint8_t, 80> bytes{};
  uint8_t length = 0;
  uint8_t udp_offset = 0;
  uint8_t ovn_offset = 0;  // the OVN option's 4 data bytes
  bool ipv6 = false;
  uint32_t ipv4_sum = 0;   // IPv4 header sum with total length and checksum zero, folded to 16 bits
  // The remote node's outbound SA (the Esp action encrypts under it); held
  // by the node (SnapRemoteNode::outbound). A flow re-resolves it with every
  // snapshot, so an outbound switch moves every flow at once.
  EspSlot* esp = nullptr;
  bool esp_nat_t = false;  // ESP goes inside UDP 4500 (NodeSettings.ipsec_nat_traversal)
  NatPeer* nat = nullptr;  // with esp_nat_t: the remote node's (its port)
};

struct SnapRemoteSubnet {
  IpPrefix prefix;
  uint32_t datapath_key = 0;
  SnapEncap encap;
};

struct SnapRemoteNode {
  std::string name;
  uint32_t dep = 0;
  IpAddress tunnel_ip;
  // Where its packets go and come from: its NAT address (RemoteNode.nat_address), or tunnel_ip.
  IpAddress reach;
  NatPeer* nat = nullptr;  // with NAT traversal
  std::vector<SnapRemoteSubnet> subnets;
  bool next_hop_known = false;
  // Its published port keys (RemoteNode.ports), by address.
  std::unordered_map<Ip16, uint16_t, Ip16Hash, Ip16Eq> port_keys;
  // IPsec: the SA we send to it with, and whether it has inbound SAs with
  // us (with NodeSettings.ipsec its plaintext Geneve is then refused, unless
  // one of them says plaintext_accepted: a rollout in progress).
  std::shared_ptr<EspSlot> outbound;
  bool inbound_sas = false;
  bool plaintext_accepted = false;

  // The OVN egress key for a destination address on this node: its port's
  // key, or the router's when the node published none for it.
  uint16_t egressKey(const uint8_t* addr, bool v6) const {
    if (port_keys.empty()) return kRouterEgressPortKey;
    Ip16 a{};
    __builtin_memcpy(a.data(), addr, v6 ? 16 : 4);
    auto it = port_keys.find(a);
    return it == port_keys.end() ? kRouterEgressPortKey : it->second;
  }
};

// Services (the load balancer of the slow path, services.cpp).
struct SnapBackend {
  Ip16 ip{};
  uint16_t port = 0;
  bool local = false;
};

// The backends of one service port for one address family, shared by every
// frontend of that port (its cluster IP, external IPs and node port): the
// usable ones by kube-proxy's rule (ready; if none, serving and terminating),
// over the cluster and on this node only, each with its Maglev table.
struct SnapBackendSet {
  std::vector<SnapBackend> usable;
  std::vector<SnapBackend> local;
  lb::MaglevTable table;
  lb::MaglevTable local_table;
  std::vector<model::ModelBackend> all;  // every backend the agent sent (dpuctl services)
};

enum class FrontendKind : uint8_t { kClusterIp, kExternalIp, kNodePort };
const char* frontendKindName(FrontendKind k);

// One (address, protocol, port) a service answers on.
struct SnapFrontend {
  uint32_t dep = 0;       // the service's dependency: flows balanced for it
  std::string service;    // "namespace/name"
  std::string port_name;
  FrontendKind kind = FrontendKind::kClusterIp;
  Ip16 ip{};
  bool v6 = false;
  uint16_t port = 0;
  uint8_t protocol = 0;
  // This kind's traffic policy is Local (internal for a cluster IP, external
  // for the others): this node's endpoints only, none: dropped.
  bool local_only = false;
  // Node port or external IP with the Cluster policy: the client is
  // masqueraded so the replies come back through this node.
  bool masquerade = false;
  uint32_t affinity_ms = 0;  // session affinity by client IP (0: none)
  std::shared_ptr<const SnapBackendSet> backends;

  // The backends a new connection may go to: this node's only under Local.
  const std::vector<SnapBackend>& candidates() const { return local_only ? backends->local : backends->usable; }
  // The one Maglev gives the connection with these fields (addresses of
  // `addr_len` bytes), as every DPU picks it; null when there is none.
  const SnapBackend* maglevPick(const uint8_t* src, const uint8_t* dst, size_t addr_len, uint16_t src_port,
                                uint16_t dst_port, uint8_t protocol) const {
    const std::vector<SnapBackend>& c = candidates();
    if (c.empty()) return nullptr;
    const lb::MaglevTable& table = local_only ? backends->local_table : backends->table;
    const uint16_t i = table.lookup(lb::tupleHash(src, dst, addr_len, src_port, dst_port, protocol));
    return &c[i < c.size() ? i : 0];
  }
};

// A service's frontends, built once for its content (and the node settings
// it depends on) and shared by the snapshots that follow while it is unchanged.
struct SnapService {
  std::string name;
  uint64_t content_hash = 0;
  uint32_t dep = 0;  // its dependency id ("service/<name>")
  std::vector<SnapFrontend> frontends;
};

struct FrontendKey {
  Ip16 ip{};
  uint16_t port = 0;
  uint8_t protocol = 0;
  bool operator==(const FrontendKey& o) const { return port == o.port && protocol == o.protocol && sameIp16(ip, o.ip); }
};
struct FrontendKeyHash {
  size_t operator()(const FrontendKey& k) const {
    return Ip16Hash{}(k.ip) ^ (size_t{k.port} << 8 | k.protocol) * 0x9e3779b97f4a7c15ull;
  }
};

// The frontends and service addresses of one slice of the addresses (by
// their hash). A snapshot built for a change of a few services shares every
// slice they do not touch with the snapshot before it, so a change costs
// the slices it touches, not a copy of every service's frontends.
struct ServiceShard {
  std::unordered_map<FrontendKey, const SnapFrontend*, FrontendKeyHash> frontends;
  // Cluster and external IPs (a port the address lacks is refused), with
  // the number of frontends on each.
  std::unordered_map<Ip16, uint32_t, Ip16Hash, Ip16Eq> ips;
};
inline constexpr size_t kServiceShards = 256;
inline size_t serviceShardOf(const Ip16& ip) { return (Ip16Hash{}(ip) >> 32) & (kServiceShards - 1); }

// Addresses the dataplane answers for services with (kube-proxy's
// 169.254.169.5 for IPv4, OVN-Kubernetes' fd69::5 for IPv6): a pod reaching
// itself through a service sees the connection come from here, so that its
// reply, addressed here, comes back through the load balancer (hairpin).
inline constexpr Ip16 kHairpinV4{169, 254, 169, 5};
inline constexpr Ip16 kHairpinV6{0xfd, 0x69, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};

struct PortSlot {
  bool bound = false;
  PortRole role = PortRole::kRepresentor;
  const SnapPort* lport = nullptr;
  overlay::MacAddress mac{};
  std::string name;
};

struct Binding {
  uint16_t port = 0;
  PortRole role = PortRole::kRepresentor;
  MacAddress mac;
};

struct Snapshot {
  uint64_t generation = 0;
  uint32_t stamp = 0;
  std::vector<uint32_t> dep_version;
  bool programmed = false;
  overlay::MacAddress router_mac{};
  bool has_tunnel_ip = false;
  uint8_t tunnel_family = 4;
  Ip16 tunnel_ip{};
  // The uplink's lane (worker_parse.h: tunnelLaneParse) may take packets:
  // an IPv4 tunnel address and the lanes on (EngineConfig::lanes).
  bool tunnel_lane = false;
  uint16_t tunnel_mtu_v4 = 0;  // largest inner IP packet a tunnel carries
  uint16_t tunnel_mtu_v6 = 0;
  int32_t uplink_port = -1;
  std::vector<SnapPort> ports;
  std::vector<SnapRemoteNode> remotes;
  std::vector<ModelSubnet> local_subnets;
  std::array<PortSlot, kMaxPorts> slots{};

  std::unordered_map<uint32_t, const SnapPort*> port_by_ipv4;
  std::unordered_map<Ip16, const SnapPort*, Ip16Hash, Ip16Eq> port_by_ipv6;
  std::unordered_map<uint32_t, const ModelSubnet*> local_by_vni;
  std::unordered_map<Ip16, const SnapRemoteNode*, Ip16Hash, Ip16Eq> peer_by_ip;
  // IPsec (ipsec_sas.h). `ipsec`: NodeSettings.ipsec, encrypt or drop.
  // Inbound SAs by (peer tunnel IP, SPI); `esp_mtu_*`: the tunnel MTUs with
  // the ESP overhead taken off.
  bool ipsec = false;
  bool ipsec_nat_t = false;  // ESP leaves inside UDP 4500 (RFC 3948)
  bool any_inbound_sa = false;
  struct EspKey {
    Ip16 peer{};
    uint32_t spi = 0;
    bool operator==(const EspKey&) const = default;
  };
  struct EspKeyHash {
    size_t operator()(const EspKey& k) const { return Ip16Hash{}(k.peer) ^ (size_t{k.spi} * 0x9e3779b97f4a7c15ull); }
  };
  // `nat`: the remote node's ESP in UDP port, learned from what authenticates (with NAT traversal).
  struct InboundSa {
    std::shared_ptr<EspSlot> slot;
    NatPeer* nat = nullptr;
  };
  std::unordered_map<EspKey, InboundSa, EspKeyHash> inbound_sas;
  uint16_t esp_mtu_v4 = 0;
  uint16_t esp_mtu_v6 = 0;
  const InboundSa* inboundSa(const uint8_t* peer, bool v6, uint32_t spi) const {
    EspKey k;
    std::memcpy(k.peer.data(), peer, v6 ? 16 : 4);
    k.spi = spi;
    auto it = inbound_sas.find(k);
    return it == inbound_sas.end() ? nullptr : &it->second;
  }
  struct RouteTarget {
    const SnapRemoteNode* node = nullptr;
    uint8_t subnet = 0;
  };
  struct RouteLength {
    uint8_t length = 0;
    std::unordered_map<Ip16, RouteTarget, Ip16Hash, Ip16Eq> table;
  };
  std::vector<RouteLength> routes_v4, routes_v6;  // longest prefix first
  std::vector<const SnapPort*> port_by_dep;
  std::vector<const SnapRemoteNode*> remote_by_dep;

  // Services.
  std::vector<std::shared_ptr<const SnapService>> services;
  // Every frontend and service address, by slice (never null once built).
  std::array<std::shared_ptr<const ServiceShard>, kServiceShards> service_shards;
  uint64_t frontends_hash = 0;  // of the frontends' keys, order-free (kDepServices)
  std::vector<IpPrefix> service_cidrs;
  std::vector<IpPrefix> cluster_cidrs;
  const SnapFrontend* frontend(const uint8_t* ip, bool v6, uint16_t port, uint8_t protocol) const {
    FrontendKey k;
    std::memcpy(k.ip.data(), ip, v6 ? 16 : 4);
    k.port = port;
    k.protocol = protocol;
    const ServiceShard* shard = service_shards[serviceShardOf(k.ip)].get();
    if (shard == nullptr) return nullptr;
    auto it = shard->frontends.find(k);
    return it == shard->frontends.end() ? nullptr : it->second;
  }
  bool isServiceIp(const uint8_t* ip, bool v6) const {
    Ip16 k{};
    std::memcpy(k.data(), ip, v6 ? 16 : 4);
    const ServiceShard* shard = service_shards[serviceShardOf(k)].get();
    return shard != nullptr && shard->ips.count(k) != 0;
  }
  bool inServiceCidr(const uint8_t* ip, bool v6) const;
  bool inClusterCidr(const uint8_t* ip, bool v6) const;

  // Flow validity (see the top of this file).
  bool depsValid(uint32_t flow_stamp, uint32_t dep_in, uint32_t dep_out, uint32_t dep_nat) const {
    return dep_version[kDepNode] <= flow_stamp && dep_version[dep_in] <= flow_stamp &&
           dep_version[dep_out] <= flow_stamp && dep_version[dep_nat] <= flow_stamp;
  }
  bool inLocalSubnet(const uint8_t* addr, bool v6) const;
  // Longest-prefix match over remote subnets (IPv4: 4 address bytes).
  RouteTarget routeRemote(const uint8_t* addr, bool v6) const;
  const SnapPort* portByDep(uint32_t dep) const { return dep < port_by_dep.size() ? port_by_dep[dep] : nullptr; }
  const SnapRemoteNode* remoteByDep(uint32_t dep) const {
    return dep < remote_by_dep.size() ? remote_by_dep[dep] : nullptr;
  }
  // The host PF's path (north_south.h).
  SnapNorthSouth north_south;
  // The local port holding an address (nullptr: none here).
  const SnapPort* portByAddress(const uint8_t* addr, bool v6) const {
    if (v6) {
      Ip16 a;
      std::memcpy(a.data(), addr, 16);
      auto it = port_by_ipv6.find(a);
      return it == port_by_ipv6.end() ? nullptr : it->second;
    }
    auto it = port_by_ipv4.find(uint32_t{addr[0]} << 24 | uint32_t{addr[1]} << 16 | uint32_t{addr[2]} << 8 | addr[3]);
    return it == port_by_ipv4.end() ? nullptr : it->second;
  }
};

// Stable ids and versions of the dependency objects (control thread only).
// Copied for every build (a failed build leaves the engine's untouched): the
// ids by key, which only grow and never change, are shared by the copies,
// so a copy costs the versions, not one string per object.
class DepRegistry {
 public:
  DepRegistry();
  uint32_t idFor(const std::string& key);
  // Records the object's content in this build; a change takes a new version.
  void touch(uint32_t id, const std::string& content);
  // The same with a 64-bit hash of the content (large objects: services).
  void touchHash(uint32_t id, uint64_t content_hash);
  // Records that the object is unchanged in this build (a touch with its
  // previous content, without the content).
  void keep(uint32_t id) { touched_[id] = true; }
  // Ends a build: objects not touched are deleted. Returns the new stamp.
  uint32_t finish();
  const std::vector<uint32_t>& versions() const { return versions_; }

 private:
  std::shared_ptr<std::unordered_map<std::string, uint32_t>> ids_;
  std::vector<uint32_t> versions_;
  std::vector<std::string> contents_;
  std::vector<bool> touched_;
  uint32_t clock_ = 1;
};

struct SnapshotInputs {
  const Model* model = nullptr;
  uint64_t generation = 0;
  const std::map<std::string, Binding>* bindings = nullptr;
  const std::map<IpAddress, MacAddress>* next_hops = nullptr;
  bool lanes = true;  // EngineConfig::lanes
  const NorthSouthTables* north_south = nullptr;  // nullptr: no host MACs or neighbours learned
  // The snapshot in force: services whose content did not change are shared, not rebuilt.
  const Snapshot* previous = nullptr;
  // With `previous`: the only services (by name) that can differ from it;
  // the others are taken from it as they are, without looking at them.
  const std::vector<std::string>* changed_services = nullptr;
  // With `previous`: the only ports (by name) whose port policy can differ
  // from it; the others keep its SnapPolicy (shared) without a look at it.
  const std::vector<std::string>* changed_port_policies = nullptr;
  PolicyNames* policy_names = nullptr;  // the engine's (nullptr: every policy is kPolicyNamesOverflow)
  const IpsecSas* ipsec = nullptr;  // the SAs in force (nullptr: none)
  // The engine's ESP in UDP state per remote node name; entries are added, never removed.
  std::map<std::string, std::unique_ptr<NatPeer>>* nat_peers = nullptr;
};

Result<std::unique_ptr<Snapshot>> buildSnapshot(const SnapshotInputs& in, DepRegistry& deps);
// The north–south part of `s` (north_south.cpp), from the model's node
// addresses, the host PF binding and the learned tables; called by
// buildSnapshot once the port bindings are in `s`.
void buildNorthSouth(const SnapshotInputs& in, const MacAddress& uplink_mac, DepRegistry& deps, Snapshot& s);

}  // namespace dpu::datapath
