// Offload: installing datapath flows in the NIC's embedded switch, so packets
// of an offloaded flow never reach a DPU core.
//
// Contract for every OffloadBackend (the rte_flow one, the no-offload one, the
// fake eswitch used by tests — all run the same test suite):
//  - Synchronous; called from one control thread (the dataplane's offload
//    thread), never from an lcore. Backends are not thread-safe.
//  - validate() says whether install() would accept the flow, without
//    installing it. A refusal carries the device's reason ("action RAW_ENCAP
//    not supported on port 3"): the caller keeps that flow in software and
//    shows the reason in dump-flows. Refusal is per flow, never global.
//  - install() returns a handle owned by the caller until remove(). A full
//    table is a refusal like any other (the flow stays in software).
//  - query() returns the hardware counters since install (absolute, not deltas);
//    the caller merges them into the flow's software statistics.
//  - remove() of an unknown handle is an error the caller logs; it changes nothing.
//  - Restart: a backend never flushes the eswitch when it starts. The rules a
//    previous dataplane process left there may still carry traffic; the new
//    process replaces them before it removes any (OffloadManager's resync:
//    install the new model's rules, take over the ones that did not change,
//    and only then remove those the new model did not re-create). inherited()
//    lists them, each with its flow and a handle this instance may remove()
//    and query(); a backend that cannot see another process's rules lists
//    none. rte_flow is one: its handles are the creating process's pointers
//    and no call lists or removes another process's rules; whether mlx5
//    keeps the rules of a process that died at all is the driver's and
//    firmware's behaviour, unproven on hardware (offload/README.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "flow/flow.h"

namespace dpu::offload {

struct Capabilities {
  std::string backend;       // "rte_flow", "none", "fake"
  bool transfer = false;     // rules on the eswitch (represented-port match/output)
  bool raw_encap = false;
  bool raw_decap = false;
  bool set_mac = false;
  bool dec_ttl = false;
  bool count = false;
  bool age = false;
  uint32_t max_flows = 0;    // 0 = unknown / unlimited
};

struct OffloadHandle {
  uint64_t id = 0;
  bool operator==(const OffloadHandle&) const = default;
};

struct HwCounters {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint32_t idle_seconds = 0;  // from the AGE action where supported
};

// A rule in the eswitch that this backend instance did not install: a
// previous dataplane process's (the contract's Restart).
struct InheritedRule {
  OffloadHandle handle;
  flow::FlowSpec flow;
};

class OffloadBackend {
 public:
  virtual ~OffloadBackend() = default;
  virtual Capabilities capabilities() const = 0;
  virtual Result<void> validate(const flow::FlowSpec& flow) = 0;
  virtual Result<OffloadHandle> install(const flow::FlowSpec& flow) = 0;
  virtual Result<void> remove(OffloadHandle handle) = 0;
  virtual Result<HwCounters> query(OffloadHandle handle) = 0;
  // The rules a previous instance left in the eswitch (the contract's
  // Restart), at this backend's start; none where it cannot see them.
  virtual std::vector<InheritedRule> inherited() { return {}; }
};

}  // namespace dpu::offload
