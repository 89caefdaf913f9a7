// NetworkPolicy in the slow path (docs/policy.md): a new connection is judged
// after service DNAT and before SNAT, egress at the source pod's port against
// the destination and ingress at the destination pod's port against the
// source; it passes when both pass. The verdict is fused into the flow the
// slow path installs (an allowed connection's hits cost nothing more and
// offload as before); a denied connection is dropped uncached, so a change
// that allows it takes effect with its next packet.
//
// Stateful: when the replies of an allowed connection would meet an isolated
// direction (the destination's egress, the source's ingress), the connection
// is tracked in conntrack (an entry without translation), and a packet that
// conntrack knows passes as the connection's. A translated connection is
// tracked already. ICMP errors about a tracked connection pass with it.
//
// A change of a port's PortPolicy changes the port's dependency version, so
// its flows (and only theirs) are revalidated; the tracked connections with
// an end on the port are judged again, and those denied now are removed.
//
// Traffic from the host's management port (the node: kubelet probes) is not
// judged at the destination's ingress, as OVN-Kubernetes allows it.
//
// A later IP fragment carries no ports, and the engine does not reassemble
// (services drop fragments to a service address for the same reason): it is
// judged by its peer alone, passing where a rule allows that peer every port
// of its protocol (or every protocol), and otherwise dropped as
// PolicyFragment, which names the cause rather than a policy's port. The
// first fragment has the ports and is judged (and tracked) as a whole packet.
#include <rte_mbuf.h>

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "engine_impl.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"

namespace dpu::datapath {
namespace {

bool hasPorts(uint8_t proto) {
  return proto == overlay::ipproto::kTcp || proto == overlay::ipproto::kUdp || proto == overlay::ipproto::kSctp;
}

// What the direction says, as a flow records it; kDenied passes through.
int judge(const SnapPolicyDirection* d, const uint8_t* peer, bool v6, uint8_t proto, uint16_t port,
          uint16_t& allowed) {
  if (d == nullptr) {
    allowed = kAllowedNotIsolated;
    return model::PolicyMatcher::kNotIsolated;
  }
  const int r = d->matcher.match(peer, v6, proto, port);
  if (r == model::PolicyMatcher::kNotIsolated) allowed = kAllowedNotIsolated;
  else if (r >= 0) allowed = d->rule_names[static_cast<size_t>(r)];
  return r;
}

}  // namespace

std::optional<Decision> EngineImpl::policyStage(WorkerContext& w, const Snapshot& snap, PacketContext& pc,
                                                const SnapPort* from, const uint8_t* dst, bool v6,
                                                uint16_t dst_port, FlowRecord& f, bool& track) {
  track = false;
  const SnapPort* to = snap.portByAddress(dst, v6);
  if (from == nullptr && to == nullptr) return std::nullopt;
  const uint8_t proto = pc.key.ip_proto;
  const bool later_fragment = pc.parsed.fragment == overlay::Fragment::kLater;
  // A rule for every port of a protocol spans 0..65535 (port 0 is no rule's
  // own: the API refuses it), so port 0 asks exactly "all ports allowed".
  const uint16_t port = hasPorts(proto) && !later_fragment ? dst_port : 0;
  const uint8_t* l3 = rte_pktmbuf_mtod(pc.mbuf, const uint8_t*) + pc.parsed.l3_offset;
  const uint8_t* src = v6 ? overlay::ipv6::src(l3) : l3 + overlay::ipv4::kSrcOffset;
  auto deny = [&w, later_fragment](const SnapPolicyDirection& d) {
    for (uint16_t i : d.policies) bump(w.counters.policy_drops[i]);
    return Decision{Decision::kDrop, later_fragment ? DropReason::kPolicyFragment : DropReason::kPolicyDenied};
  };
  if (from != nullptr) {
    const SnapPolicyDirection* egress = from->policy ? &from->policy->egress : nullptr;
    if (judge(egress, dst, v6, proto, port, f.allowed_egress) == model::PolicyMatcher::kDenied) return deny(*egress);
  }
  if (to != nullptr) {
    if (from != nullptr && from->management) {
      f.allowed_ingress = kAllowedFromNode;
    } else {
      const SnapPolicyDirection* ingress = to->policy ? &to->policy->ingress : nullptr;
      if (judge(ingress, src, v6, proto, port, f.allowed_ingress) == model::PolicyMatcher::kDenied) {
        return deny(*ingress);
      }
    }
  }
  // The replies are judged at the destination's egress and the source's ingress.
  track = (to != nullptr && to->policy && to->policy->egress.matcher.isolated()) ||
          (from != nullptr && from->policy && from->policy->ingress.matcher.isolated());
  return std::nullopt;
}

bool EngineImpl::trackForPolicy(WorkerContext& w, PacketContext& pc, bool v6, NatPlan& plan) {
  if (pc.parsed.fragment == overlay::Fragment::kLater) return true;  // no ports: nothing to track it by
  const conntrack::Tuple t = connectionTuple(pc.key, v6);
  bool loose = false;
  const auto initial = conntrack::Table::initialState(t.protocol, tcpFlagsOf(pc), loose);
  if (!initial) return true;  // opens no connection (a lone RST): forwarded, untracked
  auto hit = conntrack_->insert(t, t.reversed(), 0, *initial, w.now_ms, 0, 0, loose);
  if (!hit) return hit.code() != ErrorCode::kExhausted;  // a conflict: another worker tracked it first
  bump(w.counters.events[static_cast<size_t>(Event::kPolicyTracked)]);
  w.ct_hit = *hit;
  w.ct_hit_valid = true;
  w.policy_tracked = true;
  plan.once = openerOnce(loose);
  return true;
}

void EngineImpl::revalidatePolicyConnections(const Snapshot& before, const Snapshot& after,
                                             const std::vector<std::string>* changed_ports) {
  // No connection tracked: nothing to judge, and no walk of the table's
  // every slot.
  if (conntrack_->size() == 0) return;
  std::unordered_map<std::string, const SnapPolicy*> old_policy;
  for (const auto& p : before.ports) old_policy.emplace(p.name, p.policy.get());
  std::unordered_set<std::string> named;
  if (changed_ports != nullptr) named.insert(changed_ports->begin(), changed_ports->end());
  std::unordered_set<Ip16, Ip16Hash> changed;  // the addresses of the ports whose policy changed
  for (const auto& p : after.ports) {
    if (changed_ports != nullptr && !named.count(p.name)) continue;
    auto it = old_policy.find(p.name);
    const SnapPolicy* was = it == old_policy.end() ? nullptr : it->second;
    if (was == p.policy.get() || (was != nullptr && p.policy && was->content == p.policy->content)) continue;
    for (uint32_t a : p.ipv4) {
      Ip16 k{};
      overlay::store32(k.data(), a);
      changed.insert(k);
    }
    for (const auto& a : p.ipv6) {
      Ip16 k;
      std::memcpy(k.data(), a.data(), 16);
      changed.insert(k);
    }
  }
  if (changed.empty()) return;
  // Judged as at its start: the originator's egress against the responder
  // (the translated destination), the responder's ingress against the
  // originator. A verdict depends on the two addresses, the protocol and the
  // port only: the many connections of a client to one server port are
  // judged once.
  struct Judged {
    Ip16 from, to;
    uint16_t port;
    uint8_t proto;
    bool operator==(const Judged&) const = default;
  };
  struct JudgedHash {
    size_t operator()(const Judged& j) const {
      return Ip16Hash{}(j.from) ^ (Ip16Hash{}(j.to) * 0x9e3779b97f4a7c15ull) ^ (size_t{j.port} << 8 | j.proto);
    }
  };
  std::unordered_map<Judged, bool, JudgedHash> verdicts;
  const size_t n = conntrack_->removeIf([&](const conntrack::Entry& e) {
    if (!changed.count(e.original.src) && !changed.count(e.reply.src)) return false;  // judged as before
    const uint8_t protocol = e.original.protocol;
    const Judged key{e.original.src, e.reply.src, hasPorts(protocol) ? e.reply.src_port : uint16_t{0}, protocol};
    auto [it, fresh] = verdicts.try_emplace(key, false);
    if (!fresh) return it->second;
    const bool v6 = e.original.family == 6;
    const SnapPort* from = after.portByAddress(e.original.src.data(), v6);
    const SnapPort* to = after.portByAddress(e.reply.src.data(), v6);
    const uint8_t proto = key.proto;
    const uint16_t port = key.port;
    uint16_t ignored = 0;
    const bool denied =
        (from != nullptr && from->policy &&
         judge(&from->policy->egress, e.reply.src.data(), v6, proto, port, ignored) == model::PolicyMatcher::kDenied) ||
        (to != nullptr && to->policy && !(from != nullptr && from->management) &&
         judge(&to->policy->ingress, e.original.src.data(), v6, proto, port, ignored) ==
             model::PolicyMatcher::kDenied);
    it->second = denied;
    return denied;
  });
  control_events_[static_cast<size_t>(Event::kPolicyRevoked)] += n;
}

void EngineImpl::describePolicy(const dataplane::v1::PolicyRequest& request,
                                dataplane::v1::OperatorReply& out) const {
  for (const auto& pp : model_.port_policies) {
    if (!request.port().empty() && pp.port != request.port()) continue;
    auto* shown = out.add_port_policies();
    (void)shown->ParseFromString(pp.content);
    // Peers sent packed are shown as text, as the operator reads them.
    model::unpackPolicyPeers(*shown);
  }
  if (!request.port().empty() && out.port_policies().empty()) {
    const bool is_port = std::any_of(model_.ports.begin(), model_.ports.end(),
                                     [&](const ModelPort& p) { return p.name == request.port(); });
    out.set_error(is_port ? "port " + request.port() + " has no PortPolicy: it is not isolated"
                          : "no port " + request.port() + " is in force (dpuctl ports, dpuctl problems)");
    return;
  }
  addPolicyDrops(out, request.port());
}

void EngineImpl::addPolicyDrops(dataplane::v1::OperatorReply& out, const std::string& only_port) const {
  std::vector<std::string> named;
  for (const auto& pp : model_.port_policies) {
    if (!only_port.empty() && pp.port != only_port) continue;
    for (const auto* d : {&pp.ingress, &pp.egress}) named.insert(named.end(), d->policies.begin(), d->policies.end());
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  for (const auto& name : named) {
    const uint16_t i = policy_names_.find(name);
    uint64_t dropped = 0;
    if (i != kPolicyNamesOverflow) {
      for (const auto& w : workers_) dropped += readCounter(w->counters.policy_drops[i]);
    }
    auto* c = out.add_policy_drops();
    c->set_policy(name);
    c->set_dropped(dropped);
  }
}

}  // namespace dpu::datapath
