// The attach service: what host-shim does for each CNI verb, and what it does
// on its own (watch the DPU's health and boot id, replay after a DPU reboot,
// keep the host management port plumbed, reconcile after a restart).
//
// ADD is a transaction: each step registers its undo and any failure runs them
// all (VF back in the host netns with its original name/MAC/MTU and PF-side
// settings, DPU detach, allocation freed). DEL is idempotent. Requests for
// different attachments run concurrently; requests for the same
// (container id, ifname) run one after the other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
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
  Result<void> restoreVf(const Attachment& a);
  void detachOnDpu(const Attachment& a);
  Result<void> plumbInNetns(const nl::Netns& ns, const std::string& ifname, const attach::v1::Attachment& dpu,
                            bool replace);

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
  attach::v1::Attachment management_;
  std::string dpu_boot_id_;  // the DPU state our attachments are on

  std::mutex keys_mu_;
  std::condition_variable keys_cv_;
  std::set<std::string> busy_keys_;

  mutable std::mutex health_mu_;
  DpuHealthView health_;
  bool management_ready_ = false;

  std::atomic<bool> stopping_{false};
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  std::thread poller_;
};

}  // namespace dpu::hostshim
