// The translation of a datapath flow into one rte_flow transfer rule on the
// eswitch: attributes, the item array (pattern) and the action array, with the
// spec/mask/conf structures they point to owned by the rule. Pure: no EAL, no
// device; the rte_flow backend hands the arrays to rte_flow_validate and
// rte_flow_create, and the unit tests read them back field by field.
//
// Layout (docs/hardware.md decides each choice):
//   attr      transfer=1, group 1 (group 0 is the firmware-managed root table:
//             it holds only each port's buildRootJumpRule), priority 1 (the
//             TTL guards of buildTtlGuardRules and the close punt rules of
//             buildClosePuntRules sit at priority 0 in the same group).
//   pattern   REPRESENTED_PORT(in_port's ethdev)
//             [tunnel: ETH(type) / IPV4|IPV6(src,dst,proto=UDP) / UDP(dst 6081) /
//              GENEVE(vni, protocol 0x6558, opt_len=2 words, O=0) /
//              GENEVE_OPT(OVN class 0x0102 type 0x80 len 1, data=ingress|egress)]
//             ETH(src,dst,type; has_vlan) [VLAN(tci, inner_type)]
//             IPV4(src,dst,proto; not a fragment) | IPV6(src,dst,proto; no fragment header)
//             [UDP|TCP(src,dst ports) | ICMP(type,code[,echo id]) | ICMP6(type,code)] END
//   actions   [RAW_DECAP(size = outer length)] the rewrites in flow order
//             (SET_MAC_SRC/DST, DEC_TTL, SET_IPV4_SRC/DST, SET_TP_SRC/DST)
//             [RAW_ENCAP(template bytes, UDP source port filled)]
//             COUNT [AGE] REPRESENTED_PORT(out port's ethdev) | DROP, END
// Every field of the flow's exact-match key is matched (or the match is
// narrower, e.g. Geneve packets with extra options miss and stay in
// software): hardware never forwards a packet the slow path did not decide.
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "flow/flow.h"
#include "offload/offloadable.h"

namespace dpu::offload {

struct RteFlowRuleOptions {
  uint32_t group = 1;           // where flow rules live (never 0, docs/hardware.md)
  uint32_t priority = 1;        // flow rules; the TTL guards use guard_priority
  // The rules that send packets to software (TTL guards, close punts): must be
  // a higher precedence (lower value) than `priority`.
  uint32_t guard_priority = 0;
  bool count = true;            // attach COUNT (counters merge into the flow's statistics)
  uint32_t age_timeout_s = 0;   // attach AGE with this timeout (1..0xffffff); 0: no AGE
  // RAW_ENCAP carries the template with a zero UDP source port; the NIC does
  // not compute one, so each rule gets geneveSourcePort(flowHash32(inner key,
  // seed)) — the port software encap uses, when the engine uses the same seed.
  bool fill_source_port = true;
  uint64_t source_port_seed = 0;
};

// Which datapath ports are on the eswitch, and their ethdev ids there. A flow
// that arrives on or leaves through a port not in the map (an af_xdp or
// af_packet port) cannot be offloaded.
class PortMap {
 public:
  void add(uint32_t datapath_port, uint16_t ethdev_port);
  void remove(uint32_t datapath_port);
  std::optional<uint16_t> ethdev(uint32_t datapath_port) const;
  const std::vector<std::pair<uint32_t, uint16_t>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<uint32_t, uint16_t>> entries_;  // few ports: a vector beats a map
};

// One rule, ready for rte_flow_validate/rte_flow_create. Move-only: the
// spec/mask/conf structures and the encap/decap bytes that `pattern` and
// `actions` point to live in `arena` (one allocation per rule: building is
// on the flow-setup path), whose heap block moves with the rule.
struct RteFlowRule {
  static constexpr size_t kArenaBytes = 4096;  // the largest rule needs about 1.5 KB

  rte_flow_attr attr{};
  std::vector<rte_flow_item> pattern;    // ends with RTE_FLOW_ITEM_TYPE_END
  std::vector<rte_flow_action> actions;  // ends with RTE_FLOW_ACTION_TYPE_END
  // The AGE action's configuration (nullptr without AGE): the backend sets its
  // context to the handle before creating the rule, so aged-flow reports name it.
  rte_flow_action_age* age = nullptr;
  std::unique_ptr<std::byte[]> arena;
  size_t arena_used = 0;

  RteFlowRule() = default;
  RteFlowRule(RteFlowRule&&) = default;
  RteFlowRule& operator=(RteFlowRule&&) = default;
  RteFlowRule(const RteFlowRule&) = delete;
  RteFlowRule& operator=(const RteFlowRule&) = delete;

  // The first item/action of a type, or nullptr.
  const rte_flow_item* item(rte_flow_item_type type, size_t nth = 0) const;
  const rte_flow_action* action(rte_flow_action_type type, size_t nth = 0) const;
};

// The rule for one flow, or why it cannot be offloaded (offloadFeatures'
// reasons, or a port not on the eswitch).
Result<RteFlowRule> buildRteFlowRule(const flow::FlowSpec& flow, const PortMap& ports,
                                     const RteFlowRuleOptions& options = {});

// A port's close punt rules for one shape (offloadable.h: ClosePuntShape):
// for each flag (FIN, SYN, RST), at guard_priority in the flows' group,
//   REPRESENTED_PORT(ethdev_port)
//   [Geneve: ETH(type) / IPV4|IPV6(proto UDP) / UDP(dst 6081) / GENEVE(protocol 0x6558)]
//   ETH(type; has_vlan) [VLAN(inner_type; has_more_vlan 0)] IPV4|IPV6(proto TCP)
//   TCP(tcp_flags spec = mask = the flag)
// actions PORT_REPRESENTOR(ethdev_port) END. They take precedence over every
// flow rule, so a translated (or tracked) connection's open, close and reset
// reach conntrack in software while its other packets stay in the NIC; other
// TCP flows of the port and shape have theirs forwarded by software's cached
// flow. One set per port and shape, not per flow: a connection costs the NIC
// one rule per direction. Unproven on hardware: mlx5's acceptance of
// PORT_REPRESENTOR in a transfer rule and of a tcp_flags mask at this
// priority (offload/README.md).
std::vector<RteFlowRule> buildClosePuntRules(const ClosePuntShape& shape, uint16_t ethdev_port,
                                             const RteFlowRuleOptions& options = {});

// Group 0, priority 0, everything from one port, JUMP to
// options.group: the root table holds only these (docs/hardware.md: keep rules out
// of group 0). One per port: mlx5 gives a transfer rule without a port item
// the source port of the port it is created on, so a single catch-all would
// only catch the proxy's own traffic.
RteFlowRule buildRootJumpRule(uint16_t ethdev_port, const RteFlowRuleOptions& options = {});

// DEC_TTL in hardware does not drop at zero: a packet arriving with TTL (hop
// limit) 0 or 1 must reach software, which answers with ICMP time exceeded.
// These rules, one per IP version for plain packets and, on the uplink
// (`tunnelled`), one per outer × inner IP version for Geneve packets, catch
// TTL ≤ 1 from `ethdev_port` at guard_priority and send the packet to that
// port's representor in software (PORT_REPRESENTOR), before any flow rule.
std::vector<RteFlowRule> buildTtlGuardRules(uint16_t ethdev_port, bool tunnelled,
                                            const RteFlowRuleOptions& options = {});

// "ETH", "RAW_ENCAP": for logs and test failure messages.
std::string itemTypeName(rte_flow_item_type type);
std::string actionTypeName(rte_flow_action_type type);
// "REPRESENTED_PORT ETH IPV4 UDP END" / "RAW_ENCAP COUNT REPRESENTED_PORT END".
std::string describePattern(const RteFlowRule& rule);
std::string describeActions(const RteFlowRule& rule);

}  // namespace dpu::offload
