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
//
// Scale (issue 18: 10,000 pods, 1,000 namespaces, 5,000 policies): a
// selector peer reads only the pods of the namespaces it can pick (its
// policy's, or those its namespaceSelector matches, found per namespace, not
// per pod), and the addresses a selector peer picks are kept once per
// (scope, namespaceSelector, podSelector) for every policy and local pod that
// has the same peer (many policies share "namespaceSelector env=prod"). A
// change forgets only the kept peers it alters: a pod's change those it
// joins or leaves, or holds with other addresses; a namespace's those with a
// namespaceSelector that matched it before or after. A pod change recompiles
// the pods of the policies whose peers it so alters (a label change that
// leaves every peer as it was recompiles the pod alone), testing each
// distinct peer of the policies that reach across namespaces once.
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
  // namespaceLabels() of `ns`, kept (selectors read them for every
  // namespace a namespaceSelector peer is resolved over).
  const std::map<std::string, std::string>& labelsOfNamespace(const std::string& ns) const;
  // Adds (or removes) a crossing policy's peers in crossing_peers_ and crossing_named_.
  void indexCrossing(const std::string& key, const control::NetworkPolicyInfo& policy, bool add);
  // The local pods a policy selects.
  void addSelected(const control::NetworkPolicyInfo& policy, std::set<std::string>& out) const;
  // The local pods whose rules a change of one pod from `before` to `after`
  // (nullptr: absent) can alter: those of the policies where it joins or
  // leaves a peer, or figures with other addresses, ports or host network.
  void addDependents(const control::PodInfo* before, const control::PodInfo* after,
                     std::set<std::string>& out) const;
  PodRules compile(const control::PodInfo& pod) const;
  DirectionRules compileDirection(const control::PodInfo& pod, bool ingress) const;
  // Recompiles `candidates` and returns those whose rules differ.
  Changes recompile(const std::set<std::string>& candidates);
  // The addresses selector peer `peer` of a policy of namespace `policy_ns`
  // picks, as sorted disjoint host prefixes (kept: picked_).
  const std::vector<IpPrefix>& picked(const std::string& policy_ns, const control::NetworkPolicyPeer& peer) const;
  // Forgets the kept peers a change of one pod (from `before` to `after`,
  // nullptr: absent) or of a namespace's labels (from `before` to `after`)
  // alters: a pod joining or leaving one, or moving while in it.
  void forgetPickedOf(const control::PodInfo* before, const control::PodInfo* after);
  void forgetPickedOfNamespace(const std::map<std::string, std::string>& before,
                               const std::map<std::string, std::string>& after);

  struct PickedPeer {
    std::string scope;  // the policy's namespace, "" with a namespaceSelector
    std::optional<control::LabelSelector> namespace_selector;
    std::optional<control::LabelSelector> pod_selector;
    std::vector<IpPrefix> prefixes;
  };

  std::string node_;
  std::map<std::string, control::NamespaceInfo> namespaces_;
  std::map<std::string, control::PodInfo> pods_;
  std::map<std::string, control::NetworkPolicyInfo> policies_;   // valid ones, by "ns/name"
  std::map<std::string, std::set<std::string>> policies_by_ns_;  // namespace → policy keys
  // Policies whose rules read other namespaces' pods (crossesNamespaces), into policies_.
  std::map<std::string, const control::NetworkPolicyInfo*> crossing_;
  // Their selector peers by identity (pickedKey), each with the policies
  // using it (and how often), so a pod change tests each distinct peer once;
  // and those with an egress named port, which a pod's ports concern too.
  struct PeerUse {
    std::string scope;  // the policy's namespace, "" with a namespaceSelector
    std::optional<control::LabelSelector> namespace_selector;
    std::optional<control::LabelSelector> pod_selector;
    std::map<std::string, unsigned> policies;
  };
  std::map<std::string, PeerUse> crossing_peers_;
  std::set<std::string> crossing_named_;
  std::map<std::string, std::string> refused_;
  std::map<std::string, PodRules> rules_;
  std::map<std::string, uint32_t> pod_namespaces_;  // namespace → its pods (pods_ is ordered by "ns/")
  mutable std::map<std::string, PickedPeer> picked_;  // by the peer's identity (pickedKey)
  // namespaceLabels() by namespace, set by upsertNamespace, filled on first
  // read for a namespace not delivered (its name label alone).
  mutable std::map<std::string, std::map<std::string, std::string>> namespace_labels_;
};

// The rules of one pod of `cluster` ("namespace/name"), compiled from scratch.
PodRules compilePod(const ClusterState& cluster, const std::string& pod);

}  // namespace dpu::policy
