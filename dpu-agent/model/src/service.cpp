// A service's own fields (model.h: parseService): addresses, ports and
// endpoints, each checked as kube-proxy needs it and named when refused.
#include <algorithm>
#include <set>

#include "model/model.h"

namespace dpu::model {
namespace {

// Why `a` cannot be a service or endpoint address ("" when it can): traffic
// is balanced to and from unicast addresses only.
std::string unicastProblem(const IpAddress& a) {
  const std::array<uint8_t, 16> zero{};
  if (a.bytes == zero) return "is the unspecified address";
  if (a.isLoopback()) return "is a loopback address";
  if (a.isV4()) {
    if (a.bytes[0] >= 224 && a.bytes[0] <= 239) return "is a multicast address";
    if (a.bytes[0] >= 240) return a.v4HostOrder() == 0xffffffff ? "is the broadcast address" : "is reserved (240/4)";
  } else if (a.bytes[0] == 0xff) {
    return "is a multicast address";
  }
  return "";
}

Result<IpAddress> unicast(const std::string& text, const std::string& field) {
  auto ip = IpAddress::parse(text);
  if (!ip) return Error{field + " \"" + text + "\": " + ip.error() + " (an address without prefix length)"};
  if (auto why = unicastProblem(*ip); !why.empty()) return Error{field + " " + ip->str() + " " + why};
  return *ip;
}

}  // namespace

std::string protocolName(uint8_t protocol) {
  switch (protocol) {
    case dpv1::TCP: return "TCP";
    case dpv1::UDP: return "UDP";
    case dpv1::SCTP: return "SCTP";
    default: return "protocol " + std::to_string(protocol);
  }
}

Result<ModelService> parseService(const dpv1::Service& s) {
  ModelService out;
  out.name = s.name();
  if (s.cluster_ips().empty() && s.external_ips().empty()) {
    bool node_port = false;
    for (const auto& p : s.ports()) node_port = node_port || p.node_port() != 0;
    if (!node_port) {
      return Error{"no cluster_ips, external_ips or node ports: nothing to balance (a headless service is not sent)"};
    }
  }
  bool v4 = false, v6 = false;
  for (const auto& text : s.cluster_ips()) {
    auto ip = unicast(text, "cluster_ips");
    if (!ip) return std::move(ip).takeError();
    bool& seen = ip->isV4() ? v4 : v6;
    if (seen) return Error{"cluster_ips has two " + std::string(ip->isV4() ? "IPv4" : "IPv6") + " addresses; one per family"};
    seen = true;
    out.cluster_ips.push_back(*ip);
  }
  for (const auto& text : s.external_ips()) {
    auto ip = unicast(text, "external_ips");
    if (!ip) return std::move(ip).takeError();
    if (std::find(out.cluster_ips.begin(), out.cluster_ips.end(), *ip) != out.cluster_ips.end() ||
        std::find(out.external_ips.begin(), out.external_ips.end(), *ip) != out.external_ips.end()) {
      return Error{"external_ips " + ip->str() + " is listed twice (or is a cluster IP too)"};
    }
    out.external_ips.push_back(*ip);
  }
  if (s.ports().empty()) return Error{"no ports; a service balances at least one port"};
  std::set<std::pair<uint32_t, uint32_t>> ports, node_ports;
  std::set<std::string> names;
  for (const auto& p : s.ports()) {
    const std::string which = "port " + (p.name().empty() ? std::to_string(p.port()) : "\"" + p.name() + "\"");
    ModelServicePort mp;
    mp.name = p.name();
    if (p.protocol() != dpv1::TCP && p.protocol() != dpv1::UDP && p.protocol() != dpv1::SCTP) {
      return Error{which + ": protocol " + std::to_string(p.protocol()) + " is not TCP, UDP or SCTP"};
    }
    mp.protocol = static_cast<uint8_t>(p.protocol());
    if (p.port() == 0 || p.port() > 65535) return Error{which + ": port " + std::to_string(p.port()) + " must be 1..65535"};
    mp.port = static_cast<uint16_t>(p.port());
    if (p.node_port() > 65535) {
      return Error{which + ": node_port " + std::to_string(p.node_port()) + " must be 0 (none) or 1..65535"};
    }
    mp.node_port = static_cast<uint16_t>(p.node_port());
    if (s.ports_size() > 1 && p.name().empty()) return Error{which + ": a service with several ports names each"};
    if (!p.name().empty() && !names.insert(p.name()).second) return Error{which + ": the name is used twice"};
    if (!ports.insert({mp.protocol, mp.port}).second) {
      return Error{which + ": " + protocolName(mp.protocol) + " " + std::to_string(mp.port) + " is listed twice"};
    }
    if (mp.node_port != 0 && !node_ports.insert({mp.protocol, mp.node_port}).second) {
      return Error{which + ": node_port " + std::to_string(mp.node_port) + " is listed twice for " +
                   protocolName(mp.protocol)};
    }
    for (const auto& b : p.backends()) {
      auto ip = unicast(b.ip(), which + ": backend");
      if (!ip) return std::move(ip).takeError();
      if (b.port() == 0 || b.port() > 65535) {
        return Error{which + ": backend " + ip->str() + " port " + std::to_string(b.port()) + " must be 1..65535"};
      }
      mp.backends.push_back({*ip, static_cast<uint16_t>(b.port()), b.local(), b.ready(), b.serving(), b.terminating()});
    }
    std::sort(mp.backends.begin(), mp.backends.end(), [](const ModelBackend& a, const ModelBackend& b) {
      return std::tie(a.ip, a.port) < std::tie(b.ip, b.port);
    });
    for (size_t i = 1; i < mp.backends.size(); ++i) {
      if (mp.backends[i].ip == mp.backends[i - 1].ip && mp.backends[i].port == mp.backends[i - 1].port) {
        return Error{which + ": backend " + mp.backends[i].ip.str() + ":" + std::to_string(mp.backends[i].port) +
                     " is listed twice"};
      }
    }
    out.ports.push_back(std::move(mp));
  }
  if (s.affinity_timeout_s() > kMaxAffinityTimeoutS) {
    return Error{"affinity_timeout_s " + std::to_string(s.affinity_timeout_s()) + " must be at most " +
                 std::to_string(kMaxAffinityTimeoutS) + " (a day, as Kubernetes allows)"};
  }
  out.internal_local = s.internal_local();
  out.external_local = s.external_local();
  out.affinity_timeout_s = s.affinity_timeout_s();
  s.SerializeToString(&out.content);
  return out;
}

}  // namespace dpu::model
