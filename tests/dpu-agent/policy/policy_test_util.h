// Builders of the cluster objects NetworkPolicy reads, and the upstream netpol
// harness's shape: namespaces x, y, z with pods a, b, c each, spread over two
// nodes, every pod serving 80 and 81 over TCP, UDP and SCTP with container
// ports named serve-<port>-<protocol>, as the e2e suite's pods do.
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control/cluster_objects.h"
#include "policy/compiler.h"
#include "policy/reference.h"
#include "policy/rules.h"

namespace policytest {

using namespace dpu;
using namespace dpu::control;
using namespace dpu::policy;
using Labels = std::map<std::string, std::string>;

inline LabelSelector sel(Labels match = {}, std::vector<SelectorRequirement> exprs = {}) {
  return LabelSelector{std::move(match), std::move(exprs)};
}
inline SelectorRequirement req(std::string key, SelectorOperator op, std::vector<std::string> values = {}) {
  return SelectorRequirement{std::move(key), op, std::move(values)};
}
inline NetworkPolicyPeer podPeer(LabelSelector s) { return NetworkPolicyPeer{s, std::nullopt, std::nullopt}; }
inline NetworkPolicyPeer nsPeer(LabelSelector s) { return NetworkPolicyPeer{std::nullopt, s, std::nullopt}; }
inline NetworkPolicyPeer bothPeer(LabelSelector ns, LabelSelector pod) { return NetworkPolicyPeer{pod, ns, std::nullopt}; }
inline NetworkPolicyPeer blockPeer(std::string cidr, std::vector<std::string> except = {}) {
  return NetworkPolicyPeer{std::nullopt, std::nullopt, IpBlock{std::move(cidr), std::move(except)}};
}
inline NetworkPolicyPort portNumber(uint16_t n, Protocol p = Protocol::kTcp, uint16_t end = 0) {
  return NetworkPolicyPort{p, PortRef{n, ""}, end};
}
inline NetworkPolicyPort portName(std::string name, Protocol p = Protocol::kTcp) {
  return NetworkPolicyPort{p, PortRef{0, std::move(name)}, 0};
}
inline NetworkPolicyPort portAny(Protocol p) { return NetworkPolicyPort{p, PortRef{}, 0}; }

// A policy as the decoder gives it: policyTypes defaulted (Ingress, and
// Egress when there are egress rules) unless `types` names them.
inline NetworkPolicyInfo netpol(std::string ns, std::string name, LabelSelector target,
                                std::vector<NetworkPolicyRule> ingress, std::vector<NetworkPolicyRule> egress,
                                std::string types = "") {
  NetworkPolicyInfo p;
  p.ns = std::move(ns);
  p.name = std::move(name);
  p.pod_selector = std::move(target);
  p.ingress = std::move(ingress);
  p.egress = std::move(egress);
  if (types.empty()) {
    p.policy_ingress = true;
    p.policy_egress = !p.egress.empty();
  } else {
    p.policy_ingress = types.find("Ingress") != std::string::npos;
    p.policy_egress = types.find("Egress") != std::string::npos;
  }
  return p;
}

inline PodInfo pod(std::string ns, std::string name, std::string node, std::vector<std::string> ips, Labels labels,
                   std::vector<ContainerPort> ports = {}) {
  PodInfo p;
  p.ns = std::move(ns);
  p.name = std::move(name);
  p.uid = p.ns + "-" + p.name;
  p.node_name = std::move(node);
  p.ips = std::move(ips);
  p.labels = std::move(labels);
  p.ports = std::move(ports);
  return p;
}

// The upstream harness: x/y/z × a/b/c. Pod n/p has 10.0.<ns index>.<pod index + 1>
// and pod=<p>; a and c on node-1, b on node-2.
struct Harness {
  std::vector<std::string> namespaces{"x", "y", "z"};
  std::vector<std::string> names{"a", "b", "c"};
  ClusterState cluster;
  std::map<std::string, NetworkPolicyInfo> policies;  // by "ns/name"

  // `ips`: pod "ns/name" → its address, for pods placed elsewhere (the lab's);
  // by default 10.0.<ns index>.<pod index + 1>.
  explicit Harness(const std::map<std::string, std::string>& ips = {}) {
    for (size_t n = 0; n < namespaces.size(); ++n) {
      const auto& ns = namespaces[n];
      cluster.namespaces[ns] = NamespaceInfo{ns, {{kNamespaceNameLabel, ns}, {"ns", ns}}};
      for (size_t i = 0; i < names.size(); ++i) {
        std::vector<ContainerPort> ports;
        for (uint16_t port : {80, 81})
          for (auto [proto, text] : {std::pair{Protocol::kTcp, "tcp"}, std::pair{Protocol::kUdp, "udp"},
                                     std::pair{Protocol::kSctp, "sctp"}})
            ports.push_back(ContainerPort{"serve-" + std::to_string(port) + "-" + text, port, proto});
        const std::string key = ns + "/" + names[i];
        cluster.pods[key] = pod(ns, names[i], i == 1 ? "node-2" : "node-1",
                                {ips.count(key) ? ips.at(key)
                                                : "10.0." + std::to_string(n) + "." + std::to_string(i + 1)},
                                {{"pod", names[i]}}, ports);
      }
    }
  }
  std::vector<std::string> pods() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : cluster.pods) out.push_back(k);
    return out;
  }
  std::string ipOf(const std::string& pod) const { return cluster.pods.at(pod).ips.at(0); }
  void apply(const NetworkPolicyInfo& p) { policies[p.ns + "/" + p.name] = p; }
  void remove(const std::string& key) { policies.erase(key); }
  ClusterState state() const {
    ClusterState s = cluster;
    for (const auto& [k, p] : policies) s.policies.push_back(p);
    return s;
  }
};

// Each node's compiled rules for a cluster (every pod is local to one node).
inline std::map<std::string, PodRules> compileAll(const ClusterState& s) {
  std::map<std::string, PodRules> out;
  std::set<std::string> nodes;
  for (const auto& [k, p] : s.pods) nodes.insert(p.node_name);
  for (const auto& node : nodes) {
    PolicyCompiler c(node);
    for (const auto& [n, ns] : s.namespaces) (void)c.upsertNamespace(ns);
    for (const auto& [k, p] : s.pods) (void)c.upsertPod(p);
    for (const auto& p : s.policies) (void)c.upsertPolicy(p);
    for (const auto& [k, r] : c.rules()) out[k] = r;
  }
  return out;
}

// Whether the compiled rules let src reach dst: src's egress, then dst's ingress.
inline bool compiledAllowed(const std::map<std::string, PodRules>& rules, const ClusterState& s,
                            const std::string& src, const std::string& dst, uint8_t proto, uint16_t port) {
  IpAddress src_ip = *IpAddress::parse(s.pods.at(src).ips.at(0));
  IpAddress dst_ip = *IpAddress::parse(s.pods.at(dst).ips.at(0));
  return evaluate(rules.at(src).egress, dst_ip, proto, port) && evaluate(rules.at(dst).ingress, src_ip, proto, port);
}

// The expected reachability, built as the upstream suite builds it: all
// allowed, then cells set by peer patterns ("" matches any namespace or pod).
struct Reachability {
  std::vector<std::string> pods;
  std::map<std::pair<std::string, std::string>, bool> cells;
  explicit Reachability(std::vector<std::string> all, bool value = true) : pods(std::move(all)) {
    for (const auto& a : pods)
      for (const auto& b : pods) cells[{a, b}] = value;
  }
  static bool fits(const std::string& pod, const std::string& ns, const std::string& name) {
    auto slash = pod.find('/');
    return (ns.empty() || pod.substr(0, slash) == ns) && (name.empty() || pod.substr(slash + 1) == name);
  }
  // Every pod matching (from_ns, from_pod) to every pod matching (to_ns, to_pod).
  void expectPeer(const std::string& from_ns, const std::string& from_pod, const std::string& to_ns,
                  const std::string& to_pod, bool value) {
    for (auto& [k, v] : cells)
      if (fits(k.first, from_ns, from_pod) && fits(k.second, to_ns, to_pod)) v = value;
  }
  void expect(const std::string& from, const std::string& to, bool value) { cells[{from, to}] = value; }
  void expectAllIngress(const std::string& to, bool value) {
    for (const auto& a : pods) cells[{a, to}] = value;
  }
  void expectAllEgress(const std::string& from, bool value) {
    for (const auto& b : pods) cells[{from, b}] = value;
  }
};

// The observed matrix (compiled rules; the reference must agree) against the
// expected one, loopback left out as upstream does. Empty when they match;
// otherwise the table, row = from, column = to, X where they differ.
inline std::string validate(const Harness& h, const Reachability& want, uint8_t proto, uint16_t port) {
  ClusterState s = h.state();
  auto rules = compileAll(s);
  std::ostringstream table;
  bool bad = false;
  table << "proto " << int(proto) << " port " << port << " (. allowed, - denied, X wrong, R compiled != reference)\n    ";
  for (const auto& b : want.pods) table << b << " ";
  table << "\n";
  for (const auto& a : want.pods) {
    table << a << " ";
    for (const auto& b : want.pods) {
      bool got = compiledAllowed(rules, s, a, b, proto, port);
      Endpoint src{a, *IpAddress::parse(h.ipOf(a))}, dst{b, *IpAddress::parse(h.ipOf(b))};
      bool ref = allowed(s, src, dst, proto, port);
      char c = got ? '.' : '-';
      if (got != ref) c = 'R', bad = true;
      else if (a != b && got != want.cells.at({a, b})) c = 'X', bad = true;
      table << "  " << c << " ";
    }
    table << "\n";
  }
  return bad ? table.str() : std::string();
}

}  // namespace policytest
