// The slow path's load balancer and connection tracking (ARCHITECTURE.md
// "Services"): after port security, before routing.
//
// A packet of a connection conntrack knows is translated as its entry says,
// in whichever direction it travels; a new connection to a service address
// is balanced to a backend (client-IP affinity, then Maglev over the
// 5-tuple, so every DPU picks the same backend and a restarted dataplane
// picks it again for a mid-stream packet), tracked, and translated. The
// translation then becomes part of the one flow the slow path installs
// (the Nat action), so an established connection costs no conntrack lookup
// on the hit path; its TCP SYN, FIN and RST come back here (punt).
//
// The reply of a connection is translated back on the DPU that translated it
// (the client's): a local backend's reply arrives on its port, a remote one's
// through the tunnel. No state crosses DPUs.
//
// kube-proxy's behaviour, kept: a service without a usable endpoint refuses
// (TCP reset, ICMP port unreachable); a port the service lacks on one of its
// addresses is refused the same way; an address of the service CIDRs that no
// service has is dropped; a pod reaching itself through its service is
// masqueraded to the hairpin address so its reply comes back here.
#include <rte_mbuf.h>

#include <cstring>

#include "engine_impl.h"
#include "lb/maglev.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"
#include "overlay/replies.h"
#include "worker_actions.h"

namespace dpu::datapath {
namespace {

bool balanced(uint8_t proto) {
  return proto == overlay::ipproto::kTcp || proto == overlay::ipproto::kUdp || proto == overlay::ipproto::kSctp;
}

uint64_t frontendHash(const SnapFrontend& f) {
  uint64_t a, b;
  std::memcpy(&a, f.ip.data(), 8);
  std::memcpy(&b, f.ip.data() + 8, 8);
  return (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full) ^ (uint64_t{f.port} << 8 | f.protocol);
}

// This node's pod gateway address of the family (its first local subnet's).
bool localGateway(const Snapshot& snap, bool v6, std::array<uint8_t, 16>& out) {
  for (const auto& sub : snap.local_subnets) {
    if (!sub.has_gateway || sub.gateway.isV4() == v6) continue;
    out = {};
    std::memcpy(out.data(), sub.gateway.bytes.data(), v6 ? 16 : 4);
    return true;
  }
  return false;
}

// Inserts connection `t` with `reply`, whose destination port (both ports of
// an ICMP echo's identifier) is chosen: `first` if that is free, else from a
// hash of `t` on through [lo, hi]. A few tries: a range crowded enough to
// fail them is exhausted for that peer.
Result<conntrack::Hit> insertAllocating(conntrack::Table& ct, const conntrack::Tuple& t, conntrack::Tuple& reply,
                                        uint8_t nat, conntrack::State initial, uint64_t now_ms, bool loose,
                                        uint16_t first, uint16_t lo, uint16_t hi) {
  constexpr unsigned kTries = 32;
  const bool echo = t.protocol == overlay::ipproto::kIcmp || t.protocol == overlay::ipproto::kIcmpv6;
  const uint32_t span = uint32_t{hi} - lo + 1;
  const uint32_t start = static_cast<uint32_t>(
      lb::tupleHash(t.src.data(), t.dst.data(), t.family == 6 ? 16 : 4, t.src_port, t.dst_port, t.protocol) % span);
  for (unsigned i = 0;; ++i) {
    const bool own = i == 0 && first >= lo && first <= hi;
    reply.dst_port = own ? first : static_cast<uint16_t>(lo + (start + i) % span);
    if (echo) reply.src_port = reply.dst_port;
    auto r = ct.insert(t, reply, nat, initial, now_ms, 0, 0, loose);
    if (r || r.code() != ErrorCode::kConflict || i + 1 == kTries) return r;
  }
}

// The translation a tracked connection's packet gets in direction `dir`.
void planFromEntry(const conntrack::Entry& e, conntrack::Dir dir, NatPlan& plan) {
  plan.active = true;
  plan.v6 = e.original.family == 6;
  plan.once = inHandshake(e.state);
  if (dir == conntrack::Dir::kOriginal) {
    // Client → service: to the backend, from the client (or its masquerade).
    plan.src = e.reply.dst;
    plan.sport = e.reply.dst_port;
    plan.dst = e.reply.src;
    plan.dport = e.reply.src_port;
  } else {
    // Backend → client: from the service, to the client.
    plan.src = e.original.dst;
    plan.sport = e.original.dst_port;
    plan.dst = e.original.src;
    plan.dport = e.original.src_port;
  }
}

}  // namespace

Decision EngineImpl::reject(WorkerContext& w, const Snapshot& snap, PacketContext& pc) {
  rte_mbuf* m = pc.mbuf;
  const std::span<const uint8_t> in(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  const bool sent = sendBuilt(w, m->pool, pc.rx_port, [&](overlay::PacketBuffer& out) {
    return pc.parsed.l4 == overlay::L4Type::kTcp ? overlay::buildTcpReset(in, pc.parsed, snap.router_mac, out)
                                                 : overlay::buildIcmpPortUnreachable(in, pc.parsed, snap.router_mac, out);
  });
  if (!sent) return dropNow(DropReason::kServiceRejectFailed);
  bump(w.counters.events[static_cast<size_t>(Event::kServiceRejected)]);
  return {Decision::kReplied, DropReason::kOk};
}

std::optional<Decision> EngineImpl::serviceStage(WorkerContext& w, const Snapshot& snap, PacketContext& pc,
                                                 From from, FlowRecord& f, NatPlan& plan) {
  w.ct_hit_valid = false;
  const overlay::FlowKey& k = pc.key;
  const overlay::ParsedPacket& pk = pc.parsed;
  const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
  const uint8_t* dst = k.l3_dst.data();
  const uint8_t proto = k.ip_proto;
  if (pk.l4 == overlay::L4Type::kIcmp || pk.l4 == overlay::L4Type::kIcmpv6) {
    // Forwarded once, to wherever the translated error now goes.
    if (translateIcmpError(w, pc)) {
      w.related = true;
      return std::nullopt;
    }
  }

  // A connection conntrack knows, in either direction.
  const conntrack::Tuple t = connectionTuple(k, v6);
  const uint8_t flags = tcpFlagsOf(pc);
  conntrack::Entry e;
  if (pk.fragment != overlay::Fragment::kLater) {
    conntrack::State before_state = conntrack::State::kNew;
    if (auto hit = conntrack_->track(t, flags, w.now_ms, &e, &before_state)) {
      const bool reopened = hit->dir == conntrack::Dir::kOriginal && proto == overlay::ipproto::kTcp &&
                            (flags & (conntrack::kTcpSyn | conntrack::kTcpAck)) == conntrack::kTcpSyn &&
                            (before_state == conntrack::State::kTimeWait || before_state == conntrack::State::kClose);
      // A flushed connection (its backend left): the client's packet opens a
      // new one below; the old backend's late answer is translated as
      // before but not cached, since the flow would outlive the tombstone.
      const bool flushed_client = e.flushed && hit->dir == conntrack::Dir::kOriginal;
      if (!reopened && !flushed_client) {
        plan.established = true;
        if (e.nat == 0) {
          // Tracked for NetworkPolicy only (policy.cpp): routed as sent, its
          // flow noted in the entry; its handshake, like a translated
          // connection's, is not cached.
          plan.once = inHandshake(e.state);
          w.ct_hit = *hit;
          w.ct_hit_valid = true;
          w.policy_tracked = true;
          return std::nullopt;
        }
        planFromEntry(e, hit->dir, plan);
        if (e.flushed) plan.once = true;
        // The flow depends on the service that balanced it: a change of its
        // backends revalidates the flow against this entry (or its flush).
        const SnapFrontend* fe = snap.frontend(e.original.dst.data(), v6, e.original.dst_port, proto);
        plan.dep = fe != nullptr ? fe->dep : kDepServices;
        w.ct_hit = *hit;
        w.ct_hit_valid = true;
        return std::nullopt;
      }
      // The same 5-tuple opens a new connection: balanced anew below (a
      // flushed one was counted when it was flushed).
      (void)conntrack_->remove(*hit);
      if (!flushed_client) bump(w.counters.events[static_cast<size_t>(Event::kConntrackClosed)]);
    }
  }
  if (from == From::kTunnel) return std::nullopt;

  // A new connection: is it for a service?
  const SnapFrontend* fe = balanced(proto) ? snap.frontend(dst, v6, k.l4_dst, proto) : nullptr;
  // From the fabric only node ports and external IPs are the cluster's; the
  // rest is the host's.
  if (from == From::kFabric && (fe == nullptr || fe->kind == FrontendKind::kClusterIp)) return std::nullopt;
  if (fe == nullptr) {
    if (!snap.isServiceIp(dst, v6)) {
      if (!snap.inServiceCidr(dst, v6)) return std::nullopt;  // not a service: routed as sent
      f.dep_out = kDepServices;
      return cacheDrop(f, DropReason::kServiceIpUnknown);
    }
    if (!balanced(proto)) {
      f.dep_out = kDepServices;
      return cacheDrop(f, DropReason::kServiceProtocol);
    }
    // A port the service does not have: refused, as kube-proxy does.
    completeParse(pc);
    return reject(w, snap, pc);
  }
  if (pk.fragment != overlay::Fragment::kNone) return dropNow(DropReason::kServiceFragment);
  bool loose = false;
  const auto initial = conntrack::Table::initialState(proto, flags, loose);
  if (!initial) return dropNow(DropReason::kServiceNotAConnection);

  // The backend: the client's affinity while it lasts, else Maglev over the 5-tuple.
  const SnapBackendSet& set = *fe->backends;
  const std::vector<SnapBackend>& candidates = fe->candidates();
  if (candidates.empty()) {
    // kube-proxy drops what a Local policy cannot serve here while other
    // nodes could, and refuses a service that has no endpoint at all.
    if (fe->local_only && !set.usable.empty()) return dropNow(DropReason::kServiceNoLocalEndpoint);
    return reject(w, snap, pc);
  }
  const SnapBackend* backend = nullptr;
  const uint64_t fkey = frontendHash(*fe);
  if (fe->affinity_ms != 0) {
    conntrack::Affinity::Target sticky;
    if (affinity_->find(fkey, t.src, w.now_ms, fe->affinity_ms, sticky)) {
      for (const auto& b : candidates) {
        if (b.ip == sticky.ip && b.port == sticky.port) backend = &b;
      }
      if (backend != nullptr) bump(w.counters.events[static_cast<size_t>(Event::kServiceAffinity)]);
    }
  }
  if (backend == nullptr) {
    // Picked already while the previous packet's miss was decided (prefetchNextConnection).
    const WorkerContext::Pick& np = w.pick;
    backend = np.snap == &snap && np.frontend == fe && np.tuple == t
                  ? np.backend
                  : fe->maglevPick(t.src.data(), t.dst.data(), v6 ? 16 : 4, t.src_port, t.dst_port, proto);
  }
  if (fe->affinity_ms != 0) affinity_->record(fkey, t.src, {backend->ip, backend->port}, w.now_ms);
  if (proto == overlay::ipproto::kSctp && backend->port != fe->port) {
    return dropNow(DropReason::kServiceSctpPortChange);
  }

  // The connection: replies come from the backend to the client, or, when a
  // pod reaches itself, to the hairpin address (masqueraded).
  conntrack::Tuple reply;
  reply.family = t.family;
  reply.protocol = proto;
  reply.src = backend->ip;
  reply.src_port = backend->port;
  reply.dst = t.src;
  reply.dst_port = t.src_port;
  uint8_t nat = conntrack::kNatDst;
  bool allocate = false;
  if (sameAddress(backend->ip.data(), t.src.data(), v6)) {
    reply.dst = v6 ? kHairpinV6 : kHairpinV4;
    nat |= conntrack::kNatSrc;
    bump(w.counters.events[static_cast<size_t>(Event::kServiceHairpin)]);
  } else if (from == From::kFabric && fe->masquerade) {
    // A node port or external IP with the Cluster policy: the client is
    // masqueraded to this node's pod gateway address, so that a backend on
    // another node answers through this one, where the connection is tracked.
    if (!localGateway(snap, v6, reply.dst)) return dropNow(DropReason::kServiceNoMasqueradeAddress);
    nat |= conntrack::kNatSrc;
    allocate = true;
  }
  auto hit = allocate ? insertAllocating(*conntrack_, t, reply, nat, *initial, w.now_ms, loose, t.src_port, 1024, 65535)
                      : conntrack_->insert(t, reply, nat, *initial, w.now_ms, 0, 0, loose);
  if (!hit && hit.code() == ErrorCode::kConflict && !allocate && !loose && proto != overlay::ipproto::kSctp) {
    // The backend already has a connection from this client address and
    // port: the client picks its ports per destination, so an earlier
    // connection to another service with the same backend (still in
    // time-wait, say) may hold it. As Linux's NAT does on such a clash, the
    // client's port is translated to a free one. Not mid-stream (the backend
    // knows the connection by its port) nor for SCTP (its CRC32c covers the
    // ports).
    nat |= conntrack::kNatSrc;
    hit = insertAllocating(*conntrack_, t, reply, nat, *initial, w.now_ms, loose, 0, 1024, 65535);
  }
  if (!hit) {
    return dropNow(hit.code() == ErrorCode::kExhausted ? DropReason::kConntrackFull
                   : allocate                          ? DropReason::kSnatPortsExhausted
                                                       : DropReason::kConntrackConflict);
  }
  bump(w.counters.events[static_cast<size_t>(Event::kConntrackNew)]);
  if (loose) bump(w.counters.events[static_cast<size_t>(Event::kConntrackLoose)]);
  w.ct_hit = *hit;
  w.ct_hit_valid = true;
  conntrack::Entry made;
  made.original = t;
  made.reply = reply;
  made.state = *initial;
  planFromEntry(made, conntrack::Dir::kOriginal, plan);
  plan.once = openerOnce(loose);
  plan.dep = fe->dep;
  return std::nullopt;
}

void EngineImpl::addNat(const PacketContext& pc, const NatPlan& plan, FlowRecord& f, Decision& d) const {
  onceWhilePlanned(plan, d);
  f.ops |= op::kNat;
  f.dep_nat = plan.dep;
  f.nat = makeNatRewrite(pc.key, plan.v6, pc.key.ip_proto, plan.src.data(), plan.dst.data(), plan.sport, plan.dport);
}

bool EngineImpl::noteConnectionFlow(WorkerContext& w, const PacketContext&, uint32_t index) {
  if (!w.ct_hit_valid) return true;
  // Where the flow is, so expiry reads its last hit: worker, slot and flow
  // id (the slot may hold another flow by then).
  const uint64_t where = uint64_t{w.index_} << 58 | uint64_t{index} << 32 | w.table.extra(index).flow_id;
  return conntrack_->setUser(w.ct_hit, w.ct_hit.dir, where);
}

std::optional<Decision> EngineImpl::egressSnat(WorkerContext& w, const Snapshot& snap, PacketContext& pc,
                                               NatPlan& plan) {
  const overlay::FlowKey& k = pc.key;
  const overlay::ParsedPacket& pk = pc.parsed;
  const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
  if (!snap.north_south.hasNodeIp(v6)) return std::nullopt;
  const uint8_t proto = k.ip_proto;
  const uint8_t* frame = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*);
  const bool echo = v6 ? pk.l4 == overlay::L4Type::kIcmpv6 && frame[pk.l4_offset] == overlay::icmp6::kTypeEchoRequest
                       : pk.l4 == overlay::L4Type::kIcmp && frame[pk.l4_offset] == overlay::icmp::kTypeEchoRequest;
  if (proto != overlay::ipproto::kTcp && proto != overlay::ipproto::kUdp && !echo) return std::nullopt;
  if (pk.fragment != overlay::Fragment::kNone) return dropNow(DropReason::kSnatFragment);
  NorthSouthRoute r;
  const DropReason why = northSouthRoute(w, snap, pc, k.l3_dst.data(), v6, r);
  if (why != DropReason::kOk) return dropNow(why);
  bool loose = false;
  const auto initial = conntrack::Table::initialState(proto, tcpFlagsOf(pc), loose);
  if (!initial) return dropNow(DropReason::kServiceNotAConnection);
  const conntrack::Tuple t = connectionTuple(k, v6);
  conntrack::Tuple reply;
  reply.family = v6 ? 6 : 4;
  reply.protocol = proto;
  reply.src = t.dst;
  reply.src_port = t.dst_port;
  std::memcpy(reply.dst.data(), r.node_ip.bytes.data(), v6 ? 16 : 4);
  auto hit = insertAllocating(*conntrack_, t, reply, conntrack::kNatSrc, *initial, w.now_ms, loose, 0, kSnatPorts.first,
                              kSnatPorts.second);
  if (!hit) {
    return dropNow(hit.code() == ErrorCode::kExhausted ? DropReason::kConntrackFull : DropReason::kSnatPortsExhausted);
  }
  bump(w.counters.events[static_cast<size_t>(Event::kConntrackNew)]);
  bump(w.counters.events[static_cast<size_t>(Event::kSnatNew)]);
  if (loose) bump(w.counters.events[static_cast<size_t>(Event::kConntrackLoose)]);
  w.ct_hit = *hit;
  w.ct_hit_valid = true;
  conntrack::Entry made;
  made.original = t;
  made.reply = reply;
  made.state = *initial;
  planFromEntry(made, conntrack::Dir::kOriginal, plan);
  plan.once = openerOnce(loose);
  plan.dep = kDepNode;
  return std::nullopt;
}

namespace {

bool isIcmpError(uint8_t type, bool v6) {
  return v6 ? (type >= 1 && type <= 4)  // unreachable, too big, time exceeded, parameter problem
            : (type == 3 || type == 11 || type == 12);
}

}  // namespace

// An ICMP error quotes the packet it is about: the start of a packet of a
// translated connection, as it was after our translation. The error goes the
// other way, so the quoted tuple reversed is the connection's tuple in the
// error's direction. Translated as Linux translates a RELATED packet: the
// quoted packet back to what its sender saw (addresses, ports, its IP
// checksum and the L4 checksum where the quote holds it), the error's
// destination to the quoted packet's sender, its source to the service
// address when the error comes from the translated peer itself (a router on
// the way keeps its own address), and the ICMP checksum over the message.
bool EngineImpl::translateIcmpError(WorkerContext& w, PacketContext& pc) {
  rte_mbuf* m = pc.mbuf;
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  const overlay::ParsedPacket& pk = pc.parsed;
  const bool v6 = pk.l3 == overlay::L3Type::kIpv6;
  if (pk.fragment != overlay::Fragment::kNone) return false;
  const uint32_t end = std::min<uint32_t>(pk.l3_end, m->data_len);
  const uint32_t icmp = pk.l4_offset;
  if (end < icmp + 8 || !isIcmpError(p[icmp], v6)) return false;

  // The quoted packet: its IP header and at least 8 bytes of what follows.
  uint8_t* q = p + icmp + 8;
  const uint32_t qlen = end - (icmp + 8);
  uint32_t qhl = 0;
  uint8_t qproto = 0;
  if (v6) {
    if (qlen < 40 || (q[0] >> 4) != 6) return false;
    qhl = 40;
    qproto = q[6];
  } else {
    if (qlen < 20 || (q[0] >> 4) != 4) return false;
    qhl = (q[0] & 0x0fu) * 4u;
    if (qhl < 20 || (overlay::load16(q + 6) & 0x1fffu) != 0) return false;  // a later fragment quotes no ports
    qproto = q[9];
  }
  if (qlen < qhl + 8) return false;
  uint8_t* ql4 = q + qhl;
  const size_t alen = v6 ? 16 : 4;
  uint8_t* qaddrs = q + (v6 ? 8 : 12);  // source then destination
  conntrack::Tuple quoted;
  quoted.family = v6 ? 6 : 4;
  quoted.protocol = qproto;
  std::memcpy(quoted.src.data(), qaddrs, alen);
  std::memcpy(quoted.dst.data(), qaddrs + alen, alen);
  const bool echo = qproto == (v6 ? overlay::ipproto::kIcmpv6 : overlay::ipproto::kIcmp);
  if (echo) {
    const uint8_t t = ql4[0];
    if (v6 ? (t != 128 && t != 129) : (t != 8 && t != 0)) return false;
    quoted.src_port = quoted.dst_port = overlay::load16(ql4 + 4);
  } else if (balanced(qproto)) {
    quoted.src_port = overlay::load16(ql4);
    quoted.dst_port = overlay::load16(ql4 + 2);
  } else {
    return false;
  }
  conntrack::Entry e;
  const auto hit = conntrack_->find(quoted.reversed(), &e);
  if (!hit) return false;
  // About a connection tracked for NetworkPolicy only: related, nothing to translate.
  if (e.nat == 0) return true;
  // O: the connection in the error's direction as packets arrive; N: the
  // quoted packet's direction as its sender sent it.
  const conntrack::Tuple& o = hit->dir == conntrack::Dir::kReply ? e.reply : e.original;
  const conntrack::Tuple& n = hit->dir == conntrack::Dir::kReply ? e.original : e.reply;

  // The quoted packet.
  uint8_t old_addrs[32];
  std::memcpy(old_addrs, qaddrs, 2 * alen);
  std::memcpy(qaddrs, n.src.data(), alen);
  std::memcpy(qaddrs + alen, n.dst.data(), alen);
  uint8_t old_ports[4];
  std::memcpy(old_ports, ql4, 4);
  if (!echo) {
    overlay::store16(ql4, n.src_port);
    overlay::store16(ql4 + 2, n.dst_port);
  }
  if (!v6) {
    overlay::store16(q + 10, 0);
    overlay::store16(q + 10, overlay::internetChecksum({q, qhl}));
  }
  // Its L4 checksum, where the quote holds it (UDP's 0 means none).
  uint32_t csum_at = 0;
  bool pseudo = true;
  if (qproto == overlay::ipproto::kUdp && overlay::load16(ql4 + 6) != 0) csum_at = 6;
  if (qproto == overlay::ipproto::kTcp && qlen >= qhl + 18) csum_at = 16;
  if (echo) {
    csum_at = 2;
    pseudo = v6;  // ICMPv6's checksum covers the addresses; ICMP's does not
  }
  if (csum_at != 0) {
    uint16_t c = overlay::load16(ql4 + csum_at);
    if (pseudo) c = overlay::checksumUpdateBytes(c, old_addrs, qaddrs, 2 * alen);
    if (!echo) c = overlay::checksumUpdateBytes(c, old_ports, ql4, 4);
    overlay::store16(ql4 + csum_at, c);
  }

  // The error itself.
  uint8_t* l3 = p + pk.l3_offset;
  uint8_t* src = l3 + (v6 ? 8 : 12);
  uint8_t* dst = src + alen;
  if (std::memcmp(src, o.src.data(), alen) == 0) std::memcpy(src, n.dst.data(), alen);
  std::memcpy(dst, n.src.data(), alen);
  if (!v6) {
    const uint32_t ihl = (l3[0] & 0x0fu) * 4u;
    overlay::store16(l3 + 10, 0);
    overlay::store16(l3 + 10, overlay::internetChecksum({l3, ihl}));
  }
  const uint32_t icmp_len = end - icmp;
  overlay::store16(p + icmp + 2, 0);
  uint32_t sum = overlay::checksumAdd(p + icmp, icmp_len);
  if (v6) sum += overlay::pseudoHeaderSumV6(src, dst, overlay::ipproto::kIcmpv6, icmp_len);
  overlay::store16(p + icmp + 2, overlay::checksumFinish(sum));
  bump(w.counters.events[static_cast<size_t>(Event::kIcmpErrorTranslated)]);
  return true;
}

}  // namespace dpu::datapath
