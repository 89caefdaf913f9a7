// The fake DPU agent's state and rules (see fake_dpu_state.h). Validation
// and answers follow dpu-agent (dpu-agent/control/src/agent.cpp): POD needs
// sandbox_id and a legal ifname, the pod's namespace/name are free-form labels
// (as with a file cluster source), requested_mtu is 0 or 576..mtu, one
// MANAGEMENT attachment (no sandbox_id) whose routes are the cluster and
// service CIDRs via the gateway, a requested MAC refused as the agent refuses
// it (the router's, zero, multicast, or in use on the node).
#include "fake_dpu_state.h"

#include <cstdio>
#include <random>

#include "model/model.h"

namespace dpu::fakes {

namespace av1 = dpu::attach::v1;

namespace {

std::string randomId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

bool printableLabel(const std::string& s) {
  if (s.size() > 253) return false;
  for (unsigned char c : s)
    if (c < ' ' || c == 0x7f) return false;
  return true;
}

bool validIfname(const std::string& s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (c <= ' ' || c == '/' || c == ':' || c >= 0x7f) return false;
  return true;
}

Error invalid(std::string m) { return Error{std::move(m), ErrorCode::kInvalid}; }
Error conflict(std::string m, std::string holder) { return Error{std::move(m), ErrorCode::kConflict, std::move(holder)}; }

std::string keyText(const std::string& network, const std::string& sandbox, const std::string& ifname) {
  return network + "/" + sandbox + "/" + ifname;
}

}  // namespace

unsigned FakeDpuState::httpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalid: return 400;
    case ErrorCode::kForbidden: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kExhausted: return 507;
    default: break;
  }
  return 500;
}

ErrorCode FakeDpuState::codeOfHttpStatus(unsigned status) {
  switch (status) {
    case 403: return ErrorCode::kForbidden;
    case 404: return ErrorCode::kNotFound;
    case 409: return ErrorCode::kConflict;
    case 413: return ErrorCode::kTooLarge;
    case 507: return ErrorCode::kExhausted;
    default: break;
  }
  return status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInvalid;
}

Result<std::unique_ptr<FakeDpuState>> FakeDpuState::create(FakeDpuOptions options) {
  auto p = IpPrefix::parse(options.pod_cidr);
  if (!p) return Error{"pod CIDR: " + p.error(), ErrorCode::kInvalid};
  return std::unique_ptr<FakeDpuState>(new FakeDpuState(std::move(options), *p));
}

FakeDpuState::FakeDpuState(FakeDpuOptions options, IpPrefix cidr)
    : opt_(std::move(options)), cidr_(cidr), boot_id_(randomId()) {}

std::string FakeDpuState::bootId() const {
  std::lock_guard lk(mu_);
  return boot_id_;
}

av1::Health FakeDpuState::health() const {
  av1::Health h;
  std::lock_guard lk(mu_);
  h.set_boot_id(boot_id_);
  h.set_ready(!unhealthy_);
  h.set_version("fake-0.1");
  h.set_node_name(opt_.node_name);
  if (unhealthy_) h.set_reason("the test said so (POST /test/unhealthy)");
  return h;
}

av1::AttachmentList FakeDpuState::list() const {
  av1::AttachmentList l;
  std::lock_guard lk(mu_);
  l.set_boot_id(boot_id_);
  for (const auto& [id, a] : attachments_) *l.add_attachments() = a;
  return l;
}

Result<av1::AttachResponse> FakeDpuState::get(const std::string& id) const {
  std::lock_guard lk(mu_);
  auto it = attachments_.find(id);
  if (it == attachments_.end())
    return Error{"no attachment " + id + " on this DPU (boot id " + boot_id_ + ")", ErrorCode::kNotFound};
  av1::AttachResponse resp;
  *resp.mutable_attachment() = it->second;
  resp.set_boot_id(boot_id_);
  return resp;
}

// The next free pod address: .1 is the gateway, .2 the management port;
// next-fit so a released address is not handed out again at once.
std::optional<IpAddress> FakeDpuState::allocateLocked() {
  uint64_t size = cidr_.size();
  for (uint64_t n = 0; n + 4 < size; ++n) {
    uint64_t off = 3 + (next_ + n) % (size - 4);
    IpAddress ip = cidr_.at(off);
    if (!used_.count(ip)) {
      next_ = off - 3 + 1;
      return ip;
    }
  }
  return std::nullopt;
}

Result<av1::AttachResponse> FakeDpuState::attach(const av1::AttachRequest& r) {
  std::lock_guard lk(mu_);
  if (fail_count_ > 0) {
    --fail_count_;
    return fail_error_;
  }
  if (r.kind() != av1::POD && r.kind() != av1::MANAGEMENT) return invalid("kind must be POD or MANAGEMENT");
  if (r.vf_index() >= opt_.vfs)
    return invalid("vf_index " + std::to_string(r.vf_index()) + " is out of range (this DPU has " +
                   std::to_string(opt_.vfs) + " VFs)");
  if (r.kind() == av1::POD && (r.sandbox_id().empty() || !validIfname(r.ifname())))
    return invalid("a POD attachment needs sandbox_id and an ifname of 1-15 characters");
  if (r.kind() == av1::MANAGEMENT && !r.sandbox_id().empty())
    return invalid("a MANAGEMENT attachment has no sandbox_id: it stays in the host netns");
  // As dpu-agent with a file cluster source: the pod identity is a label
  // (podman sends only K8S_POD_NAME, a bare libcni caller nothing).
  if (!printableLabel(r.pod().namespace_()) || !printableLabel(r.pod().name()) || !printableLabel(r.network()))
    return invalid("pod.namespace, pod.name and network must be at most 253 printable characters");
  if (r.requested_mtu() != 0 && (r.requested_mtu() < 576 || r.requested_mtu() > opt_.mtu))
    return invalid("requested_mtu " + std::to_string(r.requested_mtu()) + " must be between 576 and the pod MTU " +
                   std::to_string(opt_.mtu));
  MacAddress requested;
  if (!r.requested_mac().empty()) {
    auto m = MacAddress::parse(r.requested_mac());
    if (!m) return invalid("requested_mac (runtimeConfig.mac): " + m.error());
    // dpu-agent's router MAC (control/logical_model.h kRouterMac).
    static const MacAddress kRouterMac = *MacAddress::parse("0a:58:a9:fe:00:01");
    if (auto why = dpu::model::portMacProblem(*m, kRouterMac); !why.empty())
      return invalid("requested_mac (runtimeConfig.mac): " + why);
    requested = *m;
  }
  // An attach host-shim gave up on before it got here (its reconcile did not list it).
  if (r.kind() == av1::POD && r.host_seq() != 0 && r.host_instance() == last_instance_ &&
      r.host_seq() <= last_as_of_ &&
      !last_held_.count({r.network(), r.sandbox_id(), r.ifname(), r.pf_index(), r.vf_index()})) {
    std::fprintf(stderr, "fake dpu: refusing the attach of %s: host-shim gave up on it\n",
                 keyText(r.network(), r.sandbox_id(), r.ifname()).c_str());
    return conflict("host-shim gave up on this attach of " + keyText(r.network(), r.sandbox_id(), r.ifname()) +
                        ": its reconcile as of request " + std::to_string(last_as_of_) + " does not hold it",
                    "");
  }
  for (auto& [id, a] : attachments_) {
    bool same_vf = a.pf_index() == r.pf_index() && a.vf_index() == r.vf_index();
    bool same_owner = a.kind() == r.kind() && (r.kind() == av1::MANAGEMENT ||
                                               (a.sandbox_id() == r.sandbox_id() && a.ifname() == r.ifname() &&
                                                a.network() == r.network()));
    if (same_vf && same_owner) {
      // The same answer for a retried attach; it now belongs to this request.
      a.set_host_instance(r.host_instance());
      a.set_host_seq(r.host_seq());
      av1::AttachResponse resp;
      *resp.mutable_attachment() = a;
      resp.set_boot_id(boot_id_);
      return resp;
    }
    if (same_vf)
      return conflict("VF " + std::to_string(r.vf_index()) + " of PF " + std::to_string(r.pf_index()) +
                          " is held by attachment " + id + " (" + keyText(a.network(), a.sandbox_id(), a.ifname()) + ")",
                      id);
    if (same_owner)
      return conflict(r.kind() == av1::MANAGEMENT
                          ? "the management port is already attached on VF " + std::to_string(a.vf_index())
                          : keyText(r.network(), r.sandbox_id(), r.ifname()) + " is already attached on VF " +
                                std::to_string(a.vf_index()),
                      id);
  }
  // One MAC, one attachment (port security keys on it), as dpu-agent refuses.
  for (const auto& [id, a] : attachments_)
    if (!r.requested_mac().empty() && a.mac() == requested.str())
      return Error{"requested_mac (runtimeConfig.mac): mac " + requested.str() + " is in use on this node by attachment " + id,
                   ErrorCode::kInvalid, id};
  // requested_ips as dpu-agent checks them (one IPv4 pod CIDR here).
  std::optional<IpAddress> wanted;
  if (r.requested_ips_size() > 0 && r.kind() != av1::POD)
    return invalid("requested_ips is for POD attachments: the management port's address is fixed");
  for (const auto& text : r.requested_ips()) {
    auto w = IpAddress::parse(text);
    if (!w) return invalid("requested_ips: '" + text + "' is not an IP address (give it without prefix length)");
    if (wanted || !w->isV4()) return invalid("requested address " + text + ": this node has no pod CIDR of that family");
    if (!cidr_.contains(*w) || *w == cidr_.at(0) || *w == cidr_.at(1) || *w == cidr_.at(2) ||
        *w == cidr_.at(cidr_.size() - 1))
      return invalid("requested address " + text + " is not an assignable address of this node's pod CIDR " +
                     cidr_.str());
    wanted = *w;
  }
  IpAddress ip;
  if (r.kind() == av1::MANAGEMENT) {
    ip = cidr_.at(2);
  } else if (wanted) {
    if (used_.count(*wanted)) {
      for (const auto& [id, a] : attachments_)
        for (const auto& x : a.ips())
          if (x.address().rfind(wanted->str() + "/", 0) == 0)
            return conflict("requested address " + wanted->str() + " is held by attachment " + id + "; detach it first",
                            id);
    }
    ip = *wanted;
  } else {
    auto got = allocateLocked();
    if (!got) return Error{"the pod CIDR " + cidr_.str() + " is exhausted", ErrorCode::kExhausted};
    ip = *got;
  }
  used_.insert(ip);
  av1::Attachment a;
  a.set_id(randomId());
  a.set_kind(r.kind());
  *a.mutable_pod() = r.pod();
  a.set_sandbox_id(r.sandbox_id());
  a.set_ifname(r.ifname());
  a.set_network(r.network());
  a.set_pf_index(r.pf_index());
  a.set_vf_index(r.vf_index());
  a.set_mac(r.requested_mac().empty() ? MacAddress::fromIp(ip).str() : requested.str());
  auto* assignment = a.add_ips();
  assignment->set_address(ip.str() + "/" + std::to_string(cidr_.length));
  assignment->set_gateway(cidr_.at(1).str());
  // A pod routes everything via the gateway; the management port only the
  // cluster and service CIDRs (the host keeps its own default route).
  std::vector<std::string> dsts = {ip.isV4() ? "0.0.0.0/0" : "::/0"};
  if (r.kind() == av1::MANAGEMENT) dsts = {opt_.cluster_cidr, opt_.service_cidr};
  for (const auto& dst : dsts) {
    auto* route = a.add_routes();
    route->set_dst(dst);
    route->set_gw(cidr_.at(1).str());
  }
  a.set_mtu(r.requested_mtu() ? r.requested_mtu() : opt_.mtu);
  if (answer_mtu_) {
    a.set_mtu(answer_mtu_);
    answer_mtu_ = 0;
  }
  a.set_representor("pf" + std::to_string(r.pf_index()) + "vf" + std::to_string(r.vf_index()));
  a.set_dataplane_state(dataplane_state_);
  a.set_host_instance(r.host_instance());
  a.set_host_seq(r.host_seq());
  attachments_[a.id()] = a;
  av1::AttachResponse resp;
  *resp.mutable_attachment() = a;
  resp.set_boot_id(boot_id_);
  return resp;
}

void FakeDpuState::releaseLocked(std::map<std::string, av1::Attachment>::iterator it) {
  for (const auto& ip : it->second.ips())
    if (auto p = IpInterfaceAddress::parse(ip.address())) used_.erase(p->address);
  attachments_.erase(it);
}

Result<av1::DetachResponse> FakeDpuState::detach(const av1::DetachRequest& d) {
  int selectors = !d.id().empty() + d.by_vf() + (!d.sandbox_id().empty() || !d.ifname().empty());
  if (selectors != 1)
    return invalid("give exactly one of: id; by_vf with pf_index and vf_index; sandbox_id with ifname");
  if (d.id().empty() && !d.by_vf() && (d.sandbox_id().empty() || d.ifname().empty()))
    return invalid("detaching by sandbox needs both sandbox_id and ifname");
  std::lock_guard lk(mu_);
  bool found = false;
  for (auto it = attachments_.begin(); it != attachments_.end();) {
    const auto& a = it->second;
    bool match = (!d.id().empty() && a.id() == d.id()) ||
                 (d.by_vf() && a.pf_index() == d.pf_index() && a.vf_index() == d.vf_index()) ||
                 (d.id().empty() && !d.by_vf() && a.kind() == av1::POD && a.sandbox_id() == d.sandbox_id() &&
                  a.ifname() == d.ifname() && a.network() == d.network());
    if (match) {
      auto next = std::next(it);
      releaseLocked(it);
      it = next;
      found = true;
    } else {
      ++it;
    }
  }
  av1::DetachResponse resp;
  resp.set_found(found);
  resp.set_boot_id(boot_id_);
  return resp;
}

Result<av1::ReconcileResponse> FakeDpuState::reconcile(const av1::ReconcileRequest& r) {
  if (r.host_instance().empty()) return invalid("host_instance must name the host-shim state the list is of");
  std::set<Held> held;
  for (const auto& h : r.held()) held.insert({h.network(), h.sandbox_id(), h.ifname(), h.pf_index(), h.vf_index()});
  std::lock_guard lk(mu_);
  av1::ReconcileResponse resp;
  for (auto it = attachments_.begin(); it != attachments_.end();) {
    const auto& a = it->second;
    bool keep = a.kind() != av1::POD ||
                held.count({a.network(), a.sandbox_id(), a.ifname(), a.pf_index(), a.vf_index()}) ||
                (a.host_instance() == r.host_instance() && a.host_seq() > r.as_of_seq());
    if (keep) {
      if (a.kind() == av1::POD) resp.set_kept(resp.kept() + 1);
      ++it;
      continue;
    }
    *resp.add_released() = a;
    auto next = std::next(it);
    releaseLocked(it);
    it = next;
  }
  last_instance_ = r.host_instance();
  last_as_of_ = r.as_of_seq();
  last_held_ = std::move(held);
  resp.set_boot_id(boot_id_);
  return resp;
}

Result<void> FakeDpuState::reboot(const std::string& new_cidr) {
  std::lock_guard lk(mu_);
  if (!new_cidr.empty()) {
    auto p = IpPrefix::parse(new_cidr);
    if (!p || !p->address.isV4()) return invalid("cidr: an IPv4 prefix");
    cidr_ = *p;
  }
  boot_id_ = randomId();
  attachments_.clear();
  used_.clear();
  next_ = 0;
  unhealthy_ = false;
  last_instance_.clear();
  last_as_of_ = 0;
  last_held_.clear();
  return {};
}

void FakeDpuState::setUnhealthy(bool on) {
  std::lock_guard lk(mu_);
  unhealthy_ = on;
}

void FakeDpuState::failAttaches(int count, Error e) {
  std::lock_guard lk(mu_);
  fail_count_ = count;
  fail_error_ = std::move(e);
}

void FakeDpuState::answerMtuOnce(uint32_t mtu) {
  std::lock_guard lk(mu_);
  answer_mtu_ = mtu;
}

void FakeDpuState::setDataplaneState(const std::string& id, const std::string& state) {
  std::lock_guard lk(mu_);
  if (id.empty()) {
    dataplane_state_ = state;
    for (auto& [_, a] : attachments_) a.set_dataplane_state(state);
    return;
  }
  if (auto it = attachments_.find(id); it != attachments_.end()) it->second.set_dataplane_state(state);
}

}  // namespace dpu::fakes
