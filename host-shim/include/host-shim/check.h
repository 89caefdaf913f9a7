// CHECK: compare what is live in the pod's netns with the prevResult the runtime
// hands back (the spec's JSON, any of 0.4.0/1.0.0/1.1.0). Pure: the caller reads
// the live interface with two netlink dumps, so CHECK right after ADD is cheap.
#pragma once

#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
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

}  // namespace dpu::hostshim
