// CHECK: compare what is live in the pod's netns with the prevResult the runtime
// hands back (the spec's JSON, any of 0.4.0/1.0.0/1.1.0). Pure: the caller reads
// the live interface with two netlink dumps, so CHECK right after ADD is cheap.
#pragma once

#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"
#include "host-shim/dpu_client.h"
#include "host-shim/netlink.h"

namespace dpu::hostshim {

struct LiveInterface {
  bool exists = false;
  MacAddress mac;
  uint32_t mtu = 0;
  std::vector<IpInterfaceAddress> addresses;
  std::vector<nl::RouteSpec> routes;  // routes through this interface
};

// Ok when the interface `ifname` in `netns` matches prevResult: listed there,
// same MAC, same MTU (when given), every address of ips[] pointing at it, every
// route that goes through it. The error names the first difference.
Result<void> compareWithPrevResult(const std::string& prev_result_json, const std::string& ifname,
                                   const std::string& netns, const LiveInterface& live);

// CHECK's question to the DPU (GET /v1/attachments/{id}): does its dataplane
// forward for this attachment? Ok only when dataplane_state is "programmed".
// `answer` is DpuApi::get's. The error says why not; its code is kUnavailable
// when retrying can help (the agent unreachable, the state "pending", the
// attachment unknown while host-shim replays after a DPU restart), kFailed
// otherwise (refused, port unavailable).
Result<void> checkDataplaneState(const std::string& attachment_id, const Result<attach::v1::AttachResponse>& answer);

}  // namespace dpu::hostshim
