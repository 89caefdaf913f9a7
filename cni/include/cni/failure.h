// The CNI spec's error: a well-known code, a short message and a details text
// that tells the operator what to fix. Every refusal in dpu-cni is one of
// these, printed as the spec's error JSON on stdout with exit code 1.
#pragma once

#include <cstdint>
#include <string>

namespace dpu::cni {

// The spec's well-known codes (CNI 1.1.0, "Error"), and what we use them for.
enum class ErrorCode : uint32_t {
  kIncompatibleVersion = 1,     // cniVersion we do not speak
  kUnsupportedField = 2,        // a field we refuse on purpose (e.g. "ipam": addresses come from the DPU)
  kUnknownContainer = 3,
  kInvalidEnvironment = 4,      // CNI_* variables missing or malformed, CNI_NETNS not there
  kIoFailure = 5,               // stdin unreadable
  kDecodeFailure = 6,           // stdin is not JSON, or cniVersion is not a string
  kInvalidConfig = 7,           // a field of ours with a wrong type or value
  kTryAgainLater = 11,          // host-shim unreachable or busy: the runtime retries
  kPluginNotAvailable = 50,     // STATUS: cannot serve ADD now
  kPluginNotAvailableLimitedConnectivity = 51,  // STATUS: and running pods may suffer
  kInternal = 999,              // a bug of ours; never expected
};

struct Failure {
  uint32_t code = 0;
  std::string msg;
  std::string details;
};

inline Failure fail(ErrorCode code, std::string msg, std::string details) {
  return Failure{static_cast<uint32_t>(code), std::move(msg), std::move(details)};
}

}  // namespace dpu::cni
