// What the DPU's answer means inside a pod's netns: its addresses, its routes
// (plus a default route via each family's gateway), and the netlink steps that
// put them on the pod's interface. Used by ADD, by a replay that re-plumbs a
// pod after the DPU gave it another address, and by the management port.
#pragma once

#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/attach/v1/attach.pb.h"
#include "host-shim/netlink.h"

namespace dpu::hostshim {

Result<std::vector<IpInterfaceAddress>> addressesFor(const attach::v1::Attachment& a);
// The DPU's routes, plus a default route via the first gateway of each family
// it did not already route by default; on-link routes first (a gateway must
// be reachable before a route uses it).
Result<std::vector<nl::RouteSpec>> routesFor(const attach::v1::Attachment& a);

// Addresses, routes and announcements for the link named `ifname` in ns; also
// MAC, MTU and up unless `link_set` (ADD sends those with the move).
// `replace`: the link carries an older answer (a replay): take it down and
// flush its addresses first.
Result<void> plumbPod(nl::Namespace& ns, const std::string& ifname, const attach::v1::Attachment& dpu, bool replace,
                      bool link_set = false);

}  // namespace dpu::hostshim
