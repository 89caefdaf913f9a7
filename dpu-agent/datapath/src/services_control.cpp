// The control thread's side of services and connection tracking: expiry
// (against the last hit of the connection's cached flows), the flush of UDP
// connections whose backend left their service, and what `dpuctl services`
// and `dpuctl conntrack` show.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "engine_impl.h"
#include "model/model.h"

namespace dpu::datapath {
namespace {

std::string ipText(const Ip16& ip, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(v6 ? AF_INET6 : AF_INET, ip.data(), buf, sizeof buf);
  return buf;
}

std::string protocolText(uint8_t p) {
  switch (p) {
    case conntrack::kProtoTcp: return "tcp";
    case conntrack::kProtoUdp: return "udp";
    case conntrack::kProtoSctp: return "sctp";
    case conntrack::kProtoIcmp: return "icmp";
    case conntrack::kProtoIcmp6: return "icmpv6";
  }
  return std::to_string(p);
}

bool isBackendOf(const std::vector<SnapBackend>& set, const Ip16& ip, uint16_t port) {
  for (const auto& b : set) {
    if (b.ip == ip && b.port == port) return true;
  }
  return false;
}

}  // namespace

uint64_t EngineImpl::flowLastUse(const conntrack::Entry& e) const {
  const uint64_t t = now();
  const uint32_t now32 = static_cast<uint32_t>(t);
  uint64_t last = 0;
  for (const uint64_t where : e.user) {
    if (where == 0) continue;
    const unsigned worker = static_cast<unsigned>(where >> 58);
    const uint32_t index = static_cast<uint32_t>(where >> 32) & ((1u << 26) - 1);
    const uint32_t flow_id = static_cast<uint32_t>(where);
    if (worker >= workers_.size() || index >= workers_[worker]->table.capacity()) continue;
    const FlowTable& table = workers_[worker]->table;
    if (FlowTable::loadFlowId(table.extra(index)) != flow_id) continue;  // the slot holds another flow now
    uint32_t idle = now32 - __atomic_load_n(&table.entry(index).used_ms, __ATOMIC_RELAXED);
    if (!workers_[worker]->offload.empty()) {
      const OffloadSlot& s = workers_[worker]->offload[index];
      if (s.flow_id == flow_id && s.state == OffloadSlot::kInHw) idle = std::min(idle, now32 - s.hw_used_ms);
    }
    last = std::max(last, t - idle);
  }
  return last;
}

void EngineImpl::expireConnections() {
  // The whole table about every five seconds (maintain() runs every ~100 ms);
  // the shortest timeout is ten.
  const uint32_t scan = std::max<uint32_t>(1024, conntrack_->capacity() / 50);
  const size_t n = conntrack_->expire(now(), scan, [this](const conntrack::Entry& e) { return flowLastUse(e); });
  control_events_[static_cast<size_t>(Event::kConntrackExpired)] += n;
}

void EngineImpl::flushChangedServices(const Snapshot& before, const Snapshot& after,
                                      const std::vector<std::string>* changed_names) {
  // Frontends whose service changed; a UDP connection through one whose
  // backend is no longer among those the frontend would pick is flushed at
  // once, so a client that keeps sending from one port reaches a live
  // backend (its flows go with the service's new version). TCP connections
  // keep their backend, as kube-proxy leaves them. The entry stays as a
  // tombstone (conntrack::Table::markFlushedIf) until it expires: the
  // client's next packet replaces it (serviceStage), and the old backend's
  // late answers find it instead of being cached as routed flows.
  //
  // With the changed services named, only connections to their UDP
  // frontends (before or after the change) can be stale: none, no scan.
  std::unordered_set<FrontendKey, FrontendKeyHash> udp;
  if (changed_names != nullptr) {
    auto byName = [](const std::shared_ptr<const SnapService>& a, const std::string& n) { return a->name < n; };
    for (const auto& name : *changed_names) {
      for (const Snapshot* snap : {&before, &after}) {
        auto at = std::lower_bound(snap->services.begin(), snap->services.end(), name, byName);
        if (at == snap->services.end() || (*at)->name != name) continue;
        for (const auto& f : (*at)->frontends) {
          if (f.protocol == conntrack::kProtoUdp) udp.insert(FrontendKey{f.ip, f.port, f.protocol});
        }
      }
    }
    if (udp.empty()) return;
  } else {
    std::unordered_map<std::string, uint64_t> old_hash;
    for (const auto& sv : before.services) old_hash.emplace(sv->name, sv->content_hash);
    bool changed = false;
    for (const auto& sv : after.services) {
      auto it = old_hash.find(sv->name);
      if (it == old_hash.end() || it->second != sv->content_hash) changed = true;
      if (it != old_hash.end()) old_hash.erase(it);
    }
    if (!changed && old_hash.empty()) return;
  }
  const size_t n = conntrack_->markFlushedIf([&](const conntrack::Entry& e) {
    if (e.original.protocol != conntrack::kProtoUdp || !(e.nat & conntrack::kNatDst)) return false;
    if (changed_names != nullptr && !udp.count(FrontendKey{e.original.dst, e.original.dst_port, e.original.protocol})) {
      return false;
    }
    const bool v6 = e.original.family == 6;
    const SnapFrontend* fe = after.frontend(e.original.dst.data(), v6, e.original.dst_port, e.original.protocol);
    if (fe == nullptr) return true;  // the service (or its port) is gone
    return !isBackendOf(fe->candidates(), e.reply.src, e.reply.src_port);
  });
  control_events_[static_cast<size_t>(Event::kConntrackFlushed)] += n;
}

void EngineImpl::describeServices(const Snapshot& snap, dataplane::v1::OperatorReply& out) const {
  for (const auto& sv : snap.services) {
    for (const auto& f : sv->frontends) {
      auto* s = out.add_services();
      s->set_service(f.service);
      s->set_port_name(f.port_name);
      s->set_kind(frontendKindName(f.kind));
      s->set_ip(ipText(f.ip, f.v6));
      s->set_port(f.port);
      s->set_protocol(protocolText(f.protocol));
      s->set_local_only(f.local_only);
      s->set_affinity_timeout_s(f.affinity_ms / 1000);
      const SnapBackendSet& set = *f.backends;
      s->set_maglev_size(f.local_only ? set.local_table.size() : set.table.size());
      const auto shares = set.table.shares(set.usable.size());
      const auto local_shares = set.local_table.shares(set.local.size());
      for (const auto& b : set.all) {
        auto* bs = s->add_backends();
        const Ip16 ip = toIp16(b.ip);
        bs->set_ip(b.ip.str());
        bs->set_port(b.port);
        bs->set_local(b.local);
        for (size_t i = 0; i < set.usable.size(); ++i) {
          if (set.usable[i].ip == ip && set.usable[i].port == b.port) bs->set_share(shares[i]);
        }
        for (size_t i = 0; i < set.local.size(); ++i) {
          if (set.local[i].ip == ip && set.local[i].port == b.port) bs->set_local_share(local_shares[i]);
        }
        const bool used = isBackendOf(set.usable, ip, b.port) || isBackendOf(set.local, ip, b.port);
        bs->set_condition(!used ? "unused" : b.ready ? "ready" : "serving-terminating");
      }
    }
  }
}

void EngineImpl::describeConntrack(const dataplane::v1::ConntrackRequest& request,
                                   dataplane::v1::OperatorReply& out) const {
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  std::optional<IpAddress> address;
  if (!request.address().empty()) {
    auto a = IpAddress::parse(request.address());
    if (!a) {
      out.set_error("conntrack address \"" + request.address() + "\": " + a.error());
      return;
    }
    address = *a;
  }
  const uint32_t limit = request.limit() == 0 ? 1000 : request.limit();
  const uint64_t t = now();
  uint32_t listed = 0;
  conntrack_->forEach([&](uint32_t, const conntrack::Entry& e) {
    if (listed >= limit) return;
    if (!request.protocol().empty() && protocolText(e.original.protocol) != request.protocol()) return;
    if (request.port() != 0) {
      const uint16_t p = static_cast<uint16_t>(request.port());
      if (e.original.src_port != p && e.original.dst_port != p && e.reply.src_port != p && e.reply.dst_port != p) {
        return;
      }
    }
    if (address) {
      const Ip16 a = toIp16(*address);
      if (e.original.src != a && e.original.dst != a && e.reply.src != a && e.reply.dst != a) return;
    }
    ++listed;
    auto* c = out.add_conntrack();
    c->set_protocol(protocolText(e.original.protocol));
    c->set_original(e.original.str());
    c->set_reply(e.reply.str());
    // A tombstone (its backend left) says so: it carries no traffic.
    c->set_state(e.flushed ? "flushed" : conntrack::stateName(e.state));
    std::string nat;
    if (e.nat & conntrack::kNatDst) nat = "dnat";
    if (e.nat & conntrack::kNatSrc) nat += nat.empty() ? "snat" : "+snat";
    c->set_nat(nat);
    const bool v6 = e.original.family == 6;
    if (const SnapFrontend* fe = snap.frontend(e.original.dst.data(), v6, e.original.dst_port, e.original.protocol)) {
      c->set_service(fe->service);
    }
    const uint64_t last = std::max(e.last_ms, flowLastUse(e));
    const uint64_t deadline = last + conntrack_->timeouts().forState(e.state, e.original.protocol);
    c->set_idle_ms(t > last ? t - last : 0);
    c->set_expires_in_ms(deadline > t ? deadline - t : 0);
  });
  const auto counts = conntrack_->countByState();
  for (size_t i = 0; i < counts.size(); ++i) {
    auto* sc = out.add_conntrack_states();
    sc->set_state(conntrack::stateName(static_cast<conntrack::State>(i)));
    sc->set_count(counts[i]);
  }
  out.set_conntrack_entries(conntrack_->size());
  out.set_conntrack_capacity(conntrack_->capacity());
  const conntrack::Stats st = conntrack_->stats();
  out.set_conntrack_early_dropped(st.early_dropped);
  out.set_conntrack_refused_full(st.refused_full);
}

}  // namespace dpu::datapath
