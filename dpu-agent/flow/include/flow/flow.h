// A datapath flow as every part of dpu-dataplane describes it: what the slow
// path decides for one exact match, what the flow cache compiles into its
// per-lcore action list, what offload translates into rte_flow rules, and what
// `dpuctl dump-flows` prints. This is the portable, control-side form (vectors
// allowed); the lcores run a compiled copy (datapath/) and never see this type.
//
// Ports are DPDK ethdev port ids. The match is exact: every field of FlowMatch
// takes part (a cached flow is an exact-match entry, as in OVS's EMC).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "overlay/flow_key.h"

namespace dpu::flow {

using Mac = std::array<uint8_t, 6>;

// Outer headers of a packet that arrived through a Geneve tunnel. `family` 0
// means "not tunnelled" and every other field is zero.
struct TunnelMatch {
  std::array<uint8_t, 16> remote_ip{};  // outer source address; IPv4 in the first 4 bytes
  std::array<uint8_t, 16> local_ip{};   // outer destination (our tunnel IP)
  uint32_t vni = 0;
  uint16_t ingress_port_key = 0;        // OVN option, 15 bits
  uint16_t egress_port_key = 0;         // OVN option, 16 bits
  uint8_t family = 0;                   // 0, 4 or 6
  uint8_t reserved[3] = {};
  bool operator==(const TunnelMatch&) const = default;
};

struct FlowMatch {
  overlay::FlowKey key;                 // in_port = the DPDK port it arrived on (the uplink for tunnels)
  Mac eth_src{};
  Mac eth_dst{};
  uint8_t reserved[4] = {};
  TunnelMatch tunnel;
  bool operator==(const FlowMatch&) const = default;
};

enum class ActionType : uint8_t {
  kOutput,        // port
  kSetEthSrc,     // mac
  kSetEthDst,     // mac
  kDecTtl,        // IPv4 TTL / IPv6 hop limit minus one (drop at zero: the slow path handles expiry)
  kGeneveDecap,   // strip outer Ethernet/IP/UDP/Geneve (decap_bytes); always first
  kGeneveEncap,   // prepend encap_header (outer Ethernet/IP/UDP/Geneve + options, lengths and
                  // checksums filled per packet); vni/ports keys are inside the header bytes
  kSetIpv4Src,    // NAT: ipv4
  kSetIpv4Dst,
  kSetL4Src,      // l4_port (ICMP echo: the identifier)
  kSetL4Dst,
  kEspEncrypt,    // IPsec hooks (the IPsec issue): sa_index
  kEspDecrypt,
  kDrop,          // drop_reason: an overlay::Status or datapath reason code, counted
  kSetIpv6Src,    // NAT: ipv6
  kSetIpv6Dst,
};

struct FlowAction {
  ActionType type = ActionType::kDrop;
  uint16_t port = 0;
  Mac mac{};
  uint32_t ipv4 = 0;                    // network order
  std::array<uint8_t, 16> ipv6{};
  uint16_t l4_port = 0;                 // host order
  uint32_t sa_index = 0;
  uint16_t drop_reason = 0;
  uint16_t decap_bytes = 0;
  std::vector<uint8_t> encap_header;    // kGeneveEncap: the template bytes (GeneveEncapTemplate::bytes())
  uint8_t encap_family = 4;             // outer IP version of encap_header
  bool operator==(const FlowAction&) const = default;
};

struct FlowSpec {
  FlowMatch match;
  std::vector<FlowAction> actions;
  // The flow's connection is tracked without a translation (NetworkPolicy
  // stateful replies): its TCP close must reach software as a translated
  // connection's does (offload closePuntFlags).
  bool tracked = false;
  bool operator==(const FlowSpec&) const = default;
};

// OVS dump-flows style text, for dpuctl and logs:
//   "in_port=3,eth_src=0a:58:0a:f4:01:05,...,ipv4,nw_src=10.244.1.5,nw_dst=10.244.2.7,udp,tp_src=...,tp_dst=..."
//   "dec_ttl,set_eth_src:..,set_eth_dst:..,geneve_encap(vni=..,remote=..,ingress=..,egress=..),output:0"
std::string describeMatch(const FlowMatch& match);
std::string describeActions(const std::vector<FlowAction>& actions);

}  // namespace dpu::flow
