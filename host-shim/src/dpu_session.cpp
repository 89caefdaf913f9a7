// The session with the DPU agent (see dpu_session.h).
#include "host-shim/dpu_session.h"

#include "common/log.h"
#include "host-shim/pod_plumbing.h"

namespace dpu::hostshim {

namespace {

constexpr const char* kLog = "host-shim";

std::string describe(const attach::v1::Attachment& d) {
  return d.id() + " (" + d.network() + "/" + d.sandbox_id() + "/" + d.ifname() + " on pf" +
         std::to_string(d.pf_index()) + "vf" + std::to_string(d.vf_index()) + ")";
}

}  // namespace

DpuSession::DpuSession(DpuApi& dpu, nl::Netlink& netlink, const Config& config, AttachmentBook& book,
                       KeyLocks& keys, ManagementPort& management)
    : dpu_(dpu), netlink_(netlink), config_(config), book_(book), keys_(keys), management_(management) {}

DpuSession::~DpuSession() { stop(); }

void DpuSession::start() {
  if (poller_.joinable()) return;
  poller_ = std::thread([this] { loop(); });
}

void DpuSession::stop() {
  {
    std::lock_guard lk(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void DpuSession::loop() {
  while (!stopping_) {
    pollOnce();
    std::unique_lock lk(poll_mu_);
    poll_cv_.wait_for(lk, std::chrono::milliseconds(config_.dpu.health_interval_ms), [&] { return stopping_.load(); });
  }
}

DpuHealthView DpuSession::health() const {
  std::lock_guard lk(health_mu_);
  return health_;
}

void DpuSession::pollOnce() {
  auto h = dpu_.health();
  DpuHealthView v;
  v.checked = true;
  if (h.ok()) {
    v.reachable = true;
    v.ready = h->ready();
    v.boot_id = h->boot_id();
    v.reason = h->reason();
  } else {
    v.reason = h.error();
  }
  bool was_reachable;
  {
    std::lock_guard lk(health_mu_);
    was_reachable = health_.reachable;
    health_ = v;
  }
  if (v.reachable && !was_reachable) {
    DPU_LOG(kInfo, kLog) << "DPU agent reachable, boot id " << v.boot_id;
  }
  if (!v.reachable && was_reachable) {
    DPU_LOG(kWarn, kLog) << v.reason;
  }
  if (!v.reachable || v.boot_id.empty()) return;
  bool replayed = false;
  if (const std::string known = book_.bootId(); known != v.boot_id) {
    if (!known.empty()) {
      DPU_LOG(kWarn, kLog) << "the DPU's boot id changed (" << known << " → " << v.boot_id
                           << "): replaying attachments";
      management_ready_ = false;
    }
    replayAll(v.boot_id);
    replayed = true;
  }
  // The sweep: at each (re)connect, after a replay, when asked, and periodically.
  // A request is consumed by whichever sweep runs first (its list is taken
  // after the request, so it covers it). Left pending behind a reconnect's
  // sweep it ran a second one a poll later, unasked for.
  const auto now = std::chrono::steady_clock::now();
  const bool asked = reconcile_due_.exchange(false);
  if (!was_reachable || replayed || asked || now >= next_sweep_) {
    next_sweep_ = now + std::chrono::milliseconds(config_.dpu.reconcile_interval_ms);
    if (auto r = reconcile(); !r) {
      DPU_LOG(kWarn, kLog) << "reconcile with the DPU agent: " << r.error() << "; retrying at the next poll";
      reconcile_due_ = true;
    }
  }
  if (management_.enabled() && management_ready_ && !management_.intact()) {
    DPU_LOG(kWarn, kLog) << "the management port lost its link or address; plumbing it again";
    management_ready_ = false;
  }
  if (management_.enabled() && !management_ready_) {
    if (auto r = management_.setup(); !r) {
      DPU_LOG(kWarn, kLog) << "management port: " << r.error();
    } else {
      management_ready_ = true;
    }
  }
}

Result<attach::v1::ReconcileResponse> DpuSession::reconcile() {
  auto req = book_.heldList();
  auto r = dpu_.reconcile(req);
  if (!r) return r;
  for (const auto& d : r->released()) {
    DPU_LOG(kInfo, kLog) << "reconcile: the DPU agent released " << describe(d) << ", which host-shim does not hold";
  }
  return r;
}

bool DpuSession::detach(const Attachment& a) {
  attach::v1::DetachRequest dr;
  if (!a.dpu().id().empty()) {
    dr.set_id(a.dpu().id());
  } else {
    dr.set_sandbox_id(a.container_id());
    dr.set_ifname(a.ifname());
    dr.set_network(a.network_name());
  }
  if (auto r = dpu_.detach(dr); !r) {
    DPU_LOG(kWarn, kLog) << "detach of " << attachmentKey(a) << " on the DPU failed (" << r.error()
                         << "); the next reconcile with the DPU agent releases it";
    return false;
  }
  return true;
}

void DpuSession::detachStale(const Attachment& a) {
  attach::v1::DetachRequest by_vf;
  by_vf.set_by_vf(true);
  by_vf.set_pf_index(a.pf_index());
  by_vf.set_vf_index(a.vf_index());
  attach::v1::DetachRequest by_key;
  by_key.set_sandbox_id(a.container_id());
  by_key.set_ifname(a.ifname());
  by_key.set_network(a.network_name());
  for (const auto* dr : {&by_vf, &by_key}) {
    if (auto r = dpu_.detach(*dr); !r) {
      DPU_LOG(kWarn, kLog) << "detach of what the DPU holds for " << attachmentKey(a) << ": " << r.error();
    }
  }
}

void DpuSession::replayAll(const std::string& boot_id) {
  std::vector<std::string> keys;
  for (const auto& a : book_.attachments())
    if (a.plumbed() && a.dpu_boot_id() != boot_id) keys.push_back(attachmentKey(a));
  bool all_ok = true;
  for (const auto& key : keys) {
    if (stopping_) return;
    auto key_lock = keys_.lock(key);
    std::optional<Attachment> a = book_.find(key);
    if (!a) continue;
    auto seq = book_.nextSeq();
    if (!seq) {
      DPU_LOG(kError, kLog) << "replay of " << key << ": cannot write the checkpoint: " << seq.error();
      all_ok = false;
      continue;
    }
    attach::v1::AttachRequest ar;
    ar.set_kind(attach::v1::POD);
    ar.mutable_pod()->set_namespace_(a->pod().namespace_());
    ar.mutable_pod()->set_name(a->pod().name());
    ar.mutable_pod()->set_uid(a->pod().uid());
    ar.set_sandbox_id(a->container_id());
    ar.set_ifname(a->ifname());
    ar.set_network(a->network_name());
    ar.set_pf_index(a->pf_index());
    ar.set_vf_index(a->vf_index());
    ar.set_vf_mac(a->dpu().mac());
    ar.set_requested_mac(a->dpu().mac());  // keep the pod's MAC stable across the DPU's restart
    ar.set_requested_mtu(a->dpu().mtu());
    ar.set_host_instance(book_.hostInstance());
    ar.set_host_seq(*seq);
    // ... and its addresses, so the pod keeps running on what it has.
    for (const auto& ip : a->dpu().ips()) {
      if (auto ifa = IpInterfaceAddress::parse(ip.address())) ar.add_requested_ips(ifa->address.str());
    }
    auto answer = dpu_.attach(ar);
    if (!answer.ok() && ar.requested_ips_size() > 0 &&
        (answer.code() == ErrorCode::kInvalid || answer.code() == ErrorCode::kConflict)) {
      // The DPU came back with another pod CIDR, or the address is taken:
      // take what it gives and re-plumb the pod below.
      DPU_LOG(kWarn, kLog) << "replay of " << key << ": cannot keep its address (" << answer.error()
                           << "); taking a new one";
      ar.clear_requested_ips();
      answer = dpu_.attach(ar);
    }
    if (!answer.ok()) {
      DPU_LOG(kError, kLog) << "replay of " << key << ": " << answer.error();
      all_ok = false;
      continue;
    }
    const auto& fresh = answer->attachment();
    bool same = fresh.mac() == a->dpu().mac() && fresh.mtu() == a->dpu().mtu() &&
                fresh.ips().size() == a->dpu().ips().size() && fresh.routes().size() == a->dpu().routes().size();
    for (int i = 0; same && i < fresh.ips().size(); ++i)
      same = fresh.ips(i).address() == a->dpu().ips(i).address() && fresh.ips(i).gateway() == a->dpu().ips(i).gateway();
    if (!same) {
      auto ns = netlink_.open(a->netns());
      Result<void> r = ns ? plumbPod(**ns, a->ifname(), fresh, true) : Result<void>(std::move(ns).takeError());
      if (!r) {
        DPU_LOG(kError, kLog) << "replay of " << key << ": re-plumbing failed: " << r.error();
        all_ok = false;
        continue;
      }
      DPU_LOG(kInfo, kLog) << "replay of " << key << ": re-plumbed with " << fresh.mac();
    }
    *a->mutable_dpu() = fresh;
    a->set_dpu_boot_id(answer->boot_id());
    if (auto r = book_.put(*a); !r) {
      DPU_LOG(kError, kLog) << "replay of " << key << ": cannot write the checkpoint: " << r.error();
      all_ok = false;
    }
  }
  if (all_ok) {
    if (auto r = book_.setBootId(boot_id); !r) {
      DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
    }
  }
}

}  // namespace dpu::hostshim
