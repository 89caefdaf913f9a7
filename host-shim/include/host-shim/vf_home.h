// Bringing a VF home: out of the pod's netns (or wherever a crash or the
// kernel left it) into host-shim's netns, with the name, MAC, MTU and PF-side
// settings of its snapshot, down and without addresses. The one undo of
// "this VF served a pod", shared by ADD's rollback, DEL, GC, the return
// worker and the restart that finishes an interrupted ADD or return.
#pragma once

#include "common/result.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/netlink.h"

namespace dpu::hostshim {

// The VF is looked for, in order: in `held` by its ifindex (the namespace DEL
// kept open); else in a.netns() under the pod's name with one of our MACs, or
// under the VF's own name (a move whose rename failed); then in host-shim's
// netns under its own name, under the pod's name with one of our MACs (the
// kernel hands a VF back to the host when the pod netns is destroyed; the
// host's own eth0 is never taken), or under the name sysfs gives its PCI
// address. false: the VF is nowhere (a veth destroyed with its namespace).
Result<bool> bringVfHome(nl::Netlink& netlink, const Config& config, const Attachment& a,
                         nl::Namespace* held = nullptr, int pod_ifindex = 0);

}  // namespace dpu::hostshim
