// host-shim's session with its DPU's agent: a poll of /v1/health every
// dpu.healthIntervalMs (STATUS answers from what it saw, so it never waits on
// a DPU that hangs), the DPU state (boot id) the attachments are on, the
// replay of every attachment when that changes (a DPU reboot or a wiped
// agent: pods keep their MAC and addresses where the agent can give them back,
// else they are re-plumbed), the reconcile sweep, and the upkeep of the
// management port.
//
// The sweep sends the book's list of held pod attachments (attach.proto,
// ReconcileRequest) and the agent releases what host-shim does not hold: it
// runs each time the agent becomes reachable (the first contact, after an
// outage, after a reboot's replay), every dpu.reconcileIntervalMs, and soon
// after an ADD or DEL could not reach the agent to detach. That is how an
// attach the agent processed after host-shim gave up on it (the ADD timed
// out while the agent hung) is released instead of keeping an address and a
// port for a pod that does not exist.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/key_locks.h"
#include "host-shim/management_port.h"
#include "host-shim/netlink.h"

namespace dpu::hostshim {

struct DpuHealthView {
  bool reachable = false;
  bool ready = false;
  std::string boot_id;
  std::string reason;    // why not reachable/ready
  bool checked = false;  // at least one poll finished
};

class DpuSession {
 public:
  DpuSession(DpuApi& dpu, nl::Netlink& netlink, const Config& config, AttachmentBook& book, KeyLocks& keys,
             ManagementPort& management);
  ~DpuSession();
  DpuSession(const DpuSession&) = delete;
  DpuSession& operator=(const DpuSession&) = delete;

  // The poll thread: pollOnce() every health interval until stop().
  void start();
  void stop();
  // One round: health; on a new boot id the replay; the sweep when due; the
  // management port when it needs plumbing. Tests drive it directly.
  void pollOnce();

  DpuHealthView health() const;

  // Best effort: detaches one attachment on the DPU (by its id when the DPU
  // answered one, else by network, sandbox and ifname). false when the DPU
  // could not be reached: the caller asks for a sweep once the attachment
  // has left the book (a sweep before that would keep it).
  bool detach(const Attachment& a);
  // Before retrying an attach refused with 409: detaches what the DPU holds
  // on a's VF and under a's key, both ours while we hold the VF and the key.
  void detachStale(const Attachment& a);
  // The sweep, now: host-shim's list to the agent. Logs what was released.
  Result<attach::v1::ReconcileResponse> reconcile();
  // Asks for a sweep at the next poll that reaches the agent: call it after
  // the book no longer holds what the sweep must release.
  void requestReconcile() { reconcile_due_ = true; }

 private:
  void replayAll(const std::string& boot_id);
  void loop();

  DpuApi& dpu_;
  nl::Netlink& netlink_;
  const Config& config_;
  AttachmentBook& book_;
  KeyLocks& keys_;
  ManagementPort& management_;

  mutable std::mutex health_mu_;
  DpuHealthView health_;
  bool management_ready_ = false;  // poll thread only
  std::chrono::steady_clock::time_point next_sweep_{};
  std::atomic<bool> reconcile_due_{false};

  std::atomic<bool> stopping_{false};
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  std::thread poller_;
};

}  // namespace dpu::hostshim
