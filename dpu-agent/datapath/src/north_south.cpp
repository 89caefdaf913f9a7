// North–south (north_south.h): the snapshot's part built from the model and
// the learned tables, the lcores' learning and ARP requests, the control
// thread's tables (observations, ageing, eviction) and the operator's view.
// The two slow-path entries that bridge the frames are in pipeline.cpp.
#include <rte_mbuf.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine_impl.h"
#include "overlay/replies.h"

namespace dpu::datapath {
namespace {

constexpr uint64_t kArpInterval = 1000;      // ms between two requests for one address, per worker
constexpr uint64_t kSeenInterval = 1000;     // ms between two reports of a known host MAC, per worker
constexpr uint64_t kIncompleteKept = 60000;  // ms an unanswered address stays listed after it was last needed

overlay::MacAddress fromKey(uint64_t k) {
  overlay::MacAddress m;
  for (int i = 5; i >= 0; --i) {
    m[static_cast<size_t>(i)] = static_cast<uint8_t>(k);
    k >>= 8;
  }
  return m;
}

std::string ipText(uint32_t host_order) { return IpAddress::v4(host_order).str(); }

const char* sourceText(uint8_t source) {
  switch (source) {
    case NorthSouthObservation::kReplyToHost: return "ARP reply to the host";
    case NorthSouthObservation::kRequestToHost: return "ARP request to a node IP";
    default: return "ARP from the fabric";
  }
}

}  // namespace

// ---- SnapNorthSouth ----

bool SnapNorthSouth::isHostMac(const overlay::MacAddress& m) const {
  return std::binary_search(host_macs.begin(), host_macs.end(), macKey(m));
}

bool SnapNorthSouth::refusedMac(const overlay::MacAddress& m) const {
  return std::binary_search(refused_macs.begin(), refused_macs.end(), macKey(m));
}

const SnapNodeIp4* SnapNorthSouth::nodeIp4(uint32_t ip) const {
  for (const auto& n : node_ipv4)
    if (n.ip == ip) return &n;
  return nullptr;
}

bool SnapNorthSouth::isNodeIp6(const uint8_t* a) const {
  for (const auto& n : node_ipv6)
    if (std::memcmp(n.ip.data(), a, 16) == 0) return true;
  return false;
}

const SnapNodeIp4* SnapNorthSouth::onLink4(uint32_t a) const {
  for (const auto& n : node_ipv4)
    if (n.onLink(a)) return &n;
  return nullptr;
}

// ---- the snapshot's part (control thread) ----

void buildNorthSouth(const SnapshotInputs& in, const MacAddress& uplink_mac, DepRegistry& deps, Snapshot& s) {
  SnapNorthSouth& ns = s.north_south;
  const Model& m = *in.model;
  for (const auto& [name, b] : *in.bindings) {
    if (b.role == PortRole::kHostPf && b.port < kMaxPorts) {
      ns.host_pf_port = b.port;
      break;
    }
  }
  const NorthSouthTables* t = in.north_south;
  if (t != nullptr) {
    ns.max_host_macs = t->max_host_macs;
    ns.stale_ms = t->stale_ms;
    for (const auto& [mac, entry] : t->host_macs) ns.host_macs.push_back(macKey(mac.bytes));
    std::sort(ns.host_macs.begin(), ns.host_macs.end());
  }
  std::string content = "host_pf=" + std::to_string(ns.host_pf_port);
  for (const auto& ifa : m.node_ips) {
    content += "|ip=" + ifa.str();
    if (ifa.address.isV4()) {
      SnapNodeIp4 n;
      n.ip = ifa.address.v4HostOrder();
      n.mask = ifa.length == 0 ? 0 : ~uint32_t{0} << (32 - ifa.length);
      // The host's MAC for it: what its ARP said, else its only MAC.
      if (t != nullptr) {
        if (auto owner = t->node_ip_owner.find(n.ip); owner != t->node_ip_owner.end()) {
          n.has_mac = true;
          n.mac = owner->second.bytes;
        } else if (t->host_macs.size() == 1) {
          n.has_mac = true;
          n.mac = t->host_macs.begin()->first.bytes;
        }
      }
      if (n.has_mac) content += "@" + MacAddress{n.mac}.str();
      ns.node_ipv4.push_back(n);
    } else {
      SnapNodeIp6 n;
      std::memcpy(n.ip.data(), ifa.address.bytes.data(), 16);
      n.length = ifa.length;
      ns.node_ipv6.push_back(n);
    }
  }
  for (const auto& gw : m.node_gateways) {
    content += "|gw=" + gw.str();
    if (gw.isV4()) {
      ns.has_gw4 = true;
      ns.gw4 = gw.v4HostOrder();
    }
  }
  // What the host may not claim: the cluster's own MACs.
  ns.refused_macs.push_back(macKey(m.router_mac.bytes));
  if (!uplink_mac.isZero()) ns.refused_macs.push_back(macKey(uplink_mac.bytes));
  for (const auto& p : m.ports) ns.refused_macs.push_back(macKey(p.mac.bytes));
  std::sort(ns.refused_macs.begin(), ns.refused_macs.end());
  ns.refused_macs.erase(std::unique(ns.refused_macs.begin(), ns.refused_macs.end()), ns.refused_macs.end());
  for (uint64_t k : ns.host_macs) content += "|mac=" + MacAddress{fromKey(k)}.str();
  for (uint64_t k : ns.refused_macs) content += "|refused=" + MacAddress{fromKey(k)}.str();
  ns.dep = deps.idFor("north-south");
  deps.touch(ns.dep, content);

  if (t == nullptr) return;
  const std::string uplink = "|uplink=" + std::to_string(s.uplink_port) + "/" + uplink_mac.str();
  for (const auto& [ip, n] : t->neighbours) {
    if (!n.complete) continue;
    SnapNeighbour sn;
    sn.ip = ip;
    sn.mac = n.mac.bytes;
    sn.confirmed_ms = n.confirmed_ms;
    sn.dep = deps.idFor("neighbour/" + ipText(ip));
    // What a flow through it depends on: its MAC, and the node IP and host
    // MAC it is reached from, and the uplink.
    std::string c = n.mac.str() + uplink;
    if (const SnapNodeIp4* via = ns.onLink4(ip); via != nullptr) {
      c += "|via=" + ipText(via->ip) + (via->has_mac ? "@" + MacAddress{via->mac}.str() : std::string());
    }
    deps.touch(sn.dep, c);
    ns.neighbours4.emplace(ip, sn);
  }
}

// ---- the lcores ----

void EngineImpl::observeNorthSouth(WorkerContext& w, const NorthSouthObservation& o, bool news) {
  NorthSouthWorker& ns = w.north_south;
  if (o.kind == NorthSouthObservation::kHostMac && !news) {
    // A known MAC is reported at most once a second: enough for its age.
    const uint64_t k = macKey(o.mac);
    NorthSouthWorker::Seen& seen = ns.seen[(k ^ (k >> 17)) % std::size(ns.seen)];
    if (seen.mac == k && w.now_ms - seen.ms < kSeenInterval) return;
    seen.mac = k;
    seen.ms = w.now_ms;
  }
  if (!ns.push(o)) {
    bump(w.counters.events[static_cast<size_t>(Event::kNorthSouthNewsLost)]);
    return;
  }
  // Something the snapshot lacks: wake the control thread now rather than at
  // its next maintain(). One write(2) per drain at most (the flag), and news
  // is rare: a new host MAC or neighbour, an address to resolve.
  if (news && ns_event_fd_ >= 0 && ns.wake.load(std::memory_order_relaxed) == 0) {
    ns.wake.store(1, std::memory_order_relaxed);
    const uint64_t one = 1;
    (void)!::write(ns_event_fd_, &one, sizeof one);
  }
}

void EngineImpl::learnFromArp(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host) {
  const SnapNorthSouth& ns = snap.north_south;
  const uint8_t* a = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pc.parsed.l3_offset;
  const overlay::MacAddress sha = overlay::arp::senderMac(a);
  const uint32_t spa = overlay::arp::senderIp(a);
  if (spa == 0 || (sha[0] & 1) != 0 || macKey(sha) == 0) return;  // a probe (RFC 5227), or no sender
  NorthSouthObservation o;
  o.mac = sha;
  o.ip = spa;
  if (from_host) {
    // The host says which of its MACs holds a node IP (the SNAT source MAC).
    const SnapNodeIp4* node = ns.nodeIp4(spa);
    if (node == nullptr || sha != pc.key.eth_src) return;
    o.kind = NorthSouthObservation::kNodeIpClaim;
    observeNorthSouth(w, o, !node->has_mac || node->mac != sha);
    return;
  }
  // A neighbour on the node network: on-link, not one of ours, not the host.
  if (ns.nodeIp4(spa) != nullptr || ns.onLink4(spa) == nullptr || ns.isHostMac(sha) || ns.refusedMac(sha)) return;
  const SnapNeighbour* known = ns.neighbour4(spa);
  const bool to_node = ns.nodeIp4(overlay::arp::targetIp(a)) != nullptr;
  // Only ARP to a node IP adds a neighbour (an address the host talks to or
  // is asked by); other ARP only updates one (a gratuitous ARP after a move).
  if (!to_node && known == nullptr) return;
  o.kind = NorthSouthObservation::kNeighbour;
  o.source = !to_node ? NorthSouthObservation::kOtherArp
             : overlay::arp::op(a) == overlay::arp::kOpReply ? NorthSouthObservation::kReplyToHost
                                                              : NorthSouthObservation::kRequestToHost;
  observeNorthSouth(w, o, known == nullptr || known->mac != sha);
}

namespace {

// Whether this worker may ask for `target` now (`sending`: an ARP request;
// else only report it wanted): at most once a second per address, and
// kArpPerSecond requests in all. A yes is recorded; a report does not hold
// back the first request once one can be sent.
bool mayAsk(WorkerContext& w, uint32_t target, bool sending) {
  NorthSouthWorker& ns = w.north_south;
  NorthSouthWorker::Asked& asked = ns.asked[(target * 0x9e3779b1u) >> 26];
  if (asked.ip == target && w.now_ms - asked.ms < kArpInterval && (asked.sent || !sending)) return false;
  if (sending) {
    if (w.now_ms - ns.arp_window_ms >= 1000) {
      ns.arp_window_ms = w.now_ms;
      ns.arp_in_window = 0;
    }
    if (ns.arp_in_window >= NorthSouthWorker::kArpPerSecond) return false;
    ++ns.arp_in_window;
  }
  asked.ip = target;
  asked.ms = w.now_ms;
  asked.sent = sending;
  return true;
}

}  // namespace

bool EngineImpl::sendArpRequest(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, const SnapNodeIp4& from,
                                uint32_t target, const overlay::MacAddress& dst) {
  if (snap.uplink_port < 0 || !mayAsk(w, target, true)) {
    bump(w.counters.events[static_cast<size_t>(Event::kNeighbourArpLimited)]);
    return false;
  }
  rte_mbuf* r = rte_pktmbuf_alloc(pool);
  if (r == nullptr) return false;
  overlay::PacketBuffer out(static_cast<uint8_t*>(r->buf_addr), r->buf_len, r->data_off, 0);
  if (overlay::buildArpRequest(from.mac, from.ip, target, dst, out) != overlay::Status::kOk) {
    rte_pktmbuf_free(r);
    return false;
  }
  r->data_off = static_cast<uint16_t>(out.headroom());
  r->data_len = static_cast<uint16_t>(out.size());
  r->pkt_len = out.size();
  enqueueTx(w, static_cast<uint16_t>(snap.uplink_port), r);
  bump(w.counters.events[static_cast<size_t>(Event::kNeighbourArpRequest)]);
  return true;
}

void EngineImpl::askHost(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, uint32_t node_ip) {
  const int host = snap.north_south.host_pf_port;
  // Keyed by the node IP, which is never a next hop: its own once-a-second.
  if (host < 0 || !mayAsk(w, node_ip, true)) return;
  rte_mbuf* r = rte_pktmbuf_alloc(pool);
  if (r == nullptr) return;
  overlay::PacketBuffer out(static_cast<uint8_t*>(r->buf_addr), r->buf_len, r->data_off, 0);
  if (overlay::buildArpProbe(snap.router_mac, node_ip, out) != overlay::Status::kOk) {
    rte_pktmbuf_free(r);
    return;
  }
  r->data_off = static_cast<uint16_t>(out.headroom());
  r->data_len = static_cast<uint16_t>(out.size());
  r->pkt_len = out.size();
  enqueueTx(w, static_cast<uint16_t>(host), r);
  bump(w.counters.events[static_cast<size_t>(Event::kHostArpProbe)]);
}

DropReason EngineImpl::northSouthRoute(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, uint32_t dst,
                                       NorthSouthRoute& out) {
  const SnapNorthSouth& ns = snap.north_south;
  if (snap.uplink_port < 0) return DropReason::kNoUplink;
  uint32_t hop = dst;
  const SnapNodeIp4* via = ns.onLink4(dst);
  if (via == nullptr) {
    if (!ns.has_gw4) return DropReason::kNoRoute;
    hop = ns.gw4;
    via = ns.onLink4(hop);
    if (via == nullptr) return DropReason::kNoRoute;  // the model keeps gateways on-link
  }
  NorthSouthObservation o;
  o.ip = hop;
  const SnapNeighbour* n = ns.neighbour4(hop);
  if (n == nullptr || !via->has_mac) {
    // Reported (and asked for) at most once a second per address: a flood
    // towards an unresolved next hop costs a drop per packet, nothing more.
    // Without the host's MAC for the node IP (its ARP not seen yet, as
    // after a dataplane restart) no request can be sent: the host is asked
    // which MAC holds the node IP, and its answer teaches it (learnFromArp);
    // the address is listed as wanted anyway.
    if (via->has_mac) {
      o.requested = sendArpRequest(w, snap, pc.mbuf->pool, *via, hop, overlay::eth::kBroadcast);
      if (!o.requested) return DropReason::kNeighbourUnresolved;
    } else {
      askHost(w, snap, pc.mbuf->pool, via->ip);
      if (!mayAsk(w, hop, false)) return DropReason::kNeighbourUnresolved;
    }
    o.kind = NorthSouthObservation::kWanted;
    observeNorthSouth(w, o, true);
    return DropReason::kNeighbourUnresolved;
  }
  if (w.now_ms - n->confirmed_ms > ns.stale_ms && sendArpRequest(w, snap, pc.mbuf->pool, *via, hop, n->mac)) {
    o.kind = NorthSouthObservation::kProbed;
    observeNorthSouth(w, o, false);
  }
  out.next_hop = hop;
  out.node_ip = via->ip;
  out.host_mac = via->mac;
  out.next_hop_mac = n->mac;
  out.out_port = static_cast<uint16_t>(snap.uplink_port);
  out.dep = n->dep;
  return DropReason::kOk;
}

// ---- the control thread ----

Result<void> EngineImpl::initNorthSouth() {
  ns_.max_host_macs = config_.max_host_macs;
  ns_.host_mac_ageing_ms = config_.host_mac_ageing_ms;
  ns_.max_neighbours = config_.max_neighbours;
  ns_.stale_ms = config_.neighbour_stale_ms;
  ns_event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ns_event_fd_ < 0) return Error{std::string("engine: eventfd for the north–south tables: ") + std::strerror(errno)};
  steering_.version = 1;
  return {};
}

bool EngineImpl::applyObservation(const NorthSouthObservation& o, uint64_t now_ms) {
  const MacAddress mac{o.mac};
  auto event = [this](Event e) { ++control_events_[static_cast<size_t>(e)]; };
  switch (o.kind) {
    case NorthSouthObservation::kHostMac: {
      if (auto it = ns_.host_macs.find(mac); it != ns_.host_macs.end()) {
        it->second.seen_ms = now_ms;
        return false;
      }
      // The lcores refuse new MACs once a snapshot shows the table full; one
      // that raced them in is left out here.
      if (ns_.host_macs.size() >= ns_.max_host_macs) return false;
      ns_.host_macs[mac] = NorthSouthTables::HostMac{now_ms, now_ms, {}};
      event(Event::kHostMacLearned);
      return true;
    }
    case NorthSouthObservation::kNodeIpClaim: {
      auto it = ns_.host_macs.find(mac);
      if (it == ns_.host_macs.end()) return false;
      bool changed = it->second.node_ips.insert(o.ip).second;
      auto& owner = ns_.node_ip_owner[o.ip];
      if (owner != mac) {
        // The node IP moved to another of the host's MACs.
        if (auto old = ns_.host_macs.find(owner); old != ns_.host_macs.end()) old->second.node_ips.erase(o.ip);
        owner = mac;
        changed = true;
      }
      return changed;
    }
    case NorthSouthObservation::kNeighbour: {
      auto it = ns_.neighbours.find(o.ip);
      if (it == ns_.neighbours.end()) {
        if (o.source == NorthSouthObservation::kOtherArp) return false;
        it = ns_.neighbours.emplace(o.ip, NorthSouthTables::Neighbour{}).first;
      }
      NorthSouthTables::Neighbour& n = it->second;
      const bool changed = !n.complete || n.mac != mac;
      if (changed) {
        if (!n.complete) {
          // Room for one more complete entry: the least recently confirmed goes.
          size_t complete = 0;
          auto oldest = ns_.neighbours.end();
          for (auto c = ns_.neighbours.begin(); c != ns_.neighbours.end(); ++c) {
            if (!c->second.complete) continue;
            ++complete;
            if (oldest == ns_.neighbours.end() || c->second.confirmed_ms < oldest->second.confirmed_ms) oldest = c;
          }
          if (complete >= ns_.max_neighbours && oldest != ns_.neighbours.end()) {
            ns_.neighbours.erase(oldest);
            event(Event::kNeighbourEvicted);
          }
        }
        n.complete = true;
        n.mac = mac;
        n.learned_ms = now_ms;
        event(Event::kNeighbourLearned);
      }
      n.confirmed_ms = now_ms;
      n.learned_from = sourceText(o.source);
      return changed;
    }
    case NorthSouthObservation::kWanted: {
      auto it = ns_.neighbours.find(o.ip);
      if (it == ns_.neighbours.end()) {
        size_t incomplete = 0;
        for (const auto& [ip, n] : ns_.neighbours) incomplete += !n.complete;
        if (incomplete >= ns_.max_neighbours) return false;
        NorthSouthTables::Neighbour n;
        n.confirmed_ms = now_ms;
        it = ns_.neighbours.emplace(o.ip, n).first;
      }
      it->second.wanted_ms = now_ms;
      it->second.requests += o.requested;
      return false;  // an address being resolved is not in the snapshot
    }
    case NorthSouthObservation::kProbed: {
      if (auto it = ns_.neighbours.find(o.ip); it != ns_.neighbours.end()) ++it->second.requests;
      return false;
    }
  }
  return false;
}

bool EngineImpl::ageHostMacs(uint64_t now_ms) {
  std::vector<MacAddress> idle;
  for (const auto& [mac, entry] : ns_.host_macs) {
    if (now_ms - entry.seen_ms > ns_.host_mac_ageing_ms) idle.push_back(mac);
  }
  if (idle.empty()) return false;
  // A MAC whose frames all hit cached flows (one long transfer) never comes
  // back to the slow path: a flow from it used within the ageing time keeps
  // it. Read only when some MAC is due, which is rare.
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  std::set<MacAddress> in_use;
  if (snap.north_south.host_pf_port >= 0) {
    const uint32_t now32 = static_cast<uint32_t>(now_ms);
    FlowRecord e;
    for (const auto& w : workers_) {
      for (uint32_t i = 0; i < w->table.capacity(); ++i) {
        if (!w->table.read(i, e) || e.key.in_port != static_cast<uint32_t>(snap.north_south.host_pf_port)) continue;
        uint32_t idle_ms = now32 - e.used_ms;
        if (!w->offload.empty() && w->offload[i].flow_id == e.flow_id && w->offload[i].state == OffloadSlot::kInHw) {
          idle_ms = std::min(idle_ms, now32 - w->offload[i].hw_used_ms);
        }
        if (idle_ms <= ns_.host_mac_ageing_ms) in_use.insert(MacAddress{e.key.eth_src});
      }
    }
  }
  bool changed = false;
  for (const auto& mac : idle) {
    if (in_use.count(mac)) {
      ns_.host_macs[mac].seen_ms = now_ms;
      continue;
    }
    ns_.host_macs.erase(mac);
    for (auto it = ns_.node_ip_owner.begin(); it != ns_.node_ip_owner.end();) {
      it = it->second == mac ? ns_.node_ip_owner.erase(it) : std::next(it);
    }
    ++control_events_[static_cast<size_t>(Event::kHostMacAged)];
    changed = true;
  }
  return changed;
}

void EngineImpl::northSouthUpdate() {
  if (ns_event_fd_ >= 0) {
    uint64_t signalled;
    (void)!::read(ns_event_fd_, &signalled, sizeof signalled);
  }
  const uint64_t now_ms = now();
  bool changed = false;
  for (auto& w : workers_) {
    // Cleared before the drain: news pushed after it signals again.
    w->north_south.wake.store(0, std::memory_order_release);
    NorthSouthObservation o;
    while (w->north_south.pop(o)) changed |= applyObservation(o, now_ms);
  }
  changed |= ageHostMacs(now_ms);
  for (auto it = ns_.neighbours.begin(); it != ns_.neighbours.end();) {
    const bool forgotten = !it->second.complete && now_ms - it->second.wanted_ms > kIncompleteKept;
    it = forgotten ? ns_.neighbours.erase(it) : std::next(it);
  }
  // The published confirmation times let the lcores tell a stale neighbour
  // (and probe it): refreshed when they lag by half the stale time.
  if (!changed) {
    const Snapshot& snap = *current_.load(std::memory_order_relaxed);
    for (const auto& [ip, sn] : snap.north_south.neighbours4) {
      auto it = ns_.neighbours.find(ip);
      if (it != ns_.neighbours.end() && it->second.confirmed_ms - sn.confirmed_ms > ns_.stale_ms / 2) {
        changed = true;
        break;
      }
    }
  }
  if (changed) (void)republish();
}

HostSteering EngineImpl::hostSteering() const {
  std::vector<MacAddress> macs;
  for (const auto& [mac, entry] : ns_.host_macs) macs.push_back(mac);
  std::vector<IpAddress> ips;
  for (const auto& ifa : model_.node_ips) ips.push_back(ifa.address);
  if (macs != steering_.host_macs || ips != steering_.node_ips) {
    steering_.host_macs = std::move(macs);
    steering_.node_ips = std::move(ips);
    ++steering_.version;
  }
  return steering_;
}

void EngineImpl::northSouthOperate(dataplane::v1::OperatorReply& reply) const {
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  auto* out = reply.mutable_north_south();
  out->set_host_pf_dpdk_port(snap.north_south.host_pf_port);
  for (const auto& [name, b] : bindings_) {
    if (b.role == PortRole::kHostPf) out->set_host_pf(name);
  }
  for (const auto& ifa : model_.node_ips) out->add_node_ips(ifa.str());
  for (const auto& gw : model_.node_gateways) out->add_node_gateways(gw.str());
  const uint64_t t = now();
  for (const auto& [mac, entry] : ns_.host_macs) {
    auto* h = out->add_host_macs();
    h->set_mac(mac.str());
    h->set_idle_ms(t - entry.seen_ms);
    h->set_age_ms(t - entry.learned_ms);
    for (uint32_t ip : entry.node_ips) h->add_node_ips(ipText(ip));
  }
  out->set_host_macs_max(ns_.max_host_macs);
  out->set_host_mac_ageing_ms(ns_.host_mac_ageing_ms);
  for (const auto& [ip, entry] : ns_.neighbours) {
    auto* n = out->add_neighbours();
    n->set_ip(ipText(ip));
    if (entry.complete) {
      n->set_mac(entry.mac.str());
      n->set_state(t - entry.confirmed_ms > ns_.stale_ms ? "stale" : "reachable");
      n->set_learned_from(entry.learned_from);
    } else {
      n->set_state("incomplete");
    }
    n->set_confirmed_ms(t - entry.confirmed_ms);
    n->set_requests(entry.requests);
  }
  out->set_neighbours_max(ns_.max_neighbours);
}

}  // namespace dpu::datapath
