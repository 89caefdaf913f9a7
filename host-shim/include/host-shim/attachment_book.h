// host-shim's book of what it holds: the pod attachments by key, the VFs on
// their way home after a DEL, the management port's DPU answer, the DPU state
// (boot id) the attachments were made against, and the numbering of ADDs the
// agent's reconcile relies on. In memory, and written whole as the checkpoint
// (checkpoint.proto) on every change, through a writer the owner chooses (the
// file; tests wrap it to make a write fail). Thread-safe.
//
// A key is "<network>/<container id>/<ifname>": CNI names an attachment by
// all three, so a GC or DEL of one network never touches another's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"
#include "dpu/checkpoint/v1/checkpoint.pb.h"
#include "host-shim/allocation.h"

namespace dpu::hostshim {

using Attachment = checkpoint::v1::HostAttachment;

std::string attachmentKey(const std::string& network, const std::string& container_id, const std::string& ifname);
std::string attachmentKey(const Attachment& a);
VfKey vfKeyOf(const Attachment& a);

class AttachmentBook {
 public:
  using Writer = std::function<Result<void>(const checkpoint::v1::HostShimCheckpoint&)>;
  explicit AttachmentBook(Writer writer);

  // Takes what a checkpoint holds (at start). A checkpoint without a host
  // instance (the first start) gets a new random one.
  void load(const checkpoint::v1::HostShimCheckpoint& cp);

  std::optional<Attachment> find(const std::string& key) const;
  std::vector<Attachment> attachments() const;
  size_t size() const;

  // ADD: records `a` (not plumbed yet) and gives it the next number, both in
  // one checkpoint write, before the DPU is asked. Returns the number for the
  // attach request (AttachRequest.host_seq).
  Result<uint64_t> record(const Attachment& a);
  // Replaces the attachment under a's key (plumbed, a replay's new answer).
  Result<void> put(const Attachment& a);
  // The DPU state the attachments are on, set with the last write of `a` (the
  // first ADD on a DPU state).
  Result<void> putWithBootId(const Attachment& a, const std::string& boot_id_if_unset);
  Result<void> erase(const std::string& key);
  // A replay and a fresh numbered attach request for one attachment: the
  // number comes from the same counter as ADDs'.
  Result<uint64_t> nextSeq();

  // DEL answered: the attachment leaves the book of held ones and its VF is
  // returning until returned() (or stuck, with a problem).
  Result<void> moveToReturning(const std::string& key, const Attachment& returning);
  std::optional<Attachment> returning(const VfKey& vf) const;
  std::vector<Attachment> returningAll() const;
  Result<void> setReturnProblem(const VfKey& vf, const std::string& problem);
  Result<void> returned(const VfKey& vf);

  attach::v1::Attachment management() const;
  Result<void> setManagement(const attach::v1::Attachment& m);

  std::string bootId() const;
  Result<void> setBootId(const std::string& boot_id);

  const std::string& hostInstance() const { return host_instance_; }
  // What host-shim holds, as the agent's reconcile wants it: every pod
  // attachment (ADDs in flight included) and the last number handed out,
  // read together so that any ADD numbered later is not in the list.
  attach::v1::ReconcileRequest heldList() const;

 private:
  Result<void> saveLocked();

  Writer writer_;
  std::string host_instance_;
  mutable std::mutex mu_;
  std::map<std::string, Attachment> attachments_;  // by attachmentKey
  std::map<VfKey, Attachment> returning_;          // DEL answered, VF not home yet
  attach::v1::Attachment management_;
  std::string boot_id_;
  uint64_t seq_ = 0;
};

}  // namespace dpu::hostshim
