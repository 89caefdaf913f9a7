// The configuration of the dpu-dataplane process (`dpu-dataplane --config FILE`,
// JSON or YAML): EAL arguments, worker lcores, the mbuf pool, the DPDK devargs
// behind each port role, our tunnel address, the flow cache, the offload
// backend and the two unix sockets. Parsing is pure (no DPDK), so every field is
// checked before anything is touched and a bad file fails at start naming the
// field. Example (the lab, on veths):
//
//   eal: {memory_mb: 256, no_huge: true, no_pci: true, file_prefix: dpu-node1}
//   workers: 1
//   uplink: {kind: af_xdp, iface: uplink0}           # falls back to af_packet
//   management: {devargs: "net_af_packet_mgmt,iface=mgmt0"}
//   host_pf: {kind: af_xdp, iface: pf0hpf}           # the host PF's representor (north–south)
//   representors: {mode: hotplug, backends: [af_xdp, af_packet]}
//   tunnel_ip: 192.168.100.1
//   flow_cache: {entries: 65536, idle_timeout_ms: 10000, miss_budget: 32, miss_cycle_share: 10}
//   sockets: {programming: /run/dpu/dataplane.sock, operator: /run/dpu/dpuctl.sock}
//   metrics: {listen: "0.0.0.0:9476"}                # Prometheus text on GET /metrics
//   conntrack: {max_entries: 262144, affinity_entries: 65536, timeouts: {tcp_established_s: 86400}}
//
// On a BlueField: eal {hugepages, allow: ["0000:03:00.0,representor=pf0vf[0-127]"]},
// uplink {devargs: the PF}, representors {mode: preprobed}, host_pf {kind:
// preprobed, ethdev: the host PF representor's ethdev}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "conntrack/conntrack.h"

namespace dpu::datapath {

// How a port role becomes a DPDK ethdev.
enum class PortKind : uint8_t {
  kDevargs,    // `devargs` verbatim (net_pcap, net_ring, net_null, a PCI address, ...)
  kAfXdp,      // net_af_xdp on `iface` (uplink: with our XDP program), fallback net_af_packet
  kAfPacket,   // net_af_packet on `iface`
  kPreprobed,  // an ethdev EAL already probed (-a/allow), found by name
};

struct PortConfig {
  PortKind kind = PortKind::kDevargs;
  std::string devargs;       // kDevargs
  std::string iface;         // kAfXdp, kAfPacket: the netdev
  std::string ethdev_name;   // kPreprobed: the ethdev name (rte_eth_dev_get_port_by_name)
  bool fallback = true;      // kAfXdp: try net_af_packet when af_xdp fails
  bool configured = false;   // the role is present in the config
};

enum class RepresentorMode : uint8_t {
  kHotplug,    // a vdev per representor netdev, probed as pods attach, removed when unwanted
  kPreprobed,  // mlx5 representors probed with the PF (representor=[...]), mapped by VF index
  kTemplate,   // a vdev per representor from devargs templates with {name} (tests, benchmarks)
};

struct RepresentorConfig {
  RepresentorMode mode = RepresentorMode::kHotplug;
  // kHotplug: backends tried in order ("af_xdp", "af_packet").
  std::vector<PortKind> backends{PortKind::kAfXdp, PortKind::kAfPacket};
  // kTemplate: devargs with "{name}" replaced by the representor name, and/or
  // fixed devargs per representor name (which take precedence).
  std::string devargs_template;
  std::vector<std::pair<std::string, std::string>> devargs_by_name;
  // kPreprobed: the ethdev of VF N is the probed port whose name ends in
  // "<suffix><N>" (mlx5: "_representor_vf"); the model names it "pf0vf<N>".
  std::string preprobed_suffix = "_representor_vf";
};

struct EalConfig {
  bool no_huge = true;
  bool no_pci = true;
  uint32_t memory_mb = 256;
  std::string file_prefix;               // default: "dpu-dataplane-<pid>"
  std::vector<std::string> allow;        // -a <devargs> (PCI devices, mlx5 PF with representors)
  std::vector<std::string> vdevs;        // extra --vdev
  std::vector<std::string> extra_args;   // appended verbatim (after validation of the rest)
  std::string lcores;                    // -l list; default: the first workers+1 cores
  std::string log_level;                 // --log-level, e.g. "*:notice"
};

struct SocketConfig {
  std::string programming = "/run/dpu/dataplane.sock";
  std::string operator_api = "/run/dpu/dpuctl.sock";
};

// The Prometheus endpoint (datapath/metrics.h), `metrics: {listen: "ADDR:PORT"}`
// with an IPv4 or a bracketed IPv6 literal ("[::]:9476"). Off when absent.
struct MetricsConfig {
  bool enabled = false;
  std::string address;   // numeric IPv4 or IPv6
  uint16_t port = 0;
};
// "ADDR:PORT" → MetricsConfig, or what is wrong with it.
Result<MetricsConfig> parseMetricsListen(std::string_view text);

// north_south: the host MAC and neighbour tables (the engine's EngineConfig).
struct NorthSouthConfig {
  uint32_t max_host_macs = 16;           // 1..256
  uint32_t host_mac_ageing_s = 300;      // as a Linux bridge's ageing_time
  uint32_t max_neighbours = 1024;        // 1..65536
  uint32_t neighbour_stale_s = 60;       // probed when used after this long unconfirmed
};

// conntrack: the services' connection table and the session-affinity table
// (the engine's EngineConfig conntrack_entries, affinity_entries,
// conntrack_timeouts). The table is preallocated at start:
// conntrack::Table::bytesPerEntry() bytes per entry of max_entries.
inline constexpr uint32_t kDefaultConntrackEntries = 262144;
inline constexpr uint32_t kMaxConntrackEntries = 1u << 26;   // the engine's bound
inline constexpr uint32_t kDefaultAffinityEntries = 65536;
inline constexpr uint32_t kMaxAffinityEntries = 1u << 24;    // the engine's bound
// Timeouts are given in seconds. At least 10: the control thread's expiry
// walks the whole table about every 5 s, so a shorter timeout would not hold.
inline constexpr uint32_t kMinConntrackTimeoutS = 10;
inline constexpr uint32_t kMaxConntrackTimeoutS = 86400;             // a day, every state but established
inline constexpr uint32_t kMaxConntrackEstablishedS = 30u * 86400;   // established TCP: 30 days
struct ConntrackConfig {
  uint32_t max_entries = kDefaultConntrackEntries;
  uint32_t affinity_entries = kDefaultAffinityEntries;
  // Both tables live in files beside the programming socket
  // (`<socket>.conntrack`, `<socket>.affinity`; /run is tmpfs: memory, gone
  // at reboot), so a restarted dataplane takes every connection over.
  bool persist = true;
  conntrack::Timeouts timeouts;  // milliseconds, as the engine takes them; the defaults are Linux's
};

// flow_cache.miss_budget and miss_cycle_share (the engine's limits: EngineConfig).
inline constexpr uint32_t kDefaultMissBudget = 32;
inline constexpr uint32_t kMaxMissBudget = 1u << 20;
inline constexpr uint32_t kDefaultMissCycleShare = 10;

struct DataplaneConfig {
  EalConfig eal;
  unsigned workers = 1;
  // Mbufs in the one pool (2^n - 1 is optimal for the ring), budgeted per port
  // (mbuf_budget.h): an af_xdp port takes 3,104 with the default rings.
  uint32_t mbuf_pool_size = 8191;
  uint32_t mbuf_cache_size = 256;
  uint16_t rx_ring_size = 1024;
  uint16_t tx_ring_size = 1024;
  // An idle iteration (nothing received) sleeps this long; 0 busy-polls, as a
  // production DPU does. Tests and shared machines set it so an idle dataplane
  // leaves the core to others.
  uint32_t idle_sleep_us = 0;
  PortConfig uplink;
  PortConfig management;
  // The host PF's representor (pf0hpf on a BlueField): the node's own traffic,
  // bridged with the uplink (north–south). Optional: without it the uplink
  // carries only our tunnel traffic.
  PortConfig host_pf;
  NorthSouthConfig north_south;
  ConntrackConfig conntrack;
  RepresentorConfig representors;
  std::string tunnel_ip;                 // our Geneve endpoint
  std::string uplink_mac;                // override the uplink's MAC ("" = the port's)
  std::string xdp_program;               // the uplink's XDP object ("" = the built-in path)
  // ARP for our tunnel IP to the dataplane instead of the kernel. Off by
  // default: the kernel owns the tunnel address on the uplink netdev, answers
  // ARP for it, and its neighbour table gives us the underlay next hops.
  bool xdp_steer_arp = false;
  // Underlay next hops: static entries (the tests, a static underlay) and/or
  // the kernel's routes and neighbours of the uplink netdev (af_xdp/af_packet),
  // IPv4 and IPv6, followed by rtnetlink events (dataplane_neighbours.h).
  struct NextHop {
    std::string peer;  // a remote node's tunnel IP
    std::string mac;   // the Ethernet destination towards it
  };
  std::vector<NextHop> next_hops;
  bool resolve_next_hops = true;
  uint32_t flow_cache_entries = 65536;
  uint32_t flow_idle_timeout_ms = 10000;
  // The slow-path budget, so a flood of new flows does not slow the
  // established ones; a miss over it is dropped (drop reason MissBudget, per
  // port in dpuctl ports: MISS_DROP) and a port whose packets are mostly such
  // misses is polled with smaller bursts (THROTTLED), the rest left to the
  // NIC's ring (RX_MISSED when it overflows).
  // Slow-path runs (flow-cache misses) per worker and poll iteration, across
  // its ports, shared fairly among the ports that miss
  // (flow_cache.miss_budget, 1..kMaxMissBudget).
  uint32_t miss_budget = kDefaultMissBudget;
  // Percent of a worker's cycles misses may use while it forwards established
  // traffic; all of them when it forwards nothing else
  // (flow_cache.miss_cycle_share, 1..100; 100: no cycle bound).
  uint32_t miss_cycle_share = kDefaultMissCycleShare;
  std::string offload = "none";          // "none" | "rte_flow"
  SocketConfig sockets;
  MetricsConfig metrics;
  std::string log_level = "info";
  std::string log_file;
};

// Parses and validates the whole document; errors name the field ("config.uplink.kind: ...").
Result<DataplaneConfig> parseDataplaneConfig(std::string_view text, std::string_view origin);
Result<DataplaneConfig> loadDataplaneConfig(const std::string& path);

// Why this config cannot wait as a warm standby beside an active dataplane
// ("" when it can): its EAL would probe devices at start (eal.allow, eal.vdevs,
// preprobed ports such as an mlx5 PF with its representors), which the active
// process owns. A standby opens its ports only once it is active (takeover.h).
std::string standbyProblem(const DataplaneConfig& config);

// The devargs a port role is created from (kAfXdp/kAfPacket build them; `vdev_name`
// is the unique vdev name, e.g. "net_af_xdp_uplink"). kPreprobed has none.
std::string afXdpDevargs(const std::string& vdev_suffix, const std::string& iface, const std::string& xdp_program);
// af_packet gets a queue pair per worker (`queue_pairs`): the kernel spreads flows over them (port.h).
std::string afPacketDevargs(const std::string& vdev_suffix, const std::string& iface, unsigned queue_pairs = 1);
// "{name}" in the template replaced by `name` (every occurrence).
std::string expandTemplate(const std::string& templ, const std::string& name);
std::string portKindName(PortKind kind);

}  // namespace dpu::datapath
