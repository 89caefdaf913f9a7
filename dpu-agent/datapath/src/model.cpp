// Validation of the logical model and the Delta arithmetic (model.h).
#include "model.h"

#include <map>
#include <set>

namespace dpu::datapath {
namespace {

using dataplane::v1::LogicalModel;

Result<ModelSubnet> parseSubnet(const dataplane::v1::Subnet& s, const std::string& where, bool need_gateway) {
  ModelSubnet out;
  auto prefix = IpPrefix::parse(s.cidr());
  if (!prefix) return Error{where + ": cidr \"" + s.cidr() + "\": " + prefix.error()};
  out.prefix = *prefix;
  if (!s.gateway_ip().empty()) {
    auto gw = IpAddress::parse(s.gateway_ip());
    if (!gw) return Error{where + " " + s.cidr() + ": gateway_ip \"" + s.gateway_ip() + "\": " + gw.error()};
    if (!out.prefix.contains(*gw)) {
      return Error{where + " " + s.cidr() + ": gateway_ip " + gw->str() + " is outside the subnet"};
    }
    out.gateway = *gw;
    out.has_gateway = true;
  } else if (need_gateway) {
    return Error{where + " " + s.cidr() + ": gateway_ip is required (the router port on this switch)"};
  }
  if (s.datapath_key() == 0 || s.datapath_key() > kMaxDatapathKey) {
    return Error{where + " " + s.cidr() + ": datapath_key " + std::to_string(s.datapath_key()) +
                 " must be 1..16777215 (it is the 24-bit VNI)"};
  }
  out.datapath_key = s.datapath_key();
  return out;
}

Result<MacAddress> parseUnicastMac(const std::string& text, const std::string& where) {
  auto mac = MacAddress::parse(text);
  if (!mac) return Error{where + ": \"" + text + "\": " + mac.error()};
  if (mac->isZero() || mac->isMulticast()) return Error{where + ": " + text + " must be a unicast, non-zero MAC"};
  return *mac;
}

}  // namespace

Result<Model> validateModel(const LogicalModel& in) {
  Model m;
  m.programmed = true;
  const auto& node = in.node();
  m.node_name = node.name();
  if (node.tunnel_ip().empty()) return Error{"node.tunnel_ip is empty: set the DPU's underlay address"};
  auto tip = IpAddress::parse(node.tunnel_ip());
  if (!tip) return Error{"node.tunnel_ip \"" + node.tunnel_ip() + "\": " + tip.error()};
  m.tunnel_ip = *tip;
  m.has_tunnel_ip = true;
  auto rmac = parseUnicastMac(node.router_mac(), "node.router_mac");
  if (!rmac) return std::move(rmac).takeError();
  m.router_mac = *rmac;
  if (node.pod_mtu() < 576 || node.pod_mtu() > 65535) {
    return Error{"node.pod_mtu " + std::to_string(node.pod_mtu()) + " must be 576..65535"};
  }
  m.pod_mtu = node.pod_mtu();
  if (node.underlay_mtu() != 0 && (node.underlay_mtu() < 576 || node.underlay_mtu() > 65535)) {
    return Error{"node.underlay_mtu " + std::to_string(node.underlay_mtu()) + " must be 0 (unknown) or 576..65535"};
  }
  m.underlay_mtu = node.underlay_mtu();
  for (const auto& c : node.cluster_cidrs()) {
    if (auto p = IpPrefix::parse(c); !p) return Error{"node.cluster_cidrs \"" + c + "\": " + p.error()};
  }
  for (const auto& c : node.service_cidrs()) {
    if (auto p = IpPrefix::parse(c); !p) return Error{"node.service_cidrs \"" + c + "\": " + p.error()};
  }

  // Every subnet, local and remote, for the overlap check.
  std::vector<std::pair<IpPrefix, std::string>> all_subnets;
  auto addSubnet = [&all_subnets](const IpPrefix& p, const std::string& owner) -> Result<void> {
    for (const auto& [q, other] : all_subnets) {
      if (p.overlaps(q)) return Error{owner + " subnet " + p.str() + " overlaps " + other + " subnet " + q.str()};
    }
    all_subnets.emplace_back(p, owner);
    return {};
  };

  std::set<std::pair<uint32_t, bool>> local_keys;  // a switch has at most one subnet per family
  for (const auto& s : in.local_subnets()) {
    auto sub = parseSubnet(s, "local subnet", true);
    if (!sub) return std::move(sub).takeError();
    if (auto r = addSubnet(sub->prefix, "local"); !r) return std::move(r).takeError();
    if (!local_keys.insert({sub->datapath_key, sub->prefix.address.isV4()}).second) {
      return Error{"local subnet " + s.cidr() + ": datapath_key " + std::to_string(sub->datapath_key) +
                   " already has a subnet of this IP family"};
    }
    m.local_subnets.push_back(*sub);
  }
  std::string node_content;
  node.SerializeToString(&node_content);
  for (const auto& s : in.local_subnets()) node_content += s.SerializeAsString();
  m.node_content = std::move(node_content);

  std::set<std::string> names, representors;
  std::set<uint32_t> keys;
  std::set<IpAddress> ips;
  unsigned management = 0;
  for (const auto& p : in.ports()) {
    ModelPort port;
    if (p.name().empty()) return Error{"a port has an empty name: every port needs its attachment id"};
    const std::string where = "port " + p.name();
    if (!names.insert(p.name()).second) return Error{where + ": duplicate port name"};
    port.name = p.name();
    if (p.key() == 0 || p.key() > kMaxPortKey) {
      return Error{where + ": key " + std::to_string(p.key()) + " must be 1..32767 (15-bit OVN port key)"};
    }
    if (!keys.insert(p.key()).second) return Error{where + ": key " + std::to_string(p.key()) + " is not unique"};
    port.key = static_cast<uint16_t>(p.key());
    if (p.kind() != dataplane::v1::POD && p.kind() != dataplane::v1::MANAGEMENT) {
      return Error{where + ": kind must be POD or MANAGEMENT"};
    }
    if (p.kind() == dataplane::v1::MANAGEMENT && ++management > 1) {
      return Error{where + ": a second MANAGEMENT port; a node has one host management port"};
    }
    port.kind = p.kind();
    if (p.representor().empty()) return Error{where + ": representor is empty"};
    if (!representors.insert(p.representor()).second) {
      return Error{where + ": representor " + p.representor() + " is bound to another port"};
    }
    port.representor = p.representor();
    auto mac = parseUnicastMac(p.mac(), where + ": mac");
    if (!mac) return std::move(mac).takeError();
    port.mac = *mac;
    if (mac->bytes == m.router_mac.bytes) return Error{where + ": mac " + p.mac() + " is the router MAC"};
    const ModelSubnet* subnet_v4 = nullptr;
    const ModelSubnet* subnet_v6 = nullptr;
    for (const auto& s : m.local_subnets) {
      if (s.datapath_key != p.datapath_key()) continue;
      (s.prefix.address.isV4() ? subnet_v4 : subnet_v6) = &s;
    }
    if (subnet_v4 == nullptr && subnet_v6 == nullptr) {
      return Error{where + ": datapath_key " + std::to_string(p.datapath_key()) +
                   " names no local subnet; add the subnet first or fix the key"};
    }
    port.datapath_key = p.datapath_key();
    if (p.ips().empty()) return Error{where + ": no ips; a port needs at least one address"};
    for (const auto& text : p.ips()) {
      auto ip = IpAddress::parse(text);
      if (!ip) return Error{where + ": ip \"" + text + "\": " + ip.error() + " (give an address without prefix length)"};
      const ModelSubnet* s = ip->isV4() ? subnet_v4 : subnet_v6;
      if (s == nullptr || !s->prefix.contains(*ip)) {
        return Error{where + ": ip " + ip->str() + " is not inside its logical switch's subnet"};
      }
      if (s->has_gateway && s->gateway == *ip) return Error{where + ": ip " + ip->str() + " is the gateway address"};
      if (ip->bytes == s->prefix.address.bytes) return Error{where + ": ip " + ip->str() + " is the subnet address"};
      if (!ips.insert(*ip).second) return Error{where + ": ip " + ip->str() + " is used by another port"};
      port.ips.push_back(*ip);
    }
    p.SerializeToString(&port.content);
    m.ports.push_back(std::move(port));
  }

  std::set<std::string> node_names;
  std::set<IpAddress> tunnel_ips;
  for (const auto& r : in.remote_nodes()) {
    ModelRemoteNode node_out;
    if (r.name().empty()) return Error{"a remote node has an empty name"};
    const std::string where = "remote node " + r.name();
    if (!node_names.insert(r.name()).second) return Error{where + ": duplicate name"};
    node_out.name = r.name();
    auto ip = IpAddress::parse(r.tunnel_ip());
    if (!ip) return Error{where + ": tunnel_ip \"" + r.tunnel_ip() + "\": " + ip.error()};
    if (ip->family != m.tunnel_ip.family) {
      return Error{where + ": tunnel_ip " + ip->str() + " is not of the same IP family as ours (" +
                   m.tunnel_ip.str() + ")"};
    }
    if (*ip == m.tunnel_ip) return Error{where + ": tunnel_ip " + ip->str() + " is our own tunnel IP"};
    if (!tunnel_ips.insert(*ip).second) return Error{where + ": tunnel_ip " + ip->str() + " is used by another node"};
    node_out.tunnel_ip = *ip;
    for (const auto& s : r.subnets()) {
      auto sub = parseSubnet(s, where + " subnet", false);
      if (!sub) return std::move(sub).takeError();
      if (auto rr = addSubnet(sub->prefix, where); !rr) return std::move(rr).takeError();
      node_out.subnets.push_back(*sub);
    }
    if (node_out.subnets.size() > 255) return Error{where + ": more than 255 subnets"};
    r.SerializeToString(&node_out.content);
    m.remote_nodes.push_back(std::move(node_out));
  }
  return m;
}

Result<LogicalModel> applyDelta(const LogicalModel& base, const dataplane::v1::Delta& delta, bool& resync) {
  resync = false;
  LogicalModel out = base;
  if (delta.has_node()) *out.mutable_node() = delta.node();

  auto removeBy = [&resync](auto* list, const std::string& key, auto keyOf, const std::string& what) -> Result<void> {
    for (int i = 0; i < list->size(); ++i) {
      if (keyOf(list->Get(i)) == key) {
        list->DeleteSubrange(i, 1);
        return {};
      }
    }
    resync = true;
    return Error{"delta deletes " + what + " " + key + ", which the dataplane does not have: send a FullSync"};
  };
  auto upsertBy = [](auto* list, const auto& item, auto keyOf) {
    for (int i = 0; i < list->size(); ++i) {
      if (keyOf(list->Get(i)) == keyOf(item)) {
        *list->Mutable(i) = item;
        return;
      }
    }
    *list->Add() = item;
  };
  auto portName = [](const dataplane::v1::LogicalPort& p) { return p.name(); };
  auto subnetCidr = [](const dataplane::v1::Subnet& s) { return s.cidr(); };
  auto nodeName = [](const dataplane::v1::RemoteNode& n) { return n.name(); };

  for (const auto& name : delta.delete_ports()) {
    if (auto r = removeBy(out.mutable_ports(), name, portName, "port"); !r) return std::move(r).takeError();
  }
  for (const auto& cidr : delta.delete_local_subnets()) {
    if (auto r = removeBy(out.mutable_local_subnets(), cidr, subnetCidr, "local subnet"); !r) {
      return std::move(r).takeError();
    }
  }
  for (const auto& name : delta.delete_remote_nodes()) {
    if (auto r = removeBy(out.mutable_remote_nodes(), name, nodeName, "remote node"); !r) {
      return std::move(r).takeError();
    }
  }
  for (const auto& s : delta.upsert_local_subnets()) upsertBy(out.mutable_local_subnets(), s, subnetCidr);
  for (const auto& p : delta.upsert_ports()) upsertBy(out.mutable_ports(), p, portName);
  for (const auto& n : delta.upsert_remote_nodes()) upsertBy(out.mutable_remote_nodes(), n, nodeName);
  return out;
}

}  // namespace dpu::datapath
