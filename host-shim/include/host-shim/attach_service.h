// The attach service: what host-shim does for each CNI verb, tying together
// the pieces that each do one job:
//   add.h              ADD as a list of steps, each registering its undo;
//   vf_returner.h      the VFs of answered DELs brought home in the background;
//   dpu_session.h      the DPU's health and boot id, the replay after a DPU
//                      reboot, the reconcile sweep;
//   management_port.h  the host's own port into the overlay;
//   attachment_book.h  what host-shim holds, and its checkpoint;
// through two interfaces, nl::Netlink (netlink.h) and DpuApi (dpu_client.h),
// which in-process tests replace with the fakes in tests/fakes/.
//
// DEL is idempotent. DEL answers once the VF is out of service in the pod
// netns (down, no addresses, renamed to its host name so the pod's ifname is
// free for a re-ADD, detached on the DPU, its record `returning`); the return
// worker moves it home. GC releases the attachments of the request's network
// that are not in cni.dev/valid-attachments, never another network's.
// Requests for different attachments run concurrently; requests for the same
// (network, container id, ifname) run one after the other.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "dpu/cni/v1/cni.pb.h"
#include "host-shim/allocation.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/dpu_session.h"
#include "host-shim/key_locks.h"
#include "host-shim/management_port.h"
#include "host-shim/netlink.h"
#include "host-shim/vf_inventory.h"
#include "host-shim/vf_returner.h"

namespace dpu::hostshim {

class AttachService {
 public:
  struct Options {
    // Start the DPU session's poll thread (tests drive session().pollOnce()).
    bool poll_thread = true;
    VfReturner::Options returns;
    // Writes the checkpoint; empty: the file <stateDir>/checkpoint.pb.
    AttachmentBook::Writer checkpoint_writer;
  };

  AttachService(Config config, nl::Netlink& netlink, DpuApi& dpu, Options options);
  ~AttachService();
  AttachService(const AttachService&) = delete;
  AttachService& operator=(const AttachService&) = delete;

  // Reads sysfs, loads the checkpoint, finishes what a crash cut short (an
  // ADD is undone, a return completed), starts the return worker and the
  // DPU session.
  Result<void> start();
  void stop();

  cni::v1::CniResponse handle(const cni::v1::CniRequest& req);

  DpuHealthView health() const { return session_.health(); }
  size_t attachmentCount() const { return book_.size(); }
  DpuSession& session() { return session_; }
  const AttachmentBook& book() const { return book_; }

 private:
  cni::v1::CniResponse add(const cni::v1::CniRequest& req);
  cni::v1::CniResponse del(const cni::v1::CniRequest& req);
  cni::v1::CniResponse check(const cni::v1::CniRequest& req);
  cni::v1::CniResponse status();
  cni::v1::CniResponse gc(const cni::v1::CniRequest& req);

  // Undo of a whole attachment: VF restored in the host netns, DPU detach
  // (best effort), allocation freed, checkpoint updated. Fails only when the VF
  // exists but cannot be restored (then the record stays, for a retried DEL).
  Result<void> teardown(const Attachment& a);
  // DEL's fast path: takes the VF out of service in the pod netns and queues
  // its return. false: the VF is not in the pod netns (DEL restores it inline).
  Result<bool> startReturn(Attachment a, std::string& timings);
  void reconcileAtStart();
  const VfInfo* findVf(uint32_t pf, uint32_t vf) const;

  Config config_;
  nl::Netlink& netlink_;
  DpuApi& dpu_;
  Options options_;
  AllocationStore store_;
  AttachmentBook book_;
  std::vector<VfInfo> vfs_;
  KeyLocks keys_;
  ManagementPort management_;
  VfReturner returner_;
  DpuSession session_;
};

}  // namespace dpu::hostshim
