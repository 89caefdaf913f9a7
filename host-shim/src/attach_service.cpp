// The attach service (see attach_service.h): start-up and the CNI verbs
// other than ADD (add.cpp). CHECK compares the live interface with the
// prevResult (check.h); STATUS answers from the DPU session's last poll.
#include "host-shim/attach_service.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "common/log.h"
#include "host-shim/add.h"
#include "host-shim/check.h"
#include "host-shim/checkpoint.h"
#include "host-shim/cni_errors.h"
#include "host-shim/vf_home.h"

#include <nlohmann/json.hpp>

namespace dpu::hostshim {

namespace {

constexpr const char* kLog = "host-shim";
// How long GC waits for the returns it retries: a return makes three
// attempts 0.4 and 1.6 s apart (vf_returner.cpp) before it flags the VF again.
constexpr auto kGcRetryWait = std::chrono::seconds(5);

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

cni::v1::CniResponse success() {
  cni::v1::CniResponse r;
  r.mutable_result();
  return r;
}

AttachmentBook::Writer fileWriter(const std::string& path) {
  return [path](const checkpoint::v1::HostShimCheckpoint& c) { return saveCheckpoint(path, c); };
}

}  // namespace

AttachService::AttachService(Config config, nl::Netlink& netlink, DpuApi& dpu, Options options)
    : config_(std::move(config)),
      netlink_(netlink),
      dpu_(dpu),
      options_(std::move(options)),
      store_(config_.state_dir),
      book_(options_.checkpoint_writer ? options_.checkpoint_writer
                                       : fileWriter(config_.state_dir + "/checkpoint.pb")),
      management_(config_.management, vfs_, netlink_, dpu_, store_, book_),
      returner_(netlink_, config_, store_, book_, options_.returns),
      session_(dpu_, netlink_, config_, book_, keys_, management_) {}

AttachService::~AttachService() { stop(); }

Result<void> AttachService::start() {
  if (auto r = store_.init(); !r) return prefixed("stateDir " + config_.state_dir, std::move(r).takeError());
  auto vfs = scanVfs(config_.sysfs_root, config_.pfs);
  if (!vfs) return std::move(vfs).takeError();
  vfs_ = std::move(*vfs);
  size_t pool = std::count_if(vfs_.begin(), vfs_.end(), [](const VfInfo& v) { return v.in_pool; });
  if (pool == 0)
    return Error{"pfs: none of the configured VFs exists under " + config_.sysfs_root + "; check vfs and sriov_numvfs"};
  auto cp = loadCheckpoint(config_.state_dir + "/checkpoint.pb");
  if (!cp) return std::move(cp).takeError();
  book_.load(*cp);
  reconcileAtStart();
  returner_.start();
  // Returns a crash or a stop cut short: the pod netns fds are gone; the VF
  // is found by name in the recorded netns or through sysfs in ours.
  for (auto& a : book_.returningAll()) {
    DPU_LOG(kInfo, kLog) << "finishing the return of VF " << a.vf_index() << " (" << a.pci_address()
                         << ") after the DEL of " << attachmentKey(a);
    returner_.queue({std::move(a), nullptr, 0});
  }
  DPU_LOG(kInfo, kLog) << "inventory: " << vfs_.size() << " VFs, " << pool << " in the pod pool; " << book_.size()
                       << " attachments and " << book_.returningAll().size() << " VFs returning from the checkpoint";
  if (options_.poll_thread) session_.start();
  return {};
}

void AttachService::stop() {
  session_.stop();
  returner_.stop();
}

const VfInfo* AttachService::findVf(uint32_t pf, uint32_t vf) const {
  for (const auto& v : vfs_)
    if (v.pf_index == pf && v.vf_index == vf) return &v;
  return nullptr;
}

cni::v1::CniResponse AttachService::handle(const cni::v1::CniRequest& req) {
  std::optional<VfReturner::RequestInFlight> counted;
  if (req.command() == cni::v1::ADD || req.command() == cni::v1::DEL) counted.emplace(returner_);
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

cni::v1::CniResponse AttachService::add(const cni::v1::CniRequest& req) {
  auto key_lock = keys_.lock(attachmentKey(req.network_name(), req.container_id(), req.ifname()));
  AddContext ctx{config_, vfs_, netlink_, dpu_, store_, book_, returner_, session_};
  return runAdd(ctx, req);
}

Result<void> AttachService::teardown(const Attachment& a) {
  if (auto r = bringVfHome(netlink_, config_, a); !r) return std::move(r).takeError();
  const bool detached = session_.detach(a);
  const std::string key = attachmentKey(a);
  // The VF is home (or gone): free its record even if an earlier DEL cut
  // short by a crash left it returning.
  if (auto r = store_.release(vfKeyOf(a), key, AllocationStore::Release::kReturnDone); !r) {
    DPU_LOG(kWarn, kLog) << "DEL " << key << ": " << r.error();
  }
  if (auto r = book_.erase(key); !r) return prefixed("cannot write the checkpoint", std::move(r).takeError());
  if (!detached) session_.requestReconcile();
  return {};
}

cni::v1::CniResponse AttachService::del(const cni::v1::CniRequest& req) {
  if (req.container_id().empty())
    return cniError(CniCode::kInvalidEnvironment, "CNI_CONTAINERID is empty", "the runtime must set CNI_CONTAINERID");
  if (auto p = ifnameProblem(req.ifname()); !p.empty())
    return cniError(CniCode::kInvalidEnvironment, "bad CNI_IFNAME", "CNI_IFNAME " + p);
  const std::string key = attachmentKey(req.network_name(), req.container_id(), req.ifname());
  auto key_lock = keys_.lock(key);
  std::optional<Attachment> a = book_.find(key);
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
      dr.set_network(req.network_name());
      (void)dpu_.detach(dr);
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

// DEL's fast path. After it the pod has no usable interface (CNI spec: DEL
// releases the container's resources): the VF is down, without addresses (so
// without routes), not under the pod's ifname, and the DPU forwards nothing
// for it. What is left, the move home, is the return worker's.
Result<bool> AttachService::startReturn(Attachment a, std::string& timings) {
  const std::string key = attachmentKey(a);
  const auto& snap = a.snapshot();
  PhaseTimer timer(timings);
  auto lap = [&](const char* step) { timer.lap(step); };
  if (a.netns().empty()) return false;
  auto pod = netlink_.open(a.netns());
  if (!pod) return false;  // the namespace is gone: the VF is home (a real VF) or gone (a veth)
  // Ours is the link under the pod's ifname with the pod's MAC, or one under
  // the VF's host name (a DEL retried after a crash between the two).
  std::optional<nl::LinkInfo> mine;
  auto by_name = (*pod)->findLink(a.ifname());
  if (!by_name) return std::move(by_name).takeError();
  if (*by_name && ((*by_name)->mac.str() == a.dpu().mac() || (*by_name)->mac.str() == snap.mac())) mine = **by_name;
  if (!mine) {
    auto by_vf = (*pod)->findLink(snap.netdev());
    if (!by_vf) return std::move(by_vf).takeError();
    if (*by_vf) mine = **by_vf;
  }
  if (!mine) return false;
  lap("find");
  if (mine->up) {
    nl::LinkChange down;
    down.up = false;
    if (auto r = (*pod)->changeLink(mine->ifindex, down); !r) return std::move(r).takeError();
  }
  if (auto r = (*pod)->flushAddresses(mine->ifindex); !r) return std::move(r).takeError();
  // Free the pod's ifname now, so a runtime's ADD right after this DEL (a
  // repair after a failed CHECK) finds it free. Not fatal: the link is down.
  if (mine->name != snap.netdev() && !snap.netdev().empty()) {
    nl::LinkChange rename;
    rename.name = snap.netdev();
    if (auto r = (*pod)->changeLink(mine->ifindex, rename); !r) {
      DPU_LOG(kWarn, kLog) << "DEL " << key << ": " << r.error() << "; it keeps its name until it is home";
    }
  }
  lap("down");
  const bool detached = session_.detach(a);
  lap("dpu");
  AllocationRecord rec{vfKeyOf(a), key, a.pci_address()};
  if (auto r = store_.markReturning(rec); !r) return std::move(r).takeError();
  lap("record");
  a.set_returning(true);
  a.clear_return_problem();
  if (auto r = book_.moveToReturning(key, a); !r) {
    // The record file says returning, so the VF is not handed out; a restart
    // without this checkpoint entry cannot restore the snapshot, though.
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
  if (!detached) session_.requestReconcile();  // now that the book no longer holds it
  lap("checkpoint");
  returner_.queue({std::move(a), std::move(*pod), mine->ifindex});
  return true;
}

cni::v1::CniResponse AttachService::check(const cni::v1::CniRequest& req) {
  const std::string key = attachmentKey(req.network_name(), req.container_id(), req.ifname());
  std::optional<Attachment> a = book_.find(key);
  if (a && !a->plumbed()) a.reset();
  if (!a)
    return cniError(CniCode::kUnknownContainer, "no such attachment",
                    "host-shim has no attachment " + key + "; run ADD first");
  std::string netns = req.netns().empty() ? a->netns() : req.netns();
  auto ns = netlink_.open(netns);
  if (!ns) return cniError(CniCode::kInvalidEnvironment, "cannot use CNI_NETNS", ns.error());
  LiveInterface live;
  auto link = (*ns)->findLink(req.ifname());
  if (!link) return cniError(CniCode::kIoFailure, "cannot read the interface", link.error());
  if (*link) {
    live.exists = true;
    live.mac = (*link)->mac;
    live.mtu = (*link)->mtu;
    auto addrs = (*ns)->listAddresses((*link)->ifindex);
    if (!addrs) return cniError(CniCode::kIoFailure, "cannot read addresses", addrs.error());
    live.addresses = std::move(*addrs);
    auto routes = (*ns)->listRoutes((*link)->ifindex);
    if (!routes) return cniError(CniCode::kIoFailure, "cannot read routes", routes.error());
    live.routes = std::move(*routes);
  }
  // Without a prevResult (first in the chain, CNI ≤ 0.4 tools) compare with our own answer.
  std::string prev = req.prev_result_json();
  if (prev.empty()) {
    auto r = cniResultOf(*a).result();
    nlohmann::json j;
    j["interfaces"] = {{{"name", req.ifname()}, {"mac", a->dpu().mac()}, {"mtu", a->dpu().mtu()}, {"sandbox", netns}}};
    j["ips"] = nlohmann::json::array();
    for (const auto& ip : r.ips()) j["ips"].push_back({{"address", ip.address()}, {"interface", 0}});
    prev = j.dump();
  }
  if (auto r = compareWithPrevResult(prev, req.ifname(), netns, live); !r)
    return cniError(CniCode::kCheckFailed, "live interface differs from the ADD result",
                    r.error() + "; DEL and ADD the pod again to repair it");
  if (auto r = checkDataplaneState(a->dpu().id(), dpu_.get(a->dpu().id())); !r)
    return cniError(r.code() == ErrorCode::kUnavailable ? CniCode::kTryAgainLater : CniCode::kCheckFailed,
                    "the DPU does not forward for this pod", r.error());
  return success();
}

cni::v1::CniResponse AttachService::status() {
  DpuHealthView h = health();
  if (!h.checked)
    return cniError(CniCode::kNotAvailable, "DPU agent not checked yet",
                    "host-shim has not heard from the DPU agent at " + dpu_.url() + " yet; retry in a second");
  if (!h.reachable)
    return cniError(CniCode::kNotAvailable, "DPU agent unreachable",
                    h.reason + "; check that dpu-agent runs on the DPU and answers at " + dpu_.url() +
                        " (dpu.url in the host-shim config); STATUS reports the plugin available again as soon "
                        "as the agent answers; until then new pods wait");
  if (!h.ready)
    return cniError(CniCode::kNotAvailable, "DPU agent not ready",
                    "the DPU agent at " + dpu_.url() + " reports not ready: " + h.reason);
  size_t pool = 0, held = 0;
  for (const auto& v : vfs_) pool += v.in_pool;
  for (const auto& r : store_.list()) {
    const VfInfo* v = findVf(r.vf.pf_index, r.vf.vf_index);
    held += v && v->in_pool;
  }
  size_t returning = 0, stuck = 0;
  for (const auto& a : book_.returningAll()) {
    ++returning;
    stuck += !a.return_problem().empty();
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
  // CNI 1.1: GC is per network; valid-attachments lists only this network's.
  const std::string& network = req.network_name();
  std::set<std::string> valid;
  for (const auto& v : req.valid_attachments()) valid.insert(attachmentKey(network, v.container_id(), v.ifname()));
  std::vector<Attachment> stale;
  for (const auto& a : book_.attachments())
    if (a.network_name() == network && !valid.count(attachmentKey(a))) stale.push_back(a);
  std::string failures;
  for (const auto& a : stale) {
    const std::string key = attachmentKey(a);
    auto key_lock = keys_.lock(key);
    if (!book_.find(key)) continue;
    if (auto r = teardown(a); !r) {
      failures += " " + key + ": " + r.error() + ";";
    } else {
      DPU_LOG(kInfo, kLog) << "GC " << key << ": released";
    }
  }
  // This network's records with no attachment (a crash between claim and
  // checkpoint), unless an ADD holds the key now.
  const std::string prefix = network + "/";
  for (const auto& r : store_.list())
    if (r.owner.rfind(prefix, 0) == 0 && !book_.find(r.owner) && !keys_.busy(r.owner))
      (void)store_.release(r.vf, r.owner);
  // Pod attachments the DPU holds that host-shim does not (a DEL that could
  // not reach it): the reconcile releases them, whatever their network, since
  // host-shim holds every pod attachment of this node.
  if (health().reachable) {
    if (auto r = session_.reconcile(); !r) {
      DPU_LOG(kWarn, kLog) << "GC: reconcile with the DPU agent: " << r.error();
    }
  }
  // Returns that could not finish (a restore failed, the VF was nowhere): try
  // again; they stay flagged (never handed out) until one succeeds. GC
  // answers once the retries have run (or after kGcRetryWait), so what it
  // could repair is repaired when the runtime sees it done.
  uint64_t last_retry = 0;
  for (auto& a : book_.returningAll()) {
    if (a.return_problem().empty()) continue;
    DPU_LOG(kWarn, kLog) << "GC: retrying the return of VF " << a.vf_index() << " (" << a.pci_address()
                         << "), stuck: " << a.return_problem();
    last_retry = returner_.queue({std::move(a), nullptr, 0});
  }
  if (last_retry != 0 && !returner_.waitFinished(last_retry, std::chrono::steady_clock::now() + kGcRetryWait)) {
    DPU_LOG(kWarn, kLog) << "GC: the retried returns are still running; they finish in the background";
  }
  if (!failures.empty())
    return cniError(CniCode::kPlumbingFailed, "GC could not release every attachment", failures + " retry GC");
  return success();
}

void AttachService::reconcileAtStart() {
  // A returning VF's record says so before anything else runs, whatever a
  // crash left in the record file: it must not be handed out until home.
  for (const auto& a : book_.returningAll()) {
    AllocationRecord rec{vfKeyOf(a), attachmentKey(a), a.pci_address()};
    rec.problem = a.return_problem();
    if (auto r = store_.markReturning(rec); !r) {
      DPU_LOG(kError, kLog) << "restart: " << r.error();
    }
  }
  std::set<std::string> known;
  std::vector<Attachment> unfinished;
  for (const auto& a : book_.attachments()) {
    known.insert(attachmentKey(a));
    if (!a.plumbed()) unfinished.push_back(a);
  }
  // An ADD that was cut short by a crash: undo it as its rollback would have.
  for (const auto& a : unfinished) {
    DPU_LOG(kWarn, kLog) << "undoing the unfinished ADD of " << attachmentKey(a);
    if (auto r = teardown(a); !r) {
      DPU_LOG(kError, kLog) << r.error();
    }
  }
  // Records no attachment explains are freed; attachments whose record is gone get it back.
  for (const auto& r : store_.list())
    if (r.owner != kManagementOwner && !known.count(r.owner)) (void)store_.release(r.vf, r.owner);
  for (const auto& a : book_.attachments()) {
    AllocationRecord rec{vfKeyOf(a), attachmentKey(a), a.pci_address()};
    if (auto c = store_.claim(rec); !c.ok()) {
      DPU_LOG(kError, kLog) << "restart: " << c.error();
    }
  }
}

}  // namespace dpu::hostshim
