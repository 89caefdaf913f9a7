// The attach service (see attach_service.h). Order of an ADD, and why:
//   1. validate the environment (netns opens, ifname legal) before touching anything;
//   2. claim the VF record (the per-VF flock makes concurrent ADDs safe);
//   3. snapshot the VF and checkpoint the attachment as not plumbed, so a crash
//      from here on is undone at the next start;
//   4. ask the DPU (it may refuse: then nothing on the host changed);
//   5. move + rename + MAC + MTU + up in one netlink request (one rtnl round:
//      under concurrency every rtnl request queues behind other pods' moves),
//      then addresses, routes inside the pod netns; announce the addresses;
//   6. checkpoint as plumbed.
// DEL's fast path and the return worker are at startReturn() and returnLoop().
#include "host-shim/attach_service.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

#include "common/log.h"
#include "host-shim/check.h"
#include "host-shim/checkpoint.h"
#include "host-shim/cni_errors.h"

#include <nlohmann/json.hpp>

namespace dpu::hostshim {

namespace {

// Appends " step=1.234ms" per phase to a verb's timings line (the debug log,
// which the benchmark's breakdown reads).
class PhaseTimer {
 public:
  explicit PhaseTimer(std::string& out) : out_(out) {}
  void lap(const char* step) {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration_cast<std::chrono::microseconds>(now - last_).count() / 1000.0;
    out_ += std::string(" ") + step + "=" + std::to_string(ms).substr(0, 5) + "ms";
    last_ = now;
  }

 private:
  std::string& out_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

constexpr const char* kLog = "host-shim";
constexpr const char* kManagementOwner = "management";

nl::LinkChange linkUp(bool up) {
  nl::LinkChange c;
  c.up = up;
  return c;
}

std::string keyOf(const std::string& container_id, const std::string& ifname) { return container_id + "/" + ifname; }

// Undo steps registered by an ADD, run in reverse unless committed.
class Transaction {
 public:
  ~Transaction() {
    if (committed_) return;
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  }
  void onFailure(std::function<void()> f) { undo_.push_back(std::move(f)); }
  void commit() { committed_ = true; }

 private:
  std::vector<std::function<void()>> undo_;
  bool committed_ = false;
};

cni::v1::CniResponse success() {
  cni::v1::CniResponse r;
  r.mutable_result();
  return r;
}

cni::v1::CniResponse resultOf(const checkpoint::v1::HostAttachment& a) {
  cni::v1::CniResponse r;
  auto* res = r.mutable_result();
  auto* i = res->add_interfaces();
  i->set_name(a.ifname());
  i->set_mac(a.dpu().mac());
  i->set_mtu(a.dpu().mtu());
  i->set_sandbox(a.netns());
  i->set_pci_id(a.pci_address());
  for (const auto& ip : a.dpu().ips()) {
    auto* c = res->add_ips();
    c->set_address(ip.address());
    c->set_gateway(ip.gateway());
    c->set_interface(0);
  }
  for (const auto& rt : a.dpu().routes()) {
    auto* c = res->add_routes();
    c->set_dst(rt.dst());
    c->set_gw(rt.gw());
    c->set_mtu(rt.mtu());
  }
  return r;
}

// The DPU's answer as routes for the pod: its routes, plus a default route via
// the first gateway of each family it did not already route by default.
Result<std::vector<nl::RouteSpec>> routesFor(const attach::v1::Attachment& a) {
  std::vector<nl::RouteSpec> out;
  bool default4 = false, default6 = false;
  for (const auto& r : a.routes()) {
    auto dst = IpPrefix::parse(r.dst(), true);
    if (!dst) return Error{"the DPU agent answered a bad route dst '" + r.dst() + "': " + dst.error()};
    nl::RouteSpec s{*dst, std::nullopt, r.mtu()};
    if (!r.gw().empty()) {
      auto gw = IpAddress::parse(r.gw());
      if (!gw) return Error{"the DPU agent answered a bad route gw '" + r.gw() + "': " + gw.error()};
      s.gw = *gw;
    }
    if (dst->length == 0) (dst->address.isV4() ? default4 : default6) = true;
    out.push_back(s);
  }
  for (const auto& ip : a.ips()) {
    if (ip.gateway().empty()) continue;
    auto gw = IpAddress::parse(ip.gateway());
    if (!gw) return Error{"the DPU agent answered a bad gateway '" + ip.gateway() + "'"};
    bool& have = gw->isV4() ? default4 : default6;
    if (have) continue;
    have = true;
    nl::RouteSpec s;
    s.dst.address.family = gw->family;
    s.dst.length = 0;
    s.gw = *gw;
    s.mtu = 0;
    out.push_back(s);
  }
  return out;
}

Result<std::vector<IpInterfaceAddress>> addressesFor(const attach::v1::Attachment& a) {
  std::vector<IpInterfaceAddress> out;
  for (const auto& ip : a.ips()) {
    auto p = IpInterfaceAddress::parse(ip.address());
    if (!p) return Error{"the DPU agent answered a bad address '" + ip.address() + "': " + p.error()};
    out.push_back(*p);
  }
  return out;
}

// What to do about a DPU failure worth retrying. An answer with a status came
// from a running agent, so "check that it runs" would mislead: 507 means the
// node's pod CIDR is full.
std::string dpuAdvice(const std::string& url, unsigned http_status = 0) {
  if (http_status == 507) {
    return "the node's pod address range is exhausted: delete unused pods or give the node a larger pod CIDR; "
           "the runtime retries the ADD";
  }
  if (http_status != 0) {
    return "the DPU agent at " + url + " is running but cannot serve the request now; the runtime retries the ADD";
  }
  return "check that dpu-agent runs on the DPU and answers at " + url +
         " (dpu.url in the host-shim config); the runtime retries the ADD";
}

}  // namespace

class AttachService::KeyLock {
 public:
  KeyLock(AttachService& s, std::string key) : s_(s), key_(std::move(key)) {
    std::unique_lock lk(s_.keys_mu_);
    s_.keys_cv_.wait(lk, [&] { return !s_.busy_keys_.count(key_); });
    s_.busy_keys_.insert(key_);
  }
  ~KeyLock() {
    {
      std::lock_guard lk(s_.keys_mu_);
      s_.busy_keys_.erase(key_);
    }
    s_.keys_cv_.notify_all();
  }

 private:
  AttachService& s_;
  std::string key_;
};

AttachService::AttachService(Config config)
    : config_(std::move(config)),
      checkpoint_path_(config_.state_dir + "/checkpoint.pb"),
      store_(config_.state_dir),
      dpu_(std::make_unique<DpuClient>(config_.dpu)) {}

AttachService::~AttachService() { stop(); }

Result<void> AttachService::start() {
  if (auto r = store_.init(); !r) return prefixed("stateDir " + config_.state_dir, std::move(r).takeError());
  auto vfs = scanVfs(config_.sysfs_root, config_.pfs);
  if (!vfs) return std::move(vfs).takeError();
  vfs_ = std::move(*vfs);
  size_t pool = std::count_if(vfs_.begin(), vfs_.end(), [](const VfInfo& v) { return v.in_pool; });
  if (pool == 0)
    return Error{"pfs: none of the configured VFs exists under " + config_.sysfs_root + "; check vfs and sriov_numvfs"};
  auto ns = nl::Netns::current();
  if (!ns) return std::move(ns).takeError();
  host_ns_ = std::move(*ns);
  auto cp = loadCheckpoint(checkpoint_path_);
  if (!cp) return std::move(cp).takeError();
  {
    std::lock_guard lk(mu_);
    for (const auto& a : cp->attachments()) {
      if (a.returning())
        returning_[vfKeyOf(a)] = a;
      else
        attachments_[keyOf(a.container_id(), a.ifname())] = a;
    }
    management_ = cp->management_port();
    dpu_boot_id_ = cp->dpu_boot_id();
  }
  // Test and benchmark knobs, not configuration: a delay before each return
  // (to observe the in-between state) and the worker's quiet period.
  if (const char* d = std::getenv("HOSTSHIM_TEST_RETURN_DELAY_MS")) test_return_delay_ms_ = std::atoi(d);
  if (const char* q = std::getenv("HOSTSHIM_TEST_RETURN_QUIET_MS")) return_quiet_ = std::chrono::milliseconds(std::atoi(q));
  reconcileAtStart();
  returner_ = std::thread([this] { returnLoop(); });
  {
    // Returns a crash or a stop cut short: the pod netns fds are gone; the VF
    // is found by name in the recorded netns or through sysfs in ours.
    std::vector<Attachment> unfinished;
    {
      std::lock_guard lk(mu_);
      for (const auto& [k, a] : returning_) unfinished.push_back(a);
    }
    for (auto& a : unfinished) {
      DPU_LOG(kInfo, kLog) << "finishing the return of VF " << a.vf_index() << " (" << a.pci_address()
                           << ") after the DEL of " << a.container_id() << "/" << a.ifname();
      queueReturn({std::move(a), std::nullopt, 0});
    }
  }
  DPU_LOG(kInfo, kLog) << "inventory: " << vfs_.size() << " VFs, " << pool << " in the pod pool; "
                       << attachments_.size() << " attachments and " << returning_.size()
                       << " VFs returning from the checkpoint";
  poller_ = std::thread([this] { pollLoop(); });
  return {};
}

void AttachService::stop() {
  if (stopping_.exchange(true)) return;
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  // Drains the returns queued so far: every VF DEL answered for goes home.
  {
    std::lock_guard lk(return_mu_);  // the worker is waiting or sees stopping_: no lost wake-up
  }
  return_cv_.notify_all();
  if (returner_.joinable()) returner_.join();
}

DpuHealthView AttachService::health() const {
  std::lock_guard lk(health_mu_);
  return health_;
}

size_t AttachService::attachmentCount() const {
  std::lock_guard lk(mu_);
  return attachments_.size();
}

const VfInfo* AttachService::findVf(uint32_t pf, uint32_t vf) const {
  for (const auto& v : vfs_)
    if (v.pf_index == pf && v.vf_index == vf) return &v;
  return nullptr;
}

const VfInfo* AttachService::findVfByPci(const std::string& pci) const {
  for (const auto& v : vfs_)
    if (v.pci_address == pci) return &v;
  return nullptr;
}

Result<void> AttachService::saveLocked() {
  checkpoint::v1::HostShimCheckpoint c;
  c.set_version(kCheckpointVersion);
  for (const auto& [k, a] : attachments_) *c.add_attachments() = a;
  for (const auto& [k, a] : returning_) *c.add_attachments() = a;
  *c.mutable_management_port() = management_;
  c.set_dpu_boot_id(dpu_boot_id_);
  return saveCheckpoint(checkpoint_path_, c);
}

void AttachService::putAttachment(const Attachment& a) {
  std::lock_guard lk(mu_);
  attachments_[keyOf(a.container_id(), a.ifname())] = a;
  if (auto r = saveLocked(); !r) {
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
}

void AttachService::eraseAttachment(const std::string& key) {
  std::lock_guard lk(mu_);
  attachments_.erase(key);
  if (auto r = saveLocked(); !r) {
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
}

namespace {

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The return worker yields to pods being plumbed: it starts a move home only
// once no ADD or DEL has been in flight for return_quiet_ (30 ms; a move holds rtnl for
// 15-25 ms, and every rtnl request of a concurrent ADD or DEL would wait for
// it), unless the oldest return has waited kReturnMaxDefer or an ADD waits for
// a VF to come home.
constexpr auto kReturnMaxDefer = std::chrono::milliseconds(2000);

// Counts an ADD or DEL in flight for the worker's yielding.
class RequestInFlight {
 public:
  RequestInFlight(std::atomic<int>& n, std::atomic<int64_t>& last_end) : n_(n), last_end_(last_end) { ++n_; }
  ~RequestInFlight() {
    last_end_ = steadyNs();
    --n_;
  }
  RequestInFlight(const RequestInFlight&) = delete;
  RequestInFlight& operator=(const RequestInFlight&) = delete;

 private:
  std::atomic<int>& n_;
  std::atomic<int64_t>& last_end_;
};

}  // namespace

cni::v1::CniResponse AttachService::handle(const cni::v1::CniRequest& req) {
  std::optional<RequestInFlight> counted;
  if (req.command() == cni::v1::ADD || req.command() == cni::v1::DEL)
    counted.emplace(requests_in_flight_, last_request_end_ns_);
  switch (req.command()) {
    case cni::v1::ADD: return add(req);
    case cni::v1::DEL: return del(req);
    case cni::v1::CHECK: return check(req);
    case cni::v1::STATUS: return status();
    case cni::v1::GC: return gc(req);
    default: break;
  }
  return cniError(
      CniCode::kInvalidConfig, "unknown command",
      "the request's command is " + std::to_string(req.command()) + "; expected ADD, DEL, CHECK, STATUS or GC");
}

Result<void> AttachService::plumbInNetns(const nl::Netns& ns, const std::string& ifname,
                                         const attach::v1::Attachment& dpu, bool replace, bool link_set) {
  auto sock = nl::Socket::openIn(ns);
  if (!sock) return std::move(sock).takeError();
  auto link = nl::findLink(*sock, ifname);
  if (!link) return std::move(link).takeError();
  if (!*link) return Error{"interface " + ifname + " is not in " + ns.path()};
  int idx = (*link)->ifindex;
  nl::LinkChange ch;
  auto mac = MacAddress::parse(dpu.mac());
  if (!mac) return Error{"the DPU agent answered a bad MAC '" + dpu.mac() + "'"};
  ch.mac = *mac;
  if (dpu.mtu()) ch.mtu = dpu.mtu();
  if (replace) ch.up = false;
  if (!link_set)
    if (auto r = nl::changeLink(*sock, idx, ch); !r) return r;
  auto addrs = addressesFor(dpu);
  if (!addrs) return std::move(addrs).takeError();
  auto routes = routesFor(dpu);
  if (!routes) return std::move(routes).takeError();
  if (replace)
    if (auto r = nl::flushAddresses(*sock, idx); !r) return r;
  if (!link_set)
    if (auto r = nl::changeLink(*sock, idx, linkUp(true)); !r) return r;
  for (const auto& a : *addrs)
    if (auto r = nl::addAddress(*sock, idx, a); !r) return r;
  // On-link routes first: a gateway must be reachable before a route uses it.
  std::stable_sort(routes->begin(), routes->end(), [](const auto& a, const auto& b) { return !a.gw && b.gw; });
  for (const auto& r : *routes)
    if (auto done = nl::replaceRoute(*sock, idx, r); !done) return done;
  if (auto r = nl::announceAddresses(ns, idx, *mac, *addrs); !r) {
    DPU_LOG(kWarn, kLog) << ifname << " in " << ns.path() << ": " << r.error();
  }
  return {};
}

cni::v1::CniResponse AttachService::add(const cni::v1::CniRequest& req) {
  if (req.container_id().empty())
    return cniError(CniCode::kInvalidEnvironment, "CNI_CONTAINERID is empty", "the runtime must set CNI_CONTAINERID");
  if (auto p = ifnameProblem(req.ifname()); !p.empty())
    return cniError(CniCode::kInvalidEnvironment, "bad CNI_IFNAME", "CNI_IFNAME " + p);
  if (req.netns().empty())
    return cniError(CniCode::kInvalidEnvironment, "CNI_NETNS is empty",
                    "ADD needs CNI_NETNS, the path of the pod's network namespace");
  auto pod_ns = nl::Netns::open(req.netns());
  if (!pod_ns)
    return cniError(CniCode::kInvalidEnvironment, "cannot use CNI_NETNS",
                    pod_ns.error() + "; CNI_NETNS must name an existing network namespace");

  const std::string key = keyOf(req.container_id(), req.ifname());
  KeyLock key_lock(*this, key);
  std::string timings;  // where the ADD spends its time, for the debug log
  PhaseTimer timer(timings);
  auto lap = [&](const char* step) { timer.lap(step); };
  {
    std::lock_guard lk(mu_);
    if (auto it = attachments_.find(key); it != attachments_.end() && it->second.plumbed()) {
      if (it->second.netns() == req.netns()) return resultOf(it->second);
      return cniError(CniCode::kInvalidConfig, "attachment exists in another netns",
                      key + " is already attached in " + it->second.netns() + "; DEL it first");
    }
  }

  auto host = nl::Socket::open();
  if (!host) return cniError(CniCode::kIoFailure, "netlink unavailable", host.error());
  {
    // Refuse a taken ifname before anything is claimed or asked of the DPU.
    auto pod = nl::Socket::openIn(*pod_ns);
    if (!pod) return cniError(CniCode::kIoFailure, "netlink unavailable in " + req.netns(), pod.error());
    auto taken = nl::findLink(*pod, req.ifname());
    if (!taken) return cniError(CniCode::kIoFailure, "cannot read links in " + req.netns(), taken.error());
    if (*taken)
      return cniError(CniCode::kPlumbingFailed, "CNI_IFNAME is taken in the pod netns",
                      "an interface named " + req.ifname() + " already exists in " + req.netns() +
                          "; pick another CNI_IFNAME or remove that interface");
  }
  // The VF's netdev in the host netns, by the name sysfs gives now (a real VF
  // renamed by udev) or the one read at start.
  auto netdevOf = [&](const VfInfo& v) {
    if (auto live = vfNetdevName(config_.sysfs_root, v.pci_address)) return *live;
    return v.netdev;
  };

  // Pick and claim the VF.
  const VfInfo* vf = nullptr;
  AllocationRecord rec;
  rec.owner = key;
  std::optional<nl::LinkInfo> link;
  if (!req.device_id().empty()) {
    vf = findVfByPci(req.device_id());
    if (!vf)
      return cniError(CniCode::kInvalidConfig, "deviceID is not a VF of this host-shim",
                      "deviceID " + req.device_id() + " is not a VF of the configured PFs under " + config_.sysfs_root +
                          "; use the PCI address of a VF from the pool or leave deviceID out");
    if (!vf->in_pool)
      return cniError(CniCode::kInvalidConfig, "deviceID is outside the VF pool",
                      "deviceID " + req.device_id() + " is VF " + std::to_string(vf->vf_index) + " of " + vf->pf_name +
                          (vf->reserved ? ", reserved for the host management port" : ", not in pfs[].vfs") +
                          "; pick a VF from the pool or leave deviceID out");
    rec.vf = {vf->pf_index, vf->vf_index};
    rec.pci_address = vf->pci_address;
    auto c = store_.claim(rec);
    // The VF's previous pod was just deleted and it is on its way home: wait
    // for it (tens of ms), bounded, then let the runtime retry.
    if (c.failure == ClaimFailure::kReturning && waitReturned(rec.vf, std::chrono::milliseconds(5000)))
      c = store_.claim(rec);
    if (c.failure == ClaimFailure::kReturning)
      return cniError(CniCode::kTryAgainLater, "the VF is still returning to the host",
                      c.message + "; it did not come home within 5 s; the runtime retries the ADD (see host-shim's log)");
    if (!c.ok())
      return cniError(
          c.failure == ClaimFailure::kHeld ? CniCode::kVfUnavailable : CniCode::kIoFailure, "cannot claim the VF",
          c.message + (c.failure == ClaimFailure::kHeld ? "; DEL that attachment first or pick another deviceID" : ""));
    auto l = nl::findLink(*host, netdevOf(*vf));
    if (!l || !*l) {
      (void)store_.release(rec.vf, rec.owner);
      if (!l) return cniError(CniCode::kPlumbingFailed, "cannot read the VF", l.error());
      return cniError(CniCode::kVfUnavailable, "the VF's netdev is missing",
                      "VF " + std::to_string(vf->vf_index) + " of " + vf->pf_name + " (" + vf->pci_address +
                          ") has no netdev " + netdevOf(*vf) +
                          " in the host netns; check that it is bound to its kernel driver and not in use elsewhere");
    }
    link = **l;
  } else {
    // No VF free but some on their way home (pods churning faster than the
    // kernel moves netdevs): wait for the next one home rather than fail.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(5000);
    for (;;) {
      for (const auto& v : vfs_) {
        if (!v.in_pool || store_.get({v.pf_index, v.vf_index})) continue;
        rec.vf = {v.pf_index, v.vf_index};
        rec.pci_address = v.pci_address;
        auto c = store_.claim(rec);
        if (c.failure == ClaimFailure::kIo) return cniError(CniCode::kIoFailure, "cannot claim a VF", c.message);
        if (!c.ok()) continue;
        // A VF without its netdev (bound to vfio, or lost) is skipped, not failed.
        auto l = nl::findLink(*host, netdevOf(v));
        if (!l || !*l) {
          DPU_LOG(kWarn, kLog) << "VF " << v.vf_index << " (" << v.pci_address << ") has no netdev " << netdevOf(v)
                               << " in the host netns; skipping it";
          (void)store_.release(rec.vf, rec.owner);
          continue;
        }
        vf = &v;
        link = **l;
        break;
      }
      if (vf || !waitAnyReturn(give_up)) break;
    }
    if (!vf)
      return cniError(CniCode::kVfUnavailable, "no free VF",
                      "every VF in the pool is attached, returning to the host or has no netdev; DEL unused pods or "
                      "add VFs to pfs[].vfs");
  }
  lap("claim");
  Transaction tx;
  tx.onFailure([this, rec] {
    if (auto r = store_.release(rec.vf, rec.owner); !r) {
      DPU_LOG(kError, kLog) << "rollback: " << r.error();
    }
  });
  const std::string netdev = link->name;

  Attachment a;
  a.set_container_id(req.container_id());
  a.set_ifname(req.ifname());
  a.set_netns(req.netns());
  *a.mutable_pod() = req.pod();
  a.set_network_name(req.network_name());
  a.set_pf_index(vf->pf_index);
  a.set_vf_index(vf->vf_index);
  a.set_pci_address(vf->pci_address);
  auto* snap = a.mutable_snapshot();
  snap->set_netdev(netdev);
  snap->set_mac(link->mac.str());
  snap->set_mtu(link->mtu);
  if (auto pf = nl::readPfVfSettings(*host, vf->pf_name, vf->vf_index)) {
    snap->set_has_pf_settings(true);
    snap->set_admin_mac(pf->admin_mac.str());
    snap->set_vlan(pf->vlan);
    snap->set_spoofchk(pf->spoofchk);
    snap->set_trust(pf->trust);
  }
  lap("snapshot");
  a.set_plumbed(false);
  putAttachment(a);
  lap("checkpoint");
  tx.onFailure([this, key] { eraseAttachment(key); });

  // Ask the DPU.
  attach::v1::AttachRequest ar;
  ar.set_kind(attach::v1::POD);
  ar.mutable_pod()->set_namespace_(req.pod().namespace_());
  ar.mutable_pod()->set_name(req.pod().name());
  ar.mutable_pod()->set_uid(req.pod().uid());
  ar.set_sandbox_id(req.container_id());
  ar.set_ifname(req.ifname());
  ar.set_pf_index(vf->pf_index);
  ar.set_vf_index(vf->vf_index);
  ar.set_vf_mac(snap->mac());
  ar.set_requested_mac(req.requested_mac());
  ar.set_requested_mtu(req.requested_mtu());
  for (const auto& ip : req.requested_ips()) ar.add_requested_ips(ip);
  auto answer = dpu_->attach(ar);
  if (!answer.ok() && answer.failure.kind == DpuFailure::Kind::kConflict) {
    // We hold the VF record, so whatever the DPU still has on this VF is stale
    // (a DEL that could not reach it): detach it and try once more.
    DPU_LOG(kWarn, kLog) << "the DPU still holds VF " << vf->vf_index << " (" << answer.failure.holder
                         << "); detaching the stale attachment";
    attach::v1::DetachRequest dr;
    dr.set_by_vf(true);
    dr.set_pf_index(vf->pf_index);
    dr.set_vf_index(vf->vf_index);
    if (auto d = dpu_->detach(dr); !d.ok()) {
      DPU_LOG(kWarn, kLog) << d.failure.message;
    }
    answer = dpu_->attach(ar);
  }
  if (!answer.ok()) {
    auto code = codeFor(answer.failure);
    const char* msg = answer.failure.http_status == 507        ? "no free pod address on this node"
                      : code == CniCode::kTryAgainLater ? "DPU agent unavailable"
                                                        : "DPU agent refused the attach";
    return cniError(code, msg,
                    answer.failure.message + (code == CniCode::kTryAgainLater ? "; " + dpuAdvice(dpu_->url(), answer.failure.http_status) : ""));
  }
  lap("dpu");
  *a.mutable_dpu() = answer.value->attachment();
  a.set_dpu_boot_id(answer.value->boot_id());
  tx.onFailure([this, a] { detachOnDpu(a); });

  // Move + rename into the pod netns. The kernel renames after the move, so a
  // failed rename leaves the VF in the pod netns: the undo is registered first.
  tx.onFailure([this, a] {
    if (auto r = restoreVf(a); !r) {
      DPU_LOG(kError, kLog) << "rollback of " << a.container_id() << ": " << r.error();
    }
  });
  nl::LinkChange with_move;
  auto pod_mac = MacAddress::parse(a.dpu().mac());
  if (!pod_mac)
    return cniError(CniCode::kDpuRejected, "the DPU agent answered a bad MAC",
                    "'" + a.dpu().mac() + "' is not a MAC address; check the dpu-agent version");
  with_move.mac = *pod_mac;
  if (a.dpu().mtu()) with_move.mtu = a.dpu().mtu();
  with_move.up = true;
  if (auto r = nl::moveLink(*host, link->ifindex, *pod_ns, req.ifname(), with_move); !r)
    return cniError(CniCode::kPlumbingFailed, "cannot move the VF into the pod netns", r.error());
  lap("move");
  if (auto r = plumbInNetns(*pod_ns, req.ifname(), a.dpu(), false, true); !r)
    return cniError(CniCode::kPlumbingFailed, "cannot configure " + req.ifname() + " in the pod netns", r.error());

  lap("plumb");
  a.set_plumbed(true);
  {
    std::lock_guard lk(mu_);
    attachments_[key] = a;
    if (dpu_boot_id_.empty()) dpu_boot_id_ = a.dpu_boot_id();
    if (auto r = saveLocked(); !r)
      return cniError(CniCode::kIoFailure, "cannot write the checkpoint",
                      r.error() + "; check stateDir " + config_.state_dir);
  }
  tx.commit();
  lap("checkpoint");
  DPU_LOG(kDebug, kLog) << "ADD " << key << " timings:" << timings;
  DPU_LOG(kInfo, kLog) << "ADD " << key << ": VF " << a.vf_index() << " (" << a.pci_address() << ") in " << a.netns()
                       << " mac " << a.dpu().mac();
  return resultOf(a);
}

Result<bool> AttachService::restoreVf(const Attachment& a, const nl::Netns* held, int pod_ifindex) {
  const auto& snap = a.snapshot();
  auto host = nl::Socket::open();
  if (!host) return std::move(host).takeError();
  std::optional<nl::LinkInfo> found;
  if (held && pod_ifindex > 0) {
    // The namespace DEL kept open: the VF is the link DEL took out of service there.
    auto pod = nl::Socket::openIn(*held);
    if (!pod) return std::move(pod).takeError();
    auto l = nl::findLink(*pod, pod_ifindex);
    if (!l) return std::move(l).takeError();
    if (*l) {
      if ((*l)->up)
        if (auto r = nl::changeLink(*pod, pod_ifindex, linkUp(false)); !r) return std::move(r).takeError();
      if (auto r = nl::moveLink(*pod, pod_ifindex, host_ns_, snap.netdev()); !r) return std::move(r).takeError();
    }
  } else if (!a.netns().empty()) {
    // In the pod netns under the pod's name: move it back with its own name.
    if (auto ns = nl::Netns::open(a.netns())) {
      if (auto pod = nl::Socket::openIn(*ns)) {
        // Ours is the link under the pod's name with one of our MACs, or under
        // the VF's own name (a move whose rename failed); never someone else's eth0.
        std::optional<nl::LinkInfo> mine;
        auto by_name = nl::findLink(*pod, a.ifname());
        if (!by_name) return std::move(by_name).takeError();
        // A returning VF was set down by DEL; an up one there is a newer ADD's.
        if (*by_name && ((*by_name)->mac.str() == a.dpu().mac() || (*by_name)->mac.str() == snap.mac()) &&
            !(a.returning() && (*by_name)->up))
          mine = **by_name;
        if (!mine) {
          auto by_vf = nl::findLink(*pod, snap.netdev());
          if (!by_vf) return std::move(by_vf).takeError();
          if (*by_vf) mine = **by_vf;
        }
        if (mine) {
          if (auto r = nl::changeLink(*pod, mine->ifindex, linkUp(false)); !r) return std::move(r).takeError();
          if (auto r = nl::moveLink(*pod, mine->ifindex, host_ns_, snap.netdev()); !r)
            return std::move(r).takeError();
        }
      }
    }
  }
  // Now in the host netns: under its own name, under the pod's name (the kernel
  // hands a VF back to the host when the pod netns is destroyed), or under the
  // name sysfs reports for its PCI address.
  // Under the pod's name ("eth0") it counts only with one of our MACs: the
  // host may have an eth0 of its own, which must never be renamed.
  auto ours = [&](const nl::LinkInfo& l) { return l.mac.str() == a.dpu().mac() || l.mac.str() == snap.mac(); };
  std::vector<std::pair<std::string, bool>> names = {{snap.netdev(), false}, {a.ifname(), true}};
  if (auto n = vfNetdevName(config_.sysfs_root, a.pci_address())) names.emplace_back(*n, false);
  for (const auto& [n, check_mac] : names) {
    auto l = nl::findLink(*host, n);
    if (!l) return std::move(l).takeError();
    if (*l && (!check_mac || ours(**l))) {
      found = **l;
      break;
    }
  }
  if (!found) {
    DPU_LOG(kInfo, kLog) << "VF " << a.pci_address() << " (" << snap.netdev() << ") is gone; nothing to restore";
    return false;
  }
  nl::LinkChange ch;
  ch.up = false;
  if (found->name != snap.netdev()) ch.name = snap.netdev();
  if (auto mac = MacAddress::parse(snap.mac())) ch.mac = *mac;
  if (snap.mtu()) ch.mtu = snap.mtu();
  if (auto r = nl::changeLink(*host, found->ifindex, ch); !r) return std::move(r).takeError();
  (void)nl::flushAddresses(*host, found->ifindex);
  if (snap.has_pf_settings()) {
    const PfConfig* pf = config_.pfByIndex(a.pf_index());
    nl::PfVfSettings s;
    if (auto m = MacAddress::parse(snap.admin_mac())) s.admin_mac = *m;
    s.vlan = snap.vlan();
    s.spoofchk = snap.spoofchk();
    s.trust = snap.trust();
    if (pf)
      if (auto r = nl::writePfVfSettings(*host, pf->name, a.vf_index(), s); !r) return std::move(r).takeError();
  }
  return true;
}

void AttachService::detachOnDpu(const Attachment& a) {
  attach::v1::DetachRequest dr;
  if (!a.dpu().id().empty()) {
    dr.set_id(a.dpu().id());
  } else {
    dr.set_by_vf(true);
    dr.set_pf_index(a.pf_index());
    dr.set_vf_index(a.vf_index());
  }
  auto r = dpu_->detach(dr);
  if (!r.ok()) {
    DPU_LOG(kWarn, kLog) << "detach of " << a.container_id() << "/" << a.ifname() << " on the DPU failed ("
                         << r.failure.message << "); the next ADD of that VF or a replay clears it";
  }
}

Result<void> AttachService::teardown(const Attachment& a) {
  if (auto r = restoreVf(a); !r) return std::move(r).takeError();
  detachOnDpu(a);
  const std::string key = keyOf(a.container_id(), a.ifname());
  // The VF is home (or gone): free its record even if an earlier DEL cut
  // short by a crash left it returning.
  if (auto r = store_.release({a.pf_index(), a.vf_index()}, key, AllocationStore::Release::kReturnDone); !r) {
    DPU_LOG(kWarn, kLog) << "DEL " << key << ": " << r.error();
  }
  eraseAttachment(key);
  return {};
}

cni::v1::CniResponse AttachService::del(const cni::v1::CniRequest& req) {
  if (req.container_id().empty())
    return cniError(CniCode::kInvalidEnvironment, "CNI_CONTAINERID is empty", "the runtime must set CNI_CONTAINERID");
  if (auto p = ifnameProblem(req.ifname()); !p.empty())
    return cniError(CniCode::kInvalidEnvironment, "bad CNI_IFNAME", "CNI_IFNAME " + p);
  const std::string key = keyOf(req.container_id(), req.ifname());
  KeyLock key_lock(*this, key);
  std::optional<Attachment> a;
  {
    std::lock_guard lk(mu_);
    if (auto it = attachments_.find(key); it != attachments_.end()) a = it->second;
  }
  if (!a) {
    // Nothing recorded: free a leftover record and tell the DPU, both best effort.
    for (const auto& r : store_.list())
      if (r.owner == key) (void)store_.release(r.vf, key);
    // Runtimes DEL unknown containers often (after a failed ADD, on retries):
    // do not wait for a DPU already known to be down.
    if (health().reachable) {
      attach::v1::DetachRequest dr;
      dr.set_sandbox_id(req.container_id());
      dr.set_ifname(req.ifname());
      (void)dpu_->detach(dr);
    }
    return success();
  }
  // The runtime's netns path wins: it may have been re-mounted elsewhere.
  if (!req.netns().empty()) a->set_netns(req.netns());
  std::string timings;
  auto queued = startReturn(*a, timings);
  if (queued && *queued) {
    DPU_LOG(kDebug, kLog) << "DEL " << key << " timings:" << timings;
    DPU_LOG(kInfo, kLog) << "DEL " << key << ": VF " << a->vf_index() << " out of service, returning";
    return success();
  }
  if (!queued) {
    DPU_LOG(kWarn, kLog) << "DEL " << key << ": " << queued.error() << "; returning the VF before answering";
  }
  // Not in the pod netns (gone with it, or already home): restore it here.
  if (auto r = teardown(*a); !r)
    return cniError(CniCode::kPlumbingFailed, "cannot return the VF to the host",
                    r.error() + "; the attachment is kept, retry DEL");
  DPU_LOG(kInfo, kLog) << "DEL " << key << ": VF " << a->vf_index() << " returned";
  return success();
}

std::string AttachService::vfKeyOf(const Attachment& a) { return VfKey{a.pf_index(), a.vf_index()}.str(); }

// DEL's fast path. After it the pod has no usable interface (CNI spec: DEL
// releases the container's resources): the VF is down, without addresses (so
// without routes), not under the pod's ifname, and the DPU forwards nothing
// for it. What is left, the move home, is the worker's.
Result<bool> AttachService::startReturn(Attachment a, std::string& timings) {
  const std::string key = keyOf(a.container_id(), a.ifname());
  const auto& snap = a.snapshot();
  PhaseTimer timer(timings);
  auto lap = [&](const char* step) { timer.lap(step); };
  if (a.netns().empty()) return false;
  auto ns = nl::Netns::open(a.netns());
  if (!ns) return false;  // the namespace is gone: the VF is home (a real VF) or gone (a veth)
  auto pod = nl::Socket::openIn(*ns);
  if (!pod) return std::move(pod).takeError();
  // Ours is the link under the pod's ifname with the pod's MAC, or one under
  // the VF's host name (a DEL retried after a crash between the two).
  std::optional<nl::LinkInfo> mine;
  auto by_name = nl::findLink(*pod, a.ifname());
  if (!by_name) return std::move(by_name).takeError();
  if (*by_name && ((*by_name)->mac.str() == a.dpu().mac() || (*by_name)->mac.str() == snap.mac())) mine = **by_name;
  if (!mine) {
    auto by_vf = nl::findLink(*pod, snap.netdev());
    if (!by_vf) return std::move(by_vf).takeError();
    if (*by_vf) mine = **by_vf;
  }
  if (!mine) return false;
  lap("find");
  if (mine->up)
    if (auto r = nl::changeLink(*pod, mine->ifindex, linkUp(false)); !r) return std::move(r).takeError();
  if (auto r = nl::flushAddresses(*pod, mine->ifindex); !r) return std::move(r).takeError();
  // Free the pod's ifname now, so a runtime's ADD right after this DEL (a
  // repair after a failed CHECK) finds it free. Not fatal: the link is down.
  if (mine->name != snap.netdev() && !snap.netdev().empty()) {
    nl::LinkChange rename;
    rename.name = snap.netdev();
    if (auto r = nl::changeLink(*pod, mine->ifindex, rename); !r) {
      DPU_LOG(kWarn, kLog) << "DEL " << key << ": " << r.error() << "; it keeps its name until it is home";
    }
  }
  lap("down");
  detachOnDpu(a);
  lap("dpu");
  AllocationRecord rec{{a.pf_index(), a.vf_index()}, key, a.pci_address()};
  if (auto r = store_.markReturning(rec); !r) return std::move(r).takeError();
  lap("record");
  a.set_returning(true);
  a.clear_return_problem();
  {
    std::lock_guard lk(mu_);
    attachments_.erase(key);
    returning_[vfKeyOf(a)] = a;
    if (auto r = saveLocked(); !r) {
      // The record file says returning, so the VF is not handed out; a restart
      // without this checkpoint entry cannot restore the snapshot, though.
      DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
    }
  }
  lap("checkpoint");
  queueReturn({std::move(a), std::move(*ns), mine->ifindex});
  return true;
}

void AttachService::queueReturn(ReturnJob job) {
  {
    std::lock_guard lk(return_mu_);
    return_queue_.push_back(std::move(job));
  }
  return_cv_.notify_all();
}

void AttachService::returnLoop() {
  for (;;) {
    std::optional<ReturnJob> job;
    {
      std::unique_lock lk(return_mu_);
      return_cv_.wait(lk, [&] { return !return_queue_.empty() || stopping_; });
      // Stopping drains: every VF whose DEL was answered goes home first.
      if (return_queue_.empty()) return;
      // Yield to ADDs and DELs in flight (see kReturnMaxDefer).
      for (;;) {
        auto now = std::chrono::steady_clock::now();
        bool quiet = requests_in_flight_ == 0 &&
                     steadyNs() - last_request_end_ns_ >=
                         std::chrono::duration_cast<std::chrono::nanoseconds>(return_quiet_).count();
        if (stopping_ || vf_waiters_ > 0 || quiet || now - return_queue_.front().queued_at >= kReturnMaxDefer)
          break;
        return_cv_.wait_for(lk, std::chrono::milliseconds(5));
      }
      job.emplace(std::move(return_queue_.front()));
      return_queue_.pop_front();
    }
    finishReturn(*job);
    {
      std::lock_guard lk(return_mu_);
      ++returns_done_;
    }
    return_cv_.notify_all();
  }
}

void AttachService::finishReturn(ReturnJob& job) {
  const Attachment& a = job.a;
  const std::string key = keyOf(a.container_id(), a.ifname());
  if (test_return_delay_ms_) {
    std::unique_lock lk(return_mu_);
    return_cv_.wait_for(lk, std::chrono::milliseconds(test_return_delay_ms_), [&] { return stopping_.load(); });
  }
  auto t0 = std::chrono::steady_clock::now();
  // A failed restore is retried a few times (a busy rtnl, a transient name
  // clash); then the VF stays flagged for GC and the next start.
  Result<bool> home = Error{"not tried"};
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << (2 * attempt)));
    home = restoreVf(a, job.pod_ns ? &*job.pod_ns : nullptr, job.pod_ifindex);
    if (home || stopping_) break;
  }
  job.pod_ns.reset();  // the namespace may go now
  if (!home) {
    flagReturn(a, "cannot restore it: " + home.error());
    return;
  }
  if (!*home) {
    // A veth "VF" destroyed with its namespace before we held it (a crash
    // in between); a real VF is never nowhere. Keep it out of the pool.
    flagReturn(a, "the VF is nowhere: not in " + (a.netns().empty() ? std::string("the pod netns") : a.netns()) +
                      " nor in host-shim's netns under " + a.snapshot().netdev() + " or its sysfs name");
    return;
  }
  if (auto r = store_.release({a.pf_index(), a.vf_index()}, key, AllocationStore::Release::kReturnDone); !r) {
    DPU_LOG(kWarn, kLog) << "return of " << key << ": " << r.error();
  }
  {
    std::lock_guard lk(mu_);
    returning_.erase(vfKeyOf(a));
    if (auto r = saveLocked(); !r) {
      DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
    }
  }
  auto ms = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  DPU_LOG(kDebug, kLog) << "RETURN " << key << " timings: home=" << std::to_string(ms / 1000.0).substr(0, 5) << "ms";
  DPU_LOG(kInfo, kLog) << "DEL " << key << ": VF " << a.vf_index() << " (" << a.pci_address() << ") home as "
                       << a.snapshot().netdev();
}

void AttachService::flagReturn(const Attachment& a, const std::string& problem) {
  const std::string key = keyOf(a.container_id(), a.ifname());
  DPU_LOG(kError, kLog) << "return of VF " << a.vf_index() << " (" << a.pci_address() << ") after the DEL of " << key
                        << " is stuck: " << problem << "; the VF stays out of the pool; GC and the next start retry";
  AllocationRecord rec{{a.pf_index(), a.vf_index()}, key, a.pci_address()};
  rec.problem = problem;
  if (auto r = store_.markReturning(rec); !r) {
    DPU_LOG(kError, kLog) << r.error();
  }
  std::lock_guard lk(mu_);
  if (auto it = returning_.find(vfKeyOf(a)); it != returning_.end()) it->second.set_return_problem(problem);
  if (auto r = saveLocked(); !r) {
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
}

bool AttachService::waitAnyReturn(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lk(return_mu_);
  bool on_track = false;
  {
    std::lock_guard l2(mu_);
    for (const auto& [k, a] : returning_) on_track = on_track || a.return_problem().empty();
  }
  if (!on_track) return false;
  const uint64_t before = returns_done_;
  ++vf_waiters_;  // the worker stops yielding
  bool done = return_cv_.wait_until(lk, deadline, [&] { return returns_done_ != before || stopping_; });
  --vf_waiters_;
  return done && !stopping_;
}

bool AttachService::waitReturned(const VfKey& vf, std::chrono::milliseconds bound) {
  auto returning = [&] {
    std::lock_guard lk(mu_);
    auto it = returning_.find(vf.str());
    return it != returning_.end() && it->second.return_problem().empty();
  };
  std::unique_lock lk(return_mu_);
  ++vf_waiters_;  // the worker stops yielding
  return_cv_.wait_for(lk, bound, [&] { return !returning() || stopping_; });
  --vf_waiters_;
  return !returning();
}

cni::v1::CniResponse AttachService::check(const cni::v1::CniRequest& req) {
  const std::string key = keyOf(req.container_id(), req.ifname());
  std::optional<Attachment> a;
  {
    std::lock_guard lk(mu_);
    if (auto it = attachments_.find(key); it != attachments_.end() && it->second.plumbed()) a = it->second;
  }
  if (!a)
    return cniError(CniCode::kUnknownContainer, "no such attachment",
                    "host-shim has no attachment " + key + "; run ADD first");
  std::string netns = req.netns().empty() ? a->netns() : req.netns();
  auto ns = nl::Netns::open(netns);
  if (!ns) return cniError(CniCode::kInvalidEnvironment, "cannot use CNI_NETNS", ns.error());
  auto sock = nl::Socket::openIn(*ns);
  if (!sock) return cniError(CniCode::kIoFailure, "netlink unavailable", sock.error());
  LiveInterface live;
  auto link = nl::findLink(*sock, req.ifname());
  if (!link) return cniError(CniCode::kIoFailure, "cannot read the interface", link.error());
  if (*link) {
    live.exists = true;
    live.mac = (*link)->mac;
    live.mtu = (*link)->mtu;
    auto addrs = nl::listAddresses(*sock, (*link)->ifindex);
    if (!addrs) return cniError(CniCode::kIoFailure, "cannot read addresses", addrs.error());
    live.addresses = std::move(*addrs);
    auto routes = nl::listRoutes(*sock, (*link)->ifindex);
    if (!routes) return cniError(CniCode::kIoFailure, "cannot read routes", routes.error());
    live.routes = std::move(*routes);
  }
  // Without a prevResult (first in the chain, CNI ≤ 0.4 tools) compare with our own answer.
  std::string prev = req.prev_result_json();
  if (prev.empty()) {
    auto r = resultOf(*a).result();
    nlohmann::json j;
    j["interfaces"] = {{{"name", req.ifname()}, {"mac", a->dpu().mac()}, {"mtu", a->dpu().mtu()}, {"sandbox", netns}}};
    j["ips"] = nlohmann::json::array();
    for (const auto& ip : r.ips()) j["ips"].push_back({{"address", ip.address()}, {"interface", 0}});
    prev = j.dump();
  }
  if (auto r = compareWithPrevResult(prev, req.ifname(), netns, live); !r)
    return cniError(CniCode::kCheckFailed, "live interface differs from the ADD result",
                    r.error() + "; DEL and ADD the pod again to repair it");
  return success();
}

cni::v1::CniResponse AttachService::status() {
  DpuHealthView h = health();
  if (!h.checked)
    return cniError(CniCode::kNotAvailable, "DPU agent not checked yet",
                    "host-shim has not heard from the DPU agent at " + dpu_->url() + " yet; retry in a second");
  if (!h.reachable)
    return cniError(CniCode::kNotAvailable, "DPU agent unreachable", h.reason + "; " + dpuAdvice(dpu_->url()));
  if (!h.ready)
    return cniError(CniCode::kNotAvailable, "DPU agent not ready",
                    "the DPU agent at " + dpu_->url() + " reports not ready: " + h.reason);
  size_t pool = 0, held = 0;
  for (const auto& v : vfs_) pool += v.in_pool;
  for (const auto& r : store_.list()) {
    const VfInfo* v = findVf(r.vf.pf_index, r.vf.vf_index);
    held += v && v->in_pool;
  }
  size_t returning = 0, stuck = 0;
  {
    std::lock_guard lk(mu_);
    for (const auto& [k, a] : returning_) {
      ++returning;
      stuck += !a.return_problem().empty();
    }
  }
  if (held >= pool)
    return cniError(CniCode::kNotAvailable, "no free VF",
                    "all " + std::to_string(pool) + " VFs of the pool are attached or returning (" +
                        std::to_string(returning) + " returning, " + std::to_string(stuck) +
                        " of them stuck: see the records under " + config_.state_dir +
                        "/vfs); DEL pods or add VFs to pfs[].vfs");
  return success();
}

cni::v1::CniResponse AttachService::gc(const cni::v1::CniRequest& req) {
  std::set<std::string> valid;
  for (const auto& v : req.valid_attachments()) valid.insert(keyOf(v.container_id(), v.ifname()));
  std::vector<Attachment> stale;
  {
    std::lock_guard lk(mu_);
    for (const auto& [k, a] : attachments_)
      if (!valid.count(k)) stale.push_back(a);
  }
  std::string failures;
  for (const auto& a : stale) {
    const std::string key = keyOf(a.container_id(), a.ifname());
    KeyLock key_lock(*this, key);
    {
      std::lock_guard lk(mu_);
      if (!attachments_.count(key)) continue;
    }
    if (auto r = teardown(a); !r) {
      failures += " " + key + ": " + r.error() + ";";
    } else {
      DPU_LOG(kInfo, kLog) << "GC " << key << ": released";
    }
  }
  // Records with no attachment (a crash between claim and checkpoint).
  {
    std::set<std::string> known;
    {
      std::lock_guard lk(mu_);
      for (const auto& [k, a] : attachments_) known.insert(k);
    }
    std::lock_guard kl(keys_mu_);
    for (const auto& r : store_.list())
      if (r.owner != kManagementOwner && !known.count(r.owner) && !busy_keys_.count(r.owner))
        (void)store_.release(r.vf, r.owner);
  }
  // Pod attachments the DPU holds that neither we nor the runtime know (a DEL
  // that could not reach it): detach them too, best effort.
  if (health().reachable) {
    if (auto list = dpu_->list(); list.ok()) {
      std::set<std::string> known;
      {
        std::lock_guard lk(mu_);
        for (const auto& [k, a] : attachments_) known.insert(k);
      }
      for (const auto& d : list.value->attachments()) {
        std::string key = keyOf(d.sandbox_id(), d.ifname());
        if (d.kind() != attach::v1::POD || valid.count(key) || known.count(key)) continue;
        attach::v1::DetachRequest dr;
        dr.set_id(d.id());
        (void)dpu_->detach(dr);
        DPU_LOG(kInfo, kLog) << "GC " << key << ": detached the DPU's stale attachment " << d.id();
      }
    }
  }
  // Returns that could not finish (a restore failed, the VF was nowhere): try
  // again; they stay flagged (never handed out) until one succeeds.
  std::vector<Attachment> stuck;
  {
    std::lock_guard lk(mu_);
    for (const auto& [k, a] : returning_)
      if (!a.return_problem().empty()) stuck.push_back(a);
  }
  for (auto& a : stuck) {
    DPU_LOG(kWarn, kLog) << "GC: retrying the return of VF " << a.vf_index() << " (" << a.pci_address()
                         << "), stuck: " << a.return_problem();
    queueReturn({std::move(a), std::nullopt, 0});
  }
  if (!failures.empty())
    return cniError(CniCode::kPlumbingFailed, "GC could not release every attachment", failures + " retry GC");
  return success();
}

void AttachService::reconcileAtStart() {
  std::vector<Attachment> unfinished;
  std::set<std::string> known;
  {
    std::lock_guard lk(mu_);
    // A returning VF's record says so before anything else runs, whatever a
    // crash left in the record file: it must not be handed out until home.
    for (const auto& [k, a] : returning_) {
      AllocationRecord rec{{a.pf_index(), a.vf_index()}, keyOf(a.container_id(), a.ifname()), a.pci_address()};
      rec.problem = a.return_problem();
      if (auto r = store_.markReturning(rec); !r) {
        DPU_LOG(kError, kLog) << "restart: " << r.error();
      }
    }
    for (const auto& [k, a] : attachments_) {
      known.insert(k);
      if (!a.plumbed()) unfinished.push_back(a);
    }
  }
  // An ADD that was cut short by a crash: undo it as its rollback would have.
  for (const auto& a : unfinished) {
    DPU_LOG(kWarn, kLog) << "undoing the unfinished ADD of " << a.container_id() << "/" << a.ifname();
    if (auto r = teardown(a); !r) {
      DPU_LOG(kError, kLog) << r.error();
    }
  }
  // Records no attachment explains are freed; attachments whose record is gone get it back.
  for (const auto& r : store_.list())
    if (r.owner != kManagementOwner && !known.count(r.owner)) (void)store_.release(r.vf, r.owner);
  std::lock_guard lk(mu_);
  for (const auto& [k, a] : attachments_) {
    AllocationRecord rec{{a.pf_index(), a.vf_index()}, k, a.pci_address()};
    if (auto c = store_.claim(rec); !c.ok()) {
      DPU_LOG(kError, kLog) << "restart: " << c.message;
    }
  }
}

void AttachService::pollLoop() {
  while (!stopping_) {
    auto h = dpu_->health();
    DpuHealthView v;
    v.checked = true;
    if (h.ok()) {
      v.reachable = true;
      v.ready = h.value->ready();
      v.boot_id = h.value->boot_id();
      v.reason = h.value->reason();
    } else {
      v.reason = h.failure.message;
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
    if (v.reachable && !v.boot_id.empty()) {
      std::string known;
      {
        std::lock_guard lk(mu_);
        known = dpu_boot_id_;
      }
      if (known != v.boot_id) {
        if (!known.empty()) {
          DPU_LOG(kWarn, kLog) << "the DPU's boot id changed (" << known << " → " << v.boot_id
                               << "): replaying attachments";
          management_ready_ = false;
        }
        replayAll(v.boot_id);
      }
      if (config_.management.enabled && management_ready_ && !managementPortIntact()) {
        DPU_LOG(kWarn, kLog) << "the management port lost its link or address; plumbing it again";
        management_ready_ = false;
      }
      if (config_.management.enabled && !management_ready_) {
        if (auto r = setupManagementPort(); !r) {
          DPU_LOG(kWarn, kLog) << "management port: " << r.error();
        } else
          management_ready_ = true;
      }
    }
    std::unique_lock lk(poll_mu_);
    poll_cv_.wait_for(lk, std::chrono::milliseconds(config_.dpu.health_interval_ms), [&] { return stopping_.load(); });
  }
}

void AttachService::replayAll(const std::string& boot_id) {
  std::vector<std::string> keys;
  {
    std::lock_guard lk(mu_);
    for (const auto& [k, a] : attachments_)
      if (a.plumbed() && a.dpu_boot_id() != boot_id) keys.push_back(k);
  }
  bool all_ok = true;
  for (const auto& key : keys) {
    if (stopping_) return;
    KeyLock key_lock(*this, key);
    std::optional<Attachment> a;
    {
      std::lock_guard lk(mu_);
      if (auto it = attachments_.find(key); it != attachments_.end()) a = it->second;
    }
    if (!a) continue;
    attach::v1::AttachRequest ar;
    ar.set_kind(attach::v1::POD);
    ar.mutable_pod()->set_namespace_(a->pod().namespace_());
    ar.mutable_pod()->set_name(a->pod().name());
    ar.mutable_pod()->set_uid(a->pod().uid());
    ar.set_sandbox_id(a->container_id());
    ar.set_ifname(a->ifname());
    ar.set_pf_index(a->pf_index());
    ar.set_vf_index(a->vf_index());
    ar.set_vf_mac(a->dpu().mac());
    ar.set_requested_mac(a->dpu().mac());  // keep the pod's MAC stable across the DPU's restart
    ar.set_requested_mtu(a->dpu().mtu());
    // ... and its addresses, so the pod keeps running on what it has.
    for (const auto& ip : a->dpu().ips()) {
      if (auto ifa = IpInterfaceAddress::parse(ip.address())) ar.add_requested_ips(ifa->address.str());
    }
    auto answer = dpu_->attach(ar);
    if (!answer.ok() && ar.requested_ips_size() > 0 &&
        (answer.failure.http_status == 400 || answer.failure.http_status == 409)) {
      // The DPU came back with another pod CIDR, or the address is taken:
      // take what it gives and re-plumb the pod below.
      DPU_LOG(kWarn, kLog) << "replay of " << key << ": cannot keep its address (" << answer.failure.message
                           << "); taking a new one";
      ar.clear_requested_ips();
      answer = dpu_->attach(ar);
    }
    if (!answer.ok()) {
      DPU_LOG(kError, kLog) << "replay of " << key << ": " << answer.failure.message;
      all_ok = false;
      continue;
    }
    const auto& fresh = answer.value->attachment();
    bool same = fresh.mac() == a->dpu().mac() && fresh.mtu() == a->dpu().mtu() &&
                fresh.ips().size() == a->dpu().ips().size() && fresh.routes().size() == a->dpu().routes().size();
    for (int i = 0; same && i < fresh.ips().size(); ++i)
      same = fresh.ips(i).address() == a->dpu().ips(i).address() && fresh.ips(i).gateway() == a->dpu().ips(i).gateway();
    if (!same) {
      auto ns = nl::Netns::open(a->netns());
      Result<void> r = ns ? plumbInNetns(*ns, a->ifname(), fresh, true) : Result<void>(std::move(ns).takeError());
      if (!r) {
        DPU_LOG(kError, kLog) << "replay of " << key << ": re-plumbing failed: " << r.error();
        all_ok = false;
        continue;
      }
      DPU_LOG(kInfo, kLog) << "replay of " << key << ": re-plumbed with " << fresh.mac();
    }
    *a->mutable_dpu() = fresh;
    a->set_dpu_boot_id(answer.value->boot_id());
    putAttachment(*a);
  }
  if (all_ok) {
    std::lock_guard lk(mu_);
    dpu_boot_id_ = boot_id;
    if (auto r = saveLocked(); !r) {
      DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
    }
  }
}

bool AttachService::managementPortIntact() {
  auto host = nl::Socket::open();
  if (!host) return true;  // cannot tell; do not churn
  const VfInfo* vf = findVf(config_.management.pf_index, config_.management.vf_index);
  std::string name = !config_.management.ifname.empty() ? config_.management.ifname : (vf ? vf->netdev : "");
  auto link = nl::findLink(*host, name);
  if (!link || !*link || !(*link)->up) return false;
  auto addrs = nl::listAddresses(*host, (*link)->ifindex);
  if (!addrs) return true;
  std::lock_guard lk(mu_);
  for (const auto& ip : management_.ips()) {
    auto want = IpInterfaceAddress::parse(ip.address());
    if (want && std::find(addrs->begin(), addrs->end(), *want) == addrs->end()) return false;
  }
  return true;
}

Result<void> AttachService::setupManagementPort() {
  const auto& m = config_.management;
  const VfInfo* vf = findVf(m.pf_index, m.vf_index);
  if (!vf)
    return Error{"VF " + std::to_string(m.vf_index) + " of PF " + std::to_string(m.pf_index) + " is not in sysfs"};
  auto c = store_.claim({{vf->pf_index, vf->vf_index}, kManagementOwner, vf->pci_address});
  if (!c.ok()) return Error{c.message};
  auto host = nl::Socket::open();
  if (!host) return std::move(host).takeError();
  std::optional<nl::LinkInfo> link;
  for (const auto& name : {m.ifname, vf->netdev}) {
    if (name.empty()) continue;
    auto l = nl::findLink(*host, name);
    if (!l) return std::move(l).takeError();
    if (*l) {
      link = **l;
      break;
    }
  }
  if (!link) return Error{"the management VF's netdev " + vf->netdev + " is not in the host netns"};
  attach::v1::AttachRequest ar;
  ar.set_kind(attach::v1::MANAGEMENT);
  ar.set_pf_index(vf->pf_index);
  ar.set_vf_index(vf->vf_index);
  ar.set_vf_mac(link->mac.str());
  auto answer = dpu_->attach(ar);
  if (!answer.ok()) return Error{answer.failure.message};
  const auto& d = answer.value->attachment();
  nl::LinkChange ch;
  auto mac = MacAddress::parse(d.mac());
  if (!mac) return Error{"the DPU agent answered a bad MAC '" + d.mac() + "'"};
  ch.mac = *mac;
  if (d.mtu()) ch.mtu = d.mtu();
  if (!m.ifname.empty() && link->name != m.ifname) {
    // Renaming needs the link down.
    if (auto r = nl::changeLink(*host, link->ifindex, linkUp(false)); !r) return r;
    ch.name = m.ifname;
  }
  if (auto r = nl::changeLink(*host, link->ifindex, ch); !r) return r;
  if (auto r = nl::changeLink(*host, link->ifindex, linkUp(true)); !r) return r;
  auto addrs = addressesFor(d);
  if (!addrs) return std::move(addrs).takeError();
  for (const auto& a : *addrs)
    if (auto r = nl::addAddress(*host, link->ifindex, a); !r) return r;
  std::optional<IpAddress> gw4, gw6;
  for (const auto& ip : d.ips()) {
    auto g = IpAddress::parse(ip.gateway());
    if (!g) continue;
    (g->isV4() ? gw4 : gw6) = *g;
  }
  std::vector<std::string> cidrs = m.cluster_cidrs;
  cidrs.insert(cidrs.end(), m.service_cidrs.begin(), m.service_cidrs.end());
  for (const auto& text : cidrs) {
    auto p = IpPrefix::parse(text);
    if (!p) continue;
    nl::RouteSpec r;
    r.dst = *p;
    r.gw = p->address.isV4() ? gw4 : gw6;
    // The management address's own subnet is on-link already.
    bool own = false;
    for (const auto& a : *addrs) own = own || (a.network() == *p);
    if (own) continue;
    if (auto done = nl::replaceRoute(*host, link->ifindex, r); !done) return done;
  }
  if (auto r = nl::announceAddresses(host_ns_, link->ifindex, *mac, *addrs); !r) {
    DPU_LOG(kWarn, kLog) << "management port: " << r.error();
  }
  {
    std::lock_guard lk(mu_);
    management_ = d;
    if (auto r = saveLocked(); !r) return r;
  }
  DPU_LOG(kInfo, kLog) << "management port " << (m.ifname.empty() ? link->name : m.ifname) << " up with "
                       << (d.ips().empty() ? std::string("no address") : d.ips(0).address());
  return {};
}

}  // namespace dpu::hostshim
