// FlowSpec → rte_flow item and action arrays (see rte_flow_rule.h for the
// layout). Multi-byte rte_flow fields are big-endian (rte_be*_t); the flow key
// keeps ports, ethertype and VLAN TCI in host order and addresses as wire bytes.
#include "offload/rte_flow_rule.h"

#include <rte_byteorder.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "offload/offloadable.h"
#include "overlay/flow_key.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::offload {

namespace {

using flow::ActionType;
using overlay::FlowKey;

// Builds one rule, keeping every spec/mask/conf alive in the rule's arena.
class RuleBuilder {
 public:
  explicit RuleBuilder(RteFlowRule& rule) : rule_(rule) {
    rule_.arena.reset(new std::byte[RteFlowRule::kArenaBytes]);  // not zeroed: every use is a full copy
    rule_.arena_used = 0;
    rule_.pattern.reserve(16);
    rule_.actions.reserve(16);
  }

  // Bump allocation in the rule's arena. The rte_flow structures are trivially
  // copyable C structs, so placing copies there is all their lifetime needs.
  void* allocate(size_t size, size_t align) {
    const size_t at = (rule_.arena_used + align - 1) & ~(align - 1);
    // A rule never comes near the arena's size (encap ≤ 322 bytes, 12 items);
    // running out is a bug in this file, not bad input.
    if (at + size > RteFlowRule::kArenaBytes) std::abort();
    rule_.arena_used = at + size;
    return rule_.arena.get() + at;
  }
  template <typename T>
  T* keep(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    void* p = allocate(sizeof(T), alignof(T));
    std::memcpy(p, &value, sizeof(T));
    return std::launder(static_cast<T*>(p));
  }
  uint8_t* keepBytes(const uint8_t* data, size_t size) {
    auto* p = static_cast<uint8_t*>(allocate(size, alignof(uint32_t)));
    std::memcpy(p, data, size);
    return p;
  }

  template <typename T>
  void item(rte_flow_item_type type, const T& spec, const T& mask) {
    rte_flow_item it{};
    it.type = type;
    it.spec = keep(spec);
    it.mask = keep(mask);
    rule_.pattern.push_back(it);
  }
  void action(rte_flow_action_type type, const void* conf) {
    rte_flow_action a{};
    a.type = type;
    a.conf = conf;
    rule_.actions.push_back(a);
  }
  void end() {
    rte_flow_item it{};
    it.type = RTE_FLOW_ITEM_TYPE_END;
    rule_.pattern.push_back(it);
    action(RTE_FLOW_ACTION_TYPE_END, nullptr);
  }

  void representedPort(uint16_t ethdev) {
    rte_flow_item_ethdev spec{}, mask{};
    spec.port_id = ethdev;
    mask.port_id = 0xffff;
    item(RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT, spec, mask);
  }

  // Ethernet with only its type matched (outer header of a tunnel, guards,
  // close punts); with `vlan`, one 802.1Q tag whose inner type is matched,
  // any TCI.
  void ethType(uint16_t ethertype, bool vlan = false) {
    rte_flow_item_eth spec{}, mask{};
    if (!vlan) {
      spec.hdr.ether_type = rte_cpu_to_be_16(ethertype);
      mask.hdr.ether_type = 0xffff;
    }
    spec.has_vlan = vlan ? 1 : 0;
    mask.has_vlan = 1;
    item(RTE_FLOW_ITEM_TYPE_ETH, spec, mask);
    if (vlan) {
      rte_flow_item_vlan vspec{}, vmask{};
      vspec.hdr.eth_proto = rte_cpu_to_be_16(ethertype);
      vmask.hdr.eth_proto = 0xffff;
      vspec.has_more_vlan = 0;
      vmask.has_more_vlan = 1;
      item(RTE_FLOW_ITEM_TYPE_VLAN, vspec, vmask);
    }
  }

  // An IP item of any addresses with only the protocol matched.
  void ipProto(int family, uint8_t proto) {
    if (family == 4) {
      rte_flow_item_ipv4 spec{}, mask{};
      spec.hdr.next_proto_id = proto;
      mask.hdr.next_proto_id = 0xff;
      item(RTE_FLOW_ITEM_TYPE_IPV4, spec, mask);
    } else {
      rte_flow_item_ipv6 spec{}, mask{};
      spec.hdr.proto = proto;
      mask.hdr.proto = 0xff;
      item(RTE_FLOW_ITEM_TYPE_IPV6, spec, mask);
    }
  }

  // Geneve from any peer carrying Ethernet, over IPv4 or IPv6 (guards, close
  // punts): ETH(type) / IP(proto UDP) / UDP(dst 6081) / GENEVE(protocol).
  void anyGeneve(int outer_family) {
    ethType(outer_family == 4 ? overlay::eth::kTypeIpv4 : overlay::eth::kTypeIpv6);
    ipProto(outer_family, overlay::ipproto::kUdp);
    ports(RTE_FLOW_ITEM_TYPE_UDP, 0, overlay::kGeneveUdpPort, false);
    rte_flow_item_geneve gspec{}, gmask{};
    gspec.protocol = rte_cpu_to_be_16(overlay::kGeneveProtocolEthernet);
    gmask.protocol = 0xffff;
    item(RTE_FLOW_ITEM_TYPE_GENEVE, gspec, gmask);
  }

  void ipv4(const uint8_t* src, const uint8_t* dst, uint8_t proto) {
    rte_flow_item_ipv4 spec{}, mask{};
    std::memcpy(&spec.hdr.src_addr, src, 4);
    std::memcpy(&spec.hdr.dst_addr, dst, 4);
    spec.hdr.next_proto_id = proto;
    mask.hdr.src_addr = 0xffffffff;
    mask.hdr.dst_addr = 0xffffffff;
    mask.hdr.next_proto_id = 0xff;
    // More-fragments bit and offset must be zero: a fragment is another flow
    // (its key carries the fragment flag) and stays in software.
    spec.hdr.fragment_offset = 0;
    mask.hdr.fragment_offset = rte_cpu_to_be_16(overlay::ipv4::kFlagMf | overlay::ipv4::kFragOffsetMask);
    item(RTE_FLOW_ITEM_TYPE_IPV4, spec, mask);
  }

  void ipv6(const uint8_t* src, const uint8_t* dst, uint8_t proto) {
    rte_flow_item_ipv6 spec{}, mask{};
    std::memcpy(spec.hdr.src_addr, src, 16);
    std::memcpy(spec.hdr.dst_addr, dst, 16);
    spec.hdr.proto = proto;
    std::memset(mask.hdr.src_addr, 0xff, 16);
    std::memset(mask.hdr.dst_addr, 0xff, 16);
    mask.hdr.proto = 0xff;
    spec.has_frag_ext = 0;
    mask.has_frag_ext = 1;
    item(RTE_FLOW_ITEM_TYPE_IPV6, spec, mask);
  }

  void ports(rte_flow_item_type type, uint16_t src, uint16_t dst, bool match_src = true) {
    if (type == RTE_FLOW_ITEM_TYPE_UDP) {
      rte_flow_item_udp spec{}, mask{};
      spec.hdr.src_port = rte_cpu_to_be_16(src);
      spec.hdr.dst_port = rte_cpu_to_be_16(dst);
      mask.hdr.src_port = match_src ? 0xffff : 0;
      if (!match_src) spec.hdr.src_port = 0;
      mask.hdr.dst_port = 0xffff;
      item(type, spec, mask);
    } else {
      tcp(src, dst);
    }
  }

  // TCP ports.
  void tcp(uint16_t src, uint16_t dst) {
    rte_flow_item_tcp spec{}, mask{};
    spec.hdr.src_port = rte_cpu_to_be_16(src);
    spec.hdr.dst_port = rte_cpu_to_be_16(dst);
    mask.hdr.src_port = 0xffff;
    mask.hdr.dst_port = 0xffff;
    item(RTE_FLOW_ITEM_TYPE_TCP, spec, mask);
  }

  // TCP segments that carry `flag` (one bit), whatever their ports and other
  // flags (spec = mask = the bit).
  void tcpFlag(uint8_t flag) {
    rte_flow_item_tcp spec{}, mask{};
    spec.hdr.tcp_flags = flag;
    mask.hdr.tcp_flags = flag;
    item(RTE_FLOW_ITEM_TYPE_TCP, spec, mask);
  }

 private:
  RteFlowRule& rule_;
};

rte_flow_attr transferAttr(uint32_t group, uint32_t priority) {
  rte_flow_attr attr{};
  attr.group = group;
  attr.priority = priority;
  attr.transfer = 1;
  return attr;
}

// The Geneve header and OVN option of a flow's tunnel, as matched and as the
// representative RAW_DECAP buffer carries them.
constexpr uint16_t kOvnOptionWords = overlay::kOvnOptionWireLen / 4;  // Geneve Opt Len counts 4-byte words

void ovnOptionData(const flow::TunnelMatch& t, uint8_t out[4]) {
  overlay::store16(out, t.ingress_port_key & overlay::kOvnMaxIngressPortKey);
  overlay::store16(out + 2, t.egress_port_key);
}

void tunnelItems(RuleBuilder& b, const flow::TunnelMatch& t) {
  const bool v4 = t.family == 4;
  b.ethType(v4 ? overlay::eth::kTypeIpv4 : overlay::eth::kTypeIpv6);
  // Outer source is the peer (remote), destination our tunnel IP (local).
  if (v4) {
    b.ipv4(t.remote_ip.data(), t.local_ip.data(), overlay::ipproto::kUdp);
  } else {
    b.ipv6(t.remote_ip.data(), t.local_ip.data(), overlay::ipproto::kUdp);
  }
  // The source port is the sender's entropy: not part of the flow.
  b.ports(RTE_FLOW_ITEM_TYPE_UDP, 0, overlay::kGeneveUdpPort, /*match_src=*/false);

  rte_flow_item_geneve gspec{}, gmask{};
  // Opt Len = exactly the OVN option and O = 0: packets with more options
  // (maybe critical ones software would drop) or OAM packets miss and go to
  // software. docs/hardware.md: the item matches VNI, OAM, protocol and options length.
  gspec.ver_opt_len_o_c_rsvd0 = rte_cpu_to_be_16(static_cast<uint16_t>(kOvnOptionWords << 8));
  gmask.ver_opt_len_o_c_rsvd0 = rte_cpu_to_be_16(0x3f80);
  gspec.protocol = rte_cpu_to_be_16(overlay::kGeneveProtocolEthernet);
  gmask.protocol = 0xffff;
  gspec.vni[0] = static_cast<uint8_t>(t.vni >> 16);
  gspec.vni[1] = static_cast<uint8_t>(t.vni >> 8);
  gspec.vni[2] = static_cast<uint8_t>(t.vni);
  gmask.vni[0] = gmask.vni[1] = gmask.vni[2] = 0xff;
  b.item(RTE_FLOW_ITEM_TYPE_GENEVE, gspec, gmask);

  // docs/hardware.md: one option class/type/length per device, full masks, data
  // mandatory. The data is the option's 4 wire bytes (big-endian word).
  uint8_t data[4];
  ovnOptionData(t, data);
  const uint32_t all_ones = 0xffffffff;
  uint32_t* spec_data = reinterpret_cast<uint32_t*>(b.keepBytes(data, 4));
  uint32_t* mask_data = reinterpret_cast<uint32_t*>(b.keepBytes(reinterpret_cast<const uint8_t*>(&all_ones), 4));
  rte_flow_item_geneve_opt ospec{}, omask{};
  ospec.option_class = rte_cpu_to_be_16(overlay::kOvnOptionClass);
  ospec.option_type = overlay::kOvnOptionType;
  ospec.option_len = overlay::kOvnOptionDataLen / 4;
  ospec.data = spec_data;
  omask.option_class = 0xffff;
  omask.option_type = 0xff;
  omask.option_len = 0x1f;
  omask.data = mask_data;
  b.item(RTE_FLOW_ITEM_TYPE_GENEVE_OPT, ospec, omask);
}

// Outer headers as a tunnel packet of this flow carries them (per-packet
// fields zero): RAW_DECAP's buffer, whose size is what the NIC removes.
std::vector<uint8_t> representativeOuter(const flow::TunnelMatch& t) {
  const bool v4 = t.family == 4;
  std::vector<uint8_t> h(geneveOuterLength(t), 0);
  uint8_t* p = h.data();
  overlay::store16(p + 12, v4 ? overlay::eth::kTypeIpv4 : overlay::eth::kTypeIpv6);
  uint8_t* ip = p + overlay::eth::kHeaderLen;
  size_t udp_at;
  if (v4) {
    ip[0] = 0x45;
    ip[8] = 64;
    ip[overlay::ipv4::kProtocolOffset] = overlay::ipproto::kUdp;
    std::memcpy(ip + overlay::ipv4::kSrcOffset, t.remote_ip.data(), 4);
    std::memcpy(ip + overlay::ipv4::kDstOffset, t.local_ip.data(), 4);
    udp_at = overlay::eth::kHeaderLen + overlay::ipv4::kMinHeaderLen;
  } else {
    ip[0] = 0x60;
    ip[overlay::ipv6::kNextHeaderOffset] = overlay::ipproto::kUdp;
    ip[7] = 64;
    std::memcpy(ip + overlay::ipv6::kSrcOffset, t.remote_ip.data(), 16);
    std::memcpy(ip + overlay::ipv6::kDstOffset, t.local_ip.data(), 16);
    udp_at = overlay::eth::kHeaderLen + overlay::ipv6::kHeaderLen;
  }
  overlay::udp::setDstPort(p + udp_at, overlay::kGeneveUdpPort);
  uint8_t* g = p + udp_at + overlay::udp::kHeaderLen;
  g[0] = static_cast<uint8_t>(kOvnOptionWords);
  g[1] = 0x40;  // C: the OVN option is critical
  overlay::store16(g + 2, overlay::kGeneveProtocolEthernet);
  g[4] = static_cast<uint8_t>(t.vni >> 16);
  g[5] = static_cast<uint8_t>(t.vni >> 8);
  g[6] = static_cast<uint8_t>(t.vni);
  uint8_t* o = g + overlay::kGeneveHeaderLen;
  overlay::store16(o, overlay::kOvnOptionClass);
  o[2] = overlay::kOvnOptionType;
  o[3] = overlay::kOvnOptionDataLen / 4;
  ovnOptionData(t, o + 4);
  return h;
}

Result<uint16_t> ethdevOf(const PortMap& ports, uint32_t port, const char* what) {
  auto e = ports.ethdev(port);
  if (!e) return Error{std::string(what) + " port " + std::to_string(port) + " is not on the eswitch"};
  return *e;
}

// The flow's exact-match pattern (rte_flow_rule.h), ending before END.
void flowPattern(RuleBuilder& b, const flow::FlowSpec& flow, FeatureSet f, uint16_t in_port) {
  const FlowKey& key = flow.match.key;
  const flow::TunnelMatch& tunnel = flow.match.tunnel;
  b.representedPort(in_port);
  if (tunnel.family != 0) tunnelItems(b, tunnel);

  const bool vlan = (key.flags & FlowKey::kFlagOuterVlan) != 0;
  {
    rte_flow_item_eth spec{}, mask{};
    // FlowMatch's own MACs, when set, are the ones matched (flow.cpp reads them the same way).
    const auto isZero = [](const flow::Mac& m) { return m == flow::Mac{}; };
    const flow::Mac& src = isZero(flow.match.eth_src) ? key.eth_src : flow.match.eth_src;
    const flow::Mac& dst = isZero(flow.match.eth_dst) ? key.eth_dst : flow.match.eth_dst;
    std::memcpy(spec.hdr.src_addr.addr_bytes, src.data(), 6);
    std::memcpy(spec.hdr.dst_addr.addr_bytes, dst.data(), 6);
    std::memset(mask.hdr.src_addr.addr_bytes, 0xff, 6);
    std::memset(mask.hdr.dst_addr.addr_bytes, 0xff, 6);
    // With a tag the ethertype is matched in the VLAN item (inner_type);
    // has_vlan keeps tagged and untagged packets apart either way.
    if (!vlan) {
      spec.hdr.ether_type = rte_cpu_to_be_16(key.ethertype);
      mask.hdr.ether_type = 0xffff;
    }
    spec.has_vlan = vlan ? 1 : 0;
    mask.has_vlan = 1;
    b.item(RTE_FLOW_ITEM_TYPE_ETH, spec, mask);
  }
  if (vlan) {
    rte_flow_item_vlan spec{}, mask{};
    spec.hdr.vlan_tci = rte_cpu_to_be_16(key.vlan_tci[0]);
    mask.hdr.vlan_tci = 0xffff;
    spec.hdr.eth_proto = rte_cpu_to_be_16(key.ethertype);
    mask.hdr.eth_proto = 0xffff;
    spec.has_more_vlan = 0;
    mask.has_more_vlan = 1;
    b.item(RTE_FLOW_ITEM_TYPE_VLAN, spec, mask);
  }
  const bool v4 = key.ethertype == overlay::eth::kTypeIpv4;
  if (v4) {
    b.ipv4(key.l3_src.data(), key.l3_dst.data(), key.ip_proto);
  } else {
    b.ipv6(key.l3_src.data(), key.l3_dst.data(), key.ip_proto);
  }
  if (f.has(Feature::kItemUdp) && key.ip_proto == overlay::ipproto::kUdp) {
    b.ports(RTE_FLOW_ITEM_TYPE_UDP, key.l4_src, key.l4_dst);
  } else if (f.has(Feature::kItemTcp)) {
    b.tcp(key.l4_src, key.l4_dst);
  } else if (f.has(Feature::kItemIcmp)) {
    rte_flow_item_icmp spec{}, mask{};
    spec.hdr.icmp_type = static_cast<uint8_t>(key.l4_src >> 8);
    spec.hdr.icmp_code = static_cast<uint8_t>(key.l4_src);
    mask.hdr.icmp_type = 0xff;
    mask.hdr.icmp_code = 0xff;
    // The key holds the identifier of echo request/reply only (else 0).
    const bool echo = spec.hdr.icmp_type == overlay::icmp::kTypeEchoRequest ||
                      spec.hdr.icmp_type == overlay::icmp::kTypeEchoReply;
    if (echo) {
      spec.hdr.icmp_ident = rte_cpu_to_be_16(key.l4_dst);
      mask.hdr.icmp_ident = 0xffff;
    }
    b.item(RTE_FLOW_ITEM_TYPE_ICMP, spec, mask);
  } else if (f.has(Feature::kItemIcmp6)) {
    rte_flow_item_icmp6 spec{}, mask{};
    spec.type = static_cast<uint8_t>(key.l4_src >> 8);
    spec.code = static_cast<uint8_t>(key.l4_src);
    mask.type = 0xff;
    mask.code = 0xff;
    b.item(RTE_FLOW_ITEM_TYPE_ICMP6, spec, mask);
  }
}

}  // namespace

void PortMap::add(uint32_t datapath_port, uint16_t ethdev_port) {
  remove(datapath_port);
  entries_.emplace_back(datapath_port, ethdev_port);
}

void PortMap::remove(uint32_t datapath_port) {
  std::erase_if(entries_, [&](const auto& e) { return e.first == datapath_port; });
}

std::optional<uint16_t> PortMap::ethdev(uint32_t datapath_port) const {
  for (const auto& e : entries_) {
    if (e.first == datapath_port) return e.second;
  }
  return std::nullopt;
}

const rte_flow_item* RteFlowRule::item(rte_flow_item_type type, size_t nth) const {
  for (const auto& it : pattern) {
    if (it.type == type && nth-- == 0) return &it;
  }
  return nullptr;
}

const rte_flow_action* RteFlowRule::action(rte_flow_action_type type, size_t nth) const {
  for (const auto& a : actions) {
    if (a.type == type && nth-- == 0) return &a;
  }
  return nullptr;
}

Result<RteFlowRule> buildRteFlowRule(const flow::FlowSpec& flow, const PortMap& ports,
                                     const RteFlowRuleOptions& options) {
  auto features = offloadFeatures(flow);
  if (!features) return std::move(features).takeError();
  if (options.age_timeout_s > 0xffffff) return Error{"AGE timeout does not fit 24 bits of seconds"};

  const FlowKey& key = flow.match.key;
  const flow::TunnelMatch& tunnel = flow.match.tunnel;
  auto in_port = ethdevOf(ports, key.in_port, "input");
  if (!in_port) return std::move(in_port).takeError();

  RteFlowRule rule;
  RuleBuilder b(rule);
  rule.attr = transferAttr(options.group, options.priority);
  flowPattern(b, flow, *features, *in_port);

  // --- actions ---
  const rte_flow_action_ethdev* output = nullptr;
  bool drop = false;
  for (const flow::FlowAction& a : flow.actions) {
    switch (a.type) {
      case ActionType::kGeneveDecap: {
        const std::vector<uint8_t> outer = representativeOuter(tunnel);
        rte_flow_action_raw_decap conf{};
        conf.data = b.keepBytes(outer.data(), outer.size());
        conf.size = outer.size();
        b.action(RTE_FLOW_ACTION_TYPE_RAW_DECAP, b.keep(conf));
        break;
      }
      case ActionType::kGeneveEncap: {
        std::vector<uint8_t> bytes = a.encap_header;
        if (options.fill_source_port) {
          const uint32_t udp = *encapUdpOffset(a);  // offloadFeatures checked it
          if (overlay::udp::srcPort(bytes.data() + udp) == 0) {
            const uint16_t sport = overlay::geneveSourcePort(overlay::flowHash32(key, options.source_port_seed));
            overlay::udp::setSrcPort(bytes.data() + udp, sport);
          }
        }
        rte_flow_action_raw_encap conf{};
        conf.data = b.keepBytes(bytes.data(), bytes.size());
        conf.preserve = nullptr;
        conf.size = bytes.size();
        b.action(RTE_FLOW_ACTION_TYPE_RAW_ENCAP, b.keep(conf));
        break;
      }
      case ActionType::kSetEthSrc:
      case ActionType::kSetEthDst: {
        rte_flow_action_set_mac conf{};
        std::memcpy(conf.mac_addr, a.mac.data(), 6);
        b.action(a.type == ActionType::kSetEthSrc ? RTE_FLOW_ACTION_TYPE_SET_MAC_SRC : RTE_FLOW_ACTION_TYPE_SET_MAC_DST,
                 b.keep(conf));
        break;
      }
      case ActionType::kDecTtl:
        b.action(RTE_FLOW_ACTION_TYPE_DEC_TTL, nullptr);
        break;
      case ActionType::kSetIpv4Src:
      case ActionType::kSetIpv4Dst: {
        rte_flow_action_set_ipv4 conf{};
        conf.ipv4_addr = a.ipv4;  // already network order
        b.action(a.type == ActionType::kSetIpv4Src ? RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC
                                                   : RTE_FLOW_ACTION_TYPE_SET_IPV4_DST,
                 b.keep(conf));
        break;
      }
      case ActionType::kSetIpv6Src:
      case ActionType::kSetIpv6Dst: {
        rte_flow_action_set_ipv6 conf{};
        std::memcpy(conf.ipv6_addr, a.ipv6.data(), sizeof conf.ipv6_addr);
        b.action(a.type == ActionType::kSetIpv6Src ? RTE_FLOW_ACTION_TYPE_SET_IPV6_SRC
                                                   : RTE_FLOW_ACTION_TYPE_SET_IPV6_DST,
                 b.keep(conf));
        break;
      }
      case ActionType::kSetL4Src:
      case ActionType::kSetL4Dst: {
        rte_flow_action_set_tp conf{};
        conf.port = rte_cpu_to_be_16(a.l4_port);
        b.action(a.type == ActionType::kSetL4Src ? RTE_FLOW_ACTION_TYPE_SET_TP_SRC : RTE_FLOW_ACTION_TYPE_SET_TP_DST,
                 b.keep(conf));
        break;
      }
      case ActionType::kOutput: {
        auto out = ethdevOf(ports, a.port, "output");
        if (!out) return std::move(out).takeError();
        rte_flow_action_ethdev conf{};
        conf.port_id = *out;
        output = b.keep(conf);
        break;
      }
      case ActionType::kDrop:
        drop = true;
        break;
      case ActionType::kEspEncrypt:
      case ActionType::kEspDecrypt:
        // offloadFeatures refused these already.
        return Error{"inline IPsec is not available through DPDK on mlx5"};
    }
  }
  if (options.count) b.action(RTE_FLOW_ACTION_TYPE_COUNT, b.keep(rte_flow_action_count{}));
  if (options.age_timeout_s > 0) {
    rte_flow_action_age conf{};
    conf.timeout = options.age_timeout_s & 0xffffff;
    conf.context = nullptr;
    rule.age = b.keep(conf);
    b.action(RTE_FLOW_ACTION_TYPE_AGE, rule.age);
  }
  if (output != nullptr) b.action(RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT, output);
  if (drop) b.action(RTE_FLOW_ACTION_TYPE_DROP, nullptr);
  b.end();
  return rule;
}

std::vector<RteFlowRule> buildClosePuntRules(const ClosePuntShape& shape, uint16_t ethdev_port,
                                             const RteFlowRuleOptions& options) {
  std::vector<RteFlowRule> rules;
  // One rule per flag: a TCP item matches its flags as value & mask == spec,
  // so "FIN or SYN or RST" is three rules (mlx5's TCP item takes any
  // tcp_flags mask). Ascending bit order: FIN, SYN, RST.
  for (uint8_t bit : {overlay::tcp::kFlagFin, overlay::tcp::kFlagSyn, overlay::tcp::kFlagRst}) {
    RteFlowRule rule;
    RuleBuilder b(rule);
    rule.attr = transferAttr(options.group, options.guard_priority);
    b.representedPort(ethdev_port);
    if (shape.outer_family != 0) b.anyGeneve(shape.outer_family);
    b.ethType(shape.family == 4 ? overlay::eth::kTypeIpv4 : overlay::eth::kTypeIpv6, shape.vlan);
    b.ipProto(shape.family, overlay::ipproto::kTcp);
    b.tcpFlag(bit);
    // Back to the port it arrived on, in software: the dataplane polls that
    // representor (the uplink for Geneve, still encapsulated), finds the
    // cached flow and, for a translated or tracked connection, punts the
    // packet to conntrack. No COUNT: software counts it as a hit of the flow.
    rte_flow_action_ethdev to_sw{};
    to_sw.port_id = ethdev_port;
    b.action(RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR, b.keep(to_sw));
    b.end();
    rules.push_back(std::move(rule));
  }
  return rules;
}

RteFlowRule buildRootJumpRule(uint16_t ethdev_port, const RteFlowRuleOptions& options) {
  RteFlowRule rule;
  RuleBuilder b(rule);
  // Priority 0: the per-port jumps are disjoint, and mlx5's root table has
  // few priority levels (a large value is refused).
  rule.attr = transferAttr(0, 0);
  b.representedPort(ethdev_port);
  rte_flow_action_jump jump{};
  jump.group = options.group;
  b.action(RTE_FLOW_ACTION_TYPE_JUMP, b.keep(jump));
  b.end();
  return rule;
}

std::vector<RteFlowRule> buildTtlGuardRules(uint16_t ethdev_port, bool tunnelled, const RteFlowRuleOptions& options) {
  std::vector<RteFlowRule> rules;
  auto addRule = [&](int outer_family, int inner_family) {
    RteFlowRule rule;
    RuleBuilder b(rule);
    rule.attr = transferAttr(options.group, options.guard_priority);
    b.representedPort(ethdev_port);
    if (outer_family != 0) b.anyGeneve(outer_family);
    b.ethType(inner_family == 4 ? overlay::eth::kTypeIpv4 : overlay::eth::kTypeIpv6);
    // TTL (hop limit) 0 or 1: value 0 under mask 0xfe.
    if (inner_family == 4) {
      rte_flow_item_ipv4 spec{}, mask{};
      spec.hdr.time_to_live = 0;
      mask.hdr.time_to_live = 0xfe;
      b.item(RTE_FLOW_ITEM_TYPE_IPV4, spec, mask);
    } else {
      rte_flow_item_ipv6 spec{}, mask{};
      spec.hdr.hop_limits = 0;
      mask.hdr.hop_limits = 0xfe;
      b.item(RTE_FLOW_ITEM_TYPE_IPV6, spec, mask);
    }
    rte_flow_action_ethdev to_sw{};
    to_sw.port_id = ethdev_port;
    b.action(RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR, b.keep(to_sw));
    b.end();
    rules.push_back(std::move(rule));
  };
  addRule(0, 4);
  addRule(0, 6);
  if (tunnelled) {
    for (int outer : {4, 6}) {
      for (int inner : {4, 6}) addRule(outer, inner);
    }
  }
  return rules;
}

std::string itemTypeName(rte_flow_item_type type) {
  switch (type) {
    case RTE_FLOW_ITEM_TYPE_END: return "END";
    case RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT: return "REPRESENTED_PORT";
    case RTE_FLOW_ITEM_TYPE_ETH: return "ETH";
    case RTE_FLOW_ITEM_TYPE_VLAN: return "VLAN";
    case RTE_FLOW_ITEM_TYPE_IPV4: return "IPV4";
    case RTE_FLOW_ITEM_TYPE_IPV6: return "IPV6";
    case RTE_FLOW_ITEM_TYPE_UDP: return "UDP";
    case RTE_FLOW_ITEM_TYPE_TCP: return "TCP";
    case RTE_FLOW_ITEM_TYPE_ICMP: return "ICMP";
    case RTE_FLOW_ITEM_TYPE_ICMP6: return "ICMP6";
    case RTE_FLOW_ITEM_TYPE_GENEVE: return "GENEVE";
    case RTE_FLOW_ITEM_TYPE_GENEVE_OPT: return "GENEVE_OPT";
    default: return "ITEM_" + std::to_string(static_cast<int>(type));
  }
}

std::string actionTypeName(rte_flow_action_type type) {
  switch (type) {
    case RTE_FLOW_ACTION_TYPE_END: return "END";
    case RTE_FLOW_ACTION_TYPE_RAW_DECAP: return "RAW_DECAP";
    case RTE_FLOW_ACTION_TYPE_RAW_ENCAP: return "RAW_ENCAP";
    case RTE_FLOW_ACTION_TYPE_SET_MAC_SRC: return "SET_MAC_SRC";
    case RTE_FLOW_ACTION_TYPE_SET_MAC_DST: return "SET_MAC_DST";
    case RTE_FLOW_ACTION_TYPE_DEC_TTL: return "DEC_TTL";
    case RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC: return "SET_IPV4_SRC";
    case RTE_FLOW_ACTION_TYPE_SET_IPV4_DST: return "SET_IPV4_DST";
    case RTE_FLOW_ACTION_TYPE_SET_IPV6_SRC: return "SET_IPV6_SRC";
    case RTE_FLOW_ACTION_TYPE_SET_IPV6_DST: return "SET_IPV6_DST";
    case RTE_FLOW_ACTION_TYPE_SET_TP_SRC: return "SET_TP_SRC";
    case RTE_FLOW_ACTION_TYPE_SET_TP_DST: return "SET_TP_DST";
    case RTE_FLOW_ACTION_TYPE_COUNT: return "COUNT";
    case RTE_FLOW_ACTION_TYPE_AGE: return "AGE";
    case RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT: return "REPRESENTED_PORT";
    case RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR: return "PORT_REPRESENTOR";
    case RTE_FLOW_ACTION_TYPE_DROP: return "DROP";
    case RTE_FLOW_ACTION_TYPE_JUMP: return "JUMP";
    default: return "ACTION_" + std::to_string(static_cast<int>(type));
  }
}

std::string describePattern(const RteFlowRule& rule) {
  std::string s;
  for (const auto& it : rule.pattern) s += (s.empty() ? "" : " ") + itemTypeName(it.type);
  return s;
}

std::string describeActions(const RteFlowRule& rule) {
  std::string s;
  for (const auto& a : rule.actions) s += (s.empty() ? "" : " ") + actionTypeName(a.type);
  return s;
}

}  // namespace dpu::offload
