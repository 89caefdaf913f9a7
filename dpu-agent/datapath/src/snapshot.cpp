// Building a Snapshot from the model, the bindings and the next hops, and the
// dependency versions that decide which cached flows stay valid (snapshot.h).
#include "snapshot.h"

#include <algorithm>
#include <cstring>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/geneve.h"
#include "overlay/mtu.h"

namespace dpu::datapath {

DepRegistry::DepRegistry() : ids_(std::make_shared<std::unordered_map<std::string, uint32_t>>()) {
  idFor("node");
  idFor("routing");
  idFor("services");
}

uint32_t DepRegistry::idFor(const std::string& key) {
  // An id is the key's place in the shared map; a copy that has not seen
  // it yet (another copy's build added it) grows to it.
  auto [it, inserted] = ids_->emplace(key, static_cast<uint32_t>(ids_->size()));
  const uint32_t id = it->second;
  if (id >= versions_.size()) {
    versions_.resize(id + 1, kVersionDeleted);
    contents_.resize(id + 1);
    touched_.resize(id + 1, false);
  }
  return id;
}

void DepRegistry::touch(uint32_t id, const std::string& content) {
  touched_[id] = true;
  if (versions_[id] == kVersionDeleted || contents_[id] != content) {
    versions_[id] = ++clock_;
    contents_[id] = content;
  }
}

void DepRegistry::touchHash(uint32_t id, uint64_t content_hash) {
  touch(id, std::string(reinterpret_cast<const char*>(&content_hash), sizeof content_hash));
}

uint32_t DepRegistry::finish() {
  for (size_t i = 0; i < versions_.size(); ++i) {
    if (!touched_[i]) {
      versions_[i] = kVersionDeleted;
      contents_[i].clear();
    }
    touched_[i] = false;
  }
  // Every snapshot has a stamp of its own, even when no object changed:
  // action records hold pointers into the snapshot they were resolved with
  // (the encap template, the outbound SA it names), and a record whose
  // stamp is not the current snapshot's is resolved again before it is
  // used, so it never reads a retired snapshot. Still-valid records are
  // only re-resolved (their dependencies' versions did not move).
  return ++clock_;
}

bool Snapshot::inLocalSubnet(const uint8_t* addr, bool v6) const {
  for (const auto& s : local_subnets) {
    if (s.prefix.address.isV4() == v6) continue;
    IpAddress a;
    a.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
    std::memcpy(a.bytes.data(), addr, v6 ? 16 : 4);
    if (s.prefix.contains(a)) return true;
  }
  return false;
}

namespace {

bool inAny(const std::vector<IpPrefix>& prefixes, const uint8_t* addr, bool v6) {
  IpAddress a;
  a.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
  std::memcpy(a.bytes.data(), addr, v6 ? 16 : 4);
  for (const auto& p : prefixes) {
    if (p.contains(a)) return true;
  }
  return false;
}

}  // namespace

bool Snapshot::inServiceCidr(const uint8_t* addr, bool v6) const { return inAny(service_cidrs, addr, v6); }
bool Snapshot::inClusterCidr(const uint8_t* addr, bool v6) const { return inAny(cluster_cidrs, addr, v6); }

const char* frontendKindName(FrontendKind k) {
  switch (k) {
    case FrontendKind::kClusterIp: return "cluster-ip";
    case FrontendKind::kExternalIp: return "external-ip";
    case FrontendKind::kNodePort: return "node-port";
  }
  return "?";
}

namespace {

uint64_t hashText(const std::string& text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One frontend's key, hashed: summed over the frontends, a hash of which
// (address, protocol, port)s exist that one service's change updates alone.
uint64_t frontendHash(const SnapFrontend& f) {
  return hashText(std::string(reinterpret_cast<const char*>(f.ip.data()), 16) + std::to_string(f.port) + "/" +
                  std::to_string(f.protocol));
}

// kube-proxy's choice among endpoints: the ready ones; when none is ready,
// those serving and terminating (so connections drain to a terminating pod
// rather than fail); never one that is neither.
std::vector<SnapBackend> usable(const std::vector<const model::ModelBackend*>& candidates) {
  std::vector<SnapBackend> ready, draining;
  for (const auto* b : candidates) {
    SnapBackend sb{toIp16(b->ip), b->port, b->local};
    if (b->ready) {
      ready.push_back(sb);
    } else if (b->serving && b->terminating) {
      draining.push_back(sb);
    }
  }
  return ready.empty() ? draining : ready;
}

lb::MaglevTable maglev(const std::vector<SnapBackend>& backends, bool v6) {
  std::vector<lb::BackendId> ids(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    std::memcpy(ids[i].addr, backends[i].ip.data(), 16);
    ids[i].addr_len = v6 ? 16 : 4;
    ids[i].port = backends[i].port;
  }
  return lb::MaglevTable(ids);
}

// `node_ips`: this node's addresses (north–south, both families), where each node port
// is served; part of `content_hash`.
std::shared_ptr<const SnapService> buildService(const model::ModelService& svc, uint64_t content_hash, uint32_t dep,
                                                const std::vector<IpAddress>& node_ips) {
  auto out = std::make_shared<SnapService>();
  out->name = svc.name;
  out->content_hash = content_hash;
  out->dep = dep;
  for (const auto& port : svc.ports) {
    for (const bool v6 : {false, true}) {
      std::vector<const IpAddress*> ips;
      for (const auto* list : {&svc.cluster_ips, &svc.external_ips}) {
        for (const auto& ip : *list) {
          if (ip.isV4() != v6) ips.push_back(&ip);
        }
      }
      if (ips.empty()) continue;
      auto set = std::make_shared<SnapBackendSet>();
      std::vector<const model::ModelBackend*> all, local;
      for (const auto& b : port.backends) {
        if (b.ip.isV4() == v6) continue;
        set->all.push_back(b);
        all.push_back(&b);
        if (b.local) local.push_back(&b);
      }
      set->usable = usable(all);
      set->local = usable(local);
      set->table = maglev(set->usable, v6);
      set->local_table = maglev(set->local, v6);
      for (const auto* ip : ips) {
        SnapFrontend f;
        f.dep = dep;
        f.service = svc.name;
        f.port_name = port.name;
        const bool cluster = std::find(svc.cluster_ips.begin(), svc.cluster_ips.end(), *ip) != svc.cluster_ips.end();
        f.kind = cluster ? FrontendKind::kClusterIp : FrontendKind::kExternalIp;
        f.ip = toIp16(*ip);
        f.v6 = v6;
        f.port = port.port;
        f.protocol = port.protocol;
        f.local_only = cluster ? svc.internal_local : svc.external_local;
        f.masquerade = !cluster && !svc.external_local;
        f.affinity_ms = svc.affinity_timeout_s * 1000;
        f.backends = set;
        out->frontends.push_back(std::move(f));
      }
      // The node port on each node IP of the family, with the external
      // traffic policy.
      for (const auto& nip : node_ips) {
        if (port.node_port == 0 || nip.isV4() == v6) continue;
        SnapFrontend f;
        f.dep = dep;
        f.service = svc.name;
        f.port_name = port.name;
        f.kind = FrontendKind::kNodePort;
        f.ip = toIp16(nip);
        f.v6 = v6;
        f.port = port.node_port;
        f.protocol = port.protocol;
        f.local_only = svc.external_local;
        f.masquerade = !svc.external_local;
        f.affinity_ms = svc.affinity_timeout_s * 1000;
        f.backends = set;
        out->frontends.push_back(std::move(f));
      }
    }
  }
  return out;
}

}  // namespace

namespace {
Ip16 masked(const uint8_t* addr, bool v6, uint8_t length) {
  Ip16 out{};
  const unsigned bytes = v6 ? 16 : 4;
  for (unsigned i = 0; i < bytes; ++i) {
    const int bits = static_cast<int>(length) - static_cast<int>(8 * i);
    if (bits >= 8) {
      out[i] = addr[i];
    } else if (bits > 0) {
      out[i] = static_cast<uint8_t>(addr[i] & (0xff << (8 - bits)));
    }
  }
  return out;
}
}  // namespace

Snapshot::RouteTarget Snapshot::routeRemote(const uint8_t* addr, bool v6) const {
  for (const auto& level : v6 ? routes_v6 : routes_v4) {
    auto it = level.table.find(masked(addr, v6, level.length));
    if (it != level.table.end()) return it->second;
  }
  return {};
}

PolicyNames::PolicyNames() {
  for (const char* fixed : {"", "not isolated", "allowed connection", "from the node"}) {
    index_.emplace(fixed, static_cast<uint16_t>(names_.size()));
    names_.emplace_back(fixed);
  }
}

uint16_t PolicyNames::intern(const std::string& name) {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  if (names_.size() >= kPolicyNamesOverflow) return kPolicyNamesOverflow;
  const auto i = static_cast<uint16_t>(names_.size());
  names_.push_back(name);
  index_.emplace(name, i);
  return i;
}

const std::string& PolicyNames::name(uint16_t index) const {
  static const std::string kOverflow = "(a policy beyond the dataplane's 4,094 policy names)";
  return index < names_.size() ? names_[index] : kOverflow;
}

namespace {

// The port's PortPolicy as the lcores match it: the previous snapshot's when
// its content is unchanged (1,000 rules are not recompiled on every change).
// `was`: the port in the snapshot in force (nullptr: none).
std::shared_ptr<const SnapPolicy> buildPolicy(const SnapshotInputs& in, const std::string& port, const SnapPort* was) {
  if (was != nullptr && in.changed_port_policies != nullptr &&
      std::find(in.changed_port_policies->begin(), in.changed_port_policies->end(), port) ==
          in.changed_port_policies->end()) {
    return was->policy;
  }
  const auto& policies = in.model->port_policies;  // by port
  auto at = std::lower_bound(policies.begin(), policies.end(), port,
                             [](const model::ModelPortPolicy& x, const std::string& n) { return x.port < n; });
  if (at == policies.end() || at->port != port) return nullptr;
  const model::ModelPortPolicy* pp = &*at;
  if (was != nullptr && was->policy && was->policy->content == pp->content) return was->policy;
  auto out = std::make_shared<SnapPolicy>();
  out->content = pp->content;
  out->content_hash = hashText(pp->content);
  auto name = [&in](const std::string& n) {
    return in.policy_names != nullptr ? in.policy_names->intern(n) : kPolicyNamesOverflow;
  };
  auto direction = [&name](const model::ModelPolicyDirection& d, SnapPolicyDirection& sd) {
    sd.matcher = model::PolicyMatcher(d);
    for (const auto& r : d.rules) sd.rule_names.push_back(name(r.policy));
    for (const auto& p : d.policies) sd.policies.push_back(name(p));
  };
  direction(pp->ingress, out->ingress);
  direction(pp->egress, out->egress);
  return out;
}

}  // namespace

Result<std::unique_ptr<Snapshot>> buildSnapshot(const SnapshotInputs& in, DepRegistry& deps) {
  const Model& m = *in.model;
  auto snap = std::make_unique<Snapshot>();
  Snapshot& s = *snap;
  s.generation = in.generation;
  s.programmed = m.programmed;
  s.router_mac = m.router_mac.bytes;
  s.has_tunnel_ip = m.has_tunnel_ip;
  s.tunnel_family = m.tunnel_ip.isV4() ? 4 : 6;
  s.tunnel_ip = toIp16(m.tunnel_ip);
  s.tunnel_lane = in.lanes && s.has_tunnel_ip && s.tunnel_family == 4;
  s.local_subnets = m.local_subnets;

  // Path MTU of the tunnel for inner packets: the pod MTU, or less when the
  // underlay MTU cannot carry it with our headers (Geneve + the OVN option).
  const overlay::OverlayEncap encap{
      .family = m.tunnel_ip.isV4() ? overlay::UnderlayFamily::kIpv4 : overlay::UnderlayFamily::kIpv6,
      .geneve_options_len = overlay::kOvnOptionWireLen};
  uint32_t mtu4 = m.pod_mtu, mtu6 = m.pod_mtu;
  if (m.underlay_mtu != 0) {
    mtu4 = std::min(mtu4, overlay::innerPathMtu(m.underlay_mtu, encap, false));
    mtu6 = std::min(mtu6, overlay::innerPathMtu(m.underlay_mtu, encap, true));
  }
  s.tunnel_mtu_v4 = static_cast<uint16_t>(std::min<uint32_t>(mtu4, 65535));
  s.tunnel_mtu_v6 = static_cast<uint16_t>(std::min<uint32_t>(std::max<uint32_t>(mtu6, 1280), 65535));
  // With ESP around the outer UDP packet (the agent sizes the pod MTU for
  // it already, docs/ipsec.md "Rollout").
  overlay::OverlayEncap esp_encap = encap;
  esp_encap.esp = true;
  esp_encap.esp_nat_t = m.ipsec_nat_t;  // the UDP 4500 header in front of ESP
  uint32_t esp4 = m.pod_mtu, esp6 = m.pod_mtu;
  if (m.underlay_mtu != 0) {
    esp4 = std::min(esp4, overlay::innerPathMtu(m.underlay_mtu, esp_encap, false));
    esp6 = std::min(esp6, overlay::innerPathMtu(m.underlay_mtu, esp_encap, true));
  }
  s.esp_mtu_v4 = static_cast<uint16_t>(std::min<uint32_t>(esp4, 65535));
  s.esp_mtu_v6 = static_cast<uint16_t>(std::min<uint32_t>(std::max<uint32_t>(esp6, 1280), 65535));
  s.ipsec = m.ipsec;
  s.ipsec_nat_t = m.ipsec_nat_t;

  // Port bindings.
  MacAddress uplink_mac;
  std::string routing_content = m.node_content;
  std::map<std::string, const Binding*> unused_management;
  for (const auto& [name, b] : *in.bindings) {
    if (b.port >= kMaxPorts) continue;
    PortSlot& slot = s.slots[b.port];
    slot.bound = true;
    slot.role = b.role;
    slot.mac = b.mac.bytes;
    slot.name = name;
    if (b.role == PortRole::kUplink && s.uplink_port < 0) {
      s.uplink_port = b.port;
      uplink_mac = b.mac;
    }
  }
  std::string node_content = m.node_content + "|uplink=" + std::to_string(s.uplink_port) + "/" + uplink_mac.str();
  deps.touch(kDepNode, node_content);
  buildNorthSouth(in, uplink_mac, deps, s);

  // Logical ports.
  s.ports.reserve(m.ports.size());
  auto previous_port = [&in](const std::string& name) -> const SnapPort* {
    if (in.previous == nullptr) return nullptr;
    const auto& ports = in.previous->ports;  // by name, as the model's
    auto it = std::lower_bound(ports.begin(), ports.end(), name,
                               [](const SnapPort& x, const std::string& n) { return x.name < n; });
    return it != ports.end() && it->name == name ? &*it : nullptr;
  };
  for (const auto& p : m.ports) {
    SnapPort sp;
    sp.name = p.name;
    sp.key = p.key;
    sp.management = p.kind == dataplane::v1::MANAGEMENT;
    sp.mac = p.mac.bytes;
    sp.datapath_key = p.datapath_key;
    for (const auto& ip : p.ips) {
      if (ip.isV4()) {
        sp.ipv4.push_back(ip.v4HostOrder());
      } else {
        overlay::Ipv6Address a;
        std::memcpy(a.data(), ip.bytes.data(), 16);
        sp.ipv6.push_back(a);
      }
    }
    for (const auto& sub : m.local_subnets) {
      if (sub.datapath_key != p.datapath_key || !sub.has_gateway) continue;
      if (sub.prefix.address.isV4()) {
        sp.has_gw4 = true;
        sp.gw4 = sub.gateway.v4HostOrder();
        sp.has_net4 = true;
        sp.mask4 = sub.prefix.length == 0 ? 0 : ~uint32_t{0} << (32 - sub.prefix.length);
        sp.net4 = sub.prefix.address.v4HostOrder() & sp.mask4;
      } else {
        sp.has_gw6 = true;
        std::memcpy(sp.gw6.data(), sub.gateway.bytes.data(), 16);
        sp.has_net6 = true;
        sp.len6 = sub.prefix.length;
        for (unsigned i = 0; i < 16; ++i) {
          const unsigned bits = sp.len6 > i * 8 ? std::min(8u, sp.len6 - i * 8u) : 0u;
          sp.net6[i] = static_cast<uint8_t>(sub.prefix.address.bytes[i] & (bits ? 0xff << (8 - bits) : 0));
        }
      }
    }
    auto bound = in.bindings->find(p.representor);
    if (bound != in.bindings->end() && bound->second.port < kMaxPorts) {
      sp.dpdk_port = bound->second.port;
    } else if (sp.management) {
      // The management port may be bound by role under the name "management"
      // rather than by its representor name.
      for (const auto& [name, b] : *in.bindings) {
        if (b.role == PortRole::kManagement && b.port < kMaxPorts) {
          sp.dpdk_port = b.port;
          break;
        }
      }
    }
    sp.dep = deps.idFor("port/" + p.name);
    const std::string content = p.content + "|bound=" + std::to_string(sp.dpdk_port);
    sp.policy = buildPolicy(in, p.name, previous_port(p.name));
    // A change of the port's policy retires the port's flows (and only
    // theirs): the policy is part of the port's version, not of routing's.
    deps.touch(sp.dep, sp.policy ? content + "|policy=" + std::to_string(sp.policy->content_hash) : content);
    routing_content += content;
    s.ports.push_back(std::move(sp));
  }
  for (const auto& sp : s.ports) {
    if (sp.dpdk_port >= 0) s.slots[sp.dpdk_port].lport = &sp;
    for (uint32_t a : sp.ipv4) s.port_by_ipv4.emplace(a, &sp);
    for (const auto& a : sp.ipv6) {
      Ip16 k;
      std::memcpy(k.data(), a.data(), 16);
      s.port_by_ipv6.emplace(k, &sp);
    }
  }
  for (const auto& sub : s.local_subnets) s.local_by_vni.emplace(sub.datapath_key, &sub);

  // Remote nodes and their encap templates.
  s.remotes.reserve(m.remote_nodes.size());
  for (const auto& r : m.remote_nodes) {
    SnapRemoteNode rn;
    rn.name = r.name;
    rn.tunnel_ip = r.tunnel_ip;
    rn.reach = r.reach();
    if (m.ipsec_nat_t && in.nat_peers != nullptr) {
      auto& nat = (*in.nat_peers)[r.name];
      if (!nat) nat = std::make_unique<NatPeer>();
      if (nat->address != rn.reach) {
        nat->address = rn.reach;
        nat->port.store(kNatTPort, std::memory_order_relaxed);
      }
      rn.nat = nat.get();
    }
    for (const auto& k : r.port_keys) rn.port_keys.emplace(toIp16(k.ip), k.key);
    // Behind a NAT its underlay next hop is the one towards its NAT address.
    auto hop = in.next_hops->find(rn.reach);
    MacAddress next_hop;
    if (hop != in.next_hops->end()) {
      next_hop = hop->second;
      rn.next_hop_known = true;
    } else {
      next_hop.bytes = overlay::eth::kBroadcast;
    }
    for (const auto& sub : r.subnets) {
      SnapRemoteSubnet rs;
      rs.prefix = sub.prefix;
      rs.datapath_key = sub.datapath_key;
      std::array<uint8_t, overlay::kOvnOptionDataLen> ovn_data;
      overlay::GeneveOption ovn;
      if (overlay::makeOvnOption({0, kRouterEgressPortKey}, ovn_data, ovn) != overlay::Status::kOk) {
        return Error{"building the OVN option failed"};
      }
      overlay::GeneveTunnel t;
      t.src_mac = uplink_mac.bytes;
      t.dst_mac = next_hop.bytes;
      t.family = m.tunnel_ip.isV4() ? overlay::UnderlayFamily::kIpv4 : overlay::UnderlayFamily::kIpv6;
      t.src_ip = toIp16(m.tunnel_ip);
      t.dst_ip = toIp16(rn.reach);
      t.vni = sub.datapath_key;
      t.options = std::span<const overlay::GeneveOption>(&ovn, 1);
      overlay::GeneveEncapTemplate tmpl;
      if (auto st = tmpl.build(t); st != overlay::Status::kOk) {
        return Error{"remote node " + r.name + " subnet " + sub.prefix.str() + ": building the Geneve header failed: " +
                     std::string(overlay::statusText(st))};
      }
      const auto bytes = tmpl.bytes();
      if (bytes.size() > rs.encap.bytes.size()) return Error{"Geneve header longer than expected"};
      std::memcpy(rs.encap.bytes.data(), bytes.data(), bytes.size());
      rs.encap.length = static_cast<uint8_t>(bytes.size());
      rs.encap.ipv6 = !m.tunnel_ip.isV4();
      rs.encap.udp_offset = static_cast<uint8_t>(14 + (rs.encap.ipv6 ? 40 : 20));
      rs.encap.ovn_offset = static_cast<uint8_t>(rs.encap.udp_offset + 8 + overlay::kGeneveHeaderLen +
                                                 overlay::kGeneveOptionHeaderLen);
      if (!rs.encap.ipv6) {
        // Folded to 16 bits: the hit path adds a 16-bit length and folds once.
        uint32_t sum = overlay::checksumAdd(rs.encap.bytes.data() + 14, 20);
        sum = (sum & 0xffff) + (sum >> 16);
        rs.encap.ipv4_sum = (sum & 0xffff) + (sum >> 16);
      }
      rn.subnets.push_back(rs);
    }
    // Its SAs: which one it is does not change a flow's decision (the Esp
    // action re-resolves it), whether there is one does.
    if (in.ipsec != nullptr) {
      for (const auto& [name, slot] : in.ipsec->slots()) {
        if (slot->sa().remote_node != r.name) continue;
        if (slot->outbound()) {
          rn.outbound = slot;
        } else {
          rn.inbound_sas = true;
          rn.plaintext_accepted = rn.plaintext_accepted || slot->sa().plaintext_accepted;
          s.any_inbound_sa = true;
          Snapshot::EspKey k;
          k.peer = toIp16(rn.reach);  // what it sends comes from its NAT address, when behind one
          k.spi = slot->spi();
          s.inbound_sas.emplace(k, Snapshot::InboundSa{slot, rn.nat});
        }
      }
      for (auto& sub : rn.subnets) {
        sub.encap.esp = rn.outbound.get();
        sub.encap.esp_nat_t = s.ipsec_nat_t;
        sub.encap.nat = rn.nat;
      }
    }
    rn.dep = deps.idFor("node/" + r.name);
    const std::string content = r.content + "|next_hop=" + (rn.next_hop_known ? next_hop.str() : "unknown") +
                                "|esp_out=" + (rn.outbound ? "1" : "0") + "|esp_in=" + (rn.inbound_sas ? "1" : "0");
    deps.touch(rn.dep, content);
    routing_content += content;
    s.remotes.push_back(std::move(rn));
  }
  std::map<uint8_t, Snapshot::RouteLength, std::greater<>> v4, v6;
  for (const auto& rn : s.remotes) {
    s.peer_by_ip.emplace(toIp16(rn.reach), &rn);
    for (size_t i = 0; i < rn.subnets.size(); ++i) {
      const auto& p = rn.subnets[i].prefix;
      auto& level = (p.address.isV4() ? v4 : v6)[p.length];
      level.length = p.length;
      level.table.emplace(toIp16(p.address), Snapshot::RouteTarget{&rn, static_cast<uint8_t>(i)});
    }
  }
  for (auto& [len, level] : v4) s.routes_v4.push_back(std::move(level));
  for (auto& [len, level] : v6) s.routes_v6.push_back(std::move(level));

  // Services: a service unchanged since the snapshot in force keeps its
  // frontends and Maglev tables (shared); only changed ones are rebuilt.
  s.service_cidrs = m.service_cidrs;
  s.cluster_cidrs = m.cluster_cidrs;
  std::vector<IpAddress> node_ips;
  std::string node_ips_text;
  for (const auto& a : m.node_ips) {
    node_ips.push_back(a.address);
    node_ips_text += a.address.str() + ",";
  }
  auto build = [&](const model::ModelService& svc) {
    const uint64_t h = hashText(node_ips_text, hashText(svc.content));
    const uint32_t dep = deps.idFor("service/" + svc.name);
    deps.touchHash(dep, h);
    return std::make_pair(h, dep);
  };
  // The slices this build writes: its own copies (the others stay shared).
  std::array<ServiceShard*, kServiceShards> own{};
  auto shard = [&s, &own](const Ip16& ip) -> ServiceShard& {
    const size_t i = serviceShardOf(ip);
    if (own[i] == nullptr) {
      auto copy = s.service_shards[i] ? std::make_shared<ServiceShard>(*s.service_shards[i])
                                      : std::make_shared<ServiceShard>();
      own[i] = copy.get();
      s.service_shards[i] = std::move(copy);
    }
    return *own[i];
  };
  auto index = [&s, &shard](const SnapService& sv) {
    for (const auto& f : sv.frontends) {
      ServiceShard& sh = shard(f.ip);
      if (!sh.frontends.emplace(FrontendKey{f.ip, f.port, f.protocol}, &f).second) continue;
      if (f.kind != FrontendKind::kNodePort) ++sh.ips[f.ip];
      s.frontends_hash += frontendHash(f);
    }
  };
  if (in.previous != nullptr && in.changed_services != nullptr) {
    // Only these services changed: the others, their frontends and Maglev
    // tables are the snapshot in force's (shared, not looked at one by one).
    s.services = in.previous->services;
    s.service_shards = in.previous->service_shards;
    s.frontends_hash = in.previous->frontends_hash;
    auto byName = [](const std::shared_ptr<const SnapService>& a, const std::string& n) { return a->name < n; };
    for (const auto& name : *in.changed_services) {
      auto at = std::lower_bound(s.services.begin(), s.services.end(), name, byName);
      const bool had = at != s.services.end() && (*at)->name == name;
      if (had) {
        for (const auto& f : (*at)->frontends) {
          ServiceShard& sh = shard(f.ip);
          auto it = sh.frontends.find(FrontendKey{f.ip, f.port, f.protocol});
          if (it == sh.frontends.end() || it->second != &f) continue;
          sh.frontends.erase(it);
          if (f.kind != FrontendKind::kNodePort && --sh.ips[f.ip] == 0) sh.ips.erase(f.ip);
          s.frontends_hash -= frontendHash(f);
        }
      }
      auto m_at = std::lower_bound(m.services.begin(), m.services.end(), name,
                                   [](const model::ModelService& a, const std::string& n) { return a.name < n; });
      if (m_at == m.services.end() || m_at->name != name) {
        if (had) s.services.erase(at);
        continue;
      }
      const auto [h, dep] = build(*m_at);
      auto sv = had && (*at)->content_hash == h ? *at : buildService(*m_at, h, dep, node_ips);
      index(*sv);
      if (had) {
        *at = std::move(sv);
      } else {
        s.services.insert(at, std::move(sv));
      }
    }
    for (const auto& sv : s.services) deps.keep(sv->dep);
  } else {
    std::unordered_map<std::string, std::shared_ptr<const SnapService>> before;
    if (in.previous != nullptr) {
      for (const auto& sv : in.previous->services) before.emplace(sv->name, sv);
    }
    s.services.reserve(m.services.size());
    for (const auto& svc : m.services) {
      const auto [h, dep] = build(svc);
      auto it = before.find(svc.name);
      s.services.push_back(it != before.end() && it->second->content_hash == h ? it->second
                                                                                : buildService(svc, h, dep, node_ips));
    }
    for (const auto& sv : s.services) index(*sv);
    for (auto& sh : s.service_shards) {
      if (!sh) sh = std::make_shared<ServiceShard>();
    }
  }
  deps.touchHash(kDepServices, s.frontends_hash);

  deps.touch(kDepRouting, routing_content);
  s.stamp = deps.finish();
  s.dep_version = deps.versions();
  s.port_by_dep.assign(s.dep_version.size(), nullptr);
  s.remote_by_dep.assign(s.dep_version.size(), nullptr);
  for (const auto& sp : s.ports) s.port_by_dep[sp.dep] = &sp;
  for (const auto& rn : s.remotes) s.remote_by_dep[rn.dep] = &rn;
  return snap;
}

}  // namespace dpu::datapath
