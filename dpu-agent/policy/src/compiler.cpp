// The NetworkPolicy compiler (compiler.h).
#include "policy/compiler.h"

#include <tuple>

#include "control/cluster_objects.h"
#include "policy/validate.h"

namespace dpu::policy {
namespace {

using namespace dpu::control;

std::string keyOf(const std::string& ns, const std::string& name) { return ns + "/" + name; }

IpPrefix hostPrefix(const IpAddress& ip) { return IpPrefix{ip, static_cast<uint8_t>(ip.isV4() ? 32 : 128)}; }

std::vector<IpAddress> addressesOf(const PodInfo& pod) {
  std::vector<IpAddress> out;
  for (const auto& text : pod.ips)
    if (auto ip = IpAddress::parse(text)) out.push_back(*ip);
  return out;
}

// An ipBlock as disjoint prefixes (validatePolicy has checked the texts).
std::vector<IpPrefix> blockPrefixes(const IpBlock& block) {
  auto cidr = IpPrefix::parse(block.cidr, true);
  if (!cidr) return {};
  std::vector<IpPrefix> except;
  for (const auto& text : block.except)
    if (auto ex = IpPrefix::parse(text, true)) except.push_back(*ex);
  return subtractPrefixes(*cidr, except);
}

bool blockHas(const IpBlock& block, const IpAddress& ip) {
  for (const auto& p : blockPrefixes(block))
    if (p.contains(ip)) return true;
  return false;
}

const std::vector<NetworkPolicyRule>& rulesFor(const NetworkPolicyInfo& p, bool ingress) {
  return ingress ? p.ingress : p.egress;
}

bool hasNamedPort(const NetworkPolicyRule& rule) {
  for (const auto& p : rule.ports)
    if (p.port.isName()) return true;
  return false;
}

// Whether pods of other namespaces than its own figure in the policy's rules:
// a namespaceSelector peer, or an egress named port resolved at any pod (no
// peers, or an ipBlock).
bool crossesNamespaces(const NetworkPolicyInfo& policy) {
  for (bool ingress : {true, false}) {
    for (const auto& rule : rulesFor(policy, ingress)) {
      const bool named = !ingress && hasNamedPort(rule);
      if (named && rule.peers.empty()) return true;
      for (const auto& peer : rule.peers)
        if (peer.namespace_selector || (named && peer.ip_block)) return true;
    }
  }
  return false;
}

void appendSelector(std::string& out, const std::optional<LabelSelector>& s) {
  if (!s) {
    out += "-;";
    return;
  }
  for (const auto& [k, v] : s->match_labels) out += k + "=" + v + ",";
  out += "|";
  for (const auto& r : s->match_expressions) {
    out += r.key + "#" + std::to_string(static_cast<int>(r.op)) + ":";
    for (const auto& v : r.values) out += v + ",";
    out += "&";
  }
  out += ";";
}

// A selector peer's identity: what decides the pods it picks.
std::string pickedKey(const std::string& policy_ns, const NetworkPolicyPeer& peer) {
  std::string key = peer.namespace_selector ? std::string("*") : policy_ns;
  key += "\n";
  appendSelector(key, peer.namespace_selector);
  appendSelector(key, peer.pod_selector);
  return key;
}

// Rules accumulated per (policy, protocol, first port, last port).
using RuleKey = std::tuple<std::string, uint8_t, uint16_t, uint16_t>;
struct Accumulated {
  std::vector<IpPrefix> prefixes;
  unsigned sources = 0;
  bool normalized = true;  // each source was (one kept peer's prefixes are)
};
using RuleMap = std::map<RuleKey, Accumulated>;

void add(RuleMap& m, const RuleKey& key, const std::vector<IpPrefix>& peers, bool normalized = false) {
  auto& a = m[key];
  a.prefixes.insert(a.prefixes.end(), peers.begin(), peers.end());
  ++a.sources;
  a.normalized = a.normalized && normalized;
}

}  // namespace

PolicyCompiler::PolicyCompiler(std::string node_name) : node_(std::move(node_name)) {}

const std::map<std::string, std::string>& PolicyCompiler::labelsOfNamespace(const std::string& ns) const {
  auto it = namespace_labels_.find(ns);
  if (it == namespace_labels_.end()) it = namespace_labels_.emplace(ns, namespaceLabels(namespaces_, ns)).first;
  return it->second;
}

bool PolicyCompiler::isLocal(const PodInfo& pod) const { return pod.node_name == node_ && !pod.host_network; }

const PodRules* PolicyCompiler::rulesOf(const std::string& pod) const {
  auto it = rules_.find(pod);
  return it == rules_.end() ? nullptr : &it->second;
}

ClusterState PolicyCompiler::state() const {
  ClusterState s{namespaces_, pods_, {}};
  for (const auto& [k, p] : policies_) s.policies.push_back(p);
  return s;
}

void PolicyCompiler::addSelected(const NetworkPolicyInfo& policy, std::set<std::string>& out) const {
  // Local pods are few (one node's); every pod of the namespace is checked.
  for (auto it = pods_.lower_bound(policy.ns + "/"); it != pods_.end() && it->second.ns == policy.ns; ++it)
    if (isLocal(it->second) && policy.pod_selector.matches(it->second.labels)) out.insert(it->first);
}

const std::vector<IpPrefix>& PolicyCompiler::picked(const std::string& policy_ns, const NetworkPolicyPeer& peer) const {
  const std::string key = pickedKey(policy_ns, peer);
  auto it = picked_.find(key);
  if (it != picked_.end()) return it->second.prefixes;
  PickedPeer entry{peer.namespace_selector ? std::string() : policy_ns, peer.namespace_selector, peer.pod_selector, {}};
  auto scan = [&](const std::string& ns) {
    for (auto p = pods_.lower_bound(ns + "/"); p != pods_.end() && p->second.ns == ns; ++p) {
      const PodInfo& other = p->second;
      if (other.host_network || (peer.pod_selector && !peer.pod_selector->matches(other.labels))) continue;
      for (const auto& ip : addressesOf(other)) entry.prefixes.push_back(hostPrefix(ip));
    }
  };
  if (!peer.namespace_selector) {
    scan(policy_ns);
  } else {
    for (const auto& [ns, count] : pod_namespaces_)
      if (peer.namespace_selector->matches(labelsOfNamespace(ns))) scan(ns);
  }
  entry.prefixes = normalizePrefixes(std::move(entry.prefixes));
  return picked_.emplace(key, std::move(entry)).first->second.prefixes;
}

void PolicyCompiler::forgetPickedOf(const PodInfo* before, const PodInfo* after) {
  // A kept peer's addresses change only when the pod joins or leaves it, or
  // when its addresses change while it is in it: a label change that keeps
  // it picked (or not picked) leaves the peer as it was.
  const PodInfo& pod = before != nullptr ? *before : *after;
  const auto& ns_labels = labelsOfNamespace(pod.ns);
  const bool moved = before == nullptr || after == nullptr || before->ips != after->ips;
  for (auto it = picked_.begin(); it != picked_.end();) {
    const PickedPeer& p = it->second;
    const bool ns_ok = p.namespace_selector ? p.namespace_selector->matches(ns_labels) : p.scope == pod.ns;
    auto picks = [&](const PodInfo* x) {
      return x != nullptr && ns_ok && !x->host_network && (!p.pod_selector || p.pod_selector->matches(x->labels));
    };
    const bool was = picks(before), is = picks(after);
    if (was != is || (moved && (was || is))) it = picked_.erase(it);
    else ++it;
  }
}

void PolicyCompiler::forgetPickedOfNamespace(const std::map<std::string, std::string>& before,
                                             const std::map<std::string, std::string>& after) {
  for (auto it = picked_.begin(); it != picked_.end();) {
    const PickedPeer& p = it->second;
    if (p.namespace_selector && (p.namespace_selector->matches(before) || p.namespace_selector->matches(after))) {
      it = picked_.erase(it);
    } else {
      ++it;
    }
  }
}

DirectionRules PolicyCompiler::compileDirection(const PodInfo& pod, bool ingress) const {
  DirectionRules out;
  auto by_ns = policies_by_ns_.find(pod.ns);
  if (by_ns == policies_by_ns_.end()) return out;
  RuleMap acc;
  // Whether a selector peer of `policy` picks `other` (a pod, not host network).
  auto picks = [&](const NetworkPolicyInfo& policy, const NetworkPolicyPeer& peer, const PodInfo& other) {
    if (peer.ip_block || other.host_network) return false;
    if (peer.namespace_selector ? !peer.namespace_selector->matches(labelsOfNamespace(other.ns))
                                : other.ns != policy.ns)
      return false;
    return !peer.pod_selector || peer.pod_selector->matches(other.labels);
  };
  for (const auto& key : by_ns->second) {
    const NetworkPolicyInfo& policy = policies_.at(key);
    if (!(ingress ? policy.policy_ingress : policy.policy_egress)) continue;
    if (!policy.pod_selector.matches(pod.labels)) continue;
    out.isolated = true;
    out.policies.push_back(key);
    for (const auto& rule : rulesFor(policy, ingress)) {
      // The other end's addresses, for every port but an egress named one.
      std::vector<IpPrefix> peers;
      // Normalized as it is when it is one selector peer's kept prefixes.
      bool normalized = rule.peers.size() == 1 && !rule.peers[0].ip_block;
      if (rule.peers.empty()) {
        peers = {*IpPrefix::parse("0.0.0.0/0"), *IpPrefix::parse("::/0")};
      }
      for (const auto& peer : rule.peers) {
        if (peer.ip_block) {
          auto block = blockPrefixes(*peer.ip_block);
          peers.insert(peers.end(), block.begin(), block.end());
          continue;
        }
        const auto& picked_peers = picked(policy.ns, peer);
        peers.insert(peers.end(), picked_peers.begin(), picked_peers.end());
      }
      if (rule.ports.empty()) add(acc, RuleKey(key, kIpProtoAny, 0, 65535), peers, normalized);
      for (const auto& port : rule.ports) {
        const uint8_t proto = ipProtocol(port.protocol);
        if (port.port.empty()) {
          add(acc, RuleKey(key, proto, 0, 65535), peers, normalized);
        } else if (!port.port.isName()) {
          add(acc, RuleKey(key, proto, port.port.number, port.end_port ? port.end_port : port.port.number), peers,
              normalized);
        } else if (ingress) {
          // The destination is this pod: its own container port of that name.
          for (const auto& cp : pod.ports)
            if (cp.name == port.port.name && cp.protocol == port.protocol)
              add(acc, RuleKey(key, proto, cp.port, cp.port), peers, normalized);
        } else {
          // The destination is the peer: per pod that has the port, its
          // addresses the rule's peers admit.
          for (const auto& [k, other] : pods_) {
            if (other.host_network) continue;
            for (const auto& cp : other.ports) {
              if (cp.name != port.port.name || cp.protocol != port.protocol) continue;
              std::vector<IpPrefix> admitted;
              for (const auto& ip : addressesOf(other)) {
                bool ok = rule.peers.empty();
                for (const auto& peer : rule.peers)
                  ok = ok || (peer.ip_block ? blockHas(*peer.ip_block, ip) : picks(policy, peer, other));
                if (ok) admitted.push_back(hostPrefix(ip));
              }
              if (!admitted.empty()) add(acc, RuleKey(key, proto, cp.port, cp.port), admitted);
            }
          }
        }
      }
    }
  }
  for (auto& [k, a] : acc) {
    auto peers = a.sources == 1 && a.normalized ? std::move(a.prefixes) : normalizePrefixes(std::move(a.prefixes));
    if (peers.empty()) continue;
    out.rules.push_back(AllowRule{std::move(peers), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<0>(k)});
  }
  return out;
}

PodRules PolicyCompiler::compile(const PodInfo& pod) const {
  return PodRules{keyOf(pod.ns, pod.name), compileDirection(pod, true), compileDirection(pod, false)};
}

Changes PolicyCompiler::recompile(const std::set<std::string>& candidates) {
  Changes out;
  for (const auto& key : candidates) {
    auto pod = pods_.find(key);
    auto old = rules_.find(key);
    if (pod == pods_.end() || !isLocal(pod->second)) {
      if (old != rules_.end()) {
        rules_.erase(old);
        out.pods.push_back(key);
      }
      continue;
    }
    PodRules fresh = compile(pod->second);
    if (old != rules_.end() && old->second == fresh) continue;
    rules_[key] = std::move(fresh);
    out.pods.push_back(key);
  }
  return out;
}

Changes PolicyCompiler::upsertNamespace(const NamespaceInfo& ns) {
  auto before = namespaceLabels(namespaces_, ns.name);
  namespaces_[ns.name] = ns;
  auto after = namespaceLabels(namespaces_, ns.name);
  namespace_labels_[ns.name] = after;
  if (before == after) return {};
  forgetPickedOfNamespace(before, after);
  // Only namespaceSelectors read a namespace's labels: the pods selected by a
  // policy with one that matched before or matches now.
  std::set<std::string> candidates;
  for (const auto& [k, policy] : policies_) {
    bool touched = false;
    for (bool ingress : {true, false})
      for (const auto& rule : rulesFor(policy, ingress))
        for (const auto& peer : rule.peers)
          touched = touched || (peer.namespace_selector &&
                                (peer.namespace_selector->matches(before) || peer.namespace_selector->matches(after)));
    if (touched) addSelected(policy, candidates);
  }
  return recompile(candidates);
}

Changes PolicyCompiler::deleteNamespace(const std::string& name) {
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) return {};
  // Its pods keep the name label alone, as for a namespace not delivered yet.
  NamespaceInfo bare{name, {}};
  Changes out = upsertNamespace(bare);
  namespaces_.erase(name);
  namespace_labels_.erase(name);
  return out;
}

void PolicyCompiler::addDependents(const PodInfo* before, const PodInfo* after, std::set<std::string>& out) const {
  // A pod figures in another's rules when a selector peer picks it, or as a
  // destination of an egress named port (no peers, or an ipBlock holding one
  // of its addresses): the pods of a policy whose rules the change alters —
  // the pod joins or leaves a peer, or its addresses, container ports or
  // host network change while it figures in one — are recompiled. A label
  // change that leaves every peer picking what it picked touches nothing.
  // Only a policy of the pod's namespace or one that reaches across
  // namespaces (crossing_) can: the others are not read.
  const PodInfo& pod = before != nullptr ? *before : *after;
  const auto& ns_labels = labelsOfNamespace(pod.ns);
  const bool moved = before == nullptr || after == nullptr || before->ips != after->ips ||
                     before->ports != after->ports || before->host_network != after->host_network;
  auto inBlock = [](const IpBlock& block, const PodInfo* x) {
    if (x == nullptr) return false;
    for (const auto& ip : addressesOf(*x))
      if (blockHas(block, ip)) return true;
    return false;
  };
  auto consider = [&](const NetworkPolicyInfo& policy) {
    bool touched = false;
    for (bool ingress : {true, false}) {
      for (const auto& rule : rulesFor(policy, ingress)) {
        if (touched) break;
        const bool named = !ingress && hasNamedPort(rule);
        if (named && rule.peers.empty()) touched = moved;
        for (const auto& peer : rule.peers) {
          if (touched) break;
          if (peer.ip_block) {
            touched = named && moved && (inBlock(*peer.ip_block, before) || inBlock(*peer.ip_block, after));
            continue;
          }
          const bool ns_ok =
              peer.namespace_selector ? peer.namespace_selector->matches(ns_labels) : pod.ns == policy.ns;
          if (!ns_ok) continue;
          // host_network is in `moved`: the compile leaves such a pod out.
          auto picks = [&](const PodInfo* x) {
            return x != nullptr && (!peer.pod_selector || peer.pod_selector->matches(x->labels));
          };
          const bool was = picks(before), is = picks(after);
          touched = was != is || (moved && (was || is));
        }
      }
    }
    if (touched) addSelected(policy, out);
  };
  if (auto own = policies_by_ns_.find(pod.ns); own != policies_by_ns_.end())
    for (const auto& key : own->second)
      if (!crossing_.count(key)) consider(policies_.at(key));
  // The policies that reach across namespaces through their distinct
  // selector peers (a thousand policies sharing "namespaceSelector env=prod"
  // are one peer to test); those with an egress named port one by one.
  std::set<std::string> done;
  for (const auto& entry : crossing_peers_) {
    const auto& use = entry.second;  // named: clang 14 lambdas cannot capture a structured binding
    const bool ns_ok = use.namespace_selector ? use.namespace_selector->matches(ns_labels) : use.scope == pod.ns;
    if (!ns_ok) continue;
    auto picks = [&](const PodInfo* x) {
      return x != nullptr && (!use.pod_selector || use.pod_selector->matches(x->labels));
    };
    const bool was = picks(before), is = picks(after);
    if (was == is && !(moved && (was || is))) continue;
    for (const auto& [key, uses] : use.policies)
      if (done.insert(key).second) addSelected(policies_.at(key), out);
  }
  for (const auto& key : crossing_named_)
    if (!done.count(key)) consider(policies_.at(key));
}

void PolicyCompiler::indexCrossing(const std::string& key, const NetworkPolicyInfo& policy, bool add) {
  for (bool ingress : {true, false}) {
    for (const auto& rule : rulesFor(policy, ingress)) {
      if (!ingress && hasNamedPort(rule)) {
        if (add) crossing_named_.insert(key);
        else crossing_named_.erase(key);
      }
      for (const auto& peer : rule.peers) {
        if (peer.ip_block) continue;
        const std::string id = pickedKey(policy.ns, peer);
        if (add) {
          auto [it, fresh] = crossing_peers_.try_emplace(id);
          if (fresh) {
            it->second.scope = peer.namespace_selector ? std::string() : policy.ns;
            it->second.namespace_selector = peer.namespace_selector;
            it->second.pod_selector = peer.pod_selector;
          }
          ++it->second.policies[key];
        } else if (auto it = crossing_peers_.find(id); it != crossing_peers_.end()) {
          if (--it->second.policies[key] == 0) it->second.policies.erase(key);
          if (it->second.policies.empty()) crossing_peers_.erase(it);
        }
      }
    }
  }
}

Changes PolicyCompiler::upsertPod(const PodInfo& pod) {
  const std::string key = keyOf(pod.ns, pod.name);
  std::set<std::string> candidates{key};
  std::optional<PodInfo> before;
  if (auto it = pods_.find(key); it != pods_.end()) {
    if (it->second == pod) return {};
    before = it->second;
  } else {
    ++pod_namespaces_[pod.ns];
  }
  // Dependents are found before the pod is stored: addSelected reads pods_,
  // and the pod itself is a candidate anyway.
  addDependents(before ? &*before : nullptr, &pod, candidates);
  forgetPickedOf(before ? &*before : nullptr, &pod);
  pods_[key] = pod;
  return recompile(candidates);
}

Changes PolicyCompiler::deletePod(const std::string& ns, const std::string& name) {
  const std::string key = keyOf(ns, name);
  auto it = pods_.find(key);
  if (it == pods_.end()) return {};
  std::set<std::string> candidates{key};
  addDependents(&it->second, nullptr, candidates);
  forgetPickedOf(&it->second, nullptr);
  if (--pod_namespaces_[ns] == 0) pod_namespaces_.erase(ns);
  pods_.erase(it);
  return recompile(candidates);
}

Changes PolicyCompiler::upsertPolicy(const NetworkPolicyInfo& policy) {
  const std::string key = keyOf(policy.ns, policy.name);
  std::set<std::string> candidates;
  if (auto it = policies_.find(key); it != policies_.end()) {
    if (it->second == policy) return {};
    addSelected(it->second, candidates);
    if (crossing_.erase(key)) indexCrossing(key, it->second, false);
    policies_.erase(it);
    policies_by_ns_[policy.ns].erase(key);
  }
  Changes out;
  if (auto valid = validatePolicy(policy); !valid) {
    refused_[key] = valid.error();
    out.refused.push_back(valid.error());
  } else {
    refused_.erase(key);
    policies_[key] = policy;
    policies_by_ns_[policy.ns].insert(key);
    if (crossesNamespaces(policy)) {
      crossing_[key] = &policies_.at(key);
      indexCrossing(key, policy, true);
    }
    addSelected(policy, candidates);
  }
  if (policies_by_ns_.count(policy.ns) && policies_by_ns_[policy.ns].empty()) policies_by_ns_.erase(policy.ns);
  out.pods = recompile(candidates).pods;
  return out;
}

Changes PolicyCompiler::deletePolicy(const std::string& ns, const std::string& name) {
  const std::string key = keyOf(ns, name);
  refused_.erase(key);
  auto it = policies_.find(key);
  if (it == policies_.end()) return {};
  std::set<std::string> candidates;
  addSelected(it->second, candidates);
  if (crossing_.erase(key)) indexCrossing(key, it->second, false);
  policies_.erase(it);
  policies_by_ns_[ns].erase(key);
  if (policies_by_ns_[ns].empty()) policies_by_ns_.erase(ns);
  return recompile(candidates);
}

PodRules compilePod(const ClusterState& cluster, const std::string& pod) {
  auto it = cluster.pods.find(pod);
  if (it == cluster.pods.end()) return PodRules{pod, {}, {}};
  PolicyCompiler c(it->second.node_name);
  for (const auto& [n, ns] : cluster.namespaces) (void)c.upsertNamespace(ns);
  for (const auto& [k, p] : cluster.pods) (void)c.upsertPod(p);
  for (const auto& p : cluster.policies) (void)c.upsertPolicy(p);
  const PodRules* r = c.rulesOf(pod);
  return r ? *r : PodRules{pod, {}, {}};
}

}  // namespace dpu::policy
