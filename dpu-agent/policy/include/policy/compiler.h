// The NetworkPolicy compiler of one node: from the cluster's namespaces, pods
// and policies, each LOCAL pod's rules per direction (rules.h) — isolated or
// not, and the allow rules with their peers as address prefixes, the IP
// protocol and a port range — which is what the dataplane matches a new
// connection against. The semantics are the reference evaluator's
// (reference.h); the tests hold the two equal on random clusters.
//
//  - Selector peers become the addresses of the pods they pick; ipBlock peers
//    their cidr minus the excepts, as disjoint prefixes; no peers, every
//    address (0.0.0.0/0 and ::/0).
//  - A named port resolves per destination pod: for ingress against the local
//    pod's own container ports, for egress against each peer pod's, so an
//    egress rule with a named port becomes one rule per resolved port whose
//    peers are the addresses of the pods that have it.
//  - A rule without ports allows every protocol (kIpProtoAny).
//  - Rules of one policy with the same protocol and port range are merged;
//    output is sorted and deduplicated, so equal input gives equal output.
//
// Incremental: each change (one namespace, pod or policy) returns the local
// pods whose rules it changed, and only those; the caller reprograms them. A
// policy validatePolicy refuses is left out whole (an earlier version of it
// too) and reported; the other policies stay in force.
// Not thread-safe: the agent calls it under its lock.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/cluster_source.h"
#include "policy/reference.h"
#include "policy/rules.h"

namespace dpu::policy {

struct Changes {
  std::vector<std::string> pods;     // local pods ("namespace/name") whose rules changed, sorted
  std::vector<std::string> refused;  // the policy the change refused, with why (validatePolicy's message)
};

class PolicyCompiler {
 public:
  explicit PolicyCompiler(std::string node_name);

  Changes upsertNamespace(const control::NamespaceInfo& ns);
  Changes deleteNamespace(const std::string& name);
  Changes upsertPod(const control::PodInfo& pod);
  Changes deletePod(const std::string& ns, const std::string& name);
  Changes upsertPolicy(const control::NetworkPolicyInfo& policy);
  Changes deletePolicy(const std::string& ns, const std::string& name);

  // The rules of every local pod (spec.nodeName is this node, not host
  // network), by "namespace/name"; nullptr for another pod.
  const std::map<std::string, PodRules>& rules() const { return rules_; }
  const PodRules* rulesOf(const std::string& pod) const;
  // Policies left out, by "namespace/name", with why.
  const std::map<std::string, std::string>& refused() const { return refused_; }
  // The objects as held (valid policies only): the reference evaluator's input.
  ClusterState state() const;

 private:
  bool isLocal(const control::PodInfo& pod) const;
  // The local pods a policy selects.
  void addSelected(const control::NetworkPolicyInfo& policy, std::set<std::string>& out) const;
  // The local pods whose rules depend on `pod` as it is given (a peer of theirs).
  void addDependents(const control::PodInfo& pod, std::set<std::string>& out) const;
  PodRules compile(const control::PodInfo& pod) const;
  DirectionRules compileDirection(const control::PodInfo& pod, bool ingress) const;
  // Recompiles `candidates` and returns those whose rules differ.
  Changes recompile(const std::set<std::string>& candidates);

  std::string node_;
  std::map<std::string, control::NamespaceInfo> namespaces_;
  std::map<std::string, control::PodInfo> pods_;
  std::map<std::string, control::NetworkPolicyInfo> policies_;   // valid ones, by "ns/name"
  std::map<std::string, std::set<std::string>> policies_by_ns_;  // namespace → policy keys
  std::map<std::string, std::string> refused_;
  std::map<std::string, PodRules> rules_;
};

// The rules of one pod of `cluster` ("namespace/name"), compiled from scratch.
PodRules compilePod(const ClusterState& cluster, const std::string& pod);

}  // namespace dpu::policy
