// Per-VF allocation records that survive a host-shim restart and crash: one
// small file per held VF under <stateDir>/vfs/, written atomically, with an
// flock'ed lock file per VF serializing every claim and release — between the
// threads of one host-shim and between processes (a restarted host-shim while
// the old one still drains). A VF is allocated exactly when its record exists.
//
// A record has two states: held (the VF serves `owner`) and returning (its DEL
// was answered; the VF is out of service but not yet back in the host netns
// with its original settings). A returning VF is never handed out: claim()
// refuses it with kReturning and only release(..., kReturnDone) frees it, so
// no cleanup path that frees records by owner can free it early.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace dpu::hostshim {

struct VfKey {
  uint32_t pf_index = 0;
  uint32_t vf_index = 0;
  auto operator<=>(const VfKey&) const = default;
  std::string str() const { return "pf" + std::to_string(pf_index) + "vf" + std::to_string(vf_index); }
};

struct AllocationRecord {
  VfKey vf;
  std::string owner;  // "<container id>/<ifname>", or "management"
  std::string pci_address;
  bool returning = false;
  // Returning but not finished: why (the VF is nowhere, a restore failed).
  // Shown to operators (the record file, STATUS, GC); empty while on track.
  std::string problem{};
};

class AllocationStore {
 public:
  explicit AllocationStore(std::string state_dir);

  Result<void> init();  // creates the directory

  // Takes the VF for `owner`. Claiming a VF the same owner already holds
  // succeeds (a retried ADD). A failure's code says why, so the caller can
  // pick the CNI code: kConflict — held by another owner (Error::holder);
  // kUnavailable — still returning to the host after a DEL (Error::holder,
  // the last owner); kFailed — the record could not be locked or written.
  Result<void> claim(const AllocationRecord& record);
  // Who may free a record: a held one is freed by anyone; a returning one only
  // by the return that brought the VF home (kReturnDone).
  enum class Release { kHeldOnly, kReturnDone };
  // Frees the VF if `owner` holds it (any owner when owner is empty). Freeing a
  // free VF succeeds; a returning record stays unless `how` is kReturnDone.
  Result<void> release(const VfKey& vf, const std::string& owner = "", Release how = Release::kHeldOnly);
  // Puts the record of `record.vf` into the returning state (with
  // record.problem), atomically; writes it when the file is gone (an operator
  // removed it) so the VF stays unavailable until it is home. Refuses a VF
  // held by another owner.
  Result<void> markReturning(const AllocationRecord& record);
  std::optional<AllocationRecord> get(const VfKey& vf) const;
  std::vector<AllocationRecord> list() const;

 private:
  std::string dir_;
};

}  // namespace dpu::hostshim
