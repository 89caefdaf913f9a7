// Validation of a requested logical model, object by object, with claims
// settling conflicts between objects (model.h says in which order).
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "model/model.h"

namespace dpu::model {
namespace {

using dpv1::ObjectProblem;

// NodeSettings' north–south addresses (defined with parseNodeAddresses below).
Result<NodeAddresses> nodeAddressesOf(const dpv1::NodeSettings& node);

// What the previous model in force held, by name, and the content it held it with.
struct Incumbents {
  std::map<std::string, std::string> subnets, ports, remotes, sas, services, port_policies;
  explicit Incumbents(const Model* previous) {
    if (previous == nullptr) return;
    for (const auto& pp : previous->port_policies) port_policies[pp.port] = pp.content;
    for (const auto& s : previous->local_subnets) subnets[s.cidr] = s.content;
    for (const auto& p : previous->ports) ports[p.name] = p.content;
    for (const auto& r : previous->remote_nodes) remotes[r.name] = r.content;
    for (const auto& a : previous->ipsec_sas) sas[a.name] = a.content;
    for (const auto& v : previous->services) services[v.name] = v.content;
  }
};

// The order objects of one kind are taken in: unchanged incumbents, changed
// incumbents, newcomers; by name within each.
template <typename T, typename NameOf>
std::vector<const T*> byPriority(const google::protobuf::RepeatedPtrField<T>& items, NameOf nameOf,
                                 const std::map<std::string, std::string>& incumbents) {
  struct Ranked {
    int rank;
    std::string name;
    const T* item;
  };
  std::vector<Ranked> ranked;
  ranked.reserve(items.size());
  for (const auto& item : items) {
    const std::string name = nameOf(item);
    auto it = incumbents.find(name);
    const int rank = it == incumbents.end() ? 2 : it->second == item.SerializeAsString() ? 0 : 1;
    ranked.push_back({rank, name, &item});
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const Ranked& a, const Ranked& b) { return a.rank != b.rank ? a.rank < b.rank : a.name < b.name; });
  std::vector<const T*> out;
  out.reserve(ranked.size());
  for (const auto& r : ranked) out.push_back(r.item);
  return out;
}

ObjectProblem refused(ObjectProblem::Kind kind, const std::string& name, std::string reason) {
  ObjectProblem p;
  p.set_kind(kind);
  p.set_name(name);
  p.set_state(ObjectProblem::REFUSED);
  p.set_reason(std::move(reason));
  return p;
}

// A subnet's own fields (local or remote); the error says which is wrong.
Result<ModelSubnet> parseSubnet(const dpv1::Subnet& s, bool need_gateway) {
  ModelSubnet out;
  out.cidr = s.cidr();
  auto prefix = IpPrefix::parse(s.cidr());
  if (!prefix) return Error{"cidr \"" + s.cidr() + "\": " + prefix.error()};
  out.prefix = *prefix;
  if (!s.gateway_ip().empty()) {
    auto gw = IpAddress::parse(s.gateway_ip());
    if (!gw) return Error{"gateway_ip \"" + s.gateway_ip() + "\": " + gw.error()};
    if (!out.prefix.contains(*gw)) return Error{"gateway_ip " + gw->str() + " is outside the subnet " + s.cidr()};
    if (gw->bytes == out.prefix.address.bytes) {
      return Error{"gateway_ip " + gw->str() + " is the subnet address of " + s.cidr()};
    }
    out.gateway = *gw;
    out.has_gateway = true;
  } else if (need_gateway) {
    return Error{"gateway_ip is required (the router port on this switch)"};
  }
  if (s.datapath_key() == 0 || s.datapath_key() > kMaxDatapathKey) {
    return Error{"datapath_key " + std::to_string(s.datapath_key()) + " must be 1..16777215 (it is the 24-bit VNI)"};
  }
  out.datapath_key = s.datapath_key();
  s.SerializeToString(&out.content);
  return out;
}

std::string family(const IpAddress& a) { return a.isV4() ? "IPv4" : "IPv6"; }

// Every prefix granted so far, local and remote, with who holds it.
class PrefixClaims {
 public:
  // The holder of a prefix overlapping `p`, if any.
  std::optional<std::string> holderOf(const IpPrefix& p) const {
    for (const auto& [q, holder] : held_) {
      if (p.overlaps(q)) return holder + " subnet " + q.str();
    }
    return std::nullopt;
  }
  void grant(const IpPrefix& p, const std::string& holder) { held_.emplace_back(p, holder); }

 private:
  std::vector<std::pair<IpPrefix, std::string>> held_;
};

// Identities: every object has a name, each name once. A request that breaks
// this cannot be answered object by object.
Result<void> checkIdentities(const dpv1::LogicalModel& in) {
  std::set<std::string> seen;
  for (const auto& s : in.local_subnets()) {
    if (s.cidr().empty()) return Error{"a local subnet has an empty cidr: the cidr is its name", ErrorCode::kInvalid};
    if (!seen.insert(s.cidr()).second) {
      return Error{"local subnet " + s.cidr() + " is listed twice (duplicate cidr)", ErrorCode::kInvalid};
    }
  }
  seen.clear();
  for (const auto& p : in.ports()) {
    if (p.name().empty()) {
      return Error{"a port has an empty name: every port needs its attachment id", ErrorCode::kInvalid};
    }
    if (!seen.insert(p.name()).second) {
      return Error{"port " + p.name() + " is listed twice (duplicate port name)", ErrorCode::kInvalid};
    }
  }
  seen.clear();
  for (const auto& r : in.remote_nodes()) {
    if (r.name().empty()) return Error{"a remote node has an empty name", ErrorCode::kInvalid};
    if (!seen.insert(r.name()).second) {
      return Error{"remote node " + r.name() + " is listed twice (duplicate remote node name)", ErrorCode::kInvalid};
    }
  }
  seen.clear();
  for (const auto& a : in.ipsec_sas()) {
    if (a.name().empty()) return Error{"an IPsec SA has an empty name", ErrorCode::kInvalid};
    if (!seen.insert(a.name()).second) {
      return Error{"IPsec SA " + a.name() + " is listed twice (duplicate IPsec SA name)", ErrorCode::kInvalid};
    }
  }
  seen.clear();
  for (const auto& v : in.services()) {
    if (v.name().empty()) return Error{"a service has an empty name: give it \"namespace/name\"", ErrorCode::kInvalid};
    if (!seen.insert(v.name()).second) {
      return Error{"service " + v.name() + " is listed twice (duplicate service name)", ErrorCode::kInvalid};
    }
  }
  seen.clear();
  for (const auto& pp : in.port_policies()) {
    if (pp.port().empty()) {
      return Error{"a port policy has an empty port: name the port (its attachment id) it is for",
                   ErrorCode::kInvalid};
    }
    if (!seen.insert(pp.port()).second) {
      return Error{"port " + pp.port() + " has two port policies (one per port: merge their rules)",
                   ErrorCode::kInvalid};
    }
  }
  return {};
}

class Validator {
 public:
  Validator(const dpv1::LogicalModel& in, const Model* previous) : in_(in), incumbents_(previous) {}

  Result<Verdict> run() {
    if (auto r = validateNodeSettings(in_.node()); !r) return std::move(r).takeError();
    if (auto r = checkIdentities(in_); !r) return std::move(r).takeError();
    Model& m = out_.model;
    const auto& node = in_.node();
    m.programmed = true;
    m.node_name = node.name();
    m.tunnel_ip = *IpAddress::parse(node.tunnel_ip());
    m.has_tunnel_ip = true;
    m.router_mac = *MacAddress::parse(node.router_mac());
    m.pod_mtu = node.pod_mtu();
    m.ipsec = node.ipsec();
    m.ipsec_nat_t = node.ipsec_nat_traversal();
    m.ipsec_nat_keepalive_s = node.ipsec_nat_keepalive_seconds();
    m.underlay_mtu = node.underlay_mtu();
    auto addresses = nodeAddressesOf(node);  // validateNodeSettings checked them
    m.node_ips = std::move(addresses->ips);
    m.node_gateways = std::move(addresses->gateways);

    for (const auto& c : node.cluster_cidrs()) m.cluster_cidrs.push_back(*IpPrefix::parse(c));
    for (const auto& c : node.service_cidrs()) m.service_cidrs.push_back(*IpPrefix::parse(c));

    localSubnets();
    ports();
    remoteNodes();
    ipsecSas();
    services();
    portPolicies();

    auto byName = [](const auto& a, const auto& b) { return a.name < b.name; };
    std::sort(m.local_subnets.begin(), m.local_subnets.end(),
              [](const ModelSubnet& a, const ModelSubnet& b) { return a.cidr < b.cidr; });
    std::sort(m.ports.begin(), m.ports.end(), byName);
    std::sort(m.remote_nodes.begin(), m.remote_nodes.end(), byName);
    std::sort(m.ipsec_sas.begin(), m.ipsec_sas.end(), byName);
    std::sort(m.services.begin(), m.services.end(), byName);
    std::sort(m.port_policies.begin(), m.port_policies.end(),
              [](const ModelPortPolicy& a, const ModelPortPolicy& b) { return a.port < b.port; });
    node.SerializeToString(&m.node_content);
    for (const auto& s : m.local_subnets) m.node_content += s.content;
    std::sort(out_.problems.begin(), out_.problems.end(), [](const ObjectProblem& a, const ObjectProblem& b) {
      return a.kind() != b.kind() ? a.kind() < b.kind() : a.name() < b.name();
    });
    return std::move(out_);
  }

 private:
  void localSubnets() {
    std::map<std::pair<uint32_t, bool>, std::string> keys;  // a switch has at most one subnet per family
    for (const auto* s : byPriority(in_.local_subnets(), [](const dpv1::Subnet& x) { return x.cidr(); },
                                    incumbents_.subnets)) {
      auto sub = parseSubnet(*s, true);
      if (!sub) {
        refuse(ObjectProblem::LOCAL_SUBNET, s->cidr(), sub.error());
        continue;
      }
      if (auto holder = prefixes_.holderOf(sub->prefix)) {
        refuse(ObjectProblem::LOCAL_SUBNET, s->cidr(), "overlaps " + *holder + ", which is in force");
        continue;
      }
      const std::pair<uint32_t, bool> key{sub->datapath_key, sub->prefix.address.isV4()};
      if (auto it = keys.find(key); it != keys.end()) {
        refuse(ObjectProblem::LOCAL_SUBNET, s->cidr(),
               "datapath_key " + std::to_string(sub->datapath_key) + " already has the " +
                   family(sub->prefix.address) + " subnet " + it->second + " (a logical switch has one per family)");
        continue;
      }
      keys.emplace(key, s->cidr());
      prefixes_.grant(sub->prefix, "local");
      out_.model.local_subnets.push_back(std::move(*sub));
    }
  }

  // The local subnets in force of one logical switch, and if there is none,
  // why (a refused subnet with that key is named).
  struct Switch {
    const ModelSubnet* v4 = nullptr;
    const ModelSubnet* v6 = nullptr;
  };
  Result<Switch> switchOf(uint32_t datapath_key) const {
    Switch sw;
    for (const auto& s : out_.model.local_subnets) {
      if (s.datapath_key != datapath_key) continue;
      (s.prefix.address.isV4() ? sw.v4 : sw.v6) = &s;
    }
    if (sw.v4 != nullptr || sw.v6 != nullptr) return sw;
    for (const auto& s : in_.local_subnets()) {
      if (s.datapath_key() != datapath_key) continue;
      for (const auto& p : out_.problems) {
        if (p.kind() == ObjectProblem::LOCAL_SUBNET && p.name() == s.cidr()) {
          return Error{"its local subnet " + s.cidr() + " (datapath_key " + std::to_string(datapath_key) +
                       ") is refused: " + p.reason()};
        }
      }
    }
    return Error{"datapath_key " + std::to_string(datapath_key) +
                 " names no local subnet; add the subnet first or fix the key"};
  }

  // A port's own fields, with nothing else considered.
  Result<ModelPort> parsePort(const dpv1::LogicalPort& p) const {
    ModelPort port;
    port.name = p.name();
    if (p.key() == 0 || p.key() > kMaxPortKey) {
      return Error{"key " + std::to_string(p.key()) + " must be 1..32767 (15-bit OVN port key)"};
    }
    port.key = static_cast<uint16_t>(p.key());
    if (p.kind() != dpv1::POD && p.kind() != dpv1::MANAGEMENT) return Error{"kind must be POD or MANAGEMENT"};
    port.kind = p.kind();
    if (p.representor().empty()) return Error{"representor is empty: name the VF representor it is bound to"};
    port.representor = p.representor();
    auto mac = MacAddress::parse(p.mac());
    if (!mac) return Error{"mac \"" + p.mac() + "\": " + mac.error()};
    if (auto why = portMacProblem(*mac, out_.model.router_mac); !why.empty()) return Error{why};
    port.mac = *mac;
    auto sw = switchOf(p.datapath_key());
    if (!sw) return std::move(sw).takeError();
    port.datapath_key = p.datapath_key();
    if (p.ips().empty()) return Error{"no ips; a port needs at least one address"};
    for (const auto& text : p.ips()) {
      auto ip = IpAddress::parse(text);
      if (!ip) return Error{"ip \"" + text + "\": " + ip.error() + " (give an address without prefix length)"};
      const ModelSubnet* s = ip->isV4() ? sw->v4 : sw->v6;
      if (s == nullptr || !s->prefix.contains(*ip)) {
        return Error{"ip " + ip->str() + " is not inside its logical switch's subnet" +
                     (s == nullptr ? " (the switch has no " + family(*ip) + " subnet)" : " " + s->cidr)};
      }
      if (s->has_gateway && s->gateway == *ip) return Error{"ip " + ip->str() + " is the gateway address"};
      if (ip->bytes == s->prefix.address.bytes) return Error{"ip " + ip->str() + " is the subnet address"};
      if (std::find(port.ips.begin(), port.ips.end(), *ip) != port.ips.end()) {
        return Error{"ip " + ip->str() + " is listed twice"};
      }
      port.ips.push_back(*ip);
    }
    p.SerializeToString(&port.content);
    return port;
  }

  void ports() {
    std::map<uint32_t, std::string> keys;
    std::map<std::string, std::string> representors;
    std::map<MacAddress, std::string> macs;
    std::map<IpAddress, std::string> ips;
    std::string management;
    for (const auto* p : byPriority(in_.ports(), [](const dpv1::LogicalPort& x) { return x.name(); },
                                    incumbents_.ports)) {
      auto port = parsePort(*p);
      if (!port) {
        refuse(ObjectProblem::PORT, p->name(), port.error());
        continue;
      }
      std::string clash;
      if (auto it = keys.find(port->key); it != keys.end()) {
        clash = "key " + std::to_string(port->key) + " is not unique: port " + it->second + " holds it";
      } else if (auto r = representors.find(port->representor); r != representors.end()) {
        clash = "representor " + port->representor + " is bound to port " + r->second;
      } else if (auto mc = macs.find(port->mac); mc != macs.end()) {
        clash = "mac " + port->mac.str() + " is used by port " + mc->second + " (ports of a node need distinct MACs)";
      } else if (port->kind == dpv1::MANAGEMENT && !management.empty()) {
        clash = "port " + management + " is the management port already; a node has one host management port";
      } else {
        for (const auto& ip : port->ips) {
          if (auto it = ips.find(ip); it != ips.end()) {
            clash = "ip " + ip.str() + " is used by another port, " + it->second;
            break;
          }
        }
      }
      if (!clash.empty()) {
        refuse(ObjectProblem::PORT, p->name(), clash + ", which is in force");
        continue;
      }
      keys.emplace(port->key, port->name);
      representors.emplace(port->representor, port->name);
      macs.emplace(port->mac, port->name);
      for (const auto& ip : port->ips) ips.emplace(ip, port->name);
      if (port->kind == dpv1::MANAGEMENT) management = port->name;
      out_.model.ports.push_back(std::move(*port));
    }
  }

  // A remote node's own fields and subnets, with nothing else considered.
  Result<ModelRemoteNode> parseRemote(const dpv1::RemoteNode& r) const {
    ModelRemoteNode node;
    node.name = r.name();
    auto ip = IpAddress::parse(r.tunnel_ip());
    if (!ip) return Error{"tunnel_ip \"" + r.tunnel_ip() + "\": " + ip.error()};
    const IpAddress& ours = out_.model.tunnel_ip;
    if (ip->family != ours.family) {
      return Error{"tunnel_ip " + ip->str() + " is not of the same IP family as ours (" + ours.str() + ")"};
    }
    if (*ip == ours) return Error{"tunnel_ip " + ip->str() + " is our own tunnel IP"};
    node.tunnel_ip = *ip;
    if (!r.nat_address().empty()) {
      auto nat = IpAddress::parse(r.nat_address());
      if (!nat) return Error{"nat_address \"" + r.nat_address() + "\": " + nat.error()};
      if (!nat->isV4() || !ip->isV4()) {
        return Error{"nat_address " + nat->str() + ": NAT traversal (ESP in UDP 4500) is for IPv4 underlays"};
      }
      if (*nat == ours) return Error{"nat_address " + nat->str() + " is our own tunnel IP"};
      if (!out_.model.ipsec_nat_t) {
        return Error{"nat_address " + nat->str() +
                     " is set (the node is behind a NAT) and this node does not send ESP in UDP 4500, which is "
                     "all that crosses a NAT: set node.ipsec_nat_traversal (ipsec.natTraversal)"};
      }
      node.nat_address = *nat;
    }
    if (static_cast<size_t>(r.subnets_size()) > kMaxRemoteSubnets) {
      return Error{std::to_string(r.subnets_size()) + " subnets; at most " + std::to_string(kMaxRemoteSubnets)};
    }
    for (const auto& s : r.subnets()) {
      auto sub = parseSubnet(s, false);
      if (!sub) return Error{"subnet " + s.cidr() + ": " + sub.error()};
      for (const auto& other : node.subnets) {
        if (other.prefix.overlaps(sub->prefix)) {
          return Error{"subnet " + s.cidr() + " overlaps its own subnet " + other.prefix.str()};
        }
      }
      node.subnets.push_back(std::move(*sub));
    }
    // One key may be given to several addresses: a dual-stack port publishes
    // each of its addresses with its one key.
    for (const auto& rp : r.ports()) {
      auto pip = IpAddress::parse(rp.ip());
      if (!pip) return Error{"port key for \"" + rp.ip() + "\": " + pip.error()};
      bool inside = false;
      for (const auto& s : node.subnets) inside = inside || s.prefix.contains(*pip);
      if (!inside) return Error{"port key for " + pip->str() + ": the address is in none of its subnets"};
      if (rp.key() == 0 || rp.key() > kMaxPortKey) {
        return Error{"port key for " + pip->str() + ": " + std::to_string(rp.key()) +
                     " must be 1..32767 (15-bit OVN port key)"};
      }
      for (const auto& k : node.port_keys) {
        if (k.ip == *pip) return Error{"port key for " + pip->str() + " is listed twice"};
      }
      node.port_keys.push_back({*pip, static_cast<uint16_t>(rp.key())});
    }
    std::sort(node.port_keys.begin(), node.port_keys.end(),
              [](const RemotePortKey& a, const RemotePortKey& b) { return a.ip < b.ip; });
    r.SerializeToString(&node.content);
    return node;
  }

  void remoteNodes() {
    std::map<IpAddress, std::string> tunnel_ips;
    for (const auto* r : byPriority(in_.remote_nodes(), [](const dpv1::RemoteNode& x) { return x.name(); },
                                    incumbents_.remotes)) {
      auto node = parseRemote(*r);
      if (!node) {
        refuse(ObjectProblem::REMOTE_NODE, r->name(), node.error());
        continue;
      }
      std::string clash;
      // A node is told apart by the address its packets come from: its tunnel
      // IP, or its NAT address; neither may be another's.
      if (auto it = tunnel_ips.find(node->tunnel_ip); it != tunnel_ips.end()) {
        clash = "tunnel_ip " + node->tunnel_ip.str() + " is used by remote node " + it->second;
      } else if (auto nat = node->nat_address ? tunnel_ips.find(*node->nat_address) : tunnel_ips.end();
                 nat != tunnel_ips.end()) {
        clash = "nat_address " + node->nat_address->str() + " is used by remote node " + nat->second +
                " (one node per NAT address)";
      } else {
        for (const auto& s : node->subnets) {
          if (auto holder = prefixes_.holderOf(s.prefix)) {
            clash = "subnet " + s.prefix.str() + " overlaps " + *holder;
            break;
          }
        }
      }
      if (!clash.empty()) {
        refuse(ObjectProblem::REMOTE_NODE, r->name(), clash + ", which is in force");
        continue;
      }
      tunnel_ips.emplace(node->tunnel_ip, node->name);
      if (node->nat_address) tunnel_ips.emplace(*node->nat_address, node->name);
      for (const auto& s : node->subnets) prefixes_.grant(s.prefix, "remote node " + node->name);
      out_.model.remote_nodes.push_back(std::move(*node));
    }
  }

  // An SA's own fields, with nothing else considered. No reason ever
  // quotes the key or the salt.
  Result<ModelIpsecSa> parseSa(const dpv1::IpsecSa& a) const {
    ModelIpsecSa sa;
    sa.name = a.name();
    if (a.remote_node().empty()) return Error{"remote_node is empty: name the remote node it protects traffic with"};
    sa.remote_node = a.remote_node();
    auto ip = IpAddress::parse(a.peer_tunnel_ip());
    if (!ip) return Error{"peer_tunnel_ip \"" + a.peer_tunnel_ip() + "\": " + ip.error()};
    sa.peer_tunnel_ip = *ip;
    if (a.direction() != dpv1::INBOUND && a.direction() != dpv1::OUTBOUND) return Error{"direction must be INBOUND or OUTBOUND"};
    sa.direction = a.direction();
    if (a.spi() < kMinSpi) {
      return Error{"spi " + std::to_string(a.spi()) + " is reserved (RFC 4303 §2.1: 0..255); SPIs start at 256"};
    }
    sa.spi = a.spi();
    sa.local_epoch = a.local_epoch();
    sa.remote_epoch = a.remote_epoch();
    size_t key_len = 0;
    if (a.algorithm() == dpv1::AES_128_GCM) key_len = 16;
    else if (a.algorithm() == dpv1::AES_256_GCM) key_len = 32;
    else return Error{"algorithm must be AES_128_GCM or AES_256_GCM"};
    sa.algorithm = a.algorithm();
    if (a.key().size() != key_len) {
      return Error{"key is " + std::to_string(a.key().size()) + " bytes; " + dpv1::IpsecAlgorithm_Name(a.algorithm()) +
                   " takes " + std::to_string(key_len)};
    }
    sa.key = a.key();
    if (a.salt().size() != sa.salt.size()) {
      return Error{"salt is " + std::to_string(a.salt().size()) + " bytes; AES-GCM for ESP takes 4 (RFC 4106 §8.1)"};
    }
    std::copy(a.salt().begin(), a.salt().end(), sa.salt.begin());
    sa.esn = a.esn();
    const uint64_t max_seq = a.esn() ? ~uint64_t{0} : 0xffffffffu;
    if (a.initial_sequence() == 0 || a.initial_sequence() > max_seq) {
      return Error{"initial_sequence " + std::to_string(a.initial_sequence()) + " must be 1.." + std::to_string(max_seq) +
                   (a.esn() ? "" : " without esn")};
    }
    sa.initial_sequence = a.initial_sequence();
    if (a.direction() == dpv1::OUTBOUND) {
      if (a.sequence_limit() < a.initial_sequence() || a.sequence_limit() > max_seq) {
        return Error{"sequence_limit " + std::to_string(a.sequence_limit()) + " must be initial_sequence (" +
                     std::to_string(a.initial_sequence()) + ") .. " + std::to_string(max_seq) +
                     ": an outbound SA with no sequence number left cannot send; rotate its keys"};
      }
      if (a.replay_window() != 0) return Error{"replay_window is for inbound SAs; an outbound SA has 0"};
      if (a.plaintext_accepted()) {
        return Error{"plaintext_accepted is for inbound SAs (whether the remote node's plaintext is still "
                     "accepted); an outbound SA leaves it false"};
      }
      sa.sequence_limit = a.sequence_limit();
      sa.replay_window = 0;
    } else {
      if (a.sequence_limit() != 0) return Error{"sequence_limit is for outbound SAs; an inbound SA has 0"};
      const uint32_t w = a.replay_window();
      if (w != 0 && (w < 64 || w > 65536 || w % 64 != 0)) {
        return Error{"replay_window " + std::to_string(w) + " must be 0 (the default, " +
                     std::to_string(kDefaultReplayWindow) + ") or a multiple of 64 in 64..65536"};
      }
      sa.replay_window = w == 0 ? kDefaultReplayWindow : w;
      sa.plaintext_accepted = a.plaintext_accepted();
    }
    a.SerializeToString(&sa.content);
    return sa;
  }

  void ipsecSas() {
    std::map<std::pair<IpAddress, uint32_t>, std::string> inbound;  // (peer, spi) -> holder
    std::map<std::string, std::string> outbound;                    // remote node -> holder
    for (const auto* a : byPriority(in_.ipsec_sas(), [](const dpv1::IpsecSa& x) { return x.name(); },
                                    incumbents_.sas)) {
      auto sa = parseSa(*a);
      if (!sa) {
        refuse(ObjectProblem::IPSEC_SA, a->name(), sa.error());
        continue;
      }
      const ModelRemoteNode* node = nullptr;
      for (const auto& r : out_.model.remote_nodes) {
        if (r.name == sa->remote_node) node = &r;
      }
      std::string clash;
      if (node == nullptr) {
        std::string why = "remote node " + sa->remote_node + " is not in force";
        for (const auto& p : out_.problems) {
          if (p.kind() == ObjectProblem::REMOTE_NODE && p.name() == sa->remote_node) why += " (refused: " + p.reason() + ")";
        }
        refuse(ObjectProblem::IPSEC_SA, a->name(), why);
        continue;
      }
      if (node->tunnel_ip != sa->peer_tunnel_ip) {
        refuse(ObjectProblem::IPSEC_SA, a->name(),
               "peer_tunnel_ip " + sa->peer_tunnel_ip.str() + " is not remote node " + node->name + "'s tunnel_ip " +
                   node->tunnel_ip.str());
        continue;
      }
      if (sa->direction == dpv1::INBOUND) {
        if (auto it = inbound.find({sa->peer_tunnel_ip, sa->spi}); it != inbound.end()) {
          clash = "inbound spi " + std::to_string(sa->spi) + " from " + sa->peer_tunnel_ip.str() + " is IPsec SA " +
                  it->second + "'s";
        }
      } else if (auto it = outbound.find(sa->remote_node); it != outbound.end()) {
        clash = "remote node " + sa->remote_node + " has the outbound IPsec SA " + it->second +
                " (one outbound SA per remote node)";
      }
      if (!clash.empty()) {
        refuse(ObjectProblem::IPSEC_SA, a->name(), clash + ", which is in force");
        continue;
      }
      if (sa->direction == dpv1::INBOUND) inbound.emplace(std::pair{sa->peer_tunnel_ip, sa->spi}, sa->name);
      else outbound.emplace(sa->remote_node, sa->name);
      out_.model.ipsec_sas.push_back(std::move(*sa));
    }
  }

  // A service claims each (address, protocol, port) it serves on and each
  // (protocol, node port): two services cannot both answer one of them.
  void services() {
    ServiceClaims claims;
    for (const auto* v : byPriority(in_.services(), [](const dpv1::Service& x) { return x.name(); },
                                    incumbents_.services)) {
      auto svc = parseService(*v);
      if (!svc) {
        refuse(ObjectProblem::SERVICE, v->name(), svc.error());
        continue;
      }
      if (std::string clash = claims.clash(*svc); !clash.empty()) {
        refuse(ObjectProblem::SERVICE, v->name(), clash + ", which is in force");
        continue;
      }
      claims.grant(*svc);
      out_.model.services.push_back(std::move(*svc));
    }
  }

  // A port policy holds its port, which must be in force.
  void portPolicies() {
    for (const auto* pp : byPriority(in_.port_policies(), [](const dpv1::PortPolicy& x) { return x.port(); },
                                     incumbents_.port_policies)) {
      auto parsed = parsePortPolicy(*pp);
      std::string why = portPolicyPortProblem(pp->port(), out_.model.ports, out_.problems);
      if (!parsed) {
        refuse(ObjectProblem::PORT_POLICY, pp->port(), parsed.error());
        if (why.empty()) out_.model.port_policies.push_back(refusedPortPolicy(*pp));  // fail closed
        continue;
      }
      if (!why.empty()) {
        refuse(ObjectProblem::PORT_POLICY, pp->port(), std::move(why));
        continue;
      }
      out_.model.port_policies.push_back(std::move(*parsed));
    }
  }

  void refuse(ObjectProblem::Kind kind, const std::string& name, std::string reason) {
    out_.problems.push_back(refused(kind, name, std::move(reason)));
  }

  const dpv1::LogicalModel& in_;
  Incumbents incumbents_;
  PrefixClaims prefixes_;
  Verdict out_;
};

}  // namespace

namespace {

Result<NodeAddresses> nodeAddressesOf(const dpv1::NodeSettings& node) {
  std::vector<IpPrefix> cluster, service;
  for (const auto& c : node.cluster_cidrs()) cluster.push_back(*IpPrefix::parse(c));
  for (const auto& c : node.service_cidrs()) service.push_back(*IpPrefix::parse(c));
  return parseNodeAddresses({node.node_ips().begin(), node.node_ips().end()},
                            {node.node_gateways().begin(), node.node_gateways().end()},
                            *IpAddress::parse(node.tunnel_ip()), cluster, service, "node.node_ips",
                            "node.node_gateways");
}

bool isLinkLocal(const IpAddress& a) {
  if (a.isV4()) return a.bytes[0] == 169 && a.bytes[1] == 254;
  return a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80;
}

bool isMulticastOrUnspecified(const IpAddress& a) {
  if (a.isV4()) return a.bytes[0] >= 224 || a.v4HostOrder() == 0;
  if (a.bytes[0] == 0xff) return true;
  for (size_t i = 0; i < 16; ++i)
    if (a.bytes[i] != 0) return false;
  return true;
}

}  // namespace

Result<NodeAddresses> parseNodeAddresses(const std::vector<std::string>& ips, const std::vector<std::string>& gateways,
                                         const IpAddress& tunnel_ip, const std::vector<IpPrefix>& cluster,
                                         const std::vector<IpPrefix>& service, const std::string& ips_field,
                                         const std::string& gateways_field) {
  auto invalid = [](std::string m) { return Error{std::move(m), ErrorCode::kInvalid}; };
  NodeAddresses out;
  if (ips.size() > kMaxNodeIps) {
    return invalid(ips_field + " lists " + std::to_string(ips.size()) + " addresses; at most " +
                   std::to_string(kMaxNodeIps) + " (the uplink's XDP program holds that many)");
  }
  for (const auto& text : ips) {
    const std::string what = ips_field + " \"" + text + "\"";
    auto ifa = IpInterfaceAddress::parse(text);
    if (!ifa) return invalid(what + ": " + ifa.error() + " (give the address with its prefix length, e.g. 172.18.0.1/24)");
    const IpAddress& a = ifa->address;
    const unsigned bits = a.isV4() ? 32 : 128;
    if (ifa->length == 0 || ifa->length > bits) {
      return invalid(what + ": prefix length must be 1.." + std::to_string(bits) + " (the node network's)");
    }
    if (isMulticastOrUnspecified(a) || a.isLoopback()) return invalid(what + " is not a unicast address");
    if (isLinkLocal(a)) return invalid(what + " is link-local: give the node's address on the node network");
    const IpPrefix net = ifa->network();
    if (ifa->length < bits - 1) {
      if (a == net.address) return invalid(what + " is the network address of " + net.str());
      if (a.isV4() && a == net.at(net.size() - 1)) return invalid(what + " is the broadcast address of " + net.str());
    }
    if (a == tunnel_ip) {
      return invalid(what + " is the tunnel IP: the node IP lives on the host PF, the tunnel IP on the DPU's uplink");
    }
    for (const auto* list : {&cluster, &service}) {
      for (const auto& p : *list) {
        if (p.contains(a)) {
          return invalid(what + " is inside the " + (list == &cluster ? "cluster" : "service") + " CIDR " + p.str() +
                         ", which the cluster network routes itself");
        }
      }
    }
    for (const auto& other : out.ips) {
      if (other.address == a) return invalid(what + " is listed twice");
    }
    out.ips.push_back(*ifa);
  }
  for (const auto& text : gateways) {
    const std::string what = gateways_field + " \"" + text + "\"";
    auto gw = IpAddress::parse(text);
    if (!gw) return invalid(what + ": " + gw.error() + " (give an address without prefix length)");
    if (isMulticastOrUnspecified(*gw) || gw->isLoopback()) return invalid(what + " is not a unicast address");
    bool on_link = false, has_family = false;
    for (const auto& ip : out.ips) {
      if (ip.address.family != gw->family) continue;
      has_family = true;
      if (ip.address == *gw) return invalid(what + " is a node IP; the gateway is another host on the node network");
      // An IPv6 link-local gateway (what router advertisements give) is on
      // every IPv6 link: solicited from a node IP (RFC 4861 §7.2.2).
      on_link = on_link || ip.network().contains(*gw) || (!gw->isV4() && isLinkLocal(*gw));
    }
    if (!has_family) {
      return invalid(what + ": no node IP of its family in " + ips_field + " (a gateway is reached from one)");
    }
    if (!on_link) return invalid(what + " is in none of the node IPs' prefixes (a gateway must be on-link)");
    for (const auto& other : out.gateways) {
      if (other.family == gw->family) {
        return invalid(what + ": " + other.str() + " is the " + family(*gw) + " gateway already (one per family)");
      }
    }
    out.gateways.push_back(*gw);
  }
  return out;
}

std::string portMacProblem(const MacAddress& mac, const MacAddress& router_mac) {
  if (mac.isZero()) return "mac " + mac.str() + " is zero; a port needs a unicast MAC";
  if (mac.bytes == std::array<uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
    return "mac " + mac.str() + " is the broadcast address; a port needs a unicast MAC";
  }
  if (mac.isMulticast()) {
    return "mac " + mac.str() + " is a multicast address (its first byte is odd); a port needs a unicast MAC";
  }
  if (mac == router_mac) {
    return "mac " + mac.str() + " is the router MAC (every pod's gateway answers with it); give the port another MAC";
  }
  return "";
}

std::string kindName(dpv1::ObjectProblem::Kind kind) {
  switch (kind) {
    case ObjectProblem::PORT: return "port";
    case ObjectProblem::REMOTE_NODE: return "remote node";
    case ObjectProblem::LOCAL_SUBNET: return "local subnet";
    case ObjectProblem::IPSEC_SA: return "ipsec sa";
    case ObjectProblem::SERVICE: return "service";
    case ObjectProblem::PORT_POLICY: return "port policy";
    default: break;
  }
  return "object";
}

Result<void> validateNodeSettings(const dpv1::NodeSettings& node) {
  auto invalid = [](std::string m) { return Error{std::move(m), ErrorCode::kInvalid}; };
  if (node.tunnel_ip().empty()) return invalid("node.tunnel_ip is empty: set the DPU's underlay address");
  auto tip = IpAddress::parse(node.tunnel_ip());
  if (!tip) return invalid("node.tunnel_ip \"" + node.tunnel_ip() + "\": " + tip.error());
  auto rmac = MacAddress::parse(node.router_mac());
  if (!rmac) return invalid("node.router_mac \"" + node.router_mac() + "\": " + rmac.error());
  if (rmac->isZero() || rmac->isMulticast()) {
    return invalid("node.router_mac " + node.router_mac() + " must be a unicast, non-zero MAC");
  }
  if (node.ipsec_nat_traversal() && !tip->isV4()) {
    return invalid("node.ipsec_nat_traversal is set with the IPv6 tunnel_ip " + node.tunnel_ip() +
                   ": NAT traversal (ESP in UDP 4500, RFC 3948) is for IPv4 underlays; unset it");
  }
  if (node.ipsec_nat_keepalive_seconds() != 0 && !node.ipsec_nat_traversal()) {
    return invalid("node.ipsec_nat_keepalive_seconds is " + std::to_string(node.ipsec_nat_keepalive_seconds()) +
                   " without ipsec_nat_traversal: NAT keepalives (RFC 3948 §2.2) go with ESP in UDP; set it to 0");
  }
  if (node.ipsec_nat_keepalive_seconds() > 3600) {
    return invalid("node.ipsec_nat_keepalive_seconds " + std::to_string(node.ipsec_nat_keepalive_seconds()) +
                   " must be 0 (none) or 1..3600");
  }
  if (node.pod_mtu() < 576 || node.pod_mtu() > 65535) {
    return invalid("node.pod_mtu " + std::to_string(node.pod_mtu()) + " must be 576..65535");
  }
  if (node.underlay_mtu() != 0 && (node.underlay_mtu() < 576 || node.underlay_mtu() > 65535)) {
    return invalid("node.underlay_mtu " + std::to_string(node.underlay_mtu()) + " must be 0 (unknown) or 576..65535");
  }
  for (const auto& c : node.cluster_cidrs()) {
    if (auto p = IpPrefix::parse(c); !p) return invalid("node.cluster_cidrs \"" + c + "\": " + p.error());
  }
  for (const auto& c : node.service_cidrs()) {
    if (auto p = IpPrefix::parse(c); !p) return invalid("node.service_cidrs \"" + c + "\": " + p.error());
  }
  if (auto addresses = nodeAddressesOf(node); !addresses) return std::move(addresses).takeError();
  return {};
}

namespace {

constexpr size_t kPackedV4 = 5;   // PolicyRule.peers_v4: 4 address bytes, the length
constexpr size_t kPackedV6 = 17;  // PolicyRule.peers_v6: 16 address bytes, the length

// One packed record as a prefix; the error says what is wrong with it.
Result<IpPrefix> unpackPeer(const char* record, bool v6) {
  const size_t width = v6 ? 16 : 4;
  IpPrefix p;
  p.address.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
  std::memcpy(p.address.bytes.data(), record, width);
  const unsigned length = static_cast<uint8_t>(record[width]);
  if (length > width * 8) {
    return Error{p.address.str() + "/" + std::to_string(length) + ": the length is above " +
                 std::to_string(width * 8)};
  }
  p.length = static_cast<uint8_t>(length);
  for (size_t i = 0; i < width; ++i) {
    const unsigned keep = length > i * 8 ? std::min<unsigned>(8, length - static_cast<unsigned>(i * 8)) : 0;
    const uint8_t host = static_cast<uint8_t>(keep >= 8 ? 0 : 0xff >> keep);
    if (p.address.bytes[i] & host) {
      IpPrefix masked = p;
      for (size_t j = i; j < width; ++j) {
        const unsigned k = length > j * 8 ? std::min<unsigned>(8, length - static_cast<unsigned>(j * 8)) : 0;
        masked.address.bytes[j] &= static_cast<uint8_t>(k >= 8 ? 0xff : ~(0xff >> k));
      }
      return Error{p.str() + " has host bits set (did you mean " + masked.str() + "?)"};
    }
  }
  return p;
}

Result<void> unpackPeers(const std::string& packed, bool v6, const std::string& field, std::vector<IpPrefix>& out) {
  const size_t size = v6 ? kPackedV6 : kPackedV4;
  if (packed.size() % size != 0) {
    return Error{field + " holds " + std::to_string(packed.size()) + " bytes, not a whole number of " +
                 std::to_string(size) + "-byte records (the address, then the prefix length)"};
  }
  for (size_t at = 0; at < packed.size(); at += size) {
    auto p = unpackPeer(packed.data() + at, v6);
    if (!p) {
      return Error{field + "[" + std::to_string(at / size) + "] " + p.error() +
                   " (give a prefix such as " + (v6 ? "fd00::/64" : "10.0.0.0/24") + ")"};
    }
    out.push_back(*p);
  }
  return {};
}

}  // namespace

void packPolicyPeers(const std::vector<IpPrefix>& peers, dpv1::PolicyRule& rule) {
  size_t v4 = 0, v6 = 0;
  for (const auto& p : peers) (p.address.isV4() ? v4 : v6)++;
  std::string* out4 = rule.mutable_peers_v4();
  std::string* out6 = rule.mutable_peers_v6();
  out4->reserve(out4->size() + v4 * kPackedV4);
  out6->reserve(out6->size() + v6 * kPackedV6);
  for (const auto& p : peers) {
    std::string* out = p.address.isV4() ? out4 : out6;
    out->append(reinterpret_cast<const char*>(p.address.bytes.data()), p.address.isV4() ? 4 : 16);
    out->push_back(static_cast<char>(p.length));
  }
}

void unpackPolicyPeers(dpv1::PolicyRule& rule) {
  for (bool v6 : {false, true}) {
    const std::string& packed = v6 ? rule.peers_v6() : rule.peers_v4();
    const size_t size = v6 ? kPackedV6 : kPackedV4;
    for (size_t at = 0; at < packed.size(); at += size) {
      if (at + size > packed.size()) {
        rule.add_peers("(bad record)");
        break;
      }
      auto p = unpackPeer(packed.data() + at, v6);
      rule.add_peers(p ? p->str() : "(bad record)");
    }
  }
  rule.clear_peers_v4();
  rule.clear_peers_v6();
}

void unpackPolicyPeers(dpv1::PortPolicy& policy) {
  if (policy.has_ingress()) {
    for (auto& r : *policy.mutable_ingress()->mutable_rules()) unpackPolicyPeers(r);
  }
  if (policy.has_egress()) {
    for (auto& r : *policy.mutable_egress()->mutable_rules()) unpackPolicyPeers(r);
  }
}

namespace {

Result<ModelPolicyDirection> parseDirection(const dpv1::PolicyDirection& d, const std::string& field) {
  ModelPolicyDirection out;
  out.isolated = d.isolated();
  for (int i = 0; i < d.policies_size(); ++i) {
    if (d.policies(i).empty()) {
      return Error{field + ".policies[" + std::to_string(i) + "] is empty: name the policy as \"namespace/name\""};
    }
    out.policies.push_back(d.policies(i));
  }
  if (!d.isolated()) {
    if (d.rules_size() != 0) {
      return Error{field + " is not isolated but has " + std::to_string(d.rules_size()) +
                   " rules: set isolated, or send no rules (everything passes)"};
    }
    return out;
  }
  if (out.policies.empty()) {
    return Error{field + " is isolated but names no policy in " + field +
                 ".policies: list the policies isolating the port (denials are counted against them)"};
  }
  for (int i = 0; i < d.rules_size(); ++i) {
    const auto& r = d.rules(i);
    const std::string where = field + ".rules[" + std::to_string(i) + "]";
    ModelPolicyRule rule;
    if (r.policy().empty()) return Error{where + ".policy is empty: name the policy the rule comes from"};
    rule.policy = r.policy();
    if (r.peers().empty() && r.peers_v4().empty() && r.peers_v6().empty()) {
      return Error{where + ".peers is empty: a rule allows some peers (\"0.0.0.0/0\" and \"::/0\" for any)"};
    }
    rule.peers.reserve(static_cast<size_t>(r.peers_size()) + r.peers_v4().size() / kPackedV4 +
                       r.peers_v6().size() / kPackedV6);
    for (const auto& text : r.peers()) {
      auto prefix = IpPrefix::parse(text);
      if (!prefix) {
        return Error{where + ".peers \"" + text + "\": " + prefix.error() + " (give a prefix such as 10.0.0.0/24)"};
      }
      rule.peers.push_back(*prefix);
    }
    if (auto packed = unpackPeers(r.peers_v4(), false, where + ".peers_v4", rule.peers); !packed) {
      return std::move(packed).takeError();
    }
    if (auto packed = unpackPeers(r.peers_v6(), true, where + ".peers_v6", rule.peers); !packed) {
      return std::move(packed).takeError();
    }
    const uint32_t proto = r.protocol();
    if (proto != 0 && proto != 1 && proto != 6 && proto != 17 && proto != 58 && proto != 132) {
      return Error{where + ".protocol " + std::to_string(proto) +
                   " is not one NetworkPolicy names: 0 (every protocol), 6 (TCP), 17 (UDP), 132 (SCTP), 1 or 58 (ICMP)"};
    }
    rule.protocol = static_cast<uint8_t>(proto);
    if (r.port_last() > 65535 || r.port_first() > r.port_last()) {
      return Error{where + " ports " + std::to_string(r.port_first()) + "-" + std::to_string(r.port_last()) +
                   " are not a range: 0 <= port_first <= port_last <= 65535"};
    }
    rule.port_first = static_cast<uint16_t>(r.port_first());
    rule.port_last = static_cast<uint16_t>(r.port_last());
    out.rules.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

std::string portPolicyPortProblem(const std::string& port, const std::vector<ModelPort>& ports,
                                  const std::vector<ObjectProblem>& problems) {
  const bool in_force =
      std::any_of(ports.begin(), ports.end(), [&](const ModelPort& p) { return p.name == port; });
  if (in_force) return "";
  std::string why = "port " + port + " is not in force";
  bool requested = false;
  for (const auto& p : problems) {
    if (p.kind() == ObjectProblem::PORT && p.name() == port) {
      why += " (refused: " + p.reason() + ")";
      requested = true;
    }
  }
  if (!requested) why += ": the model has no such port; send the port first or fix the name";
  return why;
}

Result<ModelPortPolicy> parsePortPolicy(const dpv1::PortPolicy& p) {
  ModelPortPolicy out;
  out.port = p.port();
  out.pod = p.pod();
  auto ingress = parseDirection(p.ingress(), "ingress");
  if (!ingress) return std::move(ingress).takeError();
  auto egress = parseDirection(p.egress(), "egress");
  if (!egress) return std::move(egress).takeError();
  out.ingress = std::move(*ingress);
  out.egress = std::move(*egress);
  p.SerializeToString(&out.content);
  return out;
}

ModelPortPolicy refusedPortPolicy(const dpv1::PortPolicy& p) {
  ModelPortPolicy out;
  out.port = p.port();
  out.pod = p.pod();
  for (ModelPolicyDirection* d : {&out.ingress, &out.egress}) {
    d->isolated = true;
    d->policies = {kRefusedPortPolicyName};
  }
  out.content = "refused:" + p.SerializeAsString();
  return out;
}

ServiceClaims::ServiceClaims(const std::vector<ModelService>& in_force) {
  for (const auto& svc : in_force) grant(svc);
}

namespace {

// The (address, protocol, port) triples a service serves on, per port its
// cluster IPs then its external IPs.
std::vector<std::tuple<IpAddress, uint8_t, uint16_t>> frontendsOf(const ModelService& svc) {
  std::vector<std::tuple<IpAddress, uint8_t, uint16_t>> out;
  for (const auto& port : svc.ports) {
    for (const auto* ips : {&svc.cluster_ips, &svc.external_ips}) {
      for (const auto& ip : *ips) out.emplace_back(ip, port.protocol, port.port);
    }
  }
  return out;
}

}  // namespace

std::string ServiceClaims::clash(const ModelService& svc) const {
  for (const auto& port : svc.ports) {
    if (port.node_port == 0) continue;
    if (auto it = node_ports_.find({port.protocol, port.node_port}); it != node_ports_.end() && it->second != svc.name) {
      return "node port " + protocolName(port.protocol) + " " + std::to_string(port.node_port) + " is service " +
             it->second + "'s";
    }
  }
  for (const auto& f : frontendsOf(svc)) {
    if (auto it = frontends_.find(f); it != frontends_.end() && it->second != svc.name) {
      return std::get<0>(f).str() + " " + protocolName(std::get<1>(f)) + " " + std::to_string(std::get<2>(f)) +
             " is served by service " + it->second;
    }
  }
  return "";
}

void ServiceClaims::grant(const ModelService& svc) {
  for (const auto& f : frontendsOf(svc)) frontends_.emplace(f, svc.name);
  for (const auto& port : svc.ports) {
    if (port.node_port != 0) node_ports_.emplace(std::make_pair(port.protocol, port.node_port), svc.name);
  }
}

void ServiceClaims::release(const ModelService& svc) {
  for (const auto& f : frontendsOf(svc)) {
    if (auto it = frontends_.find(f); it != frontends_.end() && it->second == svc.name) frontends_.erase(it);
  }
  for (const auto& port : svc.ports) {
    if (port.node_port == 0) continue;
    auto it = node_ports_.find({port.protocol, port.node_port});
    if (it != node_ports_.end() && it->second == svc.name) node_ports_.erase(it);
  }
}

Result<Verdict> validate(const dpv1::LogicalModel& requested, const Model* previous) {
  return Validator(requested, previous).run();
}

}  // namespace dpu::model
