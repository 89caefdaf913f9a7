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

const char* sourceText(uint8_t source, bool v6) {
  switch (source) {
    case NorthSouthObservation::kReplyToHost: return v6 ? "neighbour advertisement to a node IP" : "ARP reply to the host";
    case NorthSouthObservation::kRequestToHost: return v6 ? "neighbour solicitation for a node IP" : "ARP request to a node IP";
    default: return v6 ? "neighbour discovery from the fabric" : "ARP from the fabric";
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

bool SnapNorthSouth::hasNodeIp(bool v6) const {
  for (const auto& n : node_ips)
    if (n.v6() == v6) return true;
  return false;
}

const SnapNodeIp* SnapNorthSouth::nodeIp(const uint8_t* a, bool v6) const {
  for (const auto& n : node_ips)
    if (n.v6() == v6 && std::memcmp(n.ip.bytes.data(), a, v6 ? 16 : 4) == 0) return &n;
  return nullptr;
}

const SnapNodeIp* SnapNorthSouth::onLink(const uint8_t* a, bool v6) const {
  // An IPv6 link-local address (fe80::/10) is on the node network's link
  // whatever the prefixes: reached from the first IPv6 node IP, which a
  // solicitation may come from (RFC 4861 §7.2.2).
  const bool link_local = v6 && a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
  for (const auto& n : node_ips)
    if (n.v6() == v6 && (link_local || n.onLink(a))) return &n;
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
    SnapNodeIp n;
    n.ip = ifa.address;
    n.length = ifa.length;
    // The host's MAC for it: what its ARP or ND said, else its only MAC.
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
    ns.node_ips.push_back(n);
  }
  for (const auto& gw : m.node_gateways) {
    content += "|gw=" + gw.str();
    const bool v6 = !gw.isV4();
    ns.has_gw[v6] = true;
    ns.gw[v6] = gw;
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
    sn.dep = deps.idFor("neighbour/" + ip.str());
    // What a flow through it depends on: its MAC, and the node IP and host
    // MAC it is reached from, and the uplink.
    std::string c = n.mac.str() + uplink;
    if (const SnapNodeIp* via = ns.onLink(ip.bytes.data(), !ip.isV4()); via != nullptr) {
      c += "|via=" + via->ip.str() + (via->has_mac ? "@" + MacAddress{via->mac}.str() : std::string());
    }
    deps.touch(sn.dep, c);
    ns.neighbours.emplace(ip, sn);
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

void EngineImpl::learnNeighbour(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host,
                                const IpAddress& sender, const overlay::MacAddress& mac, const uint8_t* asked,
                                bool reply) {
  const SnapNorthSouth& ns = snap.north_south;
  const bool v6 = !sender.isV4();
  if ((mac[0] & 1) != 0 || macKey(mac) == 0) return;
  NorthSouthObservation o;
  o.mac = mac;
  o.setAddress(sender);
  if (from_host) {
    // The host says which of its MACs holds a node IP (the SNAT source MAC).
    const SnapNodeIp* node = ns.nodeIp(sender.bytes.data(), v6);
    if (node == nullptr || mac != pc.key.eth_src) return;
    o.kind = NorthSouthObservation::kNodeIpClaim;
    observeNorthSouth(w, o, !node->has_mac || node->mac != mac);
    return;
  }
  // A neighbour on the node network: on-link, not one of ours, not the host.
  if (ns.nodeIp(sender.bytes.data(), v6) != nullptr || ns.onLink(sender.bytes.data(), v6) == nullptr ||
      ns.isHostMac(mac) || ns.refusedMac(mac)) {
    return;
  }
  const SnapNeighbour* known = ns.neighbour(sender);
  const bool to_node = asked != nullptr && ns.nodeIp(asked, v6) != nullptr;
  // Only a request to or reply for a node IP adds a neighbour (an address
  // the host talks to or is asked by); the rest only updates one (a
  // gratuitous ARP or an unsolicited advertisement after a move).
  if (!to_node && known == nullptr) return;
  o.kind = NorthSouthObservation::kNeighbour;
  o.source = !to_node ? NorthSouthObservation::kOtherArp
             : reply  ? NorthSouthObservation::kReplyToHost
                      : NorthSouthObservation::kRequestToHost;
  observeNorthSouth(w, o, known == nullptr || known->mac != mac);
}

void EngineImpl::learnFromArp(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host) {
  const uint8_t* a = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pc.parsed.l3_offset;
  if (overlay::arp::senderIp(a) == 0) return;  // a probe (RFC 5227)
  learnNeighbour(w, snap, pc, from_host, ipAt(a + overlay::arp::kSenderIpOffset, false), overlay::arp::senderMac(a),
                 a + overlay::arp::kTargetIpOffset, overlay::arp::op(a) == overlay::arp::kOpReply);
}

// An advertisement names its target's MAC (its target link-layer option, or
// the frame's source); a solicitation its sender's (its source link-layer
// option; one from :: names nobody).
bool EngineImpl::learnFromNd(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host,
                             overlay::NeighborMessage& msg) {
  const uint8_t* frame = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*);
  if (overlay::parseNeighborMessage({frame, pc.mbuf->data_len}, pc.parsed, msg) != overlay::Status::kOk) return false;
  const uint8_t* l3 = frame + pc.parsed.l3_offset;
  const uint8_t* target = frame + msg.target_offset;
  if (frame[pc.parsed.l4_offset] == overlay::icmp6::kTypeNeighborAdvert) {
    const overlay::MacAddress mac = msg.has_link_addr ? msg.link_addr : overlay::eth::src(frame);
    const uint8_t* to = l3 + overlay::ipv6::kDstOffset;
    // Solicited (to a node IP: the host asked) adds; the rest updates.
    learnNeighbour(w, snap, pc, from_host, ipAt(target, true), mac, overlay::ipv6::isMulticast(to) ? nullptr : to,
                   true);
    return true;
  }
  const uint8_t* from = l3 + overlay::ipv6::kSrcOffset;
  if (!overlay::ipv6::isUnspecified(from) && msg.has_link_addr) {
    learnNeighbour(w, snap, pc, from_host, ipAt(from, true), msg.link_addr, target, false);
  }
  return true;
}

namespace {

// Whether this worker may ask for `target` now (`sending`: an ARP request
// or a solicitation; else only report it wanted): at most once a second per
// address, and kArpPerSecond in all. A yes is recorded; a report does not
// hold back the first request once one can be sent.
bool mayAsk(WorkerContext& w, const IpAddress& target, bool sending) {
  NorthSouthWorker& ns = w.north_south;
  NorthSouthWorker::Asked& asked = ns.asked[IpAddressHash{}(target) % std::size(ns.asked)];
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

bool EngineImpl::sendSolicitation(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, const SnapNodeIp& from,
                                  const IpAddress& target, const overlay::MacAddress& dst) {
  if (snap.uplink_port < 0 || !mayAsk(w, target, true)) {
    bump(w.counters.events[static_cast<size_t>(Event::kNeighbourArpLimited)]);
    return false;
  }
  const bool v6 = from.v6();
  const bool sent = sendBuilt(w, pool, static_cast<uint16_t>(snap.uplink_port), [&](overlay::PacketBuffer& out) {
    if (v6) {
      overlay::Ipv6Address src, dst_ip;
      std::memcpy(src.data(), from.ip.bytes.data(), 16);
      std::memcpy(dst_ip.data(), target.bytes.data(), 16);
      return overlay::buildNeighborSolicit(from.mac, src, dst_ip, dst, out);
    }
    return overlay::buildArpRequest(from.mac, from.ip.v4HostOrder(), target.v4HostOrder(), dst, out);
  });
  if (sent) bump(w.counters.events[static_cast<size_t>(v6 ? Event::kNeighbourSolicitation : Event::kNeighbourArpRequest)]);
  return sent;
}

void EngineImpl::askHost(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, const IpAddress& node_ip) {
  const int host = snap.north_south.host_pf_port;
  // Keyed by the node IP, which is never a next hop: its own once-a-second.
  if (host < 0 || !mayAsk(w, node_ip, true)) return;
  const bool v6 = !node_ip.isV4();
  const bool sent = sendBuilt(w, pool, static_cast<uint16_t>(host), [&](overlay::PacketBuffer& out) {
    if (v6) {
      overlay::Ipv6Address target;
      std::memcpy(target.data(), node_ip.bytes.data(), 16);
      return overlay::buildNeighborProbe(snap.router_mac, target, out);
    }
    return overlay::buildArpProbe(snap.router_mac, node_ip.v4HostOrder(), out);
  });
  if (sent) bump(w.counters.events[static_cast<size_t>(v6 ? Event::kHostNdProbe : Event::kHostArpProbe)]);
}

DropReason EngineImpl::northSouthRoute(WorkerContext& w, const Snapshot& snap, const PacketContext& pc,
                                       const uint8_t* dst, bool v6, NorthSouthRoute& out) {
  const SnapNorthSouth& ns = snap.north_south;
  if (snap.uplink_port < 0) return DropReason::kNoUplink;
  IpAddress hop = ipAt(dst, v6);
  const SnapNodeIp* via = ns.onLink(dst, v6);
  if (via == nullptr) {
    const IpAddress* gw = ns.gateway(v6);
    if (gw == nullptr) return DropReason::kNoRoute;
    hop = *gw;
    via = ns.onLink(hop.bytes.data(), v6);
    if (via == nullptr) return DropReason::kNoRoute;  // the model keeps gateways on-link
  }
  NorthSouthObservation o;
  o.setAddress(hop);
  const SnapNeighbour* n = ns.neighbour(hop);
  if (n == nullptr || !via->has_mac) {
    // Reported (and asked for) at most once a second per address: a flood
    // towards an unresolved next hop costs a drop per packet, nothing more.
    // Without the host's MAC for the node IP (its ARP or ND not seen yet, as
    // after a dataplane restart) no request can be sent: the host is asked
    // which MAC holds the node IP, and its answer teaches it (learnFromArp,
    // learnFromNd); the address is listed as wanted anyway.
    if (via->has_mac) {
      o.requested = sendSolicitation(w, snap, pc.mbuf->pool, *via, hop, overlay::eth::kBroadcast);
      if (!o.requested) return DropReason::kNeighbourUnresolved;
    } else {
      askHost(w, snap, pc.mbuf->pool, via->ip);
      if (!mayAsk(w, hop, false)) return DropReason::kNeighbourUnresolved;
    }
    o.kind = NorthSouthObservation::kWanted;
    observeNorthSouth(w, o, true);
    return DropReason::kNeighbourUnresolved;
  }
  if (w.now_ms - n->confirmed_ms > ns.stale_ms && sendSolicitation(w, snap, pc.mbuf->pool, *via, hop, n->mac)) {
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
  const IpAddress ip = o.address();
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
      bool changed = it->second.node_ips.insert(ip).second;
      auto& owner = ns_.node_ip_owner[ip];
      if (owner != mac) {
        // The node IP moved to another of the host's MACs.
        if (auto old = ns_.host_macs.find(owner); old != ns_.host_macs.end()) old->second.node_ips.erase(ip);
        owner = mac;
        changed = true;
      }
      return changed;
    }
    case NorthSouthObservation::kNeighbour: {
      auto it = ns_.neighbours.find(ip);
      if (it == ns_.neighbours.end()) {
        if (o.source == NorthSouthObservation::kOtherArp) return false;
        it = ns_.neighbours.emplace(ip, NorthSouthTables::Neighbour{}).first;
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
      n.learned_from = sourceText(o.source, o.v6 != 0);
      return changed;
    }
    case NorthSouthObservation::kWanted: {
      auto it = ns_.neighbours.find(ip);
      if (it == ns_.neighbours.end()) {
        size_t incomplete = 0;
        for (const auto& [ip, n] : ns_.neighbours) incomplete += !n.complete;
        if (incomplete >= ns_.max_neighbours) return false;
        NorthSouthTables::Neighbour n;
        n.confirmed_ms = now_ms;
        it = ns_.neighbours.emplace(ip, n).first;
      }
      it->second.wanted_ms = now_ms;
      it->second.requests += o.requested;
      return false;  // an address being resolved is not in the snapshot
    }
    case NorthSouthObservation::kProbed: {
      if (auto it = ns_.neighbours.find(ip); it != ns_.neighbours.end()) ++it->second.requests;
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
    for (const auto& [ip, sn] : snap.north_south.neighbours) {
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
    for (const auto& ip : entry.node_ips) h->add_node_ips(ip.str());
  }
  out->set_host_macs_max(ns_.max_host_macs);
  out->set_host_mac_ageing_ms(ns_.host_mac_ageing_ms);
  for (const auto& [ip, entry] : ns_.neighbours) {
    auto* n = out->add_neighbours();
    n->set_ip(ip.str());
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
