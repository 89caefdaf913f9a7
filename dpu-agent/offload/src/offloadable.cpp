// Hardware-independent offload decisions: which rte_flow item and action kinds
// a flow needs, and which flows no eswitch can take (see offloadable.h).
#include "offload/offloadable.h"

#include <array>
#include <cstdio>
#include <utility>

#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::offload {

namespace {

using flow::ActionType;
using overlay::FlowKey;

constexpr std::array<const char*, static_cast<size_t>(Feature::kCount_)> kFeatureNames = {
    "item REPRESENTED_PORT", "item ETH",         "item VLAN",          "item IPV4",
    "item IPV6",             "item UDP",         "item TCP",           "item ICMP",
    "item ICMP6",            "item GENEVE",      "item GENEVE_OPT",    "item TCP (tcp_flags)", "action RAW_DECAP",
    "action RAW_ENCAP",      "action SET_MAC",   "action DEC_TTL",     "action SET_IPV4",
    "action SET_IPV6",       "action SET_TP",         "action REPRESENTED_PORT", "action DROP", "action COUNT",
    "action AGE",            "action PORT_REPRESENTOR",
};

std::string hex16(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

bool isIcmpEcho(const FlowKey& key) {
  const uint8_t type = static_cast<uint8_t>(key.l4_src >> 8);
  if (key.ethertype == overlay::eth::kTypeIpv4 && key.ip_proto == overlay::ipproto::kIcmp) {
    return type == overlay::icmp::kTypeEchoRequest || type == overlay::icmp::kTypeEchoReply;
  }
  if (key.ethertype == overlay::eth::kTypeIpv6 && key.ip_proto == overlay::ipproto::kIcmpv6) {
    return type == overlay::icmp6::kTypeEchoRequest || type == overlay::icmp6::kTypeEchoReply;
  }
  return false;
}

bool isNatRewrite(ActionType type) {
  switch (type) {
    case ActionType::kSetIpv4Src:
    case ActionType::kSetIpv4Dst:
    case ActionType::kSetIpv6Src:
    case ActionType::kSetIpv6Dst:
    case ActionType::kSetL4Src:
    case ActionType::kSetL4Dst:
      return true;
    default:
      return false;
  }
}

}  // namespace

uint8_t closePuntFlags(const flow::FlowSpec& flow) {
  if (flow.match.key.ip_proto != overlay::ipproto::kTcp) return 0;
  if (flow.tracked) return overlay::tcp::kFlagFin | overlay::tcp::kFlagSyn | overlay::tcp::kFlagRst;
  for (const flow::FlowAction& a : flow.actions) {
    if (isNatRewrite(a.type)) return overlay::tcp::kFlagFin | overlay::tcp::kFlagSyn | overlay::tcp::kFlagRst;
  }
  return 0;
}

std::optional<ClosePuntShape> closePuntShape(const flow::FlowSpec& flow) {
  if (closePuntFlags(flow) == 0) return std::nullopt;
  const overlay::FlowKey& key = flow.match.key;
  ClosePuntShape shape;
  shape.port = key.in_port;
  shape.outer_family = flow.match.tunnel.family;
  shape.vlan = (key.flags & overlay::FlowKey::kFlagOuterVlan) != 0;
  shape.family = key.ethertype == overlay::eth::kTypeIpv4 ? 4 : 6;
  return shape;
}

std::string describeClosePuntShape(const ClosePuntShape& shape) {
  std::string s = "port " + std::to_string(shape.port) + ", ";
  if (shape.outer_family != 0) s += "geneve/IPv" + std::to_string(shape.outer_family) + ", ";
  s += "IPv" + std::to_string(shape.family);
  if (shape.vlan) s += ", VLAN";
  return s;
}

std::string describeClosePunt(uint8_t tcp_flags) {
  if (tcp_flags == 0) return "";
  static constexpr std::pair<uint8_t, const char*> kNamed[] = {
      {overlay::tcp::kFlagFin, "fin"}, {overlay::tcp::kFlagSyn, "syn"}, {overlay::tcp::kFlagRst, "rst"}};
  std::string s = "punt:";
  uint8_t rest = tcp_flags;
  for (const auto& [bit, name] : kNamed) {
    if (!(tcp_flags & bit)) continue;
    s += (s.size() > 5 ? "," : "") + std::string(name);
    rest &= static_cast<uint8_t>(~bit);
  }
  for (unsigned bit = 1; bit < 0x100; bit <<= 1) {
    if (rest & bit) s += (s.size() > 5 ? "," : "") + hex16(static_cast<uint16_t>(bit));
  }
  return s;
}

std::string featureName(Feature feature) {
  const auto i = static_cast<size_t>(feature);
  return i < kFeatureNames.size() ? kFeatureNames[i] : "unknown feature";
}

Feature firstMissing(FeatureSet needed, FeatureSet supported) {
  for (unsigned i = 0; i < static_cast<unsigned>(Feature::kCount_); ++i) {
    const auto f = static_cast<Feature>(i);
    if (needed.has(f) && !supported.has(f)) return f;
  }
  return Feature::kCount_;
}

uint32_t geneveOuterLength(const flow::TunnelMatch& tunnel) {
  uint32_t ip = 0;
  if (tunnel.family == 4) ip = overlay::ipv4::kMinHeaderLen;
  if (tunnel.family == 6) ip = overlay::ipv6::kHeaderLen;
  if (ip == 0) return 0;
  return overlay::eth::kHeaderLen + ip + overlay::udp::kHeaderLen + overlay::kGeneveHeaderLen +
         overlay::kOvnOptionWireLen;
}

Result<uint32_t> encapUdpOffset(const flow::FlowAction& encap) {
  const auto& h = encap.encap_header;
  const uint8_t* p = h.data();
  if (h.size() < overlay::eth::kHeaderLen) {
    return Error{"Geneve encap header of " + std::to_string(h.size()) + " bytes is shorter than Ethernet"};
  }
  const uint16_t type = overlay::load16(p + 12);
  uint32_t udp = 0;
  if (type == overlay::eth::kTypeIpv4) {
    udp = overlay::eth::kHeaderLen + overlay::ipv4::kMinHeaderLen;
    if (h.size() < udp || p[14] != 0x45 || p[14 + overlay::ipv4::kProtocolOffset] != overlay::ipproto::kUdp) {
      return Error{"Geneve encap header is not IPv4 without options carrying UDP"};
    }
    if (encap.encap_family != 4) return Error{"Geneve encap header is IPv4 but encap_family says 6"};
  } else if (type == overlay::eth::kTypeIpv6) {
    udp = overlay::eth::kHeaderLen + overlay::ipv6::kHeaderLen;
    if (h.size() < udp || p[14 + overlay::ipv6::kNextHeaderOffset] != overlay::ipproto::kUdp) {
      return Error{"Geneve encap header is not IPv6 carrying UDP (extension headers are not supported)"};
    }
    if (encap.encap_family != 6) return Error{"Geneve encap header is IPv6 but encap_family says 4"};
  } else {
    return Error{"Geneve encap header has ethertype " + hex16(type) + ", expected IPv4 or IPv6"};
  }
  if (h.size() < udp + overlay::udp::kHeaderLen + overlay::kGeneveHeaderLen ||
      overlay::udp::dstPort(p + udp) != overlay::kGeneveUdpPort) {
    return Error{"Geneve encap header does not end in UDP port 6081 and a Geneve header"};
  }
  // RAW_ENCAP prepends exactly these bytes: they must end where the Geneve
  // options (Opt Len, in 4-byte words) end.
  const uint32_t options = (p[udp + overlay::udp::kHeaderLen] & 0x3f) * 4u;
  if (h.size() != udp + overlay::udp::kHeaderLen + overlay::kGeneveHeaderLen + options) {
    return Error{"Geneve encap header of " + std::to_string(h.size()) + " bytes does not end where its " +
                 std::to_string(options) + " bytes of options end"};
  }
  return udp;
}

Result<FeatureSet> offloadFeatures(const flow::FlowSpec& flow) {
  const FlowKey& key = flow.match.key;
  const flow::TunnelMatch& tunnel = flow.match.tunnel;
  FeatureSet f;
  f.add(Feature::kItemRepresentedPort).add(Feature::kItemEth);

  if (tunnel.family != 0) {
    if (tunnel.family != 4 && tunnel.family != 6) {
      return Error{"tunnel match has address family " + std::to_string(tunnel.family) + ", expected 4 or 6"};
    }
    if (tunnel.vni > overlay::kGeneveMaxVni) return Error{"tunnel VNI does not fit 24 bits"};
    if (tunnel.ingress_port_key > overlay::kOvnMaxIngressPortKey) {
      return Error{"OVN ingress port key does not fit 15 bits"};
    }
    f.add(tunnel.family == 4 ? Feature::kItemIpv4 : Feature::kItemIpv6);
    f.add(Feature::kItemUdp).add(Feature::kItemGeneve).add(Feature::kItemGeneveOpt);
  }

  if ((key.flags & FlowKey::kFlagOuterVlan) && (key.flags & FlowKey::kFlagInnerVlan)) {
    return Error{"two VLAN tags (QinQ) are not offloaded"};
  }
  if (key.flags & FlowKey::kFlagOuterQinq) return Error{"an 802.1ad (S-tag) VLAN is not offloaded"};
  if (key.flags & FlowKey::kFlagOuterVlan) f.add(Feature::kItemVlan);
  if (key.flags & (FlowKey::kFlagFragment | FlowKey::kFlagLaterFragment)) {
    return Error{"IP fragments stay in software (docs/hardware.md: no ports to match)"};
  }

  const bool v4 = key.ethertype == overlay::eth::kTypeIpv4;
  const bool v6 = key.ethertype == overlay::eth::kTypeIpv6;
  if (!v4 && !v6) {
    return Error{"ethertype " + hex16(key.ethertype) + " is not offloaded (only IPv4 and IPv6 flows are)"};
  }
  f.add(v4 ? Feature::kItemIpv4 : Feature::kItemIpv6);
  const bool tcp = key.ip_proto == overlay::ipproto::kTcp;
  const bool udp = key.ip_proto == overlay::ipproto::kUdp;
  const bool icmp = v4 && key.ip_proto == overlay::ipproto::kIcmp;
  const bool icmp6 = v6 && key.ip_proto == overlay::ipproto::kIcmpv6;
  if (tcp) f.add(Feature::kItemTcp);
  if (udp) f.add(Feature::kItemUdp);
  if (icmp) f.add(Feature::kItemIcmp);
  if (icmp6) {
    // DPDK 22.11's ICMP6 item has type and code only: an echo flow, whose key
    // holds the identifier, cannot be matched exactly.
    if (isIcmpEcho(key) && key.l4_dst != 0) {
      return Error{"ICMPv6 echo identifier cannot be matched by rte_flow in DPDK 22.11"};
    }
    f.add(Feature::kItemIcmp6);
  }

  if (flow.actions.size() > kMaxOffloadActions) {
    return Error{"more than " + std::to_string(kMaxOffloadActions) + " actions are not offloaded"};
  }
  size_t fates = 0;
  bool encapped = false;
  for (size_t i = 0; i < flow.actions.size(); ++i) {
    const flow::FlowAction& a = flow.actions[i];
    if (fates > 0) {
      return Error{a.type == ActionType::kOutput ? "more than one output (flooding) is not offloaded"
                                                 : "actions after the output or drop are not offloaded"};
    }
    switch (a.type) {
      case ActionType::kGeneveDecap: {
        if (i != 0) return Error{"Geneve decap that is not the first action is not offloaded"};
        if (tunnel.family == 0) return Error{"Geneve decap on a flow that matched no tunnel"};
        const uint32_t outer = geneveOuterLength(tunnel);
        if (a.decap_bytes != outer) {
          return Error{"Geneve decap of " + std::to_string(a.decap_bytes) +
                       " bytes differs from the matched outer headers (" + std::to_string(outer) +
                       " bytes with the OVN option only)"};
        }
        f.add(Feature::kActionRawDecap);
        break;
      }
      case ActionType::kGeneveEncap: {
        if (encapped) return Error{"two Geneve encaps are not offloaded"};
        auto udp_offset = encapUdpOffset(a);
        if (!udp_offset) return Error{udp_offset.error()};
        if (a.encap_family == 6) {
          // Over IPv6 the outer UDP checksum is mandatory (RFC 8200 §8.1) and
          // our receivers drop a zero one; the NIC cannot compute it.
          return Error{"Geneve over IPv6 needs an outer UDP checksum the NIC cannot compute (docs/hardware.md)"};
        }
        encapped = true;
        f.add(Feature::kActionRawEncap);
        break;
      }
      case ActionType::kSetEthSrc:
      case ActionType::kSetEthDst:
        if (encapped) return Error{"a MAC rewrite after Geneve encap is not offloaded"};
        f.add(Feature::kActionSetMac);
        break;
      case ActionType::kDecTtl:
        if (encapped) return Error{"a TTL decrement after Geneve encap is not offloaded"};
        f.add(Feature::kActionDecTtl);
        break;
      case ActionType::kSetIpv4Src:
      case ActionType::kSetIpv4Dst:
        if (encapped) return Error{"a NAT rewrite after Geneve encap is not offloaded"};
        if (!v4) return Error{"an IPv4 address rewrite on a non-IPv4 flow is not offloaded"};
        f.add(Feature::kActionSetIpv4);
        break;
      case ActionType::kSetL4Src:
      case ActionType::kSetL4Dst:
        if (encapped) return Error{"a NAT rewrite after Geneve encap is not offloaded"};
        if (icmp || icmp6) {
          return Error{"ICMP identifier rewrite has no rte_flow action (docs/hardware.md); it stays in software"};
        }
        if (!tcp && !udp) return Error{"a port rewrite on a flow that is not TCP or UDP is not offloaded"};
        f.add(Feature::kActionSetTp);
        break;
      case ActionType::kEspEncrypt:
      case ActionType::kEspDecrypt:
        return Error{"inline IPsec is not available through DPDK on mlx5 (docs/hardware.md); ESP stays in software"};
      case ActionType::kSetIpv6Src:
      case ActionType::kSetIpv6Dst:
        if (encapped) return Error{"a NAT rewrite after Geneve encap is not offloaded"};
        if (v4) return Error{"an IPv6 address rewrite on a non-IPv6 flow is not offloaded"};
        f.add(Feature::kActionSetIpv6);
        break;
      case ActionType::kOutput:
        ++fates;
        f.add(Feature::kActionRepresentedPort);
        break;
      case ActionType::kDrop:
        ++fates;
        f.add(Feature::kActionDrop);
        break;
    }
  }
  if (fates == 0) return Error{"a flow without an output or drop is not offloaded"};
  if (closePuntFlags(flow) != 0) {
    // Its SYN, FIN and RST must keep reaching conntrack: the close punt rules.
    f.add(Feature::kItemTcpFlags).add(Feature::kActionPortRepresentor);
  }
  return f;
}

}  // namespace dpu::offload
