// The answers host-shim gives dpu-cni: an attachment as the CNI result, and
// CNI error codes with the mapping from what failed
// to the code a runtime acts on: 11 (try again later) only for what retrying
// can fix (the DPU agent unreachable or overloaded, a capacity of the node
// used up), 4 for a bad environment (netns, ifname, container id), 7 for a bad
// request (deviceID, what the DPU agent refuses as invalid), 50 for STATUS.
// Codes 100 and up are ours (the spec reserves 1-99).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "dpu/checkpoint/v1/checkpoint.pb.h"
#include "dpu/cni/v1/cni.pb.h"

namespace dpu::hostshim {

enum class CniCode : uint32_t {
  kIncompatibleVersion = 1,
  kUnsupportedField = 2,
  kUnknownContainer = 3,
  kInvalidEnvironment = 4,
  kIoFailure = 5,
  kDecodeFailure = 6,
  kInvalidConfig = 7,
  kTryAgainLater = 11,
  kNotAvailable = 50,
  kDpuRejected = 100,     // the DPU agent refused the request (4xx)
  kVfUnavailable = 101,   // no free VF, or the VF is held / missing
  kCheckFailed = 102,     // CHECK: live state differs from prevResult
  kPlumbingFailed = 103,  // netlink refused a step; the step is named
  kPermissionDenied = 104,  // the caller may not use host-shim's socket
};

cni::v1::CniResponse cniError(CniCode code, std::string msg, std::string details);
// ADD's result for an attachment: its interface, addresses and routes as the DPU answered them.
cni::v1::CniResponse cniResultOf(const checkpoint::v1::HostAttachment& a);
// The code for a failed DPU call (dpu_client.h lists its error codes):
// kUnavailable, kTimeout and kExhausted → 11; kConflict → 101; kInvalid → 7;
// any other refusal → 100.
CniCode codeFor(const Error& e);
// Validates CNI_IFNAME as the kernel accepts netdev names: 1-15 bytes, no '/',
// ':' or whitespace, not "." or "..". Empty string when fine, else the reason.
std::string ifnameProblem(const std::string& ifname);

}  // namespace dpu::hostshim
