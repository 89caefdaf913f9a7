// The VF returner: brings the VFs of answered DELs home in the background.
//
// DEL answers once the VF is out of service, not once it is home: the
// kernel's move of a netdev between namespaces costs 15-25 ms under rtnl, and
// the pod does not need to wait for it. The worker here, holding the pod
// netns open so that neither the runtime's unmount nor `ip netns del` can
// destroy it (a veth VF would die with it), moves the VF home, restores its
// snapshot (vf_home.h) and frees its record. A returning VF is never handed
// out; a restart finishes the returns left in the checkpoint; stop() drains.
//
// The worker yields to ADDs and DELs in flight (its moves hold rtnl, which
// their netlink requests need): it starts a move only once no request has
// been in flight for the quiet period (30 ms), unless the oldest return has
// waited 2 s or an ADD waits for a VF to come home. A failed restore is
// retried a few times, then the VF stays flagged (the record and the
// checkpoint name the problem) for GC and the next start.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "host-shim/allocation.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/netlink.h"

namespace dpu::hostshim {

class VfReturner {
 public:
  struct Options {
    std::chrono::milliseconds delay{0};   // tests: before each return, to observe the in-between state
    std::chrono::milliseconds quiet{30};  // no request in flight this long before a move (0: never yield)
  };

  // A VF on its way home after DEL.
  struct Job {
    Attachment a;
    std::unique_ptr<nl::Namespace> pod_ns;  // held open until the move; none after a restart
    int pod_ifindex = 0;                    // the VF in pod_ns
    std::chrono::steady_clock::time_point queued_at = std::chrono::steady_clock::now();
  };

  VfReturner(nl::Netlink& netlink, const Config& config, AllocationStore& store, AttachmentBook& book,
             Options options);
  ~VfReturner();
  VfReturner(const VfReturner&) = delete;
  VfReturner& operator=(const VfReturner&) = delete;

  void start();
  // Drains the returns queued so far: every VF DEL answered for goes home.
  void stop();

  // Queues a return; the ticket waitFinished() takes.
  uint64_t queue(Job job);
  // Marks the return of `a` stuck with `problem` (record and checkpoint).
  void flag(const Attachment& a, const std::string& problem);

  // Waits until the VF is no longer returning; false after `bound`.
  bool waitReturned(const VfKey& vf, std::chrono::milliseconds bound);
  // Waits for the next return to finish; false when none is on its way or at the deadline.
  bool waitAnyReturn(std::chrono::steady_clock::time_point deadline);
  // Waits until the return queued with `ticket`, and every one queued before
  // it, has finished (home, or flagged again); false at the deadline.
  bool waitFinished(uint64_t ticket, std::chrono::steady_clock::time_point deadline);

  // Counts an ADD or DEL in flight for the worker's yielding.
  class RequestInFlight {
   public:
    explicit RequestInFlight(VfReturner& r);
    ~RequestInFlight();
    RequestInFlight(const RequestInFlight&) = delete;
    RequestInFlight& operator=(const RequestInFlight&) = delete;

   private:
    VfReturner& r_;
  };

 private:
  void loop();
  void finish(Job& job);

  nl::Netlink& netlink_;
  const Config& config_;
  AllocationStore& store_;
  AttachmentBook& book_;
  const Options options_;

  std::mutex mu_;
  std::condition_variable cv_;  // a job was queued, a return finished, or stopping
  std::deque<Job> queue_;
  uint64_t queued_ = 0;  // jobs ever queued: the last one's ticket
  uint64_t done_ = 0;    // finished jobs, in the order queued (one worker, FIFO); waiters compare it
  std::atomic<int> requests_in_flight_{0};
  std::atomic<int64_t> last_request_end_ns_{0};
  std::atomic<int> vf_waiters_{0};
  std::atomic<bool> stopping_{false};
  std::thread worker_;
};

}  // namespace dpu::hostshim
