// The VFs this host may hand out, read from sysfs under a configurable root:
//   <root>/class/net/<pf>/device/sriov_numvfs     how many VFs the PF has enabled
//   <root>/class/net/<pf>/device/virtfn<N>        symlink to the VF's PCI device dir
//   <that dir>/net/<ifname>                       the VF's netdev (absent when bound
//                                                 to a userspace driver or moved away)
// The PCI address is the basename of the symlink target. The same code reads a
// real PF under /sys and the lab's fake tree (tests/fakes/fake-sysfs.bash).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "host-shim/config.h"

namespace dpu::hostshim {

struct VfInfo {
  uint32_t pf_index = 0;
  std::string pf_name;
  uint32_t vf_index = 0;
  std::string pci_address;  // "0000:3b:00.2"
  std::string netdev;       // empty when sysfs names none
  bool in_pool = false;     // may be handed to a pod
  bool reserved = false;    // held back (host management port)
};

// All VFs of the configured PFs (sorted by pf, vf). Fails naming the file when a
// PF is missing or its numbers do not read; a VF listed in the config but above
// sriov_numvfs is simply absent.
Result<std::vector<VfInfo>> scanVfs(const std::string& sysfs_root, const std::vector<PfConfig>& pfs);

// The VF's current netdev name from sysfs (it changes when a VF is renamed in
// the host netns on a real system; the fake tree keeps the original).
std::optional<std::string> vfNetdevName(const std::string& sysfs_root, const std::string& pci_address);

}  // namespace dpu::hostshim
