// Engine: the forwarding state of dpu-dataplane and the per-lcore packet loop
// body. The process around it (datapath/ dataplane main: EAL, ports, lcores,
// the programming and operator sockets) owns DPDK set-up and I/O; the Engine
// owns what happens to a packet: parse → flow cache → compiled actions, misses
// → the logical pipeline (slow path) → a new flow, handed to offload.
//
// Threads:
//  - One control thread calls every method marked "control". They never block
//    an lcore: new tables are built off the lcores and published as immutable
//    snapshots with an atomic pointer swap (release); lcores load the pointer
//    (acquire) once per burst. An old snapshot is freed only after every lcore
//    has reported a quiescent state since the swap (RCU), see quiescent().
//  - Each lcore calls the methods marked "lcore" with its own WorkerContext
//    only. No locks, allocation, exceptions or logging there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

struct rte_mbuf;

namespace dpu::offload {
class OffloadBackend;
}

namespace dpu::datapath {

enum class PortRole : uint8_t { kUplink, kManagement, kRepresentor };

struct EngineConfig {
  unsigned workers = 1;                    // lcores that call processBurst
  uint32_t flow_cache_entries = 65536;     // per worker, rounded up to a power of two
  uint32_t flow_idle_timeout_ms = 10000;   // a flow unused this long is aged out
  offload::OffloadBackend* offload = nullptr;  // nullptr: everything in software
  // Our Geneve endpoint on the uplink (also in the model; used until the first sync).
  std::string tunnel_ip;
};

class WorkerContext;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  virtual ~Engine() = default;

  // --- control ---
  // Ports the process created. `name` is how the model refers to the port:
  // the representor netdev name (LogicalPort.representor), "uplink" or "management".
  virtual Result<void> bindPort(const std::string& name, uint16_t dpdk_port, PortRole role, MacAddress mac) = 0;
  virtual void unbindPort(const std::string& name) = 0;
  // Representor names the current model refers to, so the process can hot-plug
  // ports for those it lacks (and remove those no longer wanted).
  virtual std::vector<std::string> wantedRepresentors() const = 0;
  // The programming API (proto/dpu/dataplane/v1/dataplane.proto): Hello, FullSync, Delta.
  virtual dataplane::v1::ProgramReply program(const dataplane::v1::ProgramRequest& request) = 0;
  // The operator API (dpuctl): dump-flows, ports, stats.
  virtual dataplane::v1::OperatorReply operate(const dataplane::v1::OperatorRequest& request) = 0;
  // Periodic work off the lcores (call every ~100 ms): reclaim retired
  // snapshots, age flows, drive offload installs/removals, merge hardware counters.
  virtual void maintain() = 0;

  // --- lcore ---
  virtual WorkerContext& worker(unsigned index) = 0;
  // Handles a burst received on `rx_port`. Every mbuf is consumed: transmitted
  // (buffered per output port), or freed and counted under a drop reason.
  virtual void processBurst(WorkerContext& worker, uint16_t rx_port, rte_mbuf** packets, uint16_t count) = 0;
  // Sends what processBurst buffered; frees (and counts) what the port refused.
  virtual void flush(WorkerContext& worker) = 0;
  // The lcore holds no snapshot pointer across this call (end of each loop iteration).
  virtual void quiescent(WorkerContext& worker) = 0;
};

}  // namespace dpu::datapath
