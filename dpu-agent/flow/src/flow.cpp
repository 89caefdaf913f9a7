// The OVS dump-flows style text of a datapath flow: what `dpuctl dump-flows`
// prints and what logs say. Fields a match does not have (zero) are left out,
// so a line reads like the packet it matches.
#include "flow/flow.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "overlay/bytes.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace dpu::flow {
namespace {

std::string macText(const uint8_t* m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

std::string ipv4Text(const uint8_t* a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
  return buf;
}

// RFC 5952 text: lower case, the longest run of zero groups (two or more) as "::".
std::string ipv6Text(const uint8_t* a) {
  uint16_t g[8];
  for (int i = 0; i < 8; ++i) g[i] = static_cast<uint16_t>(a[2 * i] << 8 | a[2 * i + 1]);
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (g[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len && j - i >= 2) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  std::string out;
  char buf[8];
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    out += buf;
  }
  return out;
}

std::string ipText(const std::array<uint8_t, 16>& a, bool v6) { return v6 ? ipv6Text(a.data()) : ipv4Text(a.data()); }

bool isZero(const Mac& m) {
  for (uint8_t b : m)
    if (b) return false;
  return true;
}

// Outer headers of an encap template: remote address, VNI and the OVN option keys.
std::string describeEncap(const FlowAction& a) {
  const auto& h = a.encap_header;
  std::string out = "geneve_encap(";
  const size_t ip = 14;
  const size_t ip_len = a.encap_family == 6 ? 40 : 20;
  const size_t geneve = ip + ip_len + 8;
  if (h.size() < geneve + overlay::kGeneveHeaderLen) return out + "len=" + std::to_string(h.size()) + ")";
  if (a.encap_family == 6) {
    out += "src=" + ipv6Text(h.data() + ip + 8) + ",remote=" + ipv6Text(h.data() + ip + 24);
  } else {
    out += "src=" + ipv4Text(h.data() + ip + 12) + ",remote=" + ipv4Text(h.data() + ip + 16);
  }
  const uint32_t vni = overlay::load32(h.data() + geneve + 4) >> 8;
  out += ",vni=" + std::to_string(vni);
  const size_t opt = geneve + overlay::kGeneveHeaderLen;
  if (h.size() >= opt + overlay::kOvnOptionWireLen && overlay::load16(h.data() + opt) == overlay::kOvnOptionClass &&
      h[opt + 2] == overlay::kOvnOptionType) {
    const uint16_t ingress = overlay::load16(h.data() + opt + 4) & overlay::kOvnMaxIngressPortKey;
    const uint16_t egress = overlay::load16(h.data() + opt + 6);
    out += ",ingress=" + std::to_string(ingress) + ",egress=" + std::to_string(egress);
  }
  out += ",next_hop=" + macText(h.data());
  return out + ")";
}

}  // namespace

std::string describeMatch(const FlowMatch& match) {
  const overlay::FlowKey& k = match.key;
  std::string out;
  auto add = [&out](const std::string& s) {
    if (!out.empty()) out += ',';
    out += s;
  };
  if (match.tunnel.family != 0) {
    const bool v6 = match.tunnel.family == 6;
    add("tun_src=" + ipText(match.tunnel.remote_ip, v6));
    add("tun_dst=" + ipText(match.tunnel.local_ip, v6));
    add("tun_id=" + std::to_string(match.tunnel.vni));
    add("tun_ovn(ingress=" + std::to_string(match.tunnel.ingress_port_key) +
        ",egress=" + std::to_string(match.tunnel.egress_port_key) + ")");
  }
  add("in_port=" + std::to_string(k.in_port));
  if (k.tunnel_id != 0 && match.tunnel.family == 0) add("tunnel_id=" + std::to_string(k.tunnel_id));
  const Mac& src = isZero(match.eth_src) ? k.eth_src : match.eth_src;
  const Mac& dst = isZero(match.eth_dst) ? k.eth_dst : match.eth_dst;
  add("eth_src=" + macText(src.data()));
  add("eth_dst=" + macText(dst.data()));
  if (k.flags & overlay::FlowKey::kFlagOuterVlan) add("vlan_tci=" + std::to_string(k.vlan_tci[0]));
  if (k.flags & overlay::FlowKey::kFlagInnerVlan) add("vlan_tci2=" + std::to_string(k.vlan_tci[1]));
  switch (k.ethertype) {
    case overlay::eth::kTypeArp:
      add("arp");
      add("arp_op=" + std::to_string(k.ip_proto));
      add("arp_spa=" + ipv4Text(k.l3_src.data()));
      add("arp_tpa=" + ipv4Text(k.l3_dst.data()));
      return out;
    case overlay::eth::kTypeIpv4:
      add("ipv4");
      add("nw_src=" + ipv4Text(k.l3_src.data()));
      add("nw_dst=" + ipv4Text(k.l3_dst.data()));
      break;
    case overlay::eth::kTypeIpv6:
      add("ipv6");
      add("ipv6_src=" + ipv6Text(k.l3_src.data()));
      add("ipv6_dst=" + ipv6Text(k.l3_dst.data()));
      break;
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "eth_type=0x%04x", k.ethertype);
      add(buf);
      return out;
    }
  }
  if (k.flags & overlay::FlowKey::kFlagLaterFragment) {
    add("nw_frag=later");
  } else if (k.flags & overlay::FlowKey::kFlagFragment) {
    add("nw_frag=first");
  }
  switch (k.ip_proto) {
    case overlay::ipproto::kTcp:
      add("tcp");
      break;
    case overlay::ipproto::kUdp:
      add("udp");
      break;
    case overlay::ipproto::kIcmp:
      add("icmp");
      break;
    case overlay::ipproto::kIcmpv6:
      add("icmp6");
      break;
    default:
      add("nw_proto=" + std::to_string(k.ip_proto));
      return out;
  }
  if (k.ip_proto == overlay::ipproto::kIcmp || k.ip_proto == overlay::ipproto::kIcmpv6) {
    add("icmp_type=" + std::to_string(k.l4_src >> 8));
    add("icmp_code=" + std::to_string(k.l4_src & 0xff));
    if (k.l4_dst) add("icmp_id=" + std::to_string(k.l4_dst));
  } else {
    add("tp_src=" + std::to_string(k.l4_src));
    add("tp_dst=" + std::to_string(k.l4_dst));
  }
  return out;
}

std::string describeActions(const std::vector<FlowAction>& actions) {
  std::string out;
  for (const FlowAction& a : actions) {
    if (!out.empty()) out += ',';
    switch (a.type) {
      case ActionType::kOutput:
        out += "output:" + std::to_string(a.port);
        break;
      case ActionType::kSetEthSrc:
        out += "set_eth_src:" + macText(a.mac.data());
        break;
      case ActionType::kSetEthDst:
        out += "set_eth_dst:" + macText(a.mac.data());
        break;
      case ActionType::kDecTtl:
        out += "dec_ttl";
        break;
      case ActionType::kGeneveDecap:
        out += "geneve_decap(" + std::to_string(a.decap_bytes) + ")";
        break;
      case ActionType::kGeneveEncap:
        out += describeEncap(a);
        break;
      case ActionType::kSetIpv4Src:
      case ActionType::kSetIpv4Dst: {
        uint8_t b[4];  // network order in memory
        std::memcpy(b, &a.ipv4, sizeof b);
        out += (a.type == ActionType::kSetIpv4Src ? "set_nw_src:" : "set_nw_dst:") + ipv4Text(b);
        break;
      }
      case ActionType::kSetIpv6Src:
      case ActionType::kSetIpv6Dst: {
        char text[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, a.ipv6.data(), text, sizeof text);
        out += (a.type == ActionType::kSetIpv6Src ? "set_ipv6_src:" : "set_ipv6_dst:") + std::string(text);
        break;
      }
      case ActionType::kSetL4Src:
        out += "set_tp_src:" + std::to_string(a.l4_port);
        break;
      case ActionType::kSetL4Dst:
        out += "set_tp_dst:" + std::to_string(a.l4_port);
        break;
      case ActionType::kEspEncrypt:
        out += "esp_encrypt(sa=" + std::to_string(a.sa_index) + ")";
        break;
      case ActionType::kEspDecrypt:
        out += "esp_decrypt(sa=" + std::to_string(a.sa_index) + ")";
        break;
      case ActionType::kDrop:
        out += "drop(reason=" + std::to_string(a.drop_reason) + ")";
        break;
    }
  }
  return out.empty() ? "drop" : out;
}

}  // namespace dpu::flow
