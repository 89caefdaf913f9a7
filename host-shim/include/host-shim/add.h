// CNI ADD as a list of steps, each registering its undo as soon as it has
// changed something (or may have: the DPU may act on an attach whose answer
// never came back). A failure at any step runs the undos in reverse, so a
// failed ADD leaves nothing behind: the VF home with its original name, MAC,
// MTU and PF-side settings, the DPU detached, the VF record freed, the
// checkpoint without it. The steps, in order, and why:
//   environment  netns opens and the ifname is free there, before anything is touched;
//   claim        the VF record (the per-VF flock makes concurrent ADDs safe);
//   snapshot     the VF's name, MAC, MTU and PF-side settings, to restore;
//   record       the attachment, not plumbed, in the checkpoint, numbered for the
//                agent's reconcile: a crash from here on is undone at the next start;
//   dpu          the attach (it may refuse: then nothing on the host changed);
//   move         move + rename + MAC + MTU + up in one netlink request (one rtnl
//                round: under concurrency every rtnl request queues behind other
//                pods' moves);
//   plumb        addresses, routes inside the pod netns; announce the addresses;
//   commit       the checkpoint says plumbed.
#pragma once

#include <vector>

#include "dpu/cni/v1/cni.pb.h"
#include "host-shim/allocation.h"
#include "host-shim/attachment_book.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/dpu_session.h"
#include "host-shim/netlink.h"
#include "host-shim/vf_inventory.h"
#include "host-shim/vf_returner.h"

namespace dpu::hostshim {

// What an ADD works with; owned by the attach service.
struct AddContext {
  const Config& config;
  const std::vector<VfInfo>& vfs;
  nl::Netlink& netlink;
  DpuApi& dpu;
  AllocationStore& store;
  AttachmentBook& book;
  VfReturner& returner;
  DpuSession& session;
};

// Runs the steps for `req`; the caller holds the attachment's key lock.
cni::v1::CniResponse runAdd(AddContext& ctx, const cni::v1::CniRequest& req);

}  // namespace dpu::hostshim
