// CNI ADD, step by step (see add.h). Each step is a member function that
// returns nothing to go on or the answer to stop with; the undos it registers
// run in reverse when a later step stops with an error.
#include "host-shim/add.h"

#include <chrono>
#include <functional>
#include <optional>

#include "common/log.h"
#include "host-shim/cni_errors.h"
#include "host-shim/pod_plumbing.h"
#include "host-shim/vf_home.h"

namespace dpu::hostshim {

namespace {

constexpr const char* kLog = "host-shim";
// How long an ADD waits for a VF on its way home (its previous pod's DEL was
// just answered) before it lets the runtime retry.
constexpr auto kVfWait = std::chrono::milliseconds(5000);

using Stop = std::optional<cni::v1::CniResponse>;

// What to do about a DPU failure worth retrying. A capacity the agent names
// (kExhausted: the pod CIDR, the dataplane's ports) is not fixed by checking
// that the agent runs.
std::string dpuAdvice(const std::string& url, const Error& e) {
  if (e.code == ErrorCode::kExhausted) {
    return "this node has no room for another pod (the DPU agent's message names the limit): delete unused pods "
           "or raise that limit; the runtime retries the ADD";
  }
  return "check that dpu-agent runs on the DPU and answers at " + url +
         " (dpu.url in the host-shim config); the runtime retries the ADD";
}

class AddFlow {
 public:
  AddFlow(AddContext& ctx, const cni::v1::CniRequest& req)
      : ctx_(ctx), req_(req), key_(attachmentKey(req.network_name(), req.container_id(), req.ifname())) {}

  ~AddFlow() {
    if (committed_) return;
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
    // Now that the book no longer holds it, a sweep releases what the DPU
    // may still have of this ADD.
    if (sweep_after_) ctx_.session.requestReconcile();
  }

  cni::v1::CniResponse run() {
    using Step = Stop (AddFlow::*)();
    static constexpr std::pair<const char*, Step> kSteps[] = {
        {"environment", &AddFlow::environment}, {"claim", &AddFlow::claim}, {"snapshot", &AddFlow::snapshot},
        {"record", &AddFlow::record},           {"dpu", &AddFlow::attachOnDpu}, {"move", &AddFlow::move},
        {"plumb", &AddFlow::plumb},             {"commit", &AddFlow::commit},
    };
    std::string timings;  // where the ADD spends its time, for the debug log (bench/cni.sh reads it)
    auto last = std::chrono::steady_clock::now();
    for (const auto& [name, step] : kSteps) {
      Stop stop = (this->*step)();
      const auto now = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration_cast<std::chrono::microseconds>(now - last).count() / 1000.0;
      timings += std::string(" ") + name + "=" + std::to_string(ms).substr(0, 5) + "ms";
      last = now;
      if (stop) {
        if (stop->has_error()) {
          DPU_LOG(kDebug, kLog) << "ADD " << key_ << " stopped at " << name << ": " << stop->error().details();
        }
        return *stop;
      }
    }
    committed_ = true;
    DPU_LOG(kDebug, kLog) << "ADD " << key_ << " timings:" << timings;
    DPU_LOG(kInfo, kLog) << "ADD " << key_ << ": VF " << a_.vf_index() << " (" << a_.pci_address() << ") in "
                         << a_.netns() << " mac " << a_.dpu().mac();
    return cniResultOf(a_);
  }

 private:
  void onFailure(std::function<void()> f) { undo_.push_back(std::move(f)); }

  // The VF's netdev in the host netns, by the name sysfs gives now (a real VF
  // renamed by udev) or the one read at start.
  std::string netdevOf(const VfInfo& v) const {
    if (auto live = vfNetdevName(ctx_.config.sysfs_root, v.pci_address)) return *live;
    return v.netdev;
  }

  const VfInfo* findVfByPci(const std::string& pci) const {
    for (const auto& v : ctx_.vfs)
      if (v.pci_address == pci) return &v;
    return nullptr;
  }

  Stop environment() {
    if (req_.container_id().empty())
      return cniError(CniCode::kInvalidEnvironment, "CNI_CONTAINERID is empty", "the runtime must set CNI_CONTAINERID");
    if (auto p = ifnameProblem(req_.ifname()); !p.empty())
      return cniError(CniCode::kInvalidEnvironment, "bad CNI_IFNAME", "CNI_IFNAME " + p);
    if (req_.netns().empty())
      return cniError(CniCode::kInvalidEnvironment, "CNI_NETNS is empty",
                      "ADD needs CNI_NETNS, the path of the pod's network namespace");
    auto pod = ctx_.netlink.open(req_.netns());
    if (!pod)
      return cniError(CniCode::kInvalidEnvironment, "cannot use CNI_NETNS",
                      pod.error() + "; CNI_NETNS must name an existing network namespace");
    pod_ = std::move(*pod);
    // A retried ADD of what is attached already answers the same.
    if (auto existing = ctx_.book.find(key_); existing && existing->plumbed()) {
      if (existing->netns() == req_.netns()) {
        a_ = *existing;
        committed_ = true;
        return cniResultOf(*existing);
      }
      return cniError(CniCode::kInvalidConfig, "attachment exists in another netns",
                      key_ + " is already attached in " + existing->netns() + "; DEL it first");
    }
    auto host = ctx_.netlink.host();
    if (!host) return cniError(CniCode::kIoFailure, "netlink unavailable", host.error());
    host_ = std::move(*host);
    // Refuse a taken ifname before anything is claimed or asked of the DPU.
    auto taken = pod_->findLink(req_.ifname());
    if (!taken) return cniError(CniCode::kIoFailure, "cannot read links in " + req_.netns(), taken.error());
    if (*taken)
      return cniError(CniCode::kPlumbingFailed, "CNI_IFNAME is taken in the pod netns",
                      "an interface named " + req_.ifname() + " already exists in " + req_.netns() +
                          "; pick another CNI_IFNAME or remove that interface");
    return {};
  }

  Stop claim() {
    rec_.owner = key_;
    if (!req_.device_id().empty()) return claimDevice();
    // No VF free but some on their way home (pods churning faster than the
    // kernel moves netdevs): wait for the next one home rather than fail.
    const auto give_up = std::chrono::steady_clock::now() + kVfWait;
    for (;;) {
      for (const auto& v : ctx_.vfs) {
        if (!v.in_pool || ctx_.store.get({v.pf_index, v.vf_index})) continue;
        rec_.vf = {v.pf_index, v.vf_index};
        rec_.pci_address = v.pci_address;
        auto c = ctx_.store.claim(rec_);
        if (!c && c.code() == ErrorCode::kFailed) return cniError(CniCode::kIoFailure, "cannot claim a VF", c.error());
        if (!c.ok()) continue;
        // A VF without its netdev (bound to vfio, or lost) is skipped, not failed.
        auto l = host_->findLink(netdevOf(v));
        if (!l) {
          (void)ctx_.store.release(rec_.vf, rec_.owner);
          return cniError(CniCode::kIoFailure, "cannot read the VF", l.error());
        }
        if (!*l) {
          DPU_LOG(kWarn, kLog) << "VF " << v.vf_index << " (" << v.pci_address << ") has no netdev " << netdevOf(v)
                               << " in the host netns; skipping it";
          (void)ctx_.store.release(rec_.vf, rec_.owner);
          continue;
        }
        vf_ = &v;
        link_ = **l;
        break;
      }
      if (vf_ || !ctx_.returner.waitAnyReturn(give_up)) break;
    }
    if (!vf_)
      return cniError(CniCode::kVfUnavailable, "no free VF",
                      "every VF in the pool is attached, returning to the host or has no netdev; DEL unused pods or "
                      "add VFs to pfs[].vfs");
    registerRelease();
    return {};
  }

  Stop claimDevice() {
    vf_ = findVfByPci(req_.device_id());
    if (!vf_)
      return cniError(CniCode::kInvalidConfig, "deviceID is not a VF of this host-shim",
                      "deviceID " + req_.device_id() + " is not a VF of the configured PFs under " +
                          ctx_.config.sysfs_root + "; use the PCI address of a VF from the pool or leave deviceID out");
    if (!vf_->in_pool)
      return cniError(CniCode::kInvalidConfig, "deviceID is outside the VF pool",
                      "deviceID " + req_.device_id() + " is VF " + std::to_string(vf_->vf_index) + " of " +
                          vf_->pf_name +
                          (vf_->reserved ? ", reserved for the host management port" : ", not in pfs[].vfs") +
                          "; pick a VF from the pool or leave deviceID out");
    rec_.vf = {vf_->pf_index, vf_->vf_index};
    rec_.pci_address = vf_->pci_address;
    auto c = ctx_.store.claim(rec_);
    // The VF's previous pod was just deleted and it is on its way home: wait
    // for it (tens of ms), bounded, then let the runtime retry.
    auto returning = [&] { return !c && c.code() == ErrorCode::kUnavailable; };
    if (returning() && ctx_.returner.waitReturned(rec_.vf, kVfWait)) c = ctx_.store.claim(rec_);
    if (returning())
      return cniError(CniCode::kTryAgainLater, "the VF is still returning to the host",
                      c.error() + "; it did not come home within 5 s; the runtime retries the ADD (see host-shim's log)");
    if (!c.ok()) {
      bool held = c.code() == ErrorCode::kConflict;
      return cniError(held ? CniCode::kVfUnavailable : CniCode::kIoFailure, "cannot claim the VF",
                      c.error() + (held ? "; DEL that attachment first or pick another deviceID" : ""));
    }
    registerRelease();
    auto l = host_->findLink(netdevOf(*vf_));
    if (!l) return cniError(CniCode::kPlumbingFailed, "cannot read the VF", l.error());
    if (!*l)
      return cniError(CniCode::kVfUnavailable, "the VF's netdev is missing",
                      "VF " + std::to_string(vf_->vf_index) + " of " + vf_->pf_name + " (" + vf_->pci_address +
                          ") has no netdev " + netdevOf(*vf_) +
                          " in the host netns; check that it is bound to its kernel driver and not in use elsewhere");
    link_ = **l;
    return {};
  }

  void registerRelease() {
    onFailure([this] {
      if (vf_kept_) return;  // the VF could not come home: its record stays, flagged (see move)
      if (auto r = ctx_.store.release(rec_.vf, rec_.owner); !r) {
        DPU_LOG(kError, kLog) << "rollback of ADD " << key_ << ": " << r.error();
      }
    });
  }

  Stop snapshot() {
    a_.set_container_id(req_.container_id());
    a_.set_ifname(req_.ifname());
    a_.set_netns(req_.netns());
    *a_.mutable_pod() = req_.pod();
    a_.set_network_name(req_.network_name());
    a_.set_pf_index(vf_->pf_index);
    a_.set_vf_index(vf_->vf_index);
    a_.set_pci_address(vf_->pci_address);
    auto* snap = a_.mutable_snapshot();
    snap->set_netdev(link_.name);
    snap->set_mac(link_.mac.str());
    snap->set_mtu(link_.mtu);
    if (auto pf = host_->readPfVfSettings(vf_->pf_name, vf_->vf_index)) {
      snap->set_has_pf_settings(true);
      snap->set_admin_mac(pf->admin_mac.str());
      snap->set_vlan(pf->vlan);
      snap->set_spoofchk(pf->spoofchk);
      snap->set_trust(pf->trust);
    }
    a_.set_plumbed(false);
    return {};
  }

  Stop record() {
    auto seq = ctx_.book.record(a_);
    if (!seq)
      return cniError(CniCode::kIoFailure, "cannot write the checkpoint",
                      seq.error() + "; check stateDir " + ctx_.config.state_dir);
    seq_ = *seq;
    onFailure([this] {
      if (vf_kept_) return;
      if (auto r = ctx_.book.erase(key_); !r) {
        DPU_LOG(kError, kLog) << "rollback of ADD " << key_ << ": cannot write the checkpoint: " << r.error();
      }
    });
    return {};
  }

  Stop attachOnDpu() {
    attach::v1::AttachRequest ar;
    ar.set_kind(attach::v1::POD);
    ar.mutable_pod()->set_namespace_(req_.pod().namespace_());
    ar.mutable_pod()->set_name(req_.pod().name());
    ar.mutable_pod()->set_uid(req_.pod().uid());
    ar.set_sandbox_id(req_.container_id());
    ar.set_ifname(req_.ifname());
    ar.set_network(req_.network_name());
    ar.set_pf_index(vf_->pf_index);
    ar.set_vf_index(vf_->vf_index);
    ar.set_vf_mac(a_.snapshot().mac());
    ar.set_requested_mac(req_.requested_mac());
    ar.set_requested_mtu(req_.requested_mtu());
    for (const auto& ip : req_.requested_ips()) ar.add_requested_ips(ip);
    ar.set_host_instance(ctx_.book.hostInstance());
    ar.set_host_seq(seq_);
    // Registered before the call: an attach whose answer never came (a
    // timeout) may still take effect on the DPU. Then a detach now would only
    // wait out another timeout: the undo leaves it to the reconcile sweep,
    // which releases it once the attachment has left the book (or the agent
    // refuses it as given up on, if the sweep gets there first).
    onFailure([this] {
      if (!unanswered_) {
        sweep_after_ = !ctx_.session.detach(a_);
        return;
      }
      DPU_LOG(kWarn, kLog) << "rollback of ADD " << key_ << ": the DPU did not answer the attach; the next "
                           << "reconcile with the DPU agent releases it if it took effect";
      sweep_after_ = true;
    });
    auto answer = ctx_.dpu.attach(ar);
    if (!answer.ok() && answer.code() == ErrorCode::kConflict) {
      // We hold the VF record and the key, so whatever the DPU still has on
      // this VF or under this key is stale (a DEL that could not reach it, an
      // ADD given up on): detach it and try once more. An address another pod
      // holds stays held: the retry fails the same and the answer names it.
      DPU_LOG(kWarn, kLog) << "ADD " << key_ << ": " << answer.error() << "; detaching what the DPU still holds on VF "
                           << vf_->vf_index << " and under " << key_;
      ctx_.session.detachStale(a_);
      answer = ctx_.dpu.attach(ar);
    }
    if (!answer.ok()) {
      unanswered_ = answer.code() == ErrorCode::kUnavailable;
      auto code = codeFor(answer.failure());
      const char* msg = answer.code() == ErrorCode::kExhausted ? "no room for another pod on this node"
                        : code == CniCode::kTryAgainLater       ? "DPU agent unavailable"
                                                                : "DPU agent refused the attach";
      return cniError(code, msg,
                      answer.error() +
                          (code == CniCode::kTryAgainLater ? "; " + dpuAdvice(ctx_.dpu.url(), answer.failure()) : ""));
    }
    *a_.mutable_dpu() = answer->attachment();
    a_.set_dpu_boot_id(answer->boot_id());
    return {};
  }

  Stop move() {
    // The kernel renames after the move, so a failed rename leaves the VF in
    // the pod netns: the undo is registered first.
    onFailure([this] { bringHome(); });
    nl::LinkChange with_move;
    auto pod_mac = MacAddress::parse(a_.dpu().mac());
    if (!pod_mac)
      return cniError(CniCode::kDpuRejected, "the DPU agent answered a bad MAC",
                      "'" + a_.dpu().mac() + "' is not a MAC address; check the dpu-agent version");
    with_move.mac = *pod_mac;
    if (a_.dpu().mtu()) with_move.mtu = a_.dpu().mtu();
    with_move.up = true;
    if (auto r = host_->moveLink(link_.ifindex, *pod_, req_.ifname(), with_move); !r)
      return cniError(CniCode::kPlumbingFailed, "cannot move the VF into the pod netns", r.error());
    return {};
  }

  // The undo of move: the VF home with its snapshot. When that fails, the
  // VF's record and the book keep it as a stuck return (never handed out;
  // GC and the next start retry) instead of being freed.
  void bringHome() {
    auto home = bringVfHome(ctx_.netlink, ctx_.config, a_);
    if (home) return;
    vf_kept_ = true;
    std::string problem = "cannot restore it after a failed ADD: " + home.error();
    DPU_LOG(kError, kLog) << "rollback of ADD " << key_ << ": " << problem;
    Attachment stuck = a_;
    stuck.set_returning(true);
    stuck.set_return_problem(problem);
    AllocationRecord rec = rec_;
    rec.problem = problem;
    if (auto r = ctx_.store.markReturning(rec); !r) {
      DPU_LOG(kError, kLog) << "rollback of ADD " << key_ << ": " << r.error();
    }
    if (auto r = ctx_.book.moveToReturning(key_, stuck); !r) {
      DPU_LOG(kError, kLog) << "rollback of ADD " << key_ << ": cannot write the checkpoint: " << r.error();
    }
  }

  Stop plumb() {
    if (auto r = plumbPod(*pod_, req_.ifname(), a_.dpu(), false, true); !r)
      return cniError(CniCode::kPlumbingFailed, "cannot configure " + req_.ifname() + " in the pod netns", r.error());
    return {};
  }

  Stop commit() {
    a_.set_plumbed(true);
    if (auto r = ctx_.book.putWithBootId(a_, a_.dpu_boot_id()); !r)
      return cniError(CniCode::kIoFailure, "cannot write the checkpoint",
                      r.error() + "; check stateDir " + ctx_.config.state_dir);
    return {};
  }

  AddContext& ctx_;
  const cni::v1::CniRequest& req_;
  const std::string key_;
  std::vector<std::function<void()>> undo_;
  bool committed_ = false;
  bool vf_kept_ = false;
  bool unanswered_ = false;  // the attach got no answer: it may have taken effect
  bool sweep_after_ = false;  // the rollback could not detach on the DPU
  std::unique_ptr<nl::Namespace> pod_;
  std::unique_ptr<nl::Namespace> host_;
  const VfInfo* vf_ = nullptr;
  AllocationRecord rec_;
  nl::LinkInfo link_;
  Attachment a_;
  uint64_t seq_ = 0;
};

}  // namespace

cni::v1::CniResponse runAdd(AddContext& ctx, const cni::v1::CniRequest& req) {
  AddFlow flow(ctx, req);
  return flow.run();
}

}  // namespace dpu::hostshim
