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
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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

class OffloadBackend {
 public:
  virtual ~OffloadBackend() = default;
  virtual Capabilities capabilities() const = 0;
  virtual Result<void> validate(const flow::FlowSpec& flow) = 0;
  virtual Result<OffloadHandle> install(const flow::FlowSpec& flow) = 0;
  virtual Result<void> remove(OffloadHandle handle) = 0;
  virtual Result<HwCounters> query(OffloadHandle handle) = 0;
};

}  // namespace dpu::offload
