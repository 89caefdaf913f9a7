// The logical model of one node (proto dpu.dataplane.v1.LogicalModel) as the
// parts that must agree on it check it: its validation, object by object, and
// the Delta arithmetic. No DPDK, no I/O: the dataplane's engine, the fake
// dataplane and the agent (for early, clear attach errors) link the same code,
// so a fake never accepts what the real dataplane refuses.
//
// What is refused, and how:
//  - The request as a whole (validate() fails, ErrorCode kInvalid; the
//    dataplane answers INVALID and changes nothing) only when nothing could
//    work: node settings that are unusable (tunnel IP, router MAC, MTUs, CIDRs)
//    or objects without an identity (an empty or repeated name or CIDR).
//  - Otherwise object by object. An object that fails its own checks, or
//    claims something another object in force holds, is left out of the model
//    in force and listed in Verdict::problems (REFUSED, with the reason); every
//    other object is in force. A port on a refused local subnet is refused too.
//
// Conflicts between objects are settled by claims: a port claims its key,
// representor, MAC, addresses (and, for MANAGEMENT, the one management slot);
// a local subnet its prefix and (datapath key, family); a remote node its
// tunnel IP and its subnets' prefixes; an inbound IPsec SA its (peer tunnel
// IP, SPI), an outbound one its remote node's one outbound slot; a service
// each (address, protocol, port) it serves on (cluster and external IPs) and
// each (protocol, node port); a port policy its port, which must be a port in
// force (a port has at most one). Objects are taken in this order and each is
// granted its claims only if none is held already:
//   1. local subnets, then ports, then remote nodes (a remote node overlapping
//      our own subnet is the one refused), then IPsec SAs (an SA of a remote
//      node not in force is refused), then services, then port policies (a
//      policy of a port not in force is refused);
//   2. within a kind: objects in force before with unchanged content, then
//      objects in force before whose content changed, then new objects;
//   3. within each of those, by name (CIDR for subnets).
// So the outcome depends on the requested model and on what was in force
// before, never on the order of a request's repeated fields: an established
// object keeps what it holds when a newcomer (or a changed object) asks for
// the same thing, and among newcomers the lowest name wins. When the holder
// goes, the next request grants the refused object its claim.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::model {

namespace dpv1 = ::dpu::dataplane::v1;

// The OVN option's egress key a sender writes when it does not know the
// destination port (the remote node published no key for that address): our
// receivers read it as "the distributed router, route by the inner
// destination". It is OVN's _MC_flood group, so it is never sent when the
// destination port's key is known. Outside the 15-bit range of port keys, so
// it never names a port.
inline constexpr uint16_t kRouterEgressPortKey = 0x8000;
inline constexpr uint32_t kMaxPortKey = 0x7fff;        // 15-bit OVN port key
inline constexpr uint32_t kMaxDatapathKey = 0xffffff;  // 24-bit VNI
inline constexpr size_t kMaxRemoteSubnets = 255;       // a flow names its remote subnet in one byte
inline constexpr size_t kMaxNodeIps = 8;               // north–south: the uplink's XDP maps hold this many

struct ModelSubnet {
  IpPrefix prefix;
  IpAddress gateway;
  bool has_gateway = false;
  uint32_t datapath_key = 0;
  std::string cidr;     // the text it was requested as (its name)
  std::string content;  // serialized Subnet: equal content, unchanged subnet
};

struct ModelPort {
  std::string name;
  uint16_t key = 0;
  dpv1::PortKind kind = dpv1::POD;
  std::string representor;
  MacAddress mac;
  std::vector<IpAddress> ips;
  uint32_t datapath_key = 0;
  std::string content;  // serialized LogicalPort: equal content, unchanged port
};

struct RemotePortKey {
  IpAddress ip;
  uint16_t key = 0;
};

struct ModelRemoteNode {
  std::string name;
  IpAddress tunnel_ip;
  // RemoteNode.nat_address: the node is behind a NAT and reached there.
  std::optional<IpAddress> nat_address;
  std::vector<ModelSubnet> subnets;
  std::vector<RemotePortKey> port_keys;  // sorted by address
  std::string content;
  // The address its packets go to and come from.
  const IpAddress& reach() const { return nat_address ? *nat_address : tunnel_ip; }
};

// RFC 4303 §2.1: SPIs 1..255 are reserved, 0 is never sent.
inline constexpr uint32_t kMinSpi = 256;
inline constexpr uint32_t kDefaultReplayWindow = 1024;

// An IPsec SA in force. `key` is secret: never logged, dumped or reported
// (its `content` holds it too: compare it, never print it).
struct ModelIpsecSa {
  std::string name;
  std::string remote_node;
  IpAddress peer_tunnel_ip;
  dpv1::IpsecDirection direction = dpv1::INBOUND;
  uint32_t spi = 0;
  uint32_t local_epoch = 0;
  uint32_t remote_epoch = 0;
  dpv1::IpsecAlgorithm algorithm = dpv1::AES_128_GCM;
  std::string key;
  std::array<uint8_t, 4> salt{};
  bool esn = true;
  uint64_t initial_sequence = 1;
  uint64_t sequence_limit = 0;  // outbound
  uint32_t replay_window = kDefaultReplayWindow;  // inbound (0 requested: the default)
  bool plaintext_accepted = false;  // inbound: the remote node's plaintext Geneve still accepted (a rollout)
  std::string content;
};

// A service endpoint for one service port (dpv1::ServiceBackend).
struct ModelBackend {
  IpAddress ip;
  uint16_t port = 0;
  bool local = false;
  bool ready = false;
  bool serving = false;
  bool terminating = false;
  auto operator<=>(const ModelBackend&) const = default;
};

struct ModelServicePort {
  std::string name;
  uint8_t protocol = 0;  // IANA: 6 TCP, 17 UDP, 132 SCTP
  uint16_t port = 0;
  uint16_t node_port = 0;  // 0: none
  std::vector<ModelBackend> backends;  // sorted by (ip, port): every DPU builds the same Maglev table
};

struct ModelService {
  std::string name;
  std::vector<IpAddress> cluster_ips;   // at most one per family
  std::vector<IpAddress> external_ips;  // external and load-balancer IPs
  std::vector<ModelServicePort> ports;
  bool internal_local = false;
  bool external_local = false;
  uint32_t affinity_timeout_s = 0;
  std::string content;
};

// NetworkPolicy of one local pod port (dpv1::PortPolicy, docs/policy.md).
struct ModelPolicyRule {
  std::vector<IpPrefix> peers;  // as requested (the agent sends them disjoint and sorted)
  uint8_t protocol = 0;         // IANA; 0: every protocol, ports ignored
  uint16_t port_first = 0;
  uint16_t port_last = 65535;
  std::string policy;           // "namespace/name"
};

struct ModelPolicyDirection {
  bool isolated = false;
  std::vector<std::string> policies;  // the policies isolating it
  std::vector<ModelPolicyRule> rules;
};

struct ModelPortPolicy {
  std::string port;  // a ModelPort in force
  std::string pod;
  ModelPolicyDirection ingress;
  ModelPolicyDirection egress;
  std::string content;  // serialized PortPolicy: equal content, unchanged rules
};

// The PortPolicy's own fields (a refusal names the field and what to fix):
// every peer a prefix without host bits, protocol 0, 1, 6, 17, 58 or 132,
// port_first <= port_last <= 65535, policy names non-empty, and a direction
// that is not isolated has no rules. Whether its port is in force is
// validate()'s to say.
Result<ModelPortPolicy> parsePortPolicy(const dpv1::PortPolicy& p);

// What a port in force gets when its PortPolicy is refused (a field the
// dataplane cannot read, or a dataplane older than the agent): both directions
// isolated by kRefusedPortPolicyName with no rule, so nothing new passes until
// a valid PortPolicy replaces it. A policy the dataplane cannot read must not
// leave its pod open. Its content is marked, so that the same request is
// judged again (and refused again) rather than taken as unchanged.
inline constexpr const char* kRefusedPortPolicyName = "(its PortPolicy was refused: all denied)";
ModelPortPolicy refusedPortPolicy(const dpv1::PortPolicy& p);

// A rule's peers in the packed form the agent sends (PolicyRule.peers_v4,
// peers_v6: 5- and 17-byte records, the address then the prefix length), in
// the given order. The dataplane reads `peers` and the packed fields alike.
void packPolicyPeers(const std::vector<IpPrefix>& peers, dpv1::PolicyRule& rule);
// Every peer of the rule as text ("10.0.0.0/24"): `peers`, then the packed
// ones, for the operator's view (dpuctl policy) of a rule sent packed.
// Records that are not prefixes are shown as found ("(bad record)"): the
// operator sees what the dataplane was sent, which validation refused.
void unpackPolicyPeers(dpv1::PolicyRule& rule);
// The same for every rule of both directions: for the operator, and for a
// dataplane that does not read packed peers (HelloReply.packed_peers).
void unpackPolicyPeers(dpv1::PortPolicy& policy);

// Why the port policy of `port` cannot be in force ("" when it can): its port
// is not among `ports` (those in force); a PORT problem among `problems` says
// why the port was refused. validate() and validatePortPolicyDelta give it.
std::string portPolicyPortProblem(const std::string& port, const std::vector<ModelPort>& ports,
                                  const std::vector<dpv1::ObjectProblem>& problems);

// Sessions a client's affinity lasts at most (Kubernetes caps
// sessionAffinityConfig.clientIP.timeoutSeconds at one day).
inline constexpr uint32_t kMaxAffinityTimeoutS = 86400;

// The service's own fields (a refusal names the field): what claims cannot
// decide. Shared with the agent, which refuses early what would be refused here.
Result<ModelService> parseService(const dpv1::Service& s);

// "protocol 6" as "TCP", for messages.
std::string protocolName(uint8_t protocol);

// The model in force: only objects that passed.
struct Model {
  bool programmed = false;
  std::string node_name;
  IpAddress tunnel_ip;
  bool has_tunnel_ip = false;
  uint32_t underlay_mtu = 0;
  uint32_t pod_mtu = 1500;
  bool ipsec = false;  // NodeSettings.ipsec: encrypt to every remote node, refuse plaintext from IPsec peers
  bool ipsec_nat_t = false;  // NodeSettings.ipsec_nat_traversal: ESP sent inside UDP 4500 (RFC 3948)
  uint32_t ipsec_nat_keepalive_s = 0;  // NodeSettings.ipsec_nat_keepalive_seconds (0: none)
  MacAddress router_mac;
  std::vector<ModelSubnet> local_subnets;  // by CIDR
  std::vector<ModelPort> ports;            // by name
  std::vector<ModelRemoteNode> remote_nodes;  // by name
  std::vector<ModelIpsecSa> ipsec_sas;        // by name
  std::vector<ModelService> services;         // by name
  std::vector<ModelPortPolicy> port_policies; // by port
  std::vector<IpPrefix> cluster_cidrs;        // node settings: the pods' addresses
  std::vector<IpPrefix> service_cidrs;        // node settings: where cluster IPs come from
  std::string node_content;  // serialized NodeSettings and the local subnets in force
  // North–south (NodeSettings.node_ips, node_gateways): the node's addresses
  // on the host PF with their prefix, and the node network's gateways.
  std::vector<IpInterfaceAddress> node_ips;
  std::vector<IpAddress> node_gateways;
};

struct Verdict {
  Model model;
  // Every requested object left out, sorted by (kind, name); state REFUSED.
  std::vector<dpv1::ObjectProblem> problems;
};

// Checks the whole request, then every object (see the top of this file).
// `previous`: the model in force before (nullptr: none), whose objects keep
// their claims. Fails (kInvalid, nothing in force changes) only for node
// settings or identities; the error names the field to fix.
Result<Verdict> validate(const dpv1::LogicalModel& requested, const Model* previous);

// The node settings alone (the first thing validate() checks).
Result<void> validateNodeSettings(const dpv1::NodeSettings& node);

// The node's north–south addresses: each node IP an interface address
// ("172.18.0.1/24") that is unicast, not link-local or loopback, not the
// network or broadcast address of its prefix, not the tunnel IP, outside
// `cluster` and `service`, listed once, at most kMaxNodeIps of them; at most
// one gateway per family, on-link in a node IP's prefix of its family and not
// a node IP. The error names the field (`ips_field`, `gateways_field`: the
// caller's names for them) and what to fix. validateNodeSettings and the
// agent's configuration check both use it, so they refuse alike.
struct NodeAddresses {
  std::vector<IpInterfaceAddress> ips;
  std::vector<IpAddress> gateways;
};
Result<NodeAddresses> parseNodeAddresses(const std::vector<std::string>& ips, const std::vector<std::string>& gateways,
                                         const IpAddress& tunnel_ip, const std::vector<IpPrefix>& cluster,
                                         const std::vector<IpPrefix>& service, const std::string& ips_field,
                                         const std::string& gateways_field);

// The claims of the services in force — each (address, protocol, port) they
// serve on and each (protocol, node port) — with the service holding each.
// validate() settles service conflicts with one; the dataplane keeps one
// between requests, so a Delta that changes a few services is validated
// against it without going through the rest of the model.
class ServiceClaims {
 public:
  ServiceClaims() = default;
  explicit ServiceClaims(const std::vector<ModelService>& in_force);
  // Why `svc` cannot be granted its claims ("" when it can): the first one
  // another service holds, named as validate() names it.
  std::string clash(const ModelService& svc) const;
  void grant(const ModelService& svc);
  // Gives up the claims `svc` holds (those another service holds stay).
  void release(const ModelService& svc);
  size_t size() const { return frontends_.size() + node_ports_.size(); }

 private:
  std::map<std::tuple<IpAddress, uint8_t, uint16_t>, std::string> frontends_;
  std::map<std::pair<uint8_t, uint16_t>, std::string> node_ports_;
};

// A Delta that changes services and nothing else: no node settings, no
// other kind upserted or deleted. Services claim only among themselves, so
// such a Delta leaves every other object's verdict as it was.
bool changesServicesOnly(const dpv1::Delta& delta);

struct ServiceUpdate {
  std::string name;
  std::optional<ModelService> in_force;  // nullopt: not in force (deleted, or refused)
};

struct ServiceDeltaVerdict {
  // By name: every service whose fate the Delta can change — the ones it
  // deletes or changes and the requested ones that were refused (a claim
  // they want may be free now). A service upserted with its content in
  // force is unchanged and not listed.
  std::vector<ServiceUpdate> updates;
  // The SERVICE problems of those names (the refused ones), by name.
  std::vector<dpv1::ObjectProblem> problems;
};

// What validate() would decide for the services of applyDelta(requested,
// delta), from the services in force (`in_force`, by name, with their
// `claims`) and `waiting`: the requested services not in force now that the
// Delta neither deletes nor upserts. The order is validate()'s (model.h):
// unchanged services keep their claims; then changed services, then the
// others, each by name, are granted theirs if free. `claims` becomes the
// outcome's. Fails (kInvalid, nothing changed) for an upsert without a name.
// Whether the deleted services exist is the caller's (applyDelta's kNotFound).
Result<ServiceDeltaVerdict> validateServiceDelta(const dpv1::Delta& delta, const std::vector<ModelService>& in_force,
                                                 const std::vector<const dpv1::Service*>& waiting,
                                                 ServiceClaims& claims);

// A Delta that changes port policies and nothing else. A port policy holds
// only its port, which such a Delta leaves as it is: every other object's
// verdict stays as it was, and so does that of a port policy it does not name.
bool changesPortPoliciesOnly(const dpv1::Delta& delta);

struct PortPolicyUpdate {
  std::string port;
  // nullopt: not in force (deleted, or its port is not in force); one refused
  // on a port in force is in force as refusedPortPolicy().
  std::optional<ModelPortPolicy> in_force;
};

struct PortPolicyDeltaVerdict {
  // By port: every port policy the Delta deletes or changes. One upserted
  // with its content in force is unchanged and not listed.
  std::vector<PortPolicyUpdate> updates;
  // The PORT_POLICY problems of those ports (the refused ones), by port.
  std::vector<dpv1::ObjectProblem> problems;
};

// What validate() would decide for the port policies of applyDelta(requested,
// delta), from the model in force (`in_force`: its ports and port policies,
// by port) and the problems of the request in force (`problems`: why a port
// was refused). Fails (kInvalid, nothing changed) for an upsert without a
// port, with validate()'s message. Whether the deleted port policies exist
// is the caller's (applyDelta's kNotFound).
Result<PortPolicyDeltaVerdict> validatePortPolicyDelta(const dpv1::Delta& delta, const Model& in_force,
                                                       const std::vector<dpv1::ObjectProblem>& problems);

// Applies a Delta to a copy of the requested model (refused objects
// included: the agent's view of the model is what Deltas refer to). Fails with
// kNotFound when the Delta deletes something the model lacks, which means the
// agent and the dataplane disagree about the base: a FullSync repairs it.
Result<dpv1::LogicalModel> applyDelta(const dpv1::LogicalModel& base, const dpv1::Delta& delta);

// Why `mac` cannot be a port's MAC on a node whose router MAC is `router_mac`
// ("" when it can): zero, multicast (broadcast included) or the router's. The
// same sentence validate() gives; the agent refuses an attach with it.
std::string portMacProblem(const MacAddress& mac, const MacAddress& router_mac);

// "port", "remote node", "local subnet", "ipsec sa": how problems name their kind.
std::string kindName(dpv1::ObjectProblem::Kind kind);

}  // namespace dpu::model
