// A cached flow back in its portable form (flow::FlowSpec): what offload
// translates into rte_flow rules and what dump-flows prints, one
// flow::FlowAction per action of actions.def, in its fused order. The compiled
// entry refers to the snapshot for its encap header (per remote subnet, with
// the flow's ingress and egress keys patched in), so the snapshot it is valid in is given.
#include <cstring>

#include "engine_impl.h"
#include "overlay/bytes.h"

namespace dpu::datapath {

flow::FlowSpec EngineImpl::toFlowSpec(const Snapshot& snap, const FlowRecord& e) const {
  flow::FlowSpec spec;
  spec.match.key = e.key;
  spec.tracked = e.tracked != 0 && !(e.ops & op::kDrop);
  spec.match.eth_src = e.key.eth_src;
  spec.match.eth_dst = e.key.eth_dst;
  if (e.tun_family != 0) {
    spec.match.tunnel.family = e.tun_family;
    spec.match.tunnel.remote_ip = e.tun_remote;
    spec.match.tunnel.local_ip = snap.tunnel_ip;
    spec.match.tunnel.vni = e.key.tunnel_id;
    spec.match.tunnel.ingress_port_key = e.tun_ingress;
    spec.match.tunnel.egress_port_key = e.tun_egress;
  }
  auto add = [&spec](flow::ActionType type) -> flow::FlowAction& {
    spec.actions.emplace_back();
    spec.actions.back().type = type;
    return spec.actions.back();
  };
  if (e.ops & op::kDrop) {
    add(flow::ActionType::kDrop).drop_reason = e.drop_reason;
    return spec;
  }
  // From a node with inbound SAs, the flow's packets arrive (or, with IPsec
  // on, must arrive) as ESP and are decrypted before the lookup: a rule
  // matching plaintext Geneve would skip that, so such a flow says so and
  // stays in software (offload refuses ESP: docs/ipsec.md "Hardware").
  if (e.ops & op::kDecap) {
    const SnapRemoteNode* peer = snap.remoteByDep(e.dep_in);
    if (peer != nullptr && peer->inbound_sas) add(flow::ActionType::kEspDecrypt);
    add(flow::ActionType::kGeneveDecap).decap_bytes = e.decap_len;
  }
  if (e.ops & op::kDecTtl) add(flow::ActionType::kDecTtl);
  if (e.ops & op::kSetEthSrc) add(flow::ActionType::kSetEthSrc).mac = e.set_src;
  if (e.ops & op::kSetEthDst) add(flow::ActionType::kSetEthDst).mac = e.set_dst;
  if (e.ops & op::kNat) {
    const NatRewrite& n = e.nat;
    auto address = [&](uint8_t bit, flow::ActionType v4, flow::ActionType v6, const std::array<uint8_t, 16>& ip) {
      if (!(n.fields & bit)) return;
      flow::FlowAction& a = add(n.v6 ? v6 : v4);
      if (n.v6) {
        a.ipv6 = ip;
      } else {
        std::memcpy(&a.ipv4, ip.data(), 4);
      }
    };
    address(NatRewrite::kSrcIp, flow::ActionType::kSetIpv4Src, flow::ActionType::kSetIpv6Src, n.src_ip);
    address(NatRewrite::kDstIp, flow::ActionType::kSetIpv4Dst, flow::ActionType::kSetIpv6Dst, n.dst_ip);
    if (n.fields & (NatRewrite::kSrcPort | NatRewrite::kIcmpId)) {
      add(flow::ActionType::kSetL4Src).l4_port = overlay::load16(reinterpret_cast<const uint8_t*>(&n.src_port));
    }
    if (n.fields & NatRewrite::kDstPort) {
      add(flow::ActionType::kSetL4Dst).l4_port = overlay::load16(reinterpret_cast<const uint8_t*>(&n.dst_port));
    }
  }
  if (e.ops & op::kEncap) {
    const SnapRemoteNode* node = snap.remoteByDep(e.dep_out);
    if (node != nullptr && e.encap_subnet < node->subnets.size()) {
      const SnapEncap& t = node->subnets[e.encap_subnet].encap;
      flow::FlowAction& a = add(flow::ActionType::kGeneveEncap);
      a.encap_header.assign(t.bytes.begin(), t.bytes.begin() + t.length);
      overlay::store16(a.encap_header.data() + t.ovn_offset, e.encap_ingress & overlay::kOvnMaxIngressPortKey);
      overlay::store16(a.encap_header.data() + t.ovn_offset + 2, e.encap_egress);
      a.encap_family = t.ipv6 ? 6 : 4;
    }
  }
  if (e.ops & op::kEsp) {
    const SnapRemoteNode* node = snap.remoteByDep(e.dep_out);
    // sa_index: the SPI of the outbound SA the flow encrypts under now.
    add(flow::ActionType::kEspEncrypt).sa_index = node != nullptr && node->outbound ? node->outbound->spi() : 0;
  }
  if (e.ops & op::kOutput) add(flow::ActionType::kOutput).port = e.out_port;
  return spec;
}

}  // namespace dpu::datapath
