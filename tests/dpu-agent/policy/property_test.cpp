// The compiler against the reference evaluator on random small clusters:
// namespaces x, y, z with random labels, nine pods with random labels,
// container ports and addresses (IPv4, some IPv6 too) over two nodes, and one
// to five random policies (some invalid, which must be left out). For every
// ordered pair of pods, and from addresses that are no pod's, every protocol
// and probed port, each direction's compiled rules evaluated as the dataplane
// will (evaluate) must give the reference's verdict. Then random changes,
// one at a time, against each node's compiler: its rules must equal a fresh
// compilation, and the pods it reports changed must be exactly those whose
// rules differ. Seeded: the same cases on every run.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "policy/validate.h"
#include "policy_test_util.h"

using namespace policytest;

namespace {

struct Gen {
  std::mt19937 rng;
  explicit Gen(uint32_t seed) : rng(seed) {}
  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  bool chance(int percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(static_cast<int>(v.size()))]; }

  const std::vector<std::string> keys{"app", "tier", "team"};
  const std::vector<std::string> values{"a", "b", "c"};

  Labels labels() {
    Labels l;
    for (const auto& k : keys)
      if (chance(55)) l[k] = pick(values);
    return l;
  }

  LabelSelector selector(bool namespaces) {
    LabelSelector s;
    if (chance(25)) return s;
    int terms = 1 + below(2);
    for (int i = 0; i < terms; ++i) {
      std::string key = namespaces && chance(30) ? kNamespaceNameLabel : pick(keys);
      std::vector<std::string> vals = key == kNamespaceNameLabel ? std::vector<std::string>{"x", "y", "z"} : values;
      switch (below(5)) {
        case 0: s.match_labels[key] = pick(vals); break;
        case 1: s.match_expressions.push_back(req(key, SelectorOperator::kIn, {pick(vals), pick(vals)})); break;
        case 2: s.match_expressions.push_back(req(key, SelectorOperator::kNotIn, {pick(vals)})); break;
        case 3: s.match_expressions.push_back(req(key, SelectorOperator::kExists)); break;
        default: s.match_expressions.push_back(req(key, SelectorOperator::kDoesNotExist)); break;
      }
    }
    return s;
  }

  std::string within(const IpPrefix& cidr, const std::vector<IpAddress>& addresses) {
    std::vector<IpAddress> inside;
    for (const auto& a : addresses)
      if (cidr.contains(a)) inside.push_back(a);
    unsigned width = cidr.address.isV4() ? 32 : 128;
    if (inside.empty() || cidr.length >= width) return {};
    unsigned len = cidr.length + 1 + below(static_cast<int>(width - cidr.length));
    if (len > width) len = width;
    return IpPrefix::parse(pick(inside).str() + "/" + std::to_string(len), true)->str();
  }

  NetworkPolicyPeer peer(const std::vector<IpAddress>& addresses) {
    switch (below(4)) {
      case 0: return podPeer(selector(false));
      case 1: return nsPeer(selector(true));
      case 2: return bothPeer(selector(true), selector(false));
      default: {
        std::vector<std::string> cidrs{"10.0.0.0/16", "10.0.0.0/24", "10.0.1.0/24", "10.0.0.0/25", "0.0.0.0/0",
                                       "fd00::/64", "::/0", "10.0.0.0/8"};
        if (!addresses.empty()) {
          const IpAddress& a = pick(addresses);
          cidrs.push_back(a.str() + (a.isV4() ? "/32" : "/128"));
        }
        auto cidr = *IpPrefix::parse(pick(cidrs), true);
        IpBlock block{cidr.str(), {}};
        int excepts = below(3);
        for (int i = 0; i < excepts; ++i)
          if (auto e = within(cidr, addresses); !e.empty()) block.except.push_back(e);
        return NetworkPolicyPeer{std::nullopt, std::nullopt, block};
      }
    }
  }

  NetworkPolicyPort port() {
    Protocol proto = pick(std::vector<Protocol>{Protocol::kTcp, Protocol::kUdp, Protocol::kSctp});
    switch (below(5)) {
      case 0: return portAny(proto);
      case 1: return portNumber(chance(50) ? 80 : 81, proto);
      case 2: return portNumber(chance(50) ? 80 : 79, proto, chance(50) ? 80 : 8080);
      default: return portName(pick(std::vector<std::string>{"serve-80-tcp", "serve-81-udp", "http", "metrics"}), proto);
    }
  }

  std::vector<NetworkPolicyRule> rules(const std::vector<IpAddress>& addresses) {
    std::vector<NetworkPolicyRule> out(below(3));
    for (auto& r : out) {
      int peers = below(3), ports = below(3);
      for (int i = 0; i < peers; ++i) r.peers.push_back(peer(addresses));
      for (int i = 0; i < ports; ++i) r.ports.push_back(port());
    }
    return out;
  }

  NetworkPolicyInfo policy(int index, const std::vector<IpAddress>& addresses) {
    NetworkPolicyInfo p;
    p.ns = pick(std::vector<std::string>{"x", "y", "z"});
    p.name = "p" + std::to_string(index);
    p.pod_selector = selector(false);
    p.ingress = rules(addresses);
    p.egress = rules(addresses);
    switch (below(4)) {
      case 0: p.policy_ingress = true, p.policy_egress = !p.egress.empty(); break;  // defaulted
      case 1: p.policy_ingress = true, p.policy_egress = false; break;
      case 2: p.policy_ingress = false, p.policy_egress = true; break;
      default: p.policy_ingress = p.policy_egress = true; break;
    }
    // Now and then a policy the API server would refuse: it must be left out.
    if (chance(8) && !p.ingress.empty()) p.ingress[0].peers.push_back(blockPeer("10.0.0.0/24", {"10.9.0.0/24"}));
    return p;
  }

  std::vector<ContainerPort> containerPorts() {
    std::vector<ContainerPort> out;
    if (chance(50)) out.push_back({"serve-80-tcp", 80, Protocol::kTcp});
    if (chance(50)) out.push_back({"serve-81-udp", 81, Protocol::kUdp});
    switch (below(4)) {
      case 0: out.push_back({"http", 8080, Protocol::kTcp}); break;
      case 1: out.push_back({"http", 8081, Protocol::kTcp}); break;
      case 2: out.push_back({"http", 80, Protocol::kSctp}); break;
      default: break;
    }
    if (chance(30)) out.push_back({"metrics", 81, Protocol::kTcp});
    return out;
  }

  PodInfo pod(int index) {
    PodInfo p = policytest::pod(pick(std::vector<std::string>{"x", "y", "z"}), "p" + std::to_string(index),
                                chance(50) ? "n1" : "n2", {}, labels(), containerPorts());
    p.ips.push_back("10.0." + std::to_string(below(2)) + "." + std::to_string(index + 1));
    if (chance(40)) p.ips.push_back("fd00::" + std::to_string(index + 1));
    return p;
  }

  NamespaceInfo ns(const std::string& name) {
    Labels l = labels();
    l[kNamespaceNameLabel] = name;
    return NamespaceInfo{name, l};
  }
};

std::vector<IpAddress> addressesOf(const ClusterState& s) {
  std::vector<IpAddress> out;
  for (const auto& [k, p] : s.pods)
    for (const auto& ip : p.ips) out.push_back(*IpAddress::parse(ip));
  return out;
}

ClusterState randomCluster(Gen& g, std::vector<NetworkPolicyInfo>& all_policies) {
  ClusterState s;
  for (const char* n : {"x", "y", "z"}) s.namespaces[n] = g.ns(n);
  for (int i = 0; i < 9; ++i) {
    PodInfo p = g.pod(i);
    s.pods[p.ns + "/" + p.name] = p;
  }
  int policies = 1 + g.below(5);
  for (int i = 0; i < policies; ++i) {
    auto p = g.policy(i, addressesOf(s));
    all_policies.push_back(p);
    if (validatePolicy(p)) s.policies.push_back(p);
  }
  return s;
}

// Each node's compiler fed every object, invalid policies included.
std::map<std::string, PodRules> compileNodes(const ClusterState& s, const std::vector<NetworkPolicyInfo>& policies) {
  std::map<std::string, PodRules> out;
  for (const char* node : {"n1", "n2"}) {
    PolicyCompiler c(node);
    for (const auto& [n, ns] : s.namespaces) (void)c.upsertNamespace(ns);
    for (const auto& [k, p] : s.pods) (void)c.upsertPod(p);
    for (const auto& p : policies) (void)c.upsertPolicy(p);
    CHECK(c.state().policies.size() == s.policies.size());
    for (const auto& [k, r] : c.rules()) out[k] = r;
  }
  return out;
}

struct Probe {
  uint8_t proto;
  uint16_t port;
};
const std::vector<Probe> kProbes = [] {
  std::vector<Probe> v;
  for (uint8_t proto : {kIpProtoTcp, kIpProtoUdp, kIpProtoSctp})
    for (uint16_t port : {80, 81, 8080, 8081}) v.push_back({proto, port});
  v.push_back({kIpProtoIcmp, 0});
  return v;
}();

}  // namespace

TEST_CASE("property: compiled rules evaluate as the reference evaluator on random clusters") {
  size_t cases = 0, allowed_count = 0, isolated = 0;
  for (uint32_t seed = 1; seed <= 250; ++seed) {
    Gen g(seed);
    std::vector<NetworkPolicyInfo> policies;
    ClusterState s = randomCluster(g, policies);
    auto rules = compileNodes(s, policies);
    REQUIRE(rules.size() == s.pods.size());
    for (const auto& [k, r] : rules) isolated += r.ingress.isolated + r.egress.isolated;

    std::vector<Endpoint> outsiders{{"", *IpAddress::parse("10.0.0.200")}, {"", *IpAddress::parse("192.168.1.1")},
                                    {"", *IpAddress::parse("fd00::c8")}};
    for (const auto& [src_key, src] : s.pods) {
      for (const auto& src_ip : src.ips) {
        Endpoint from{src_key, *IpAddress::parse(src_ip)};
        std::vector<Endpoint> targets = outsiders;
        for (const auto& [dst_key, dst] : s.pods)
          for (const auto& dst_ip : dst.ips) targets.push_back({dst_key, *IpAddress::parse(dst_ip)});
        for (const auto& to : targets) {
          if (to.ip.family != from.ip.family) continue;
          for (const auto& probe : kProbes) {
            bool ref_egress = egressAllowed(s, from, to, probe.proto, probe.port);
            bool got_egress = evaluate(rules.at(src_key).egress, to.ip, probe.proto, probe.port);
            // Ingress at a pod destination, from this pod and (outsiders) towards it.
            bool ref_ingress = true, got_ingress = true;
            if (!to.pod.empty()) {
              ref_ingress = ingressAllowed(s, from, to, probe.proto, probe.port);
              got_ingress = evaluate(rules.at(to.pod).ingress, from.ip, probe.proto, probe.port);
            }
            ++cases;
            allowed_count += ref_egress && ref_ingress;
            if (got_egress != ref_egress || got_ingress != ref_ingress) {
              INFO("seed " << seed << ": " << src_key << " " << from.ip.str() << " -> " << to.pod << " "
                           << to.ip.str() << " proto " << int(probe.proto) << " port " << probe.port);
              INFO("egress compiled " << got_egress << " reference " << ref_egress << "\n"
                                      << describe(rules.at(src_key).egress));
              INFO("ingress compiled " << got_ingress << " reference " << ref_ingress);
              if (!to.pod.empty()) INFO(describe(rules.at(to.pod).ingress));
              for (const auto& p : s.policies) INFO(toJson(p).dump());
              FAIL("compiled rules and the reference evaluator disagree");
            }
          }
        }
        // From addresses no pod has, to this pod (ingress only).
        for (const auto& outsider : outsiders) {
          if (outsider.ip.family != from.ip.family) continue;
          for (const auto& probe : kProbes) {
            bool ref = ingressAllowed(s, outsider, from, probe.proto, probe.port);
            bool got = evaluate(rules.at(src_key).ingress, outsider.ip, probe.proto, probe.port);
            ++cases;
            if (got != ref) {
              INFO("seed " << seed << ": " << outsider.ip.str() << " -> " << src_key << " proto " << int(probe.proto)
                           << " port " << probe.port << "\n" << describe(rules.at(src_key).ingress));
              FAIL("compiled ingress and the reference evaluator disagree");
            }
          }
        }
      }
    }
  }
  // The random clusters must exercise both verdicts, and isolation, in bulk.
  WARN(cases << " cases, " << allowed_count << " allowed, " << isolated << " isolated directions");
  CHECK(cases > 100000);
  CHECK(allowed_count > cases / 10);
  CHECK(allowed_count < cases - cases / 10);
  CHECK(isolated > 500);
}

TEST_CASE("property: incremental changes report exactly the pods whose rules change") {
  size_t changes = 0, reported = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    Gen g(1000 + seed);
    std::vector<NetworkPolicyInfo> policies;
    ClusterState s = randomCluster(g, policies);
    std::map<std::string, PolicyCompiler> nodes;
    for (const char* node : {"n1", "n2"}) nodes.emplace(node, PolicyCompiler(node));

    auto step = [&](const std::function<Changes(PolicyCompiler&)>& change) {
      for (auto& [node, c] : nodes) {
        auto before = c.rules();
        Changes got = change(c);
        std::vector<std::string> differ;
        std::set<std::string> keys;
        for (const auto& [k, r] : before) keys.insert(k);
        for (const auto& [k, r] : c.rules()) keys.insert(k);
        for (const auto& k : keys) {
          auto a = before.find(k);
          auto b = c.rules().find(k);
          if (a == before.end() || b == c.rules().end() || !(a->second == b->second)) differ.push_back(k);
        }
        CHECK(got.pods == differ);
        reported += got.pods.size();
        // And the rules equal a compilation from scratch of the same objects.
        ClusterState now = c.state();
        for (const auto& [k, p] : now.pods)
          if (p.node_name == node) CHECK(c.rules().at(k) == compilePod(now, k));
      }
      ++changes;
    };

    // Build up object by object, in a random order of kinds.
    for (const auto& entry : s.namespaces) {
      const NamespaceInfo& ns = entry.second;
      step([&](PolicyCompiler& c) { return c.upsertNamespace(ns); });
    }
    for (const auto& p : policies) step([&](PolicyCompiler& c) { return c.upsertPolicy(p); });
    for (const auto& entry : s.pods) {
      const PodInfo& p = entry.second;
      step([&](PolicyCompiler& c) { return c.upsertPod(p); });
    }
    // Then random changes.
    for (int i = 0; i < 25; ++i) {
      switch (g.below(7)) {
        case 0: {  // a pod's labels
          auto it = std::next(s.pods.begin(), g.below(static_cast<int>(s.pods.size())));
          it->second.labels = g.labels();
          PodInfo p = it->second;
          step([&](PolicyCompiler& c) { return c.upsertPod(p); });
          break;
        }
        case 1: {  // a pod's addresses or ports
          auto it = std::next(s.pods.begin(), g.below(static_cast<int>(s.pods.size())));
          if (g.chance(50)) it->second.ports = g.containerPorts();
          else it->second.ips = {"10.0." + std::to_string(g.below(2)) + "." + std::to_string(100 + g.below(50))};
          PodInfo p = it->second;
          step([&](PolicyCompiler& c) { return c.upsertPod(p); });
          break;
        }
        case 2: {  // a pod goes, another comes
          auto it = std::next(s.pods.begin(), g.below(static_cast<int>(s.pods.size())));
          std::string ns = it->second.ns, name = it->second.name;
          s.pods.erase(it);
          step([&](PolicyCompiler& c) { return c.deletePod(ns, name); });
          PodInfo p = g.pod(20 + i);
          s.pods[p.ns + "/" + p.name] = p;
          step([&](PolicyCompiler& c) { return c.upsertPod(p); });
          break;
        }
        case 3: {  // a namespace's labels
          std::string name = g.pick(std::vector<std::string>{"x", "y", "z"});
          NamespaceInfo ns = g.ns(name);
          step([&](PolicyCompiler& c) { return c.upsertNamespace(ns); });
          break;
        }
        case 4: {  // a new or replaced policy
          auto p = g.policy(g.below(7), addressesOf(s));
          step([&](PolicyCompiler& c) { return c.upsertPolicy(p); });
          break;
        }
        case 5: {  // a policy deleted (maybe one that never was)
          std::string ns = g.pick(std::vector<std::string>{"x", "y", "z"});
          std::string name = "p" + std::to_string(g.below(7));
          step([&](PolicyCompiler& c) { return c.deletePolicy(ns, name); });
          break;
        }
        default: {  // a namespace deleted
          std::string name = g.pick(std::vector<std::string>{"x", "y", "z"});
          step([&](PolicyCompiler& c) { return c.deleteNamespace(name); });
          break;
        }
      }
    }
  }
  WARN(changes << " changes, " << reported << " pod rule sets reported changed");
  CHECK(reported > changes / 2);
}
