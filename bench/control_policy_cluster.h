// The NetworkPolicy scale cluster of issue 18's control-plane benchmark
// (bench/control.sh, part "policy"): N namespaces, P pods, 5 policies per
// namespace, built deterministically so that every run compiles the same.
//
//   namespaces ns-I: team=tI%20, env=prod|dev (I odd|even)
//   pods p-J in ns-(J % N), on node-(J % nodes), address 10.128.0.0 + J + 1,
//     labels app=a(K%5), tier=front|back (K = J / N, the pod's index in its
//     namespace), container port http 8080/TCP
//   policies per namespace (p0..p4, the upstream shapes):
//     p0 default deny ingress (podSelector {}); a change gives it a rule
//     p1 app=a1 ← app=a0 of its namespace, TCP 8080
//     p2 tier=front ← namespaceSelector team=<own team> AND app=a2, named port http
//     p3 app=a3 → namespaceSelector env=prod on TCP and UDP 53; → ipBlock
//        10.0.0.0/8 except 10.128.0.0/16 on TCP 443 (egress isolated)
//     p4 app In (a3, a4) ← the next namespace by its name label, TCP 80-90
#pragma once

#include <cstdint>
#include <string>

#include "control/cluster_source.h"

namespace dpu::bench {

struct PolicyCluster {
  uint32_t namespaces = 1000;
  uint32_t pods = 10000;
  uint32_t nodes = 100;  // node-0 is the local one
  static constexpr uint32_t kPoliciesPerNamespace = 5;

  static std::string ip4(uint32_t v) {
    return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." + std::to_string((v >> 8) & 255) +
           "." + std::to_string(v & 255);
  }

  control::NamespaceInfo namespaceOf(uint32_t i) const {
    control::NamespaceInfo ns;
    ns.name = "ns-" + std::to_string(i);
    ns.labels = {{"team", "t" + std::to_string(i % 20)},
                 {"env", i % 2 ? "prod" : "dev"},
                 {"kubernetes.io/metadata.name", ns.name}};
    return ns;
  }

  // `flip`: the pod's app label moved to the next value (a label change).
  control::PodInfo podOf(uint32_t j, bool flip = false) const {
    control::PodInfo p;
    const uint32_t k = j / namespaces;
    p.ns = "ns-" + std::to_string(j % namespaces);
    p.name = "p-" + std::to_string(j);
    p.uid = "uid-" + std::to_string(j);
    p.node_name = "node-" + std::to_string(j % nodes);
    p.ips = {ip4((10u << 24 | 128u << 16) + j + 1)};
    p.labels = {{"app", "a" + std::to_string((k + (flip ? 1 : 0)) % 5)}, {"tier", k % 10 < 5 ? "front" : "back"}};
    p.ports = {{"http", 8080, control::Protocol::kTcp}};
    return p;
  }

  // `variant` (odd) gives p0 an ingress rule (TCP 9000 from app=a0 of its
  // namespace): a policy change that alters every pod of the namespace.
  control::NetworkPolicyInfo policyOf(uint32_t i, uint32_t which, uint16_t variant = 0) const {
    using namespace control;
    NetworkPolicyInfo p;
    p.ns = "ns-" + std::to_string(i);
    p.name = "p" + std::to_string(which);
    auto labels = [](std::string k, std::string v) {
      LabelSelector s;
      s.match_labels = {{std::move(k), std::move(v)}};
      return s;
    };
    auto tcp = [](uint16_t port, uint16_t end = 0) {
      NetworkPolicyPort x;
      x.protocol = Protocol::kTcp;
      x.port.number = port;
      x.end_port = end;
      return x;
    };
    switch (which) {
      case 0:
        // podSelector {}: every pod of the namespace, no rule (but in a variant).
        if (variant % 2 == 1) {
          NetworkPolicyPeer peer;
          peer.pod_selector = labels("app", "a0");
          p.ingress.push_back({{peer}, {tcp(9000)}});
        }
        break;
      case 1: {
        p.pod_selector = labels("app", "a1");
        NetworkPolicyPeer peer;
        peer.pod_selector = labels("app", "a0");
        p.ingress.push_back({{peer}, {tcp(8080)}});
        break;
      }
      case 2: {
        p.pod_selector = labels("tier", "front");
        NetworkPolicyPeer peer;
        peer.namespace_selector = labels("team", "t" + std::to_string(i % 20));
        peer.pod_selector = labels("app", "a2");
        NetworkPolicyPort named;
        named.port.name = "http";
        p.ingress.push_back({{peer}, {named}});
        break;
      }
      case 3: {
        p.pod_selector = labels("app", "a3");
        p.policy_egress = true;
        p.policy_ingress = false;
        NetworkPolicyPeer prod;
        prod.namespace_selector = labels("env", "prod");
        NetworkPolicyPort udp;
        udp.protocol = Protocol::kUdp;
        udp.port.number = 53;
        p.egress.push_back({{prod}, {tcp(53), udp}});
        NetworkPolicyPeer block;
        block.ip_block = IpBlock{"10.0.0.0/8", {"10.128.0.0/16"}};
        p.egress.push_back({{block}, {tcp(443)}});
        break;
      }
      default: {
        SelectorRequirement in;
        in.key = "app";
        in.op = SelectorOperator::kIn;
        in.values = {"a3", "a4"};
        p.pod_selector.match_expressions = {in};
        NetworkPolicyPeer next;
        SelectorRequirement name;
        name.key = "kubernetes.io/metadata.name";
        name.op = SelectorOperator::kIn;
        name.values = {"ns-" + std::to_string((i + 1) % namespaces)};
        next.namespace_selector = LabelSelector{};
        next.namespace_selector->match_expressions = {name};
        p.ingress.push_back({{next}, {tcp(80, 90)}});
        break;
      }
    }
    return p;
  }
};

}  // namespace dpu::bench
