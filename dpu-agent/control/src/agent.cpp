// The agent's attachments, cluster view and model derivation (see agent.h).
#include "control/agent.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>

#include "common/atomic_file.h"
#include "common/log.h"
#include "control/checkpoint.h"
#include "control/policy_model.h"
#include "model/model.h"

namespace dpu::control {
namespace {

constexpr const char* kLog = "dpu-agent";
using model::kMaxPortKey;  // 15-bit port key in the OVN option

std::string randomHex(size_t bytes) {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

std::string podKey(const std::string& ns, const std::string& name) { return ns + "/" + name; }

bool validIfname(const std::string& s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s) {
    if (c <= ' ' || c == '/' || c == ':' || c >= 0x7f) return false;
  }
  return true;
}

// A Kubernetes object name part: DNS-1123 subdomain characters.
bool validObjectName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

// A free-form label: bounded, and nothing that breaks a log line.
bool printableLabel(const std::string& s) {
  if (s.size() > 253) return false;
  for (unsigned char c : s) {
    if (c < ' ' || c == 0x7f) return false;
  }
  return true;
}

std::string vfName(uint32_t pf, uint32_t vf) { return "pf" + std::to_string(pf) + "vf" + std::to_string(vf); }

}  // namespace

Agent::Agent(AgentConfig config, ModelState& model, bool pods_checked)
    : config_(std::move(config)), model_(model), pods_checked_(pods_checked), policy_(config_.node_name) {
  model_.setNode(nodeSettings());
}

dpv1::NodeSettings Agent::nodeSettings() const {
  dpv1::NodeSettings n;
  n.set_name(config_.node_name);
  n.set_tunnel_ip(config_.tunnel_ip.str());
  n.set_underlay_mtu(config_.underlay_mtu);
  n.set_pod_mtu(config_.pod_mtu);
  n.set_router_mac(kRouterMac);
  for (const auto& c : config_.cluster_cidrs) n.add_cluster_cidrs(c.str());
  for (const auto& c : config_.service_cidrs) n.add_service_cidrs(c.str());
  n.set_ipsec(config_.ipsec.encrypt());
  n.set_ipsec_nat_traversal(config_.ipsec.nat_traversal);
  n.set_ipsec_nat_keepalive_seconds(config_.ipsec.nat_keepalive_s);
  for (const auto& ip : config_.node_ips) n.add_node_ips(ip.str());
  for (const auto& gw : config_.node_gateways) n.add_node_gateways(gw.str());
  return n;
}

dpv1::LogicalPort Agent::portOf(const Record& r) const {
  const auto& a = r.attachment;
  dpv1::LogicalPort p;
  p.set_name(a.id());
  p.set_key(r.port_key);
  p.set_kind(a.kind() == attv1::MANAGEMENT ? dpv1::MANAGEMENT : dpv1::POD);
  p.set_representor(a.representor());
  p.set_pf_index(a.pf_index());
  p.set_vf_index(a.vf_index());
  p.set_mac(a.mac());
  for (const auto& ip : a.ips()) {
    auto ifa = IpInterfaceAddress::parse(ip.address());
    if (!ifa) continue;
    p.add_ips(ifa->address.str());
    if (p.datapath_key() == 0) p.set_datapath_key(datapathKeyFor(ifa->network(), config_.cluster_cidrs));
  }
  return p;
}

std::optional<dpv1::RemoteNode> Agent::remoteNodeOf(const NodeInfo& node) const {
  if (node.tunnel_ip.empty()) return std::nullopt;
  auto tip = IpAddress::parse(node.tunnel_ip);
  if (!tip) return std::nullopt;
  dpv1::RemoteNode rn;
  rn.set_name(node.name);
  rn.set_tunnel_ip(tip->str());
  rn.set_ipsec_public_key(node.ipsec_public_key);
  // Behind a NAT it is reached at the NAT's address, unless it is behind ours
  // (the same site: its tunnel IP is reachable from here, and a NAT does not
  // always send its own public address back inside). A bad address goes to
  // the model, which refuses the node and says why.
  if (!node.ipsec_nat_address.empty()) {
    auto nat = IpAddress::parse(node.ipsec_nat_address);
    if (!nat || !config_.ipsec.nat_address || *nat != *config_.ipsec.nat_address) {
      rn.set_nat_address(nat ? nat->str() : node.ipsec_nat_address);
    }
  }
  uint32_t key = 0;
  for (const auto& text : node.pod_cidrs) {
    auto p = IpPrefix::parse(text, true);
    if (!p) continue;
    const IpPrefix net = *p;
    if (key == 0) key = datapathKeyFor(net, config_.cluster_cidrs);
    auto* s = rn.add_subnets();
    s->set_cidr(net.str());
    s->set_gateway_ip(net.at(1).str());
    s->set_datapath_key(key);
  }
  if (rn.subnets_size() == 0) return std::nullopt;
  // Its published port keys, as the model accepts them: a bad entry is left
  // out (that address gets the router key) rather than the whole node refused.
  std::vector<std::pair<IpAddress, uint32_t>> keys;
  for (const auto& [text, k] : node.port_keys) {
    auto ip = IpAddress::parse(text);
    bool inside = false;
    for (const auto& s : rn.subnets()) inside = inside || (ip && IpPrefix::parse(s.cidr())->contains(*ip));
    if (!ip || !inside || k == 0 || k > kMaxPortKey) {
      DPU_LOG(kWarn, kLog) << "node " << node.name << " publishes port key " << k << " for '" << text
                           << "', which is not one of its pod addresses with a 15-bit key: ignored";
      continue;
    }
    keys.emplace_back(*ip, k);
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& [ip, k] : keys) {
    auto* p = rn.add_ports();
    p->set_ip(ip.str());
    p->set_key(k);
  }
  return rn;
}

std::string Agent::bootId() const {
  std::lock_guard lock(mu_);
  return boot_id_;
}

Result<void> Agent::restore() {
  std::lock_guard lock(mu_);
  const std::string path = config_.checkpointPath();
  auto loaded = loadAgentCheckpoint(path);
  if (!loaded) {
    std::string aside = path + ".corrupt";
    std::rename(path.c_str(), aside.c_str());
    boot_id_ = randomHex(16);
    DPU_LOG(kError, kLog) << loaded.error() << "; moved it to " << aside << " and starting with no attachments and a new boot id "
                          << boot_id_ << " (host-shim will replay its attachments)";
  } else if (!loaded->has_value()) {
    boot_id_ = randomHex(16);
    DPU_LOG(kInfo, kLog) << "no checkpoint at " << path << ": first start, new boot id " << boot_id_;
  } else {
    const auto& cp = **loaded;
    boot_id_ = cp.boot_id();
    next_port_key_ = cp.next_port_key() ? cp.next_port_key() : 1;
    generation_.store(cp.generation());
    for (const auto& a : cp.attachments()) {
      Record r;
      r.attachment = a;
      auto key = cp.port_keys().find(a.id());
      if (key != cp.port_keys().end()) r.port_key = key->second;
      attachments_[a.id()] = r;
      by_vf_[{a.pf_index(), a.vf_index()}] = a.id();
      if (a.kind() == attv1::POD) by_sandbox_[sandboxKeyOf(a)] = a.id();
    }
    // Attachments from an older checkpoint without port keys get fresh ones.
    for (auto& [id, r] : attachments_) {
      if (r.port_key == 0) {
        auto k = allocatePortKeyLocked();
        if (k) r.port_key = *k;
      }
    }
    pending_recent_.assign(cp.recently_released().begin(), cp.recently_released().end());
    DPU_LOG(kInfo, kLog) << "restored " << attachments_.size() << " attachments from " << path << ", boot id " << boot_id_;
  }
  if (!config_.pod_cidrs.empty()) setPodCidrsLocked(config_.pod_cidrs);
  for (const auto& [id, r] : attachments_) upsertPortLocked(r);
  ++port_keys_version_;
  return checkpointLocked();
}

void Agent::setPodCidrsLocked(const std::vector<IpPrefix>& cidrs) {
  if (!pod_cidrs_.empty()) {
    if (cidrs != pod_cidrs_) {
      DPU_LOG(kError, kLog) << "this node's pod CIDRs changed; keeping the ones in use until the agent restarts with the node drained";
    }
    return;
  }
  pod_cidrs_ = cidrs;
  for (const auto& c : cidrs) {
    Ipam ipam(c);
    for (const auto& [id, r] : attachments_) {
      for (const auto& ip : r.attachment.ips()) {
        auto ifa = IpInterfaceAddress::parse(ip.address());
        if (!ifa || !c.contains(ifa->address) || ipam.isReserved(ifa->address)) continue;
        if (auto claimed = ipam.claim(ifa->address); !claimed) {
          DPU_LOG(kError, kLog) << "attachment " << id << ": " << claimed.error();
        }
      }
    }
    ipam.setRecentlyReleased(pending_recent_);
    ipams_.push_back(std::move(ipam));
    dpv1::Subnet s;
    s.set_cidr(c.str());
    s.set_gateway_ip(c.at(1).str());
    s.set_datapath_key(datapathKeyFor(cidrs.front(), config_.cluster_cidrs));
    model_.upsertLocalSubnet(s);
  }
  pending_recent_.clear();
  DPU_LOG(kInfo, kLog) << "pod CIDR " << cidrs.front().str() << (cidrs.size() > 1 ? " (and more)" : "") << " in use";
}

Result<void> Agent::checkpointLocked() {
  ::dpu::checkpoint::v1::AgentCheckpoint cp;
  cp.set_version(kAgentCheckpointVersion);
  cp.set_boot_id(boot_id_);
  cp.set_generation(generation_.load());
  cp.set_next_port_key(next_port_key_);
  for (const auto& [id, r] : attachments_) {
    *cp.add_attachments() = r.attachment;
    (*cp.mutable_port_keys())[id] = r.port_key;
  }
  if (ipams_.empty()) {
    for (const auto& a : pending_recent_) cp.add_recently_released(a);
  }
  for (const auto& ipam : ipams_) {
    for (const auto& a : ipam.recentlyReleased()) cp.add_recently_released(a);
  }
  return saveAgentCheckpoint(config_.checkpointPath(), cp);
}

Result<uint32_t> Agent::allocatePortKeyLocked() {
  std::set<uint32_t> used;
  for (const auto& [id, r] : attachments_) used.insert(r.port_key);
  for (uint32_t i = 0; i < kMaxPortKey; ++i) {
    uint32_t k = (next_port_key_ - 1 + i) % kMaxPortKey + 1;
    if (!used.count(k)) {
      next_port_key_ = k % kMaxPortKey + 1;
      return k;
    }
  }
  return Error{"all " + std::to_string(kMaxPortKey) + " logical port keys are in use"};
}

std::optional<std::string> Agent::findHolderLocked(uint32_t pf, uint32_t vf) const {
  auto it = by_vf_.find({pf, vf});
  if (it == by_vf_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Agent::findBySandboxLocked(const SandboxKey& key) const {
  auto it = by_sandbox_.find(key);
  if (it == by_sandbox_.end()) return std::nullopt;
  return it->second;
}

std::string Agent::holderOfAddressLocked(const IpAddress& ip) const {
  for (const auto& [id, r] : attachments_) {
    for (const auto& a : r.attachment.ips()) {
      auto ifa = IpInterfaceAddress::parse(a.address());
      if (ifa && ifa->address == ip) return id;
    }
  }
  return "(none: the address was released recently or is being restored)";
}

bool Agent::macHeldLocked(const std::string& mac) const {
  for (const auto& [id, r] : attachments_) {
    if (r.attachment.mac() == mac) return true;
  }
  return false;
}

std::optional<std::string> Agent::findManagementLocked() const {
  for (const auto& [id, r] : attachments_) {
    if (r.attachment.kind() == attv1::MANAGEMENT) return id;
  }
  return std::nullopt;
}

Result<void> Agent::validateAttach(const attv1::AttachRequest& r) const {
  if (r.kind() != attv1::POD && r.kind() != attv1::MANAGEMENT) {
    return Error{"kind must be POD or MANAGEMENT", ErrorCode::kInvalid};
  }
  if (r.kind() == attv1::POD) {
    if (pods_checked_) {
      // The placement check looks the pod up in the Kubernetes API by these.
      if (!validObjectName(r.pod().namespace_()))
        return Error{"pod.namespace must be a Kubernetes namespace name (the runtime passes it as "
                            "K8S_POD_NAMESPACE in CNI_ARGS)", ErrorCode::kInvalid};
      if (!validObjectName(r.pod().name()))
        return Error{"pod.name must be a Kubernetes pod name (the runtime passes it as K8S_POD_NAME in CNI_ARGS)", ErrorCode::kInvalid};
    } else {
      // Without Kubernetes the pod identity is only a label: runtimes outside
      // Kubernetes pass none (bare libcni) or only K8S_POD_NAME set to the
      // container's name (podman), which need not be a DNS-1123 name.
      if (!printableLabel(r.pod().namespace_())) return Error{"pod.namespace must be at most 253 printable characters", ErrorCode::kInvalid};
      if (!printableLabel(r.pod().name())) return Error{"pod.name must be at most 253 printable characters", ErrorCode::kInvalid};
    }
    if (!printableLabel(r.network()))
      return Error{"network must be the CNI network's name, at most 253 printable characters", ErrorCode::kInvalid};
    if (r.sandbox_id().empty() || r.sandbox_id().size() > 256) {
      return Error{"sandbox_id must be the container (sandbox) id, 1-256 characters", ErrorCode::kInvalid};
    }
    if (!validIfname(r.ifname())) return Error{"ifname must be an interface name of 1-15 characters without '/', ':' or spaces", ErrorCode::kInvalid};
  } else if (!r.sandbox_id().empty()) {
    return Error{"a MANAGEMENT attachment has no sandbox_id: it stays in the host netns", ErrorCode::kInvalid};
  }
  const RepresentorMap* rep = config_.representorsOf(r.pf_index());
  if (!rep) return Error{"pf_index " + std::to_string(r.pf_index()) + " is not a PF this DPU manages", ErrorCode::kInvalid};
  if (r.vf_index() >= rep->vf_count) {
    return Error{"vf_index " + std::to_string(r.vf_index()) + " is out of range: PF " + std::to_string(r.pf_index()) +
                            " has VFs 0-" + std::to_string(rep->vf_count - 1), ErrorCode::kInvalid};
  }
  if (!r.vf_mac().empty()) {
    if (auto m = MacAddress::parse(r.vf_mac()); !m) return Error{"vf_mac: " + m.error(), ErrorCode::kInvalid};
  }
  if (!r.requested_mac().empty()) {
    auto m = MacAddress::parse(r.requested_mac());
    if (!m) return Error{"requested_mac: " + m.error(), ErrorCode::kInvalid};
    // The dataplane would refuse such a port and the pod would never get a
    // network: refused here, with the same reason, before anything is held.
    if (auto why = model::portMacProblem(*m, *MacAddress::parse(kRouterMac)); !why.empty()) {
      return Error{"requested_mac (runtimeConfig.mac): " + why, ErrorCode::kInvalid};
    }
  }
  if (r.requested_ips_size() > 0 && r.kind() != attv1::POD) {
    return Error{"requested_ips is for POD attachments: the management port's address is fixed", ErrorCode::kInvalid};
  }
  bool seen_v4 = false, seen_v6 = false;
  for (const auto& text : r.requested_ips()) {
    auto ip = IpAddress::parse(text);
    if (!ip) return Error{"requested_ips: '" + text + "' is not an IP address (give it without prefix length)", ErrorCode::kInvalid};
    bool& seen = ip->isV4() ? seen_v4 : seen_v6;
    if (seen) return Error{"requested_ips: at most one address per family", ErrorCode::kInvalid};
    seen = true;
  }
  if (r.requested_mtu() != 0 && (r.requested_mtu() < 576 || r.requested_mtu() > config_.pod_mtu)) {
    return Error{"requested_mtu " + std::to_string(r.requested_mtu()) + " must be between 576 and the pod MTU " +
                            std::to_string(config_.pod_mtu) + " (what fits the overlay)", ErrorCode::kInvalid};
  }
  return {};
}

Result<attv1::AttachResponse> Agent::attach(const attv1::AttachRequest& r) {
  if (auto v = validateAttach(r); !v.ok()) return std::move(v).takeError();
  std::lock_guard lock(mu_);
  auto answer = [&](const Record& rec) {
    attv1::AttachResponse resp;
    *resp.mutable_attachment() = withState(rec);
    resp.set_boot_id(boot_id_);
    return resp;
  };
  const std::string vf = vfName(r.pf_index(), r.vf_index());

  // An attach older than host-shim's last list that the list does not hold:
  // host-shim gave up on it (the ADD timed out) before it got here.
  if (r.kind() == attv1::POD && r.host_seq() != 0 && !reconciled_instance_.empty() &&
      r.host_instance() == reconciled_instance_ && r.host_seq() <= reconciled_as_of_ &&
      !reconciled_held_.count({r.network(), r.sandbox_id(), r.ifname(), r.pf_index(), r.vf_index()})) {
    DPU_LOG(kWarn, kLog) << "refusing the attach of " << r.network() << "/" << r.sandbox_id() << "/" << r.ifname()
                         << " (host-shim request " << r.host_seq() << "): host-shim gave up on it";
    return Error{"host-shim gave up on this attach of " + r.network() + "/" + r.sandbox_id() + "/" +
                            r.ifname() + " (request " + std::to_string(r.host_seq()) + "): its list as of request " +
                            std::to_string(reconciled_as_of_) + " does not hold it", ErrorCode::kConflict};
  }

  // Idempotency first: a retried ADD gets the same answer.
  std::optional<std::string> same = r.kind() == attv1::POD
                                        ? findBySandboxLocked({r.network(), r.sandbox_id(), r.ifname()})
                                        : findManagementLocked();
  if (same) {
    Record& rec = attachments_.at(*same);
    auto& a = rec.attachment;
    if (a.pf_index() == r.pf_index() && a.vf_index() == r.vf_index() &&
        (r.kind() == attv1::MANAGEMENT ||
         (a.pod().namespace_() == r.pod().namespace_() && a.pod().name() == r.pod().name()))) {
      // The same answer; the attachment now belongs to this request's place
      // in host-shim's order, so a reconcile taken before it keeps it.
      if (r.kind() == attv1::POD && (a.host_instance() != r.host_instance() || a.host_seq() != r.host_seq())) {
        a.set_host_instance(r.host_instance());
        a.set_host_seq(r.host_seq());
        if (auto saved = checkpointLocked(); !saved) {
          DPU_LOG(kError, kLog) << saved.error();
        }
      }
      return answer(rec);
    }
    if (r.kind() == attv1::MANAGEMENT) {
      return Error{"the management port is already attached through pf" + std::to_string(a.pf_index()) + "vf" +
                              std::to_string(a.vf_index()) + " (attachment " + *same + "); detach it first", ErrorCode::kConflict, *same};
    }
    return Error{"sandbox " + r.sandbox_id() + " ifname " + r.ifname() + " on network '" + r.network() +
                            "' is already attached as pod " +
                            a.pod().namespace_() + "/" + a.pod().name() + " through pf" + std::to_string(a.pf_index()) + "vf" +
                            std::to_string(a.vf_index()) + " (attachment " + *same + "); detach it first", ErrorCode::kConflict, *same};
  }
  if (auto holder = findHolderLocked(r.pf_index(), r.vf_index())) {
    const auto& a = attachments_.at(*holder).attachment;
    std::string who = a.kind() == attv1::MANAGEMENT ? std::string("the management port")
                                                    : "pod " + a.pod().namespace_() + "/" + a.pod().name() + " (sandbox " +
                                                          a.sandbox_id() + ", " + a.ifname() + ")";
    return Error{"VF " + vf + " is held by attachment " + *holder + " of " + who + "; detach it first", ErrorCode::kConflict, *holder};
  }
  if (const uint32_t capacity = port_capacity_.load(); capacity != 0 && attachments_.size() >= capacity) {
    const std::string max = std::to_string(max_ethports_.load());
    return Error{"this node's dataplane can open " + std::to_string(capacity) +
                            " representor ports (its DPDK is built with RTE_MAX_ETHPORTS " + max +
                            ", less the ports it uses otherwise) and all are held by attachments; delete an unused "
                            "pod on this node, or run dpu-dataplane built against a DPDK configured with "
                            "-Dmax_ethports=N (N > " + max + ")", ErrorCode::kExhausted};
  }
  if (r.kind() == attv1::POD && pods_checked_) {
    if (!synced_.load()) return Error{"the Kubernetes view is not synced yet; retry shortly", ErrorCode::kUnavailable};
    auto it = pods_.find(podKey(r.pod().namespace_(), r.pod().name()));
    if (it == pods_.end()) {
      return Error{"pod " + r.pod().namespace_() + "/" + r.pod().name() + " is not known to the Kubernetes API; "
                          "check the pod exists (or retry if it was created just now)", ErrorCode::kNotFound};
    }
    if (it->second.node_name != config_.node_name) {
      return Error{"pod " + r.pod().namespace_() + "/" + r.pod().name() + " is scheduled on node '" +
                              it->second.node_name + "', not on this node '" + config_.node_name + "'", ErrorCode::kForbidden};
    }
    if (!r.pod().uid().empty() && !it->second.uid.empty() && r.pod().uid() != it->second.uid) {
      return Error{"pod " + r.pod().namespace_() + "/" + r.pod().name() + " has uid " + it->second.uid +
                              ", not " + r.pod().uid() + " (the pod was recreated)", ErrorCode::kConflict};
    }
  }
  if (ipams_.empty()) {
    return Error{"this node's pod CIDR is not known yet: set podCIDR in the config or give Node " +
                            config_.node_name + " spec.podCIDR", ErrorCode::kUnavailable};
  }
  if (!r.requested_mac().empty()) {
    std::string holder;
    if (auto why = macProblemLocked(*MacAddress::parse(r.requested_mac()), holder); !why.empty()) {
      return Error{"requested_mac (runtimeConfig.mac): " + why, ErrorCode::kInvalid, holder};
    }
  }

  for (const auto& text : r.requested_ips()) {
    auto w = IpAddress::parse(text);
    bool family_served = false;
    for (const auto& ipam : ipams_) family_served = family_served || ipam.pool().address.family == w->family;
    if (!family_served) return Error{"requested address " + text + ": this node has no pod CIDR of that family", ErrorCode::kInvalid};
  }

  Record rec;
  auto& a = rec.attachment;
  a.set_id((r.kind() == attv1::MANAGEMENT ? "mgmt-" : "att-") + randomHex(8));
  a.set_kind(r.kind());
  *a.mutable_pod() = r.pod();
  a.set_sandbox_id(r.sandbox_id());
  a.set_ifname(r.ifname());
  a.set_network(r.network());
  a.set_host_instance(r.host_instance());
  a.set_host_seq(r.host_seq());
  a.set_pf_index(r.pf_index());
  a.set_vf_index(r.vf_index());
  a.set_representor(config_.representorsOf(r.pf_index())->representorFor(r.vf_index()));
  a.set_mtu(r.requested_mtu() ? r.requested_mtu() : config_.pod_mtu);

  std::vector<std::pair<size_t, IpAddress>> taken;
  auto undo = [&] {
    for (auto& [i, ip] : taken) {
      if (r.kind() == attv1::POD) ipams_[i].release(ip);
    }
  };
  for (size_t i = 0; i < ipams_.size(); ++i) {
    auto& ipam = ipams_[i];
    IpAddress ip;
    std::optional<IpAddress> wanted;
    for (const auto& text : r.requested_ips()) {
      auto w = IpAddress::parse(text);
      if (w && w->family == ipam.pool().address.family) wanted = *w;
    }
    if (r.kind() == attv1::MANAGEMENT) {
      ip = ipam.managementAddress();
    } else if (wanted) {
      if (!ipam.pool().contains(*wanted) || ipam.isReserved(*wanted)) {
        undo();
        return Error{"requested address " + wanted->str() + " is not an assignable address of this node's pod CIDR " +
                                ipam.pool().str(), ErrorCode::kInvalid};
      }
      if (auto claimed = ipam.claim(*wanted); !claimed) {
        undo();
        std::string holder = holderOfAddressLocked(*wanted);
        return Error{"requested address " + wanted->str() + " is held by attachment " + holder + "; detach it first", ErrorCode::kConflict, holder};
      }
      ip = *wanted;
      taken.emplace_back(i, ip);
    } else {
      auto got = ipam.allocate();
      // The MAC comes from the first address unless one is requested. After a
      // DPU reboot host-shim replays its pods with their old MACs on new
      // addresses, so the MAC of a free address can be held: skip such
      // addresses (released again below) rather than refuse the attach.
      std::vector<IpAddress> skipped;
      while (got && i == 0 && r.requested_mac().empty() && macHeldLocked(MacAddress::fromIp(*got).str()) &&
             skipped.size() <= attachments_.size()) {
        skipped.push_back(*got);
        got = ipam.allocate();
      }
      for (const auto& s : skipped) ipam.release(s);
      if (!got) {
        undo();
        return Error{got.error() + "; delete unused pods on this node or give it a larger pod CIDR", ErrorCode::kExhausted};
      }
      ip = *got;
      taken.emplace_back(i, ip);
    }
    auto* ipa = a.add_ips();
    ipa->set_address(ip.str() + "/" + std::to_string(ipam.pool().length));
    ipa->set_gateway(ipam.gateway().str());
    if (r.kind() == attv1::POD) {
      auto* route = a.add_routes();
      route->set_dst(ip.isV4() ? "0.0.0.0/0" : "::/0");
      route->set_gw(ipam.gateway().str());
    } else {
      for (const auto* list : {&config_.cluster_cidrs, &config_.service_cidrs}) {
        for (const auto& c : *list) {
          if (c.address.family != ip.family) continue;
          auto* route = a.add_routes();
          route->set_dst(c.str());
          route->set_gw(ipam.gateway().str());
        }
      }
    }
  }
  if (!r.requested_mac().empty()) {
    a.set_mac(MacAddress::parse(r.requested_mac())->str());
  } else {
    auto first = IpInterfaceAddress::parse(a.ips(0).address());
    a.set_mac(MacAddress::fromIp(first->address).str());
  }
  for (const auto& [id, other] : attachments_) {
    if (other.attachment.mac() == a.mac()) {
      undo();
      return Error{"MAC " + a.mac() + " is already used by attachment " + id, ErrorCode::kConflict, id};
    }
  }
  auto key = allocatePortKeyLocked();
  if (!key) {
    undo();
    return Error{key.error(), ErrorCode::kExhausted};
  }
  rec.port_key = *key;

  attachments_[a.id()] = rec;
  by_vf_[{a.pf_index(), a.vf_index()}] = a.id();
  if (a.kind() == attv1::POD) by_sandbox_[sandboxKeyOf(a)] = a.id();
  ++port_keys_version_;
  if (auto saved = checkpointLocked(); !saved) {
    attachments_.erase(a.id());
    by_vf_.erase({a.pf_index(), a.vf_index()});
    by_sandbox_.erase(sandboxKeyOf(a));
    undo();
    return Error{saved.error() + "; nothing was attached, fix the state directory and retry", ErrorCode::kFailed};
  }
  upsertPortLocked(rec);
  DPU_LOG(kInfo, kLog) << "attached " << a.id() << " " << (a.kind() == attv1::POD ? "pod " + a.pod().namespace_() + "/" + a.pod().name() : "management port")
                       << " on " << vf << " (" << a.representor() << ") " << a.ips(0).address() << " " << a.mac();
  return answer(rec);
}

void Agent::releaseLocked(const std::string& id) {
  auto it = attachments_.find(id);
  if (it == attachments_.end()) return;
  const auto& a = it->second.attachment;
  if (a.kind() == attv1::POD) {
    for (const auto& ip : a.ips()) {
      auto ifa = IpInterfaceAddress::parse(ip.address());
      if (!ifa) continue;
      for (auto& ipam : ipams_) {
        if (ipam.pool().contains(ifa->address)) ipam.release(ifa->address);
      }
    }
  }
  by_vf_.erase({a.pf_index(), a.vf_index()});
  if (a.kind() == attv1::POD) by_sandbox_.erase(sandboxKeyOf(a));
  model_.deletePort(id);
  ++port_keys_version_;
  DPU_LOG(kInfo, kLog) << "detached " << id << " from pf" << a.pf_index() << "vf" << a.vf_index();
  const bool pod = a.kind() == attv1::POD;
  const std::string key = podKey(a.pod().namespace_(), a.pod().name());
  attachments_.erase(it);
  if (pod && deleted_attached_pods_.count(key) && attachmentsOfPodLocked(key).empty()) {
    deleted_attached_pods_.erase(key);
    source_pods_.erase(key);
  }
  // The pod's port is gone with its PortPolicy (deletePort); the pod's
  // address may be another local pod's peer.
  if (pod) applyPolicyChangesLocked(refreshPolicyPodLocked(key));
}

Result<attv1::DetachResponse> Agent::detach(const attv1::DetachRequest& r) {
  int selectors = (!r.id().empty()) + (r.by_vf() ? 1 : 0) + ((!r.sandbox_id().empty() || !r.ifname().empty()) ? 1 : 0);
  if (selectors != 1) {
    return Error{"give exactly one of: id; by_vf with pf_index and vf_index; sandbox_id with ifname", ErrorCode::kInvalid};
  }
  if (!r.by_vf() && (r.pf_index() != 0 || r.vf_index() != 0)) {
    return Error{"pf_index/vf_index select by VF only with by_vf: true", ErrorCode::kInvalid};
  }
  if (r.id().empty() && !r.by_vf() && (r.sandbox_id().empty() || r.ifname().empty())) {
    return Error{"detaching by sandbox needs both sandbox_id and ifname", ErrorCode::kInvalid};
  }
  std::lock_guard lock(mu_);
  std::optional<std::string> id;
  if (!r.id().empty()) {
    if (attachments_.count(r.id())) id = r.id();
  } else if (r.by_vf()) {
    id = findHolderLocked(r.pf_index(), r.vf_index());
  } else {
    id = findBySandboxLocked({r.network(), r.sandbox_id(), r.ifname()});
  }
  attv1::DetachResponse resp;
  resp.set_boot_id(boot_id_);
  if (!id) {
    resp.set_found(false);
    return resp;
  }
  Record saved = attachments_.at(*id);
  releaseLocked(*id);
  if (auto done = checkpointLocked(); !done) {
    // The client must be able to retry: it is not detached until the record says so.
    attachments_[*id] = saved;
    const auto& a = saved.attachment;
    by_vf_[{a.pf_index(), a.vf_index()}] = *id;
    if (a.kind() == attv1::POD) by_sandbox_[sandboxKeyOf(a)] = *id;
    for (const auto& ip : a.ips()) {
      auto ifa = IpInterfaceAddress::parse(ip.address());
      for (auto& ipam : ipams_) {
        if (ifa && ipam.pool().contains(ifa->address) && !ipam.isReserved(ifa->address)) (void)ipam.claim(ifa->address);
      }
    }
    upsertPortLocked(saved);
    ++port_keys_version_;
    return Error{done.error() + "; the attachment is kept, retry the detach", ErrorCode::kFailed};
  }
  resp.set_found(true);
  return resp;
}

attv1::Attachment Agent::withState(const Record& r) const {
  attv1::Attachment a = r.attachment;
  a.set_dataplane_state(dataplane_view_ ? dataplane_view_(a.id()) : std::string("pending"));
  return a;
}

Result<attv1::ReconcileResponse> Agent::reconcile(const attv1::ReconcileRequest& r) {
  if (r.host_instance().empty() || r.host_instance().size() > 64 || !printableLabel(r.host_instance()))
    return Error{"host_instance must name the host-shim state the list is of (1-64 printable characters)", ErrorCode::kInvalid};
  std::set<HeldKey> held;
  for (const auto& h : r.held()) held.insert({h.network(), h.sandbox_id(), h.ifname(), h.pf_index(), h.vf_index()});
  std::lock_guard lock(mu_);
  attv1::ReconcileResponse resp;
  std::vector<std::string> gone;
  for (const auto& [id, rec] : attachments_) {
    const auto& a = rec.attachment;
    if (a.kind() != attv1::POD) continue;
    // Held, or made by a request of this host-shim newer than its list.
    if (held.count({a.network(), a.sandbox_id(), a.ifname(), a.pf_index(), a.vf_index()}) ||
        (a.host_instance() == r.host_instance() && a.host_seq() > r.as_of_seq())) {
      resp.set_kept(resp.kept() + 1);
      continue;
    }
    gone.push_back(id);
  }
  std::map<std::string, Record> saved;
  for (const auto& id : gone) {
    saved[id] = attachments_.at(id);
    *resp.add_released() = attachments_.at(id).attachment;
    releaseLocked(id);
  }
  if (!gone.empty()) {
    if (auto done = checkpointLocked(); !done) {
      // Nothing is released until the record says so: put them back.
      for (const auto& [id, rec] : saved) {
        attachments_[id] = rec;
        const auto& a = rec.attachment;
        by_vf_[{a.pf_index(), a.vf_index()}] = id;
        by_sandbox_[sandboxKeyOf(a)] = id;
        for (const auto& ip : a.ips()) {
          auto ifa = IpInterfaceAddress::parse(ip.address());
          for (auto& ipam : ipams_) {
            if (ifa && ipam.pool().contains(ifa->address) && !ipam.isReserved(ifa->address)) (void)ipam.claim(ifa->address);
          }
        }
        upsertPortLocked(rec);
        ++port_keys_version_;
      }
      return Error{done.error() + "; nothing was released, fix the state directory", ErrorCode::kFailed};
    }
  }
  for (const auto& a : resp.released()) {
    DPU_LOG(kInfo, kLog) << "reconcile: released " << a.id() << " (" << a.network() << "/" << a.sandbox_id() << "/"
                         << a.ifname() << " on " << vfName(a.pf_index(), a.vf_index())
                         << "): host-shim does not hold it";
  }
  released_by_reconcile_.fetch_add(gone.size());
  reconciled_instance_ = r.host_instance();
  reconciled_as_of_ = r.as_of_seq();
  reconciled_held_ = std::move(held);
  resp.set_boot_id(boot_id_);
  return resp;
}

attv1::AttachmentList Agent::list() const {
  std::lock_guard lock(mu_);
  attv1::AttachmentList l;
  for (const auto& [id, r] : attachments_) *l.add_attachments() = withState(r);
  l.set_boot_id(boot_id_);
  return l;
}

Result<attv1::AttachResponse> Agent::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = attachments_.find(id);
  if (it == attachments_.end()) {
    return Error{"no attachment " + id + " on this DPU (boot id " + boot_id_ +
                            "): it was detached, or the DPU lost its state; ADD the pod again", ErrorCode::kNotFound};
  }
  attv1::AttachResponse resp;
  *resp.mutable_attachment() = withState(it->second);
  resp.set_boot_id(boot_id_);
  return resp;
}

std::map<std::string, uint32_t> Agent::portKeys() const {
  std::lock_guard lock(mu_);
  std::map<std::string, uint32_t> out;
  for (const auto& [id, r] : attachments_) {
    for (const auto& ip : r.attachment.ips()) {
      if (auto ifa = IpInterfaceAddress::parse(ip.address())) out[ifa->address.str()] = r.port_key;
    }
  }
  return out;
}

std::string Agent::macProblemLocked(const MacAddress& mac, std::string& holder) const {
  if (auto why = model::portMacProblem(mac, *MacAddress::parse(kRouterMac)); !why.empty()) return why;
  for (const auto& [id, other] : attachments_) {
    if (MacAddress::parse(other.attachment.mac()).value() == mac) {
      holder = id;
      const auto& a = other.attachment;
      return "mac " + mac.str() + " is in use on this node by attachment " + id +
             (a.kind() == attv1::MANAGEMENT ? std::string(" (the host management port)")
                                            : " (pod " + a.pod().namespace_() + "/" + a.pod().name() + ")") +
             "; every port of a node needs its own MAC";
    }
  }
  return "";
}

std::string Agent::notReadyReason() const {
  std::lock_guard lock(mu_);
  if (!synced_.load()) return "the cluster source has not completed its first sync";
  if (ipams_.empty()) return "this node's pod CIDR is not known (no podCIDR in the config, and Node " + config_.node_name +
                             " has none)";
  return "";
}

std::vector<Agent::IpamUsage> Agent::ipamUsage() const {
  std::lock_guard lock(mu_);
  std::vector<IpamUsage> out;
  for (const auto& ipam : ipams_) out.push_back({ipam.pool().str(), ipam.usedCount(), ipam.capacity()});
  return out;
}

void Agent::setPortCapacity(uint32_t capacity, uint32_t max_ethports) {
  const uint32_t before = port_capacity_.exchange(capacity);
  max_ethports_.store(max_ethports);
  if (before == capacity) return;
  const size_t held = attachmentCount();
  if (held > capacity) {
    DPU_LOG(kWarn, kLog) << "the dataplane can open " << capacity << " representor ports (RTE_MAX_ETHPORTS "
                         << max_ethports << ") but " << held << " attachments hold one: those beyond have no port";
  } else {
    DPU_LOG(kInfo, kLog) << "the dataplane can open " << capacity << " representor ports (RTE_MAX_ETHPORTS "
                         << max_ethports << "); " << held << " in use";
  }
}

size_t Agent::attachmentCount() const {
  std::lock_guard lock(mu_);
  return attachments_.size();
}

void Agent::nodeUpserted(const NodeInfo& node) {
  std::lock_guard lock(mu_);
  nodes_[node.name] = node;
  if (node.name == config_.node_name) {
    if (config_.pod_cidrs.empty() && !node.pod_cidrs.empty()) {
      std::vector<IpPrefix> cidrs;
      for (const auto& text : node.pod_cidrs) {
        auto p = IpPrefix::parse(text);
        if (!p) {
          DPU_LOG(kError, kLog) << "Node " << node.name << " has a bad pod CIDR '" << text << "': " << p.error();
          return;
        }
        cidrs.push_back(*p);
      }
      setPodCidrsLocked(cidrs);
    }
    return;
  }
  if (auto rn = remoteNodeOf(node)) {
    model_.upsertRemoteNode(*rn);
  } else {
    DPU_LOG(kDebug, kLog) << "node " << node.name << " has no tunnel IP or pod CIDR yet: not routable";
    model_.deleteRemoteNode(node.name);
  }
}

void Agent::nodeDeleted(const std::string& name) {
  std::lock_guard lock(mu_);
  nodes_.erase(name);
  if (name != config_.node_name) model_.deleteRemoteNode(name);
}

void Agent::podUpserted(const PodInfo& pod) {
  std::lock_guard lock(mu_);
  const std::string key = podKey(pod.ns, pod.name);
  source_pods_[key] = pod;
  deleted_attached_pods_.erase(key);
  applyPolicyChangesLocked(refreshPolicyPodLocked(key));
  if (!pods_checked_) return;
  pods_[key] = PodPlacement{pod.uid, pod.node_name};
}

void Agent::podDeleted(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  const std::string key = podKey(ns, name);
  // A pod still attached here keeps the labels it had until its port goes
  // (CNI DEL, or the orphan release below): losing them first would leave
  // a running pod unprotected for that while.
  if (attachmentsOfPodLocked(key).empty()) {
    source_pods_.erase(key);
    applyPolicyChangesLocked(refreshPolicyPodLocked(key));
  } else if (source_pods_.count(key)) {
    deleted_attached_pods_.insert(key);
  }
  if (!pods_checked_) return;
  pods_.erase(key);
  if (first_sync_done_) releaseOrphansLocked();
}

void Agent::recompileServiceLocked(const std::string& key) {
  const ServiceInfo* svc = service_catalog_.service(key);
  if (svc == nullptr) {
    refused_services_.erase(key);
    model_.deleteService(key);
    return;
  }
  if (auto why = notProxiedReason(*svc); !why.empty()) {
    DPU_LOG(kDebug, kLog) << "service " << key << " is not proxied: " << why;
    refused_services_.erase(key);
    model_.deleteService(key);
    return;
  }
  auto compiled = compileService(*svc, service_catalog_.slicesOf(key), config_.node_name);
  if (!compiled) {
    // Said once per distinct reason: a slice churning under a bad service
    // does not repeat it.
    auto& known = refused_services_[key];
    if (known != compiled.error()) {
      DPU_LOG(kWarn, kLog) << "service " << key << " is left out of the dataplane: " << compiled.error()
                           << "; fix the Service or its EndpointSlices";
    }
    known = compiled.error();
    model_.deleteService(key);
    return;
  }
  if (refused_services_.erase(key)) {
    DPU_LOG(kInfo, kLog) << "service " << key << " is usable again";
  }
  model_.upsertService(*compiled);
}

std::map<std::string, std::string> Agent::refusedServices() const {
  std::lock_guard lock(mu_);
  return refused_services_;
}

void Agent::serviceUpserted(const ServiceInfo& svc) {
  std::lock_guard lock(mu_);
  for (const auto& key : service_catalog_.upsertService(svc)) recompileServiceLocked(key);
}

void Agent::serviceDeleted(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  for (const auto& key : service_catalog_.deleteService(ns, name)) recompileServiceLocked(key);
}

void Agent::endpointSliceUpserted(const EndpointSliceInfo& slice) {
  std::lock_guard lock(mu_);
  for (const auto& key : service_catalog_.upsertSlice(slice)) recompileServiceLocked(key);
}

void Agent::endpointSliceDeleted(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  for (const auto& key : service_catalog_.deleteSlice(ns, name)) recompileServiceLocked(key);
}

void Agent::networkPolicyUpserted(const NetworkPolicyInfo& policy) {
  std::lock_guard lock(mu_);
  applyPolicyChangesLocked(policy_.upsertPolicy(policy));
}

void Agent::networkPolicyDeleted(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  applyPolicyChangesLocked(policy_.deletePolicy(ns, name));
}

void Agent::namespaceUpserted(const NamespaceInfo& ns) {
  std::lock_guard lock(mu_);
  applyPolicyChangesLocked(policy_.upsertNamespace(ns));
}

void Agent::namespaceDeleted(const std::string& name) {
  std::lock_guard lock(mu_);
  applyPolicyChangesLocked(policy_.deleteNamespace(name));
}

std::vector<std::string> Agent::attachmentsOfPodLocked(const std::string& key) const {
  std::vector<std::string> out;
  for (const auto& [id, r] : attachments_) {
    const auto& a = r.attachment;
    if (a.kind() == attv1::POD && podKey(a.pod().namespace_(), a.pod().name()) == key) out.push_back(id);
  }
  return out;
}

std::optional<PodInfo> Agent::policyPodLocked(const std::string& key) const {
  std::optional<PodInfo> pod;
  if (auto it = source_pods_.find(key); it != source_pods_.end()) pod = it->second;
  const auto ids = attachmentsOfPodLocked(key);
  if (ids.empty()) return pod;
  if (!pod) {
    const auto& a = attachments_.at(ids.front()).attachment;
    pod = PodInfo{};
    pod->ns = a.pod().namespace_();
    pod->name = a.pod().name();
    pod->uid = a.pod().uid();
  }
  // Attached here, so it runs here and has a VF: not host network.
  pod->node_name = config_.node_name;
  pod->host_network = false;
  // status.podIPs lags the CNI ADD that assigned them: the attachment's
  // addresses stand in until the source has some.
  if (pod->ips.empty()) {
    for (const auto& id : ids) {
      for (const auto& ip : attachments_.at(id).attachment.ips()) {
        if (auto ifa = IpInterfaceAddress::parse(ip.address())) pod->ips.push_back(ifa->address.str());
      }
    }
  }
  return pod;
}

policy::Changes Agent::refreshPolicyPodLocked(const std::string& key) {
  auto pod = policyPodLocked(key);
  if (pod) return policy_.upsertPod(*pod);
  const auto slash = key.find('/');
  return policy_.deletePod(key.substr(0, slash), key.substr(slash + 1));
}

std::optional<dpv1::PortPolicy> Agent::portPolicyLocked(const std::string& id, const std::string& key) const {
  const policy::PodRules* rules = policy_.rulesOf(key);
  if (rules == nullptr) return std::nullopt;
  return portPolicyOf(id, *rules);
}

void Agent::upsertPortLocked(const Record& r) {
  const auto& a = r.attachment;
  if (a.kind() != attv1::POD) {
    model_.upsertPort(portOf(r));
    return;
  }
  // The compiler learns the pod's port first, so the port and its rules
  // reach the dataplane in one Delta; the other pods it changed follow.
  const std::string key = podKey(a.pod().namespace_(), a.pod().name());
  policy::Changes changes = refreshPolicyPodLocked(key);
  model_.upsertPort(portOf(r), portPolicyLocked(a.id(), key));
  applyPolicyChangesLocked(changes);
}

void Agent::applyPolicyChangesLocked(const policy::Changes& changes) {
  // Every port the change touched in one step: one Delta, which the
  // dataplane installs whole.
  std::vector<std::pair<std::string, std::optional<dpv1::PortPolicy>>> policies;
  for (const auto& key : changes.pods) {
    for (const auto& id : attachmentsOfPodLocked(key)) policies.emplace_back(id, portPolicyLocked(id, key));
  }
  if (!policies.empty()) model_.setPortPolicies(policies);
  // Refusals: said once per distinct reason, and when a policy is usable again.
  const auto& now = policy_.refused();
  for (auto it = refused_policies_.begin(); it != refused_policies_.end();) {
    if (now.count(it->first)) {
      ++it;
      continue;
    }
    DPU_LOG(kInfo, kLog) << "networkpolicy " << it->first << " is enforced again";
    it = refused_policies_.erase(it);
  }
  for (const auto& [key, why] : now) {
    auto& known = refused_policies_[key];
    if (known == why) continue;
    // `why` names the policy and the field (policy/validate.h).
    DPU_LOG(kWarn, kLog) << why << "; the policy is left out of the dataplane (the other policies stay in force)";
    known = why;
  }
}

std::map<std::string, std::string> Agent::refusedPolicies() const {
  std::lock_guard lock(mu_);
  return refused_policies_;
}

void Agent::releaseOrphansLocked() {
  std::vector<std::string> gone;
  for (const auto& [id, r] : attachments_) {
    const auto& a = r.attachment;
    if (a.kind() != attv1::POD) continue;
    auto it = pods_.find(podKey(a.pod().namespace_(), a.pod().name()));
    bool orphan = it == pods_.end() || it->second.node_name != config_.node_name ||
                  (!a.pod().uid().empty() && !it->second.uid.empty() && a.pod().uid() != it->second.uid);
    if (orphan) gone.push_back(id);
  }
  for (const auto& id : gone) {
    DPU_LOG(kInfo, kLog) << "releasing attachment " << id << ": its pod is gone from this node";
    releaseLocked(id);
    released_orphans_.fetch_add(1);
  }
  if (!gone.empty()) {
    if (auto done = checkpointLocked(); !done) {
      DPU_LOG(kError, kLog) << done.error();
    }
  }
}

void Agent::synced() {
  std::lock_guard lock(mu_);
  synced_.store(true);
  if (pods_checked_) releaseOrphansLocked();
  if (!first_sync_done_) {
    first_sync_done_ = true;
    DPU_LOG(kInfo, kLog) << "cluster view synced: " << nodes_.size() << " nodes";
  }
}

}  // namespace dpu::control
