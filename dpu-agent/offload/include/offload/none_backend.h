// The no-offload backend: every flow runs in software. It is what a dataplane
// on af_xdp/af_packet ports (no eswitch) uses, and what an operator picks to
// rule the NIC out while debugging. It refuses every flow with the same reason,
// so `dpuctl dump-flows` says why nothing is in hardware.
#pragma once

#include "offload/offload.h"

namespace dpu::offload {

inline constexpr const char* kOffloadDisabledReason = "offload disabled";

class NoOffloadBackend final : public OffloadBackend {
 public:
  Capabilities capabilities() const override;
  Result<void> validate(const flow::FlowSpec& flow) override;
  Result<OffloadHandle> install(const flow::FlowSpec& flow) override;
  Result<void> remove(OffloadHandle handle) override;
  Result<HwCounters> query(OffloadHandle handle) override;
};

}  // namespace dpu::offload
