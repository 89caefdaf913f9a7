// The dpu-agent configuration: what one DPU needs to know about itself (node
// name, tunnel IP, representors), where it learns about the cluster, and where
// it listens and keeps state. Read from JSON or YAML through FieldReader, so a
// bad field stops the agent at start with a message naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::control {

// One PF's VFs and the names of their representors on the DPU. The name is a
// pattern: "{pf}" and "{vf}" are replaced by the indexes, so "pf0vf{vf}" names
// netdevs and "0000:03:00.0,representor=vf{vf}" names DPDK devargs.
struct RepresentorMap {
  uint32_t pf_index = 0;
  uint32_t vf_count = 0;
  std::string name_pattern;
  std::vector<std::string> names;  // explicit names per VF; overrides the pattern when set
  std::string representorFor(uint32_t vf) const;
};

enum class ClusterSourceKind { kFile, kKubernetes };

struct ClusterSourceConfig {
  ClusterSourceKind kind = ClusterSourceKind::kFile;
  std::string file_path;            // kind == kFile
  std::string kubeconfig;           // kind == kKubernetes: empty with in_cluster
  std::string kube_context;         // empty: the kubeconfig's current-context
  bool in_cluster = false;
  std::string in_cluster_dir;       // empty: the standard service-account directory
  std::string api_server;           // in-cluster: instead of KUBERNETES_SERVICE_HOST/PORT
};

struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;       // set: clients must present a certificate signed by it
  bool enabled() const { return !cert_file.empty(); }
};

// Where the host's node name comes from when the config does not give it: the
// label `label` of the DPU's own Node `node`, read from the cluster source's
// API server, or from another one (the DPU cluster of a separate-cluster
// install: in_cluster or kubeconfig).
struct NodeNameFrom {
  std::string label;  // empty: nodeName is given
  std::string node;
  bool in_cluster = false;
  std::string kubeconfig;
};

// A second listener for Prometheus, `metrics: {listen: "ADDR:PORT"}`: the
// attach API binds only to the host<->DPU link, which a scraper on the
// management network cannot reach. It serves GET /metrics, /healthz and
// /readyz and nothing of the attach API, with the API's TLS settings (so with
// api.tls.clientCA the scraper needs a client certificate signed by that CA).
struct MetricsListen {
  bool enabled = false;
  std::string address;  // numeric IPv4 or IPv6
  uint16_t port = 0;
};

// IPsec between DPUs (docs/ipsec.md): `ipsec: false|true` or an object.
//  - off:  no keys, nothing published, the pod MTU without ESP.
//  - keys: the node makes and keeps its key pair, derives and installs the SAs
//          with every peer and publishes its key once the dataplane holds
//          them — while the traffic stays plaintext: the first step of
//          turning IPsec on in a running cluster. Pods get the ESP MTU
//          already, so that encrypting later needs no new pod.
//  - on:   encrypt. Refused until the dataplane encrypts (agent_config.cpp):
//          accepting it would send what the operator wants encrypted in
//          plaintext.
enum class IpsecMode { kOff, kKeys, kOn };
const char* ipsecModeName(IpsecMode mode);

struct IpsecConfig {
  IpsecMode mode = IpsecMode::kOff;
  std::string state_dir;                    // key pair and SA state; default <stateDir>/ipsec
  std::string psk_file;                     // the cluster PSK (base64); empty: none
  uint32_t key_bits = 128;                  // AES-GCM: 128 or 256
  uint64_t rotation_period_s = 86400;       // a new key pair this often (0: only on demand, PSK change, limits)
  uint64_t grace_period_s = 60;             // old keys stay accepted this long after a new one is published
  uint64_t esn_soft_limit = uint64_t{1} << 63;  // rotate when an SA has sent this many packets
  uint64_t byte_soft_limit = 0;             // rotate when an SA has carried this many bytes (0: no limit)
  uint32_t replay_window = 1024;            // inbound anti-replay window (packets)
  // Rollout (docs/ipsec.md, "Rollout"): with mode on, plaintext from a peer
  // that does not advertise mode on is still accepted, so a running cluster
  // turns encryption on (and off) node by node. False: fail closed, every
  // IPsec peer's plaintext refused.
  bool rollout = false;
  // NAT traversal (docs/ipsec.md, "NAT traversal"): ESP sent inside UDP
  // 4500 (RFC 3948) for underlays behind NAT; IPv4 only. The pod MTU is
  // 8 bytes smaller (1400 on a 1500 underlay).
  bool nat_traversal = false;
  // Behind a NAT (docs/ipsec.md, "NAT traversal"): the NAT's public IPv4
  // address, where peers send this node's ESP in UDP. Published next to the
  // key (annotation dpu-cni.io/ipsec-nat-address, file "ipsecNatAddress").
  // Needs nat_traversal.
  std::optional<IpAddress> nat_address;
  // NAT keepalives (RFC 3948 §2.2) to every peer this often; 0: none. Only
  // with nat_traversal (0 without it). 0..3600, default 20.
  uint32_t nat_keepalive_s = 0;

  bool enabled() const { return mode != IpsecMode::kOff; }
  bool encrypt() const { return mode == IpsecMode::kOn; }
};

struct AgentConfig {
  std::string node_name;            // empty until resolved when node_name_from is set
  NodeNameFrom node_name_from;
  IpAddress tunnel_ip;
  std::string uplink;
  std::vector<RepresentorMap> representors;
  std::vector<IpPrefix> pod_cidrs;  // empty: from this node's Node object
  std::vector<IpPrefix> cluster_cidrs;
  std::vector<IpPrefix> service_cidrs;
  // North–south (northSouth): the node's own addresses, which live on the
  // host PF, with their prefix ("172.18.0.1/24"), and the node network's
  // gateways (one per family, on-link). The dataplane bridges the host's
  // traffic between the host PF and the uplink and resolves the gateway for
  // traffic it sends to the outside from a node IP. Validated with the
  // model's rules (model::parseNodeAddresses). Empty: the dataplane knows no
  // node IP (frames to the host's MACs are still bridged).
  std::vector<IpInterfaceAddress> node_ips;
  std::vector<IpAddress> node_gateways;
  uint32_t underlay_mtu = 1500;
  uint32_t pod_mtu = 0;             // computed from underlay_mtu, tunnel family and ipsec
  IpsecConfig ipsec;
  ClusterSourceConfig cluster_source;
  std::string api_address = "127.0.0.1";
  uint16_t api_port = 9443;
  TlsConfig tls;
  // api.insecure: serve the attach API without mutual TLS on an address off
  // this host; refused otherwise (agent_config.cpp).
  bool api_insecure = false;
  MetricsListen metrics;
  std::string dataplane_socket = "/run/dpu/dataplane.sock";
  std::string state_dir = "/var/lib/dpu-agent";
  std::string log_level = "info";
  std::string log_file;             // empty: stderr

  const RepresentorMap* representorsOf(uint32_t pf) const;
  std::string apiUri() const;       // "http(s)://address:port"
  std::string metricsUri() const;   // the same for `metrics` (empty when off)
  std::string checkpointPath() const { return state_dir + "/agent-checkpoint.pb"; }
};

// Validates every field; the error names the first bad one ("config.underlayMTU: ...").
Result<AgentConfig> parseAgentConfig(const nlohmann::json& doc);
Result<AgentConfig> loadAgentConfig(const std::string& path);

// The pod MTU for an underlay MTU: Geneve with the OVN option (8 bytes), ESP
// when ipsec (any mode but off: keys prepares for encryption).
uint32_t podMtu(uint32_t underlay_mtu, bool ipv6_underlay, bool ipsec, bool nat_t = false);

}  // namespace dpu::control
