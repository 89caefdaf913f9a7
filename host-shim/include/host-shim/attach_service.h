// The attach service: what host-shim does for each CNI verb, and what it does
// on its own (watch the DPU's health and boot id, replay after a DPU reboot,
// keep the host management port plumbed, reconcile after a restart).
//
// ADD is a transaction: each step registers its undo and any failure runs them
// all (VF back in the host netns with its original name/MAC/MTU and PF-side
// settings, DPU detach, allocation freed). DEL is idempotent. Requests for
// different attachments run concurrently; requests for the same
// (container id, ifname) run one after the other.
//
// DEL answers once the VF is out of service, not once it is home: the kernel's
// move of a netdev between namespaces costs 15-25 ms under rtnl, and the pod
// does not need to wait for it. DEL sets the VF down in the pod netns, flushes
// its addresses, renames it to its host name (so the pod's ifname is free for a
// re-ADD), detaches it on the DPU and marks its record `returning` (record file
// and checkpoint); a background worker, holding the pod netns open so that
// neither the runtime's unmount nor `ip netns del` can destroy it (a veth VF
// would die with it), moves the VF home, restores its snapshot and frees the
// record. A returning VF is never handed out; a restart finishes the returns
// left in the checkpoint; stop() drains the worker. The worker yields to ADDs
// and DELs in flight (its moves hold rtnl, which their netlink requests need),
// for at most 2 s, and never while an ADD waits for a VF to come home.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "dpu/checkpoint/v1/checkpoint.pb.h"
#include "dpu/cni/v1/cni.pb.h"
#include "host-shim/allocation.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/netlink.h"
#include "host-shim/vf_inventory.h"

namespace dpu::hostshim {

struct DpuHealthView {
  bool reachable = false;
  bool ready = false;
  std::string boot_id;
  std::string reason;    // why not reachable/ready
  bool checked = false;  // at least one poll finished
};

class AttachService {
 public:
  explicit AttachService(Config config);
  ~AttachService();
  AttachService(const AttachService&) = delete;
  AttachService& operator=(const AttachService&) = delete;

  // Reads sysfs, loads the checkpoint, reconciles, starts the health poller.
  Result<void> start();
  void stop();

  cni::v1::CniResponse handle(const cni::v1::CniRequest& req);

  DpuHealthView health() const;
  size_t attachmentCount() const;

 private:
  using Attachment = checkpoint::v1::HostAttachment;

  cni::v1::CniResponse add(const cni::v1::CniRequest& req);
  cni::v1::CniResponse del(const cni::v1::CniRequest& req);
  cni::v1::CniResponse check(const cni::v1::CniRequest& req);
  cni::v1::CniResponse status();
  cni::v1::CniResponse gc(const cni::v1::CniRequest& req);

  // Undo of a whole attachment: VF restored in the host netns, DPU detach
  // (best effort), allocation freed, checkpoint updated. Fails only when the VF
  // exists but cannot be restored (then the record stays, for a retried DEL).
  Result<void> teardown(const Attachment& a);
  // Moves the VF home (out of `held` by its ifindex when given, else out of
  // a.netns() by name) and restores its snapshot. false: the VF is nowhere.
  Result<bool> restoreVf(const Attachment& a, const nl::Netns* held = nullptr, int pod_ifindex = 0);

  // A VF on its way home after DEL.
  struct ReturnJob {
    Attachment a;
    std::optional<nl::Netns> pod_ns;  // held open until the move; none after a restart
    int pod_ifindex = 0;              // the VF in pod_ns
    std::chrono::steady_clock::time_point queued_at = std::chrono::steady_clock::now();
  };
  // DEL's fast path: takes the VF out of service in the pod netns and queues
  // its return. false: the VF is not in the pod netns (DEL restores it inline).
  Result<bool> startReturn(Attachment a, std::string& timings);
  void queueReturn(ReturnJob job);
  void returnLoop();
  void finishReturn(ReturnJob& job);
  void flagReturn(const Attachment& a, const std::string& problem);
  // Waits until the VF is no longer returning; false after `bound`.
  bool waitReturned(const VfKey& vf, std::chrono::milliseconds bound);
  // Waits for the next return to finish; false when none is on its way or at the deadline.
  bool waitAnyReturn(std::chrono::steady_clock::time_point deadline);
  static std::string vfKeyOf(const Attachment& a);
  void detachOnDpu(const Attachment& a);
  // Addresses, routes and announcements for the VF named `ifname` in ns; also
  // MAC, MTU and up unless `link_set` (ADD sends those with the move).
  Result<void> plumbInNetns(const nl::Netns& ns, const std::string& ifname, const attach::v1::Attachment& dpu,
                            bool replace, bool link_set = false);

  const VfInfo* findVf(uint32_t pf, uint32_t vf) const;
  const VfInfo* findVfByPci(const std::string& pci) const;

  void putAttachment(const Attachment& a);
  void eraseAttachment(const std::string& key);
  Result<void> saveLocked();

  void pollLoop();
  void replayAll(const std::string& boot_id);
  Result<void> setupManagementPort();
  bool managementPortIntact();
  void reconcileAtStart();

  // Serializes requests for one (container id, ifname).
  class KeyLock;

  Config config_;
  std::string checkpoint_path_;
  AllocationStore store_;
  std::unique_ptr<DpuClient> dpu_;
  std::vector<VfInfo> vfs_;
  nl::Netns host_ns_;

  mutable std::mutex mu_;
  std::map<std::string, Attachment> attachments_;  // key: "<container id>/<ifname>"
  std::map<std::string, Attachment> returning_;    // key: VfKey::str(); DEL answered, VF not home yet
  attach::v1::Attachment management_;
  std::string dpu_boot_id_;  // the DPU state our attachments are on

  std::mutex keys_mu_;
  std::condition_variable keys_cv_;
  std::set<std::string> busy_keys_;

  mutable std::mutex health_mu_;
  DpuHealthView health_;
  bool management_ready_ = false;

  // The return worker. Lock order: return_mu_ before mu_.
  std::mutex return_mu_;
  std::condition_variable return_cv_;  // a job was queued, a return finished, or stopping
  std::deque<ReturnJob> return_queue_;
  uint64_t returns_done_ = 0;  // finished jobs; waiters compare it
  // The worker yields to ADD/DEL requests (see returnLoop): how many are in
  // flight, when the last one ended, and how many ADDs wait for a VF to return.
  std::atomic<int> requests_in_flight_{0};
  std::atomic<int64_t> last_request_end_ns_{0};
  std::atomic<int> vf_waiters_{0};
  std::thread returner_;
  uint32_t test_return_delay_ms_ = 0;  // tests only: HOSTSHIM_TEST_RETURN_DELAY_MS
  std::chrono::milliseconds return_quiet_{30};  // HOSTSHIM_TEST_RETURN_QUIET_MS (0: never yield)

  std::atomic<bool> stopping_{false};
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  std::thread poller_;
};

}  // namespace dpu::hostshim
