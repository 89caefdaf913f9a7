// The no-offload backend (see none_backend.h).
#include "offload/none_backend.h"

#include <string>

namespace dpu::offload {

Capabilities NoOffloadBackend::capabilities() const {
  Capabilities caps;
  caps.backend = "none";
  return caps;
}

Result<void> NoOffloadBackend::validate(const flow::FlowSpec&) { return Error{kOffloadDisabledReason}; }

Result<OffloadHandle> NoOffloadBackend::install(const flow::FlowSpec&) { return Error{kOffloadDisabledReason}; }

Result<void> NoOffloadBackend::remove(OffloadHandle handle) {
  return Error{"offload handle " + std::to_string(handle.id) + " is unknown: offload is disabled"};
}

Result<HwCounters> NoOffloadBackend::query(OffloadHandle handle) {
  return Error{"offload handle " + std::to_string(handle.id) + " is unknown: offload is disabled"};
}

}  // namespace dpu::offload
