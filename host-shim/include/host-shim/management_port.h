// The host management port: a VF left in host-shim's netns as the host's
// port into the overlay (kubelet probes reach pods through it). It is
// attached on the DPU as MANAGEMENT, renamed (managementPort.ifname), given
// the DPU's MAC, MTU and address, and routes to the cluster and service
// CIDRs via the DPU's gateway. The DPU session plumbs it at the first contact
// and after a DPU reboot, and again whenever it lost its link or address.
#pragma once

#include <vector>

#include "common/result.h"
#include "host-shim/allocation.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/netlink.h"
#include "host-shim/vf_inventory.h"

namespace dpu::hostshim {

inline constexpr const char* kManagementOwner = "management";

class ManagementPort {
 public:
  ManagementPort(const ManagementPortConfig& config, const std::vector<VfInfo>& vfs, nl::Netlink& netlink,
                 DpuApi& dpu, AllocationStore& store, AttachmentBook& book);

  bool enabled() const { return config_.enabled; }
  // Attaches it on the DPU (idempotent) and plumbs it in host-shim's netns.
  Result<void> setup();
  // Up with every address the DPU gave it (true when it cannot tell: no churn).
  bool intact();

 private:
  const VfInfo* vf() const;

  const ManagementPortConfig& config_;
  const std::vector<VfInfo>& vfs_;
  nl::Netlink& netlink_;
  DpuApi& dpu_;
  AllocationStore& store_;
  AttachmentBook& book_;
};

}  // namespace dpu::hostshim
