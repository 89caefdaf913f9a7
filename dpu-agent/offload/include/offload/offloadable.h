// What an eswitch needs to offload one datapath flow, decided without a device:
// the rte_flow item and action kinds the flow translates into (FeatureSet), or
// the reason it can never run in hardware whatever the device (ESP, fragments,
// ICMP identifier rewrite, outer-IPv6 encap, ...; docs/hardware.md lists them).
//
// Every backend starts here, so that the rte_flow translation, the fake eswitch
// and `dpuctl dump-flows` agree on which flows stay in software and why. A
// backend then checks the FeatureSet against what its device supports.
//
// Pure functions, no DPDK: the fake eswitch and the engine's tests use them
// without linking DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "flow/flow.h"

namespace dpu::offload {

// One rte_flow item or action kind. The names (featureName) are DPDK's, so a
// refusal reads like the PMD's own ("action RAW_ENCAP not supported").
enum class Feature : uint8_t {
  // Pattern items.
  kItemRepresentedPort,
  kItemEth,
  kItemVlan,
  kItemIpv4,
  kItemIpv6,
  kItemUdp,
  kItemTcp,
  kItemIcmp,
  kItemIcmp6,
  kItemGeneve,
  kItemGeneveOpt,
  kItemTcpFlags,  // TCP item with hdr.tcp_flags under a mask (the close punt rules)
  // Actions.
  kActionRawDecap,
  kActionRawEncap,
  kActionSetMac,
  kActionDecTtl,
  kActionSetIpv4,
  kActionSetIpv6,
  kActionSetTp,
  kActionRepresentedPort,
  kActionDrop,
  kActionCount,
  kActionAge,
  kActionPortRepresentor,  // to the application, i.e. dpu-dataplane in software
  kCount_,  // number of features; not a feature
};

// "item GENEVE_OPT", "action RAW_ENCAP".
std::string featureName(Feature feature);

class FeatureSet {
 public:
  constexpr FeatureSet() = default;
  static constexpr FeatureSet all() {
    FeatureSet s;
    s.bits_ = (uint32_t{1} << static_cast<unsigned>(Feature::kCount_)) - 1;
    return s;
  }
  constexpr FeatureSet& add(Feature f) {
    bits_ |= bit(f);
    return *this;
  }
  constexpr FeatureSet& drop(Feature f) {
    bits_ &= ~bit(f);
    return *this;
  }
  constexpr bool has(Feature f) const { return (bits_ & bit(f)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint32_t bits() const { return bits_; }
  bool operator==(const FeatureSet&) const = default;

 private:
  static constexpr uint32_t bit(Feature f) { return uint32_t{1} << static_cast<unsigned>(f); }
  uint32_t bits_ = 0;
};
static_assert(static_cast<unsigned>(Feature::kCount_) <= 32, "FeatureSet is a 32-bit mask");

// The first feature in `needed` that `supported` lacks, or kCount_ when none.
Feature firstMissing(FeatureSet needed, FeatureSet supported);

// A flow longer than this stays in software (the slow path fuses a handful).
inline constexpr size_t kMaxOffloadActions = 16;

// The item and action kinds `flow` translates into (COUNT and AGE not
// included: a backend adds what it attaches to every rule; a flow with
// closePuntFlags adds item TCP flags and action PORT_REPRESENTOR, which its
// port's close punt rules need), or the reason the
// flow stays in software on any hardware. The reason names the flow's property
// and says that it stays in software; it never contains addresses, so equal
// reasons of different flows are equal strings (the offload manager interns them).
Result<FeatureSet> offloadFeatures(const flow::FlowSpec& flow);

// The TCP flags whose packets of `flow` must still reach software when the
// flow is in hardware: SYN, FIN and RST of a TCP flow with a NAT rewrite or
// of a connection tracked untranslated (FlowSpec::tracked), 0 for any other
// flow. The engine's fast path sends exactly these packets of a
// translated connection's cached flow to conntrack (its punt), so that the
// connection's state follows its close and reuse; toFlowSpec gives address and
// port rewrites to translated flows only. The punting is not the flow's own
// rule: its port's close punt rules for the flow's shape (ClosePuntShape)
// send those packets of every TCP flow of that shape to software, so a
// connection costs the NIC one rule per direction, not four.
uint8_t closePuntFlags(const flow::FlowSpec& flow);

// What a port's close punt rules match besides the TCP flag: the port, the
// outer IP version of a Geneve flow (0: not tunnelled), a VLAN tag and the IP
// version — the structure of a flow's pattern without its addresses and ports.
// A port has one set of close punt rules (FIN, SYN, RST) per shape its flows
// need, made when the first such flow is offloaded, before that flow's rule
// (rte_flow_rule.h: buildClosePuntRules), and kept while the port is on the
// eswitch.
struct ClosePuntShape {
  uint32_t port = 0;          // datapath port the packets arrive on
  uint8_t outer_family = 0;   // Geneve over IPv4 or IPv6; 0: not tunnelled
  bool vlan = false;          // one 802.1Q tag (QinQ is not offloaded)
  uint8_t family = 4;         // the (inner) IP version
  bool operator==(const ClosePuntShape&) const = default;
};

// The shape of `flow`'s close punt rules; nullopt when closePuntFlags(flow) is 0.
std::optional<ClosePuntShape> closePuntShape(const flow::FlowSpec& flow);

// "port 2, geneve/IPv4, IPv6, VLAN": for reasons and logs.
std::string describeClosePuntShape(const ClosePuntShape& shape);

// "punt:fin,syn,rst" for closePuntFlags' bits (FIN, SYN, RST in that order,
// other bits by value); "" for 0. dump-flows shows it after "hw".
std::string describeClosePunt(uint8_t tcp_flags);

// The length of the outer headers a Geneve flow with this tunnel match carries
// when it holds exactly the OVN option: outer Ethernet + IPv4/IPv6 + UDP +
// Geneve + the 8-byte OVN option. 0 when `tunnel.family` is not 4 or 6.
uint32_t geneveOuterLength(const flow::TunnelMatch& tunnel);

// Where the UDP header starts in a Geneve encap template (outer Ethernet,
// IPv4 without options or IPv6, UDP 6081, Geneve), or an error naming what is
// wrong with the template.
Result<uint32_t> encapUdpOffset(const flow::FlowAction& encap);

}  // namespace dpu::offload
