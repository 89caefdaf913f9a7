// The slow path: the logical pipeline, OVN-style, run on the lcore for a
// packet that missed the flow cache. Port security → ARP/ND responder →
// routing (local port, host management port, or the remote node owning the
// destination subnet through Geneve) → egress. Its result is one flow (match
// + fused actions, installed by the caller), a reply sent on the packet's
// behalf (ARP, ND, ICMP too-big; not cached), or an uncached drop.
// North–south (north_south.h): the host PF's frames and the uplink's frames
// that are not our tunnel traffic are bridged between the two ports, untouched.
//
// Which decisions are cached: forwarding and the drops whose cause is in the
// match (a spoofed source, a destination with no route), each recording the
// model objects it read (snapshot.h) so a model change retires it. ARP and
// ND are answered here every time (rare, and their checks read fields the
// flow key does not hold: the ARP sender MAC, the ND options).
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "engine_impl.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"
#include "overlay/replies.h"

namespace dpu::datapath {
namespace {

enum ReplyKind { kReplyArp, kReplyNa, kReplyFragNeeded, kReplyPacketTooBig };

Decision dropNow(overlay::Status s) { return dropNow(toDropReason(s)); }

bool isLinkLocal6(const uint8_t* a) { return a[0] == 0xfe && (a[1] & 0xc0) == 0x80; }

bool isGatewayAddress(const Snapshot& snap, const uint8_t* a, bool v6) {
  for (const auto& s : snap.local_subnets) {
    if (!s.has_gateway || s.gateway.isV4() == v6) continue;
    if (sameAddress(s.gateway.bytes.data(), a, v6)) return true;
  }
  return false;
}

// An address a router never forwards a packet to off the link it came on
// (RFC 4291 §2.5.6, RFC 3927 §7): link-local, loopback, unspecified, multicast
// (IPv4: also 0/8 and the limited broadcast, in 224/4 and above).
bool linkScoped(const uint8_t* a, bool v6) {
  if (v6) return isLinkLocal6(a) || overlay::ipv6::isMulticast(a) || overlay::ipv6::isUnspecified(a) ||
                 (std::all_of(a, a + 15, [](uint8_t b) { return b == 0; }) && a[15] == 1);
  return (a[0] == 169 && a[1] == 254) || a[0] == 127 || a[0] == 0 || a[0] >= 224;
}

// A destination no part of the cluster has: not a pod subnet here or on
// another node, not a cluster or service address, not a gateway; and one a
// router may forward to (not link-scoped: a pod's packet to fe80::1 is not
// the node network's).
bool offCluster(const Snapshot& snap, const uint8_t* dst, bool v6) {
  return !linkScoped(dst, v6) && !snap.inLocalSubnet(dst, v6) && snap.routeRemote(dst, v6).node == nullptr &&
         !snap.inClusterCidr(dst, v6) && !snap.inServiceCidr(dst, v6) && !isGatewayAddress(snap, dst, v6);
}

// A packet from the fabric to a port egress SNAT allocates (kSnatPorts), or
// an echo reply with such an identifier.
bool isSnatReturn(const PacketContext& pc, const uint8_t* frame) {
  const overlay::ParsedPacket& pk = pc.parsed;
  if (pk.fragment == overlay::Fragment::kLater) return false;
  uint16_t port = 0;
  if (pk.l4 == overlay::L4Type::kTcp || pk.l4 == overlay::L4Type::kUdp) {
    port = pc.key.l4_dst;
  } else if ((pk.l4 == overlay::L4Type::kIcmp && frame[pk.l4_offset] == overlay::icmp::kTypeEchoReply) ||
             (pk.l4 == overlay::L4Type::kIcmpv6 && frame[pk.l4_offset] == overlay::icmp6::kTypeEchoReply)) {
    port = pc.key.l4_dst;  // the identifier
  } else {
    return false;
  }
  return port >= kSnatPorts.first && port <= kSnatPorts.second;
}

// An unfragmented IPv6 neighbour solicitation or advertisement.
bool isNeighbourDiscovery(const overlay::ParsedPacket& pk, const uint8_t* frame) {
  if (pk.l3 != overlay::L3Type::kIpv6 || pk.l4 != overlay::L4Type::kIcmpv6 || pk.fragment != overlay::Fragment::kNone) {
    return false;
  }
  const uint8_t type = frame[pk.l4_offset];
  return type == overlay::icmp6::kTypeNeighborSolicit || type == overlay::icmp6::kTypeNeighborAdvert;
}

// UDP from a DHCP server's port to a client's (RFC 2131): an answer, whose
// client hardware address (chaddr) says whose it is when it is broadcast (a
// client that has no address yet may ask for broadcast answers).
bool fromDhcpServer(const overlay::ParsedPacket& pk, const uint8_t* frame) {
  if (pk.l3 != overlay::L3Type::kIpv4 || pk.l4 != overlay::L4Type::kUdp || pk.fragment != overlay::Fragment::kNone) {
    return false;
  }
  const uint8_t* udp = frame + pk.l4_offset;
  return overlay::udp::srcPort(udp) == overlay::dhcp::kServerPort &&
         overlay::udp::dstPort(udp) == overlay::dhcp::kClientPort;
}

}  // namespace

Decision EngineImpl::toFabric(WorkerContext& w, const Snapshot& snap, PacketContext& pc, const uint8_t* dst, bool v6,
                              FlowRecord& f) {
  NorthSouthRoute r;
  const DropReason why = northSouthRoute(w, snap, pc, dst, v6, r);
  if (why != DropReason::kOk) return dropNow(why);
  const uint8_t* l3 = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pc.parsed.l3_offset;
  if ((v6 ? overlay::ipv6::hopLimit(l3) : overlay::ipv4::ttl(l3)) <= 1) return dropNow(DropReason::kTtlExpired);
  f.dep_out = r.dep;
  f.ops = op::kDecTtl | op::kSetEthSrc | op::kSetEthDst | op::kOutput;
  f.set_src = r.host_mac;
  f.set_dst = r.next_hop_mac;
  f.out_port = r.out_port;
  return {Decision::kFlow, DropReason::kOk};
}

Decision EngineImpl::slowPath(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& f) {
  const PortSlot& slot = snap.slots[pc.rx_port];
  if (slot.role == PortRole::kUplink) {
    // Not decapsulated: not for our tunnel address (prepare, north_south.h).
    if (pc.probe.family == 0) return slowPathFromFabric(w, snap, pc, f);
    return slowPathFromTunnel(w, snap, pc, f);
  }
  if (slot.role == PortRole::kHostPf) return slowPathFromHost(w, snap, pc, f);
  return slowPathFromPort(w, snap, pc, slot, f);
}

Decision EngineImpl::slowPathFromPort(WorkerContext& w, const Snapshot& snap, PacketContext& pc,
                                      const PortSlot& slot, FlowRecord& f) {
  const SnapPort* lp = slot.lport;
  if (lp == nullptr) return dropNow(DropReason::kUnboundPort);
  f.dep_in = lp->dep;
  const overlay::FlowKey& k = pc.key;
  const overlay::ParsedPacket& pk = pc.parsed;
  const uint8_t* frame = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*);

  // Port security, layer 2.
  if (k.eth_src != lp->mac) return cacheDrop(f, DropReason::kPortSecurityMac);

  if (pk.l3 == overlay::L3Type::kArp) {
    const uint8_t* a = frame + pk.l3_offset;
    const uint32_t spa = overlay::arp::senderIp(a);
    if (overlay::arp::senderMac(a) != lp->mac || (spa != 0 && !lp->hasIpv4(spa))) {
      return dropNow(DropReason::kPortSecurityArp);
    }
    if (overlay::arp::op(a) != overlay::arp::kOpRequest) return dropNow(DropReason::kArpNotRequest);
    // An ARP probe (sender 0.0.0.0, RFC 5227) is not answered: a reply would
    // tell the pod its gateway address is taken.
    // A neighbour in the pod's own subnet is answered with the router MAC as
    // well (routed through the gateway); the pod's own address is not.
    const uint32_t tpa = overlay::arp::targetIp(a);
    const bool for_gateway = lp->has_gw4 && tpa == lp->gw4;
    const bool for_neighbour = lp->inSubnet4(tpa) && !lp->hasIpv4(tpa);
    if (spa == 0 || !(for_gateway || for_neighbour)) {
      return dropNow(DropReason::kArpNotForGateway);
    }
    return sendReply(w, snap, pc, kReplyArp, *lp, 0) ? Decision{Decision::kReplied, DropReason::kOk}
                                               : dropNow(DropReason::kReplyFailed);
  }
  if (!pk.isIp()) return cacheDrop(f, DropReason::kNotIp);
  const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
  const uint8_t* l3 = frame + pk.l3_offset;

  if (v6 && pk.l4 == overlay::L4Type::kIcmpv6 && pk.fragment == overlay::Fragment::kNone) {
    const uint8_t type = frame[pk.l4_offset];
    if (type >= overlay::icmp6::kTypeRouterSolicit && type <= overlay::icmp6::kTypeNeighborAdvert + 1) {
      const uint8_t* src = overlay::ipv6::src(l3);
      const bool src_ok = overlay::ipv6::isUnspecified(src) || isLinkLocal6(src) || lp->hasIpv6(src);
      if (!src_ok) return dropNow(DropReason::kPortSecurityNd);
      if (type != overlay::icmp6::kTypeNeighborSolicit && type != overlay::icmp6::kTypeNeighborAdvert) {
        return dropNow(DropReason::kIcmpv6NotHandled);
      }
      overlay::NeighborMessage msg;
      if (auto st = overlay::parseNeighborMessage({frame, pc.mbuf->data_len}, pk, msg); st != overlay::Status::kOk) {
        return dropNow(st);
      }
      if (msg.has_link_addr && msg.link_addr != lp->mac) return dropNow(DropReason::kPortSecurityNd);
      const uint8_t* target = frame + msg.target_offset;
      if (type == overlay::icmp6::kTypeNeighborAdvert) {
        // A pod may advertise only its own addresses; we learn nothing from it.
        if (!isLinkLocal6(target) && !lp->hasIpv6(target)) return dropNow(DropReason::kPortSecurityNd);
        return dropNow(DropReason::kIcmpv6NotHandled);
      }
      const bool for_gateway = lp->has_gw6 && std::memcmp(target, lp->gw6.data(), 16) == 0;
      const bool for_neighbour = lp->inSubnet6(target) && !lp->hasIpv6(target) && !isLinkLocal6(target);
      if (!for_gateway && !for_neighbour) return dropNow(DropReason::kNdNotForGateway);
      return sendReply(w, snap, pc, kReplyNa, *lp, 0) ? Decision{Decision::kReplied, DropReason::kOk}
                                                : dropNow(DropReason::kReplyFailed);
    }
  }

  // Broadcast and multicast (DHCP discovery, MLD, mDNS) are not forwarded;
  // checked before the source address, which such packets often lack.
  if (k.eth_dst[0] & 1) return cacheDrop(f, DropReason::kMulticastNotForwarded);
  // Port security, layer 3.
  if (v6 ? !lp->hasIpv6(overlay::ipv6::src(l3)) : !lp->hasIpv4(overlay::ipv4::src(l3))) {
    return cacheDrop(f, DropReason::kPortSecurityIp);
  }
  if (k.eth_dst != snap.router_mac) return cacheDrop(f, DropReason::kNotToGateway);

  // Services and tracked connections: a packet to a service is balanced to a
  // backend, one of a translated connection translated (services.cpp).
  NatPlan plan;
  if (auto d = serviceStage(w, snap, pc, From::kPod, f, plan)) return *d;
  const uint8_t* dst = plan.active ? plan.dst.data() : (v6 ? overlay::ipv6::dst(l3) : l3 + overlay::ipv4::kDstOffset);
  // NetworkPolicy (policy.cpp): a new connection is judged after service
  // DNAT and before SNAT; a packet of a known connection was judged with it.
  bool track = false;
  if (plan.established || w.related) {
    f.allowed_egress = kAllowedConnection;
    f.allowed_ingress = snap.portByAddress(dst, v6) != nullptr ? kAllowedConnection : kAllowedNone;
  } else if (auto d = policyStage(w, snap, pc, lp, dst, v6, plan.active ? plan.dport : k.l4_dst, f, track)) {
    // The service connection just balanced for it is not made.
    if (plan.active && w.ct_hit_valid) (void)conntrack_->remove(w.ct_hit);
    w.ct_hit_valid = false;
    return *d;
  }
  // Off the cluster: out through the node IP (egress SNAT), where the node has one.
  if (!plan.active && offCluster(snap, dst, v6)) {
    if (auto d = egressSnat(w, snap, pc, plan)) return *d;
    if (plan.active) dst = plan.dst.data();
  }
  Decision d = routeFromPort(w, snap, pc, lp->key, dst, v6, f, plan.active || w.related);
  if (plan.active && d.kind == Decision::kFlow && (f.ops & op::kOutput)) addNat(pc, plan, f, d);
  // A translated connection is tracked already; its entry passes the replies.
  if (track && !plan.active && d.kind == Decision::kFlow && (f.ops & op::kOutput) &&
      !trackForPolicy(w, pc, v6, plan)) {
    return dropNow(DropReason::kConntrackFull);
  }
  onceWhilePlanned(plan, d);
  return d;
}

Decision EngineImpl::routeFromPort(WorkerContext& w, const Snapshot& snap, PacketContext& pc, uint16_t ingress_key,
                                   const uint8_t* dst, bool v6, FlowRecord& f, bool translated) {
  const uint8_t* l3 = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pc.parsed.l3_offset;
  if (isGatewayAddress(snap, dst, v6)) return cacheDrop(f, DropReason::kToGateway);
  const uint8_t ttl = v6 ? overlay::ipv6::hopLimit(l3) : overlay::ipv4::ttl(l3);
  const SnapPort* dp = nullptr;
  if (v6) {
    Ip16 a;
    std::memcpy(a.data(), dst, 16);
    auto it = snap.port_by_ipv6.find(a);
    if (it != snap.port_by_ipv6.end()) dp = it->second;
  } else {
    auto it = snap.port_by_ipv4.find(overlay::load32(dst));
    if (it != snap.port_by_ipv4.end()) dp = it->second;
  }
  if (dp != nullptr) {
    f.dep_out = dp->dep;
    if (dp->dpdk_port < 0) return cacheDrop(f, DropReason::kNoOutputPort);
    if (ttl <= 1) return dropNow(DropReason::kTtlExpired);
    f.ops = op::kDecTtl | op::kSetEthSrc | op::kSetEthDst | op::kOutput;
    f.set_src = snap.router_mac;
    f.set_dst = dp->mac;
    f.out_port = static_cast<uint16_t>(dp->dpdk_port);
    return {Decision::kFlow, DropReason::kOk};
  }
  if (snap.inLocalSubnet(dst, v6)) {
    f.dep_out = kDepRouting;
    return cacheDrop(f, DropReason::kUnknownDestination);
  }
  const Snapshot::RouteTarget route = snap.routeRemote(dst, v6);
  if (route.node == nullptr) {
    if (translated && !snap.inClusterCidr(dst, v6) && !snap.inServiceCidr(dst, v6)) {
      return toFabric(w, snap, pc, dst, v6, f);
    }
    f.dep_out = kDepRouting;
    return cacheDrop(f, DropReason::kNoRoute);
  }
  f.dep_out = route.node->dep;
  if (snap.uplink_port < 0) return cacheDrop(f, DropReason::kNoUplink);
  if (ttl <= 1) return dropNow(DropReason::kTtlExpired);
  f.ops = op::kDecTtl | op::kSetEthSrc | op::kSetEthDst | op::kEncap | op::kOutput;
  f.set_src = snap.router_mac;
  // The sender does not know the remote pod's MAC (remote nodes publish
  // subnets): the receiving node rewrites the destination on delivery.
  f.set_dst = snap.router_mac;
  f.out_port = static_cast<uint16_t>(snap.uplink_port);
  f.mtu = v6 ? snap.tunnel_mtu_v6 : snap.tunnel_mtu_v4;
  f.encap_subnet = route.subnet;
  f.encap_ingress = ingress_key;
  // As OVN does, the egress key names the destination port, so the receiver
  // (ours or an OVN chassis) is told where the packet goes; 0x8000 (the
  // router: route by the inner destination) only when the remote node
  // published no key for the address.
  f.encap_egress = route.node->egressKey(dst, v6);
  // RFC 8926 §3.3: the source port from the inner flow hash (fixed seed, so
  // it does not change when the process restarts).
  f.encap_sport = overlay::geneveSourcePort(overlay::flowHash32(pc.key));
  // IPsec on (NodeSettings.ipsec): ESP under the node's outbound SA, or
  // nothing leaves for it (fail closed). The flow depends on the node, whose
  // version changes when it gains or loses its outbound SA.
  if (snap.ipsec) {
    if (!route.node->outbound) return cacheDrop(f, DropReason::kIpsecNoSa);
    f.ops |= op::kEsp;
    f.mtu = v6 ? snap.esp_mtu_v6 : snap.esp_mtu_v4;
  }
  return {Decision::kFlow, DropReason::kOk};
}

Decision EngineImpl::slowPathFromTunnel(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& f) {
  const TunnelProbe& t = pc.probe;
  auto peer_it = snap.peer_by_ip.find(t.remote);
  if (peer_it == snap.peer_by_ip.end()) {
    f.dep_out = kDepRouting;
    return cacheDrop(f, DropReason::kUnknownTunnelPeer);
  }
  const SnapRemoteNode* peer = peer_it->second;
  f.dep_in = peer->dep;
  const uint32_t vni = pc.key.tunnel_id;
  if (snap.local_by_vni.find(vni) == snap.local_by_vni.end()) return cacheDrop(f, DropReason::kUnknownVni);
  const overlay::ParsedPacket& pk = pc.parsed;
  if (!pk.isIp()) return cacheDrop(f, DropReason::kNotIp);
  const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
  const uint8_t* l3 = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pk.l3_offset;
  const uint8_t* src = v6 ? overlay::ipv6::src(l3) : l3 + overlay::ipv4::kSrcOffset;
  const uint8_t* dst = v6 ? overlay::ipv6::dst(l3) : l3 + overlay::ipv4::kDstOffset;

  // The sending node may only speak for its own subnets.
  const IpAddress src_ip = ipAt(src, v6);
  bool src_ok = false;
  for (const auto& s : peer->subnets) src_ok = src_ok || s.prefix.contains(src_ip);
  if (!src_ok) return cacheDrop(f, DropReason::kTunnelSourceSpoof);

  // A reply of a connection this node translated (a remote backend
  // answering our client) is translated back before it is delivered.
  NatPlan plan;
  if (auto d = serviceStage(w, snap, pc, From::kTunnel, f, plan)) return *d;
  if (plan.active) dst = plan.dst.data();
  // The reply of a connection this node translated towards the fabric (a
  // masqueraded node-port client): out through the node network.
  if ((plan.active || w.related) && offCluster(snap, dst, v6)) {
    Decision d = toFabric(w, snap, pc, dst, v6, f);
    if (d.kind != Decision::kFlow) return d;
    f.ops |= op::kDecap;
    if (plan.active) addNat(pc, plan, f, d);
    return d;
  }

  const SnapPort* dp = nullptr;
  if (v6) {
    Ip16 a;
    std::memcpy(a.data(), dst, 16);
    auto it = snap.port_by_ipv6.find(a);
    if (it != snap.port_by_ipv6.end()) dp = it->second;
  } else {
    auto it = snap.port_by_ipv4.find(overlay::load32(dst));
    if (it != snap.port_by_ipv4.end()) dp = it->second;
  }
  if (dp == nullptr) {
    f.dep_out = kDepRouting;
    return cacheDrop(f, snap.inLocalSubnet(dst, v6) ? DropReason::kUnknownDestination : DropReason::kNoRoute);
  }
  f.dep_out = dp->dep;
  // The egress check: the VNI is the destination's logical switch, and the
  // egress key names the destination port, as senders that know our port
  // keys send it. The router's key 0x8000 ("route by the inner destination")
  // is accepted too: it comes from senders that did not have our key for the
  // address (an older version, or the moments before our keys reach them);
  // such flows are counted, so an operator sees whether any remain.
  if (dp->datapath_key != vni || (t.egress != kRouterEgressPortKey && t.egress != dp->key)) {
    return cacheDrop(f, DropReason::kWrongEgressPort);
  }
  if (dp->dpdk_port < 0) return cacheDrop(f, DropReason::kNoOutputPort);
  // NetworkPolicy: ingress at the destination pod's port (the sending node
  // judged egress), for a new connection.
  bool track = false;
  if (plan.established || w.related) {
    f.allowed_ingress = kAllowedConnection;
  } else if (auto d = policyStage(w, snap, pc, nullptr, dst, v6, pc.key.l4_dst, f, track)) {
    return *d;
  }
  if (track && !plan.active && !trackForPolicy(w, pc, v6, plan)) return dropNow(DropReason::kConntrackFull);
  if (t.egress == kRouterEgressPortKey) bump(w.counters.events[static_cast<size_t>(Event::kTunnelRouterEgressKey)]);
  f.ops = op::kDecap | op::kSetEthSrc | op::kSetEthDst | op::kOutput;
  f.set_src = snap.router_mac;
  f.set_dst = dp->mac;
  f.out_port = static_cast<uint16_t>(dp->dpdk_port);
  Decision d{Decision::kFlow, DropReason::kOk};
  if (plan.active) addNat(pc, plan, f, d);
  onceWhilePlanned(plan, d);
  return d;
}

// The host PF's frames: every frame from a host MAC leaves on the uplink as it
// came (a cached flow of one Output, which offloads as a represented-port
// rule). A source MAC the host may not use is refused; a new one is learned
// (north_south.h) and its frames are forwarded uncached until the snapshot
// has it, so that no flow is cached against a table about to change. ARP and
// IPv6 neighbour discovery are forwarded uncached every time: the host's ARP
// and advertisements say which MAC holds which node IP.
Decision EngineImpl::slowPathFromHost(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& f) {
  const SnapNorthSouth& ns = snap.north_south;
  f.dep_in = ns.dep;
  f.dep_out = ns.dep;
  const overlay::MacAddress& src = pc.key.eth_src;
  if ((src[0] & 1) != 0 || macKey(src) == 0 || ns.refusedMac(src)) return cacheDrop(f, DropReason::kHostMacRefused);
  if (snap.uplink_port < 0) return cacheDrop(f, DropReason::kNoUplink);
  const bool known = ns.isHostMac(src);
  if (!known && ns.host_macs.size() >= ns.max_host_macs) return dropNow(DropReason::kHostMacTableFull);
  NorthSouthObservation seen;
  seen.kind = NorthSouthObservation::kHostMac;
  seen.mac = src;
  observeNorthSouth(w, seen, !known);
  const auto uplink = static_cast<uint16_t>(snap.uplink_port);
  const bool arp = pc.parsed.l3 == overlay::L3Type::kArp;
  const bool nd = isNeighbourDiscovery(pc.parsed, rte_pktmbuf_mtod(pc.mbuf, const uint8_t*));
  if (arp) learnFromArp(w, snap, pc, true);
  overlay::NeighborMessage msg;
  if (nd) (void)learnFromNd(w, snap, pc, true, msg);
  if (!known || arp || nd) {
    enqueueTx(w, uplink, pc.mbuf);
    return {Decision::kSent, DropReason::kOk};
  }
  f.ops = op::kOutput;
  f.out_port = uplink;
  return {Decision::kFlow, DropReason::kOk};
}

// The uplink's frames that are not for our tunnel address (prepare took
// those): the host's, or nobody's here. Unicast to a host MAC is a cached
// flow of one Output to the host PF; ARP and IPv6 neighbour discovery are
// learned from and forwarded uncached (ARP and solicitations for a node IP,
// broadcast and multicast included, and what is unicast to a host MAC), and
// so are a DHCP server's broadcast answers to a host MAC; the rest is dropped
// (FabricNotForHost: cached, except ARP, neighbour discovery and DHCP, whose
// flow key does not hold the address that decided).
// Other broadcast and multicast (router advertisements, gratuitous ARP for
// other addresses) stay with the DPU's kernel: the uplink's XDP program gives
// a frame to the dataplane or to the kernel, never to both (docs/services.md).
Decision EngineImpl::slowPathFromFabric(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& f) {
  const SnapNorthSouth& ns = snap.north_south;
  f.dep_in = ns.dep;
  f.dep_out = ns.dep;
  const overlay::ParsedPacket& pk = pc.parsed;
  const uint8_t* frame = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*);

  // ---- The north–south load balancer goes here: NodePort and the node's
  // externalIP / load-balancer ingress traffic is the cluster's, taken
  // before the bridging decision below gives the frame to the host. ----

  // prepare() sends the uplink's frames here only with a host PF bound.
  if (ns.host_pf_port < 0) return dropNow(DropReason::kFabricNotForHost);
  const auto host = static_cast<uint16_t>(ns.host_pf_port);
  if (pk.l3 == overlay::L3Type::kArp) {
    learnFromArp(w, snap, pc, false);
    if (ns.nodeIp(frame + pk.l3_offset + overlay::arp::kTargetIpOffset, false) == nullptr) {
      return dropNow(DropReason::kFabricNotForHost);
    }
    enqueueTx(w, host, pc.mbuf);
    return {Decision::kSent, DropReason::kOk};
  }
  const overlay::MacAddress& dst = pc.key.eth_dst;
  const bool unicast = (dst[0] & 1) == 0;
  if (isNeighbourDiscovery(pk, frame)) {
    overlay::NeighborMessage msg;
    const bool valid = learnFromNd(w, snap, pc, false, msg);
    // To the host: what is unicast to one of its MACs, and a solicitation
    // for a node IP sent to the solicited-node group. An unsolicited
    // advertisement to all-nodes only updates a neighbour.
    bool for_host = unicast && ns.isHostMac(dst);
    if (!unicast && frame[pk.l4_offset] == overlay::icmp6::kTypeNeighborSolicit) {
      for_host = valid && ns.nodeIp(frame + msg.target_offset, true) != nullptr;
    }
    if (!for_host) return dropNow(DropReason::kFabricNotForHost);
    enqueueTx(w, host, pc.mbuf);
    return {Decision::kSent, DropReason::kOk};
  }
  if (unicast && ns.isHostMac(dst) && pk.isIp()) {
    // Node ports and external IPs, and the replies of connections this node
    // translated (egress SNAT, masqueraded node-port clients): the cluster's.
    NatPlan plan;
    if (auto d = serviceStage(w, snap, pc, From::kFabric, f, plan)) return *d;
    if (plan.active || w.related) {
      const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
      const uint8_t* l3 = frame + pk.l3_offset;
      const uint8_t* to = plan.active ? plan.dst.data() : v6 ? overlay::ipv6::dst(l3) : l3 + overlay::ipv4::kDstOffset;
      // NetworkPolicy: a new node-port or external-IP connection is judged at
      // its local backend's ingress against the client's own address (before
      // the masquerade); a remote backend's node judges it.
      bool track = false;
      if (plan.established || w.related) {
        f.allowed_ingress = snap.portByAddress(to, v6) != nullptr ? kAllowedConnection : kAllowedNone;
      } else if (auto d = policyStage(w, snap, pc, nullptr, to, v6, plan.dport, f, track)) {
        if (w.ct_hit_valid) (void)conntrack_->remove(w.ct_hit);  // the connection just balanced is not made
        w.ct_hit_valid = false;
        return *d;
      }
      Decision d = routeFromPort(w, snap, pc, kRouterEgressPortKey, to, v6, f, true);
      if (plan.active && d.kind == Decision::kFlow && (f.ops & op::kOutput)) addNat(pc, plan, f, d);
      return d;
    }
    // A port egress SNAT translates to, with no connection (this process
    // started after it, or it expired): not the host's (its own connections
    // never use these ports, and its stack would reset the pod's
    // connection). Dropped until the pod's next packet picks the connection
    // up again, on the same port (the first one tried is a hash of it).
    if (isSnatReturn(pc, frame)) return dropNow(DropReason::kSnatNoConnection);
    // The host's: bridged, and decided again when the services change (a new node port).
    f.dep_nat = kDepServices;
  }
  if (unicast && ns.isHostMac(dst)) {
    f.ops = op::kOutput;
    f.out_port = host;
    return {Decision::kFlow, DropReason::kOk};
  }
  // A DHCP server's broadcast answer: the host's when it names a host MAC.
  // Never cached, either way: the flow key does not hold what decides (a drop
  // cached for another client's answer would take the host's next).
  if (!unicast && fromDhcpServer(pk, frame)) {
    const uint8_t* client = overlay::dhcp::replyClientMac(frame + pk.payload_offset, pk.payloadLength());
    overlay::MacAddress mac{};
    if (client != nullptr) std::memcpy(mac.data(), client, mac.size());
    if (client == nullptr || !ns.isHostMac(mac)) return dropNow(DropReason::kFabricNotForHost);
    enqueueTx(w, host, pc.mbuf);
    return {Decision::kSent, DropReason::kOk};
  }
  return cacheDrop(f, DropReason::kFabricNotForHost);
}

// A packet too big for its path is dropped and counted as MtuExceeded every
// time; when the sender can learn the path MTU from it (IPv4 with DF, or
// IPv6, and a gateway address to answer from), the ICMP error sent back is
// counted too (IcmpFragNeeded, Icmp6PacketTooBig), as an event beside the drop.
void EngineImpl::tooBig(WorkerContext& w, const Snapshot& snap, const FlowActions& e, PacketContext& pc) {
  const SnapPort* lp = snap.portByDep(e.dep_in);
  rte_mbuf* m = pc.mbuf;
  if (lp != nullptr) {
    if (pc.parsed.l3 == overlay::L3Type::kIpv4) {
      const uint8_t* l3 = rte_pktmbuf_mtod(m, const uint8_t*) + pc.parsed.l3_offset;
      if (overlay::ipv4::dontFragment(l3) && lp->has_gw4) sendReply(w, snap, pc, kReplyFragNeeded, *lp, e.mtu);
    } else if (lp->has_gw6) {
      sendReply(w, snap, pc, kReplyPacketTooBig, *lp, e.mtu);
    }
  }
  drop(w, m, pc.rx_port, DropReason::kMtuExceeded);
}

// Builds a reply in a new mbuf from the request's pool and queues it on the
// port the request came from. The request itself is the caller's to free.
bool EngineImpl::sendReply(WorkerContext& w, const Snapshot& snap, PacketContext& pc, int kind, const SnapPort& port, uint32_t mtu) {
  rte_mbuf* m = pc.mbuf;
  const std::span<const uint8_t> in(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  const overlay::MacAddress& gw_mac = snap.router_mac;
  Event event = Event::kArpReply;
  const bool sent = sendBuilt(w, m->pool, pc.rx_port, [&](overlay::PacketBuffer& out) {
    switch (kind) {
      case kReplyArp:
        return overlay::buildArpReply(in, pc.parsed, gw_mac, out);
      case kReplyNa:
        event = Event::kNdReply;
        return overlay::buildNeighborAdvert(in, pc.parsed, gw_mac, out);
      case kReplyFragNeeded:
        event = Event::kIcmpFragNeeded;
        return overlay::buildIcmpFragNeeded(in, pc.parsed, gw_mac, port.gw4, static_cast<uint16_t>(mtu), out);
      case kReplyPacketTooBig:
        event = Event::kIcmp6PacketTooBig;
        return overlay::buildIcmp6PacketTooBig(in, pc.parsed, gw_mac, port.gw6, mtu, out);
    }
    return overlay::Status::kUnsupported;
  });
  if (sent) bump(w.counters.events[static_cast<size_t>(event)]);
  return sent;
}

}  // namespace dpu::datapath
