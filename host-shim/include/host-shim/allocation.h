// Per-VF allocation records that survive a host-shim restart and crash: one
// small file per held VF under <stateDir>/vfs/, written atomically, with an
// flock'ed lock file per VF serializing every claim and release — between the
// threads of one host-shim and between processes (a restarted host-shim while
// the old one still drains). A VF is allocated exactly when its record exists.
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
};

// Why a claim failed, so the caller can pick the CNI code.
enum class ClaimFailure { kNone, kHeld, kIo };

struct ClaimResult {
  ClaimFailure failure = ClaimFailure::kNone;
  std::string message;  // what failed; for kHeld names the holder
  std::string holder;   // kHeld: the owner holding the VF
  bool ok() const { return failure == ClaimFailure::kNone; }
};

class AllocationStore {
 public:
  explicit AllocationStore(std::string state_dir);

  Result<void> init();  // creates the directory

  // Takes the VF for `owner`. Claiming a VF the same owner already holds
  // succeeds (a retried ADD); one held by another owner fails with kHeld.
  ClaimResult claim(const AllocationRecord& record);
  // Frees the VF if `owner` holds it (any owner when owner is empty). Freeing a
  // free VF succeeds.
  Result<void> release(const VfKey& vf, const std::string& owner = "");
  std::optional<AllocationRecord> get(const VfKey& vf) const;
  std::vector<AllocationRecord> list() const;

 private:
  std::string dir_;
};

}  // namespace dpu::hostshim
