// The compiled form of NetworkPolicy for one pod: per direction, whether the
// pod is isolated and the rules that allow traffic, each naming the policy it
// came from. This is what the dataplane's slow path will match a new
// connection against (evaluate() is that match, written once here so the
// compiler's tests and the dataplane agree on it): the peer address (the
// source for ingress, the destination after service DNAT for egress), the IP
// protocol and the destination port.
//
// A rule set is plain data, sorted and deduplicated, so two compilations of
// the same cluster compare equal and a change is seen by comparing them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "control/cluster_source.h"

namespace dpu::policy {

using control::Protocol;

// IP protocol numbers (IANA) of the protocols NetworkPolicy ports name.
inline constexpr uint8_t kIpProtoAny = 0;  // in a rule: every protocol (a rule without ports)
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoSctp = 132;
uint8_t ipProtocol(Protocol p);

// Traffic the rule allows: a peer address inside one of `peers`, the IP
// protocol `protocol` (kIpProtoAny: every protocol, ports ignored), a
// destination port within [port_first, port_last].
struct AllowRule {
  std::vector<IpPrefix> peers;  // disjoint, sorted; 0.0.0.0/0 and ::/0 for "any peer"
  uint8_t protocol = kIpProtoAny;
  uint16_t port_first = 0;
  uint16_t port_last = 65535;
  std::string policy;           // "namespace/name" of the policy the rule comes from
  bool operator==(const AllowRule&) const = default;
  auto operator<=>(const AllowRule&) const = default;
};

// One direction of one pod. Not isolated: everything passes (no policy with
// this policyType selects the pod). Isolated: only what a rule allows;
// `policies` lists the policies that isolate it (a denied connection is
// counted against them).
struct DirectionRules {
  bool isolated = false;
  std::vector<std::string> policies;  // sorted
  std::vector<AllowRule> rules;       // sorted, deduplicated
  bool operator==(const DirectionRules&) const = default;
};

struct PodRules {
  std::string pod;  // "namespace/name"
  DirectionRules ingress;
  DirectionRules egress;
  bool operator==(const PodRules&) const = default;
};

// Whether `rules` let a connection with this peer address, IP protocol and
// destination port pass (for ICMP and other port-less protocols, port 0).
bool evaluate(const DirectionRules& rules, const IpAddress& peer, uint8_t ip_protocol, uint16_t port);

// `from` minus every prefix of `except`, as disjoint prefixes in address
// order (an except of another family removes nothing).
std::vector<IpPrefix> subtractPrefixes(const IpPrefix& from, const std::vector<IpPrefix>& except);
// The smallest sorted list of disjoint prefixes covering the same addresses:
// prefixes inside another are dropped, sibling halves merged.
std::vector<IpPrefix> normalizePrefixes(std::vector<IpPrefix> prefixes);

// A rule set as text, one rule a line, for test failures and (later) dpuctl.
std::string describe(const DirectionRules& rules);

}  // namespace dpu::policy
