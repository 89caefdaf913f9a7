// The return worker (see vf_returner.h).
#include "host-shim/vf_returner.h"

#include "common/log.h"
#include "host-shim/vf_home.h"

namespace dpu::hostshim {

namespace {

constexpr const char* kLog = "host-shim";
// A return waits for a quiet moment at most this long.
constexpr auto kMaxDefer = std::chrono::milliseconds(2000);

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

VfReturner::RequestInFlight::RequestInFlight(VfReturner& r) : r_(r) { ++r_.requests_in_flight_; }

VfReturner::RequestInFlight::~RequestInFlight() {
  r_.last_request_end_ns_ = steadyNs();
  --r_.requests_in_flight_;
}

VfReturner::VfReturner(nl::Netlink& netlink, const Config& config, AllocationStore& store, AttachmentBook& book,
                       Options options)
    : netlink_(netlink), config_(config), store_(store), book_(book), options_(options) {}

VfReturner::~VfReturner() { stop(); }

void VfReturner::start() {
  if (worker_.joinable()) return;
  worker_ = std::thread([this] { loop(); });
}

void VfReturner::stop() {
  {
    std::lock_guard lk(mu_);  // the worker is waiting or sees stopping_: no lost wake-up
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

uint64_t VfReturner::queue(Job job) {
  uint64_t ticket = 0;
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(job));
    ticket = ++queued_;
  }
  cv_.notify_all();
  return ticket;
}

void VfReturner::loop() {
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !queue_.empty() || stopping_; });
      // Stopping drains: every VF whose DEL was answered goes home first.
      if (queue_.empty()) return;
      // Yield to ADDs and DELs in flight (see vf_returner.h).
      for (;;) {
        auto now = std::chrono::steady_clock::now();
        bool quiet = requests_in_flight_ == 0 &&
                     steadyNs() - last_request_end_ns_ >=
                         std::chrono::duration_cast<std::chrono::nanoseconds>(options_.quiet).count();
        if (stopping_ || vf_waiters_ > 0 || quiet || now - queue_.front().queued_at >= kMaxDefer) break;
        cv_.wait_for(lk, std::chrono::milliseconds(5));
      }
      job.emplace(std::move(queue_.front()));
      queue_.pop_front();
    }
    finish(*job);
    {
      std::lock_guard lk(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
}

void VfReturner::finish(Job& job) {
  const Attachment& a = job.a;
  const std::string key = attachmentKey(a);
  if (options_.delay.count() > 0) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, options_.delay, [&] { return stopping_.load(); });
  }
  auto t0 = std::chrono::steady_clock::now();
  // A failed restore is retried a few times (a busy rtnl, a transient name
  // clash); then the VF stays flagged for GC and the next start.
  Result<bool> home = Error{"not tried"};
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << (2 * attempt)));
    home = bringVfHome(netlink_, config_, a, job.pod_ns.get(), job.pod_ifindex);
    if (home || stopping_) break;
  }
  job.pod_ns.reset();  // the namespace may go now
  if (!home) {
    flag(a, "cannot restore it: " + home.error());
    return;
  }
  if (!*home) {
    // A veth "VF" destroyed with its namespace before we held it (a crash
    // in between); a real VF is never nowhere. Keep it out of the pool.
    flag(a, "the VF is nowhere: not in " + (a.netns().empty() ? std::string("the pod netns") : a.netns()) +
                " nor in host-shim's netns under " + a.snapshot().netdev() + " or its sysfs name");
    return;
  }
  if (auto r = store_.release(vfKeyOf(a), key, AllocationStore::Release::kReturnDone); !r) {
    DPU_LOG(kWarn, kLog) << "return of " << key << ": " << r.error();
  }
  if (auto r = book_.returned(vfKeyOf(a)); !r) {
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
  auto ms = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  DPU_LOG(kDebug, kLog) << "RETURN " << key << " timings: home=" << std::to_string(ms / 1000.0).substr(0, 5) << "ms";
  DPU_LOG(kInfo, kLog) << "DEL " << key << ": VF " << a.vf_index() << " (" << a.pci_address() << ") home as "
                       << a.snapshot().netdev();
}

void VfReturner::flag(const Attachment& a, const std::string& problem) {
  const std::string key = attachmentKey(a);
  DPU_LOG(kError, kLog) << "return of VF " << a.vf_index() << " (" << a.pci_address() << ") after the DEL of " << key
                        << " is stuck: " << problem << "; the VF stays out of the pool; GC and the next start retry";
  AllocationRecord rec{vfKeyOf(a), key, a.pci_address()};
  rec.problem = problem;
  if (auto r = store_.markReturning(rec); !r) {
    DPU_LOG(kError, kLog) << r.error();
  }
  if (auto r = book_.setReturnProblem(vfKeyOf(a), problem); !r) {
    DPU_LOG(kError, kLog) << "cannot write the checkpoint: " << r.error();
  }
}

bool VfReturner::waitAnyReturn(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lk(mu_);
  bool on_track = false;
  for (const auto& a : book_.returningAll()) on_track = on_track || a.return_problem().empty();
  if (!on_track) return false;
  const uint64_t before = done_;
  ++vf_waiters_;  // the worker stops yielding
  bool done = cv_.wait_until(lk, deadline, [&] { return done_ != before || stopping_; });
  --vf_waiters_;
  return done && !stopping_;
}

bool VfReturner::waitFinished(uint64_t ticket, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lk(mu_);
  ++vf_waiters_;  // the worker stops yielding
  const bool done = cv_.wait_until(lk, deadline, [&] { return done_ >= ticket || stopping_; });
  --vf_waiters_;
  return done && done_ >= ticket;
}

bool VfReturner::waitReturned(const VfKey& vf, std::chrono::milliseconds bound) {
  auto returning = [&] {
    auto a = book_.returning(vf);
    return a && a->return_problem().empty();
  };
  std::unique_lock lk(mu_);
  ++vf_waiters_;  // the worker stops yielding
  cv_.wait_for(lk, bound, [&] { return !returning() || stopping_; });
  --vf_waiters_;
  return !returning();
}

}  // namespace dpu::hostshim
