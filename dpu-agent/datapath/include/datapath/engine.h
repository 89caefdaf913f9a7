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
//  - The process stops every lcore before it destroys the Engine, and runs
//    as many lcores as EngineConfig::workers (a worker that never reports
//    quiescent() holds every retired snapshot in memory).
//  - Worker i transmits on tx queue i of every port (the process configures
//    one tx queue per worker on each port it binds).
//  - Flows: each worker has its own exact-match flow cache; a miss runs the
//    logical pipeline on the lcore itself (run to completion, no allocation,
//    within the worker's slow-path budget: EngineConfig::miss_budget) and
//    installs one flow. A flow records the versions of the model objects
//    its decision read (ports, remote nodes, node settings); a snapshot in
//    which one of them changed makes it stale, and a stale flow is never used
//    again (removed on lookup or by the aging sweep).
//  - Offload (EngineConfig::offload set): lcores queue each new flow on a
//    per-worker single-producer ring; maintain() drains it on the control
//    thread and calls validate/install, and removes rules whose flow left the
//    cache. A restart never flushes the eswitch: the rules a previous process
//    left there (OffloadBackend::inherited(), where the backend can list them)
//    are kept from the engine's creation until the first full sync has been
//    programmed and the flows offered by then have taken them over or
//    replaced them; maintain() then removes the rest (offload/inherited_rules.h).
//    Without a full sync, that happens after offload_resync_timeout_ms.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "conntrack/conntrack.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

struct rte_mbuf;

namespace dpu::offload {
class OffloadBackend;
}

namespace dpu::datapath {

// kHostPf: the host PF's representor (pf0hpf on a BlueField), bound under the
// name "host_pf": the node's own traffic, bridged to and from the uplink
// (north–south, pipeline.cpp).
enum class PortRole : uint8_t { kUplink, kManagement, kRepresentor, kHostPf };

// What the uplink's XDP program must hand to the dataplane besides our
// tunnel traffic (xdp.h): frames to the host's MACs and ARP/ND for the node
// IPs. `version` changes whenever either list does.
struct HostSteering {
  uint64_t version = 0;
  std::vector<MacAddress> host_macs;
  std::vector<IpAddress> node_ips;
};

struct EngineConfig {
  unsigned workers = 1;                    // lcores that call processBurst
  uint32_t flow_cache_entries = 65536;     // per worker, rounded up to a power of two
  uint32_t flow_idle_timeout_ms = 10000;   // a flow unused this long is aged out
  offload::OffloadBackend* offload = nullptr;  // nullptr: everything in software
  // Our Geneve endpoint on the uplink (also in the model; used until the first sync).
  std::string tunnel_ip;
  // Milliseconds from a monotonic clock; nullptr: CLOCK_MONOTONIC. Read once
  // per burst by the lcores and by maintain(); tests pass a controllable clock.
  uint64_t (*clock_ms)() = nullptr;
  // New flows an lcore may queue for offload before maintain() drains them
  // (per worker, rounded up to a power of two); beyond it a flow stays in
  // software until a periodic scan offers it (counted as `OffloadQueueFull`).
  uint32_t offload_queue = 4096;
  // A previous process's rules are removed this long after the engine's
  // creation when no full sync has come by then (the agent never connected).
  uint32_t offload_resync_timeout_ms = 30000;
  // The slow-path budget (src/miss_budget.h), so that one pod sending new
  // 5-tuples at line rate cannot stall the established flows on its lcore
  // (Open vSwitch bounds its upcalls the same way). A miss over it is dropped
  // and counted (`MissBudget`, and per port); the sender's retransmission
  // finds budget later. A port whose packets are mostly such misses gets
  // smaller receive bursts (rxBurstSize), so the excess waits in the NIC.
  //
  // Slow-path runs (flow-cache misses) a worker may make per poll iteration
  // (between two quiescent() calls), across all its ports; each port that
  // missed in the last iteration may take an equal share. It bounds how long
  // one iteration's misses hold up the packets behind them.
  static constexpr uint32_t kDefaultMissBudget = 32;
  static constexpr uint32_t kMaxMissBudget = 1u << 20;
  uint32_t miss_budget = kDefaultMissBudget;
  // Percent of a worker's cycles its slow-path runs may use while it also
  // forwards established traffic (a flow hit in this or the last poll
  // iteration); with nothing else to forward they may use the whole core.
  // 100: no bound but the count above.
  static constexpr uint32_t kDefaultMissCycleShare = 10;
  uint32_t miss_cycle_share = kDefaultMissCycleShare;
  // The cycle counter slow-path runs and poll iterations are measured with;
  // nullptr: the TSC. Tests pass a controllable one.
  uint64_t (*cycles)() = nullptr;
  // The lanes (actions.def): the common packets' own parse and the common
  // records' own routines. Off, every packet takes the general parse and
  // every record the general routine, which do the same, slower: the engine
  // tests compare the two byte for byte, and a benchmark shows the gain.
  bool lanes = true;
  // North–south (the host PF's path): the host MACs learned on the host PF
  // port (bounded: a new MAC beyond it is dropped as HostMacTableFull, and
  // forgotten after host_mac_ageing_ms without a frame or a used flow), and
  // the neighbours on the node network learned from ARP (bounded, the least
  // recently confirmed evicted; one not confirmed for neighbour_stale_ms is
  // probed when used).
  static constexpr uint32_t kMaxHostMacs = 256;  // the uplink XDP program's map
  uint32_t max_host_macs = 16;
  uint32_t host_mac_ageing_ms = 300000;
  uint32_t max_neighbours = 1024;
  uint32_t neighbour_stale_ms = 60000;
  // Connection tracking for services and NAT (dpu-agent/conntrack): at most
  // this many connections, preallocated (Table::bytesPerEntry each); when
  // full, a new connection through a service is dropped (ConntrackFull) and
  // none is evicted for it.
  static constexpr uint32_t kDefaultConntrackEntries = 262144;
  uint32_t conntrack_entries = kDefaultConntrackEntries;
  conntrack::Timeouts conntrack_timeouts;
  // Clients remembered for session affinity (services with ClientIP affinity).
  static constexpr uint32_t kDefaultAffinityEntries = 65536;
  uint32_t affinity_entries = kDefaultAffinityEntries;
  // Files the two tables live in ("": process memory): what they hold then
  // outlives the process, and the next engine on the same files takes the
  // connections and the clients' backends over (conntrack.h, affinity.h).
  // The dataplane holds its active lock before it opens them.
  std::string conntrack_file;
  std::string affinity_file;
  // Where the ports NAT traversal learned for each peer are kept ("": not
  // kept): a restarted engine sends to a NATed peer's port at once instead of
  // 4500 until the peer's next authenticated packet.
  std::string nat_ports_file;
};

// The most packets the lcore loop takes from one receive queue per poll
// iteration (Engine::rxBurstSize says how many it should take).
inline constexpr uint16_t kRxBurst = 32;

class WorkerContext;

// Where NAT keepalives go (nat_keepalive.h): every remote node's ESP in UDP
// address and port, our tunnel IP, and the interval (0: none).
struct NatKeepaliveTargets {
  uint32_t interval_s = 0;
  IpAddress local;
  std::vector<std::pair<IpAddress, uint16_t>> peers;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  virtual ~Engine() = default;

  // --- control ---
  // Ports the process created. `name` is how the model refers to the port:
  // the representor netdev name (LogicalPort.representor), "uplink" or "management".
  virtual Result<void> bindPort(const std::string& name, uint16_t dpdk_port, PortRole role, MacAddress mac) = 0;
  virtual void unbindPort(const std::string& name) = 0;
  // Representor names the model in force refers to (refused ports are not in
  // force), so the process can hot-plug ports for those it lacks (and remove
  // those no longer wanted). In the order the process should open them: the
  // management port first, then by port key (the order the agent attached
  // them), so that a restarted dataplane gives each the backend it had when
  // the mbuf budget leaves af_xdp to only some.
  virtual std::vector<std::string> wantedRepresentors() const = 0;
  // The logical ports (LogicalPort.name) of the model bound to representor
  // `representor`, so the process can name them when it cannot open it.
  virtual std::vector<std::string> logicalPortsOf(const std::string& representor) const = 0;
  // The programming API (proto/dpu/dataplane/v1/dataplane.proto): Hello,
  // FullSync, Delta, Status. The model is validated object by object
  // (dpu-agent/model): a refused object is left out and listed in every
  // reply's `problems`; INVALID only for a request refused as a whole.
  virtual dataplane::v1::ProgramReply program(const dataplane::v1::ProgramRequest& request) = 0;
  // The operator API (dpuctl): dump-flows, ports, stats, problems.
  virtual dataplane::v1::OperatorReply operate(const dataplane::v1::OperatorRequest& request) = 0;
  // Periodic work off the lcores (call every ~100 ms): reclaim retired
  // snapshots, age flows, drive offload installs/removals, merge hardware counters.
  virtual void maintain() = 0;
  // The underlay next hop (Ethernet destination of the outer header) towards a
  // tunnel peer, as the process resolves it (kernel neighbour table of the
  // uplink netdev). Until it is known, tunnel packets to that peer go to the
  // Ethernet broadcast address (a bridge delivers them; counted as
  // `TunnelNextHopUnresolved`). A change revalidates that peer's flows.
  virtual Result<void> setTunnelNextHop(const IpAddress& peer_tunnel_ip, MacAddress next_hop) = 0;
  // Where the model's remote nodes are reached (their tunnel IPs, or NAT addresses:
  // RemoteNode.nat_address), so the process can resolve them.
  virtual std::vector<IpAddress> wantedTunnelPeers() const = 0;
  // With NAT traversal and keepalives on: whom to send them to (learned ports included).
  virtual NatKeepaliveTargets natKeepaliveTargets() const { return {}; }
  // Bytes each cached flow costs: the flow entry, its share of the bucket
  // header and (with an offload backend) the offload bookkeeping.
  virtual size_t bytesPerFlow() const = 0;
  // The same while every flow's key is compact (IPv4): the key tails of
  // long (IPv6) keys are then never touched (flow_cache.h).
  virtual size_t bytesPerCompactFlow() const = 0;
  // North–south. An fd (eventfd) that becomes readable when an lcore learned
  // something the control thread must publish (a new host MAC, a new or
  // changed neighbour): the process polls it and calls northSouthUpdate(),
  // which maintain() also does. -1: the engine has none.
  virtual int northSouthEventFd() const { return -1; }
  virtual void northSouthUpdate() {}
  // What the uplink's XDP program must steer for the host (see HostSteering).
  virtual HostSteering hostSteering() const { return {}; }

  // --- lcore ---
  virtual WorkerContext& worker(unsigned index) = 0;
  // How many packets the loop should take from `rx_port` (any of its receive
  // queues this worker polls) before it hands them to processBurst: kRxBurst,
  // or fewer, or none while the port's packets are mostly misses over the
  // slow-path budget; the rest wait in the NIC's ring (and when it is full,
  // the NIC drops them: imissed). Ask before every receive burst.
  virtual uint16_t rxBurstSize(WorkerContext& worker, uint16_t rx_port) = 0;
  // Handles a burst received on `rx_port`. Every mbuf is consumed: transmitted
  // (buffered per output port), or freed and counted under a drop reason.
  virtual void processBurst(WorkerContext& worker, uint16_t rx_port, rte_mbuf** packets, uint16_t count) = 0;
  // Sends what processBurst buffered; frees (and counts) what the port refused.
  virtual void flush(WorkerContext& worker) = 0;
  // The lcore holds no snapshot pointer across this call (end of each loop iteration).
  virtual void quiescent(WorkerContext& worker) = 0;
  // The loop slept after quiescent() (idle: nothing received): what follows
  // is a new iteration, its time counted from here.
  virtual void awake(WorkerContext& worker) { (void)worker; }
};

}  // namespace dpu::datapath
