// NetworkPolicy, piece by piece: label selectors, validation messages, the
// prefix arithmetic of ipBlock/except, named ports resolved per destination
// pod, and the compiler's output form (sorted, merged, deterministic) and its
// incremental answers.
#include <catch2/catch.hpp>

#include "policy/validate.h"
#include "policy_test_util.h"

using namespace policytest;

namespace {

std::vector<IpPrefix> prefixes(std::initializer_list<const char*> texts) {
  std::vector<IpPrefix> out;
  for (const char* t : texts) out.push_back(*IpPrefix::parse(t));
  return out;
}

IpAddress ip(const char* text) { return *IpAddress::parse(text); }

std::string refusal(const NetworkPolicyInfo& p) {
  auto r = validatePolicy(p);
  return r ? std::string() : r.error();
}

NetworkPolicyRule rule(std::vector<NetworkPolicyPeer> peers, std::vector<NetworkPolicyPort> ports = {}) {
  return NetworkPolicyRule{std::move(peers), std::move(ports)};
}

}  // namespace

TEST_CASE("label selectors: matchLabels and every operator, all terms ANDed") {
  Labels l{{"app", "web"}, {"tier", "front"}};
  CHECK(sel().matches(l));
  CHECK(sel().matches({}));
  CHECK(sel({{"app", "web"}}).matches(l));
  CHECK_FALSE(sel({{"app", "db"}}).matches(l));
  CHECK_FALSE(sel({{"app", "web"}, {"zone", "a"}}).matches(l));
  CHECK(sel({}, {req("app", SelectorOperator::kIn, {"db", "web"})}).matches(l));
  CHECK_FALSE(sel({}, {req("app", SelectorOperator::kIn, {"db"})}).matches(l));
  CHECK_FALSE(sel({}, {req("zone", SelectorOperator::kIn, {"a"})}).matches(l));
  CHECK(sel({}, {req("app", SelectorOperator::kNotIn, {"db"})}).matches(l));
  CHECK_FALSE(sel({}, {req("app", SelectorOperator::kNotIn, {"web"})}).matches(l));
  CHECK(sel({}, {req("zone", SelectorOperator::kNotIn, {"a"})}).matches(l));  // no label: not in the set
  CHECK(sel({}, {req("tier", SelectorOperator::kExists)}).matches(l));
  CHECK_FALSE(sel({}, {req("zone", SelectorOperator::kExists)}).matches(l));
  CHECK(sel({}, {req("zone", SelectorOperator::kDoesNotExist)}).matches(l));
  CHECK_FALSE(sel({}, {req("tier", SelectorOperator::kDoesNotExist)}).matches(l));
  CHECK_FALSE(sel({{"app", "web"}}, {req("tier", SelectorOperator::kDoesNotExist)}).matches(l));
}

TEST_CASE("namespace labels always carry kubernetes.io/metadata.name") {
  std::map<std::string, NamespaceInfo> nss{{"x", NamespaceInfo{"x", {{"team", "red"}}}}};
  CHECK(namespaceLabels(nss, "x") == Labels{{"team", "red"}, {kNamespaceNameLabel, "x"}});
  CHECK(namespaceLabels(nss, "unknown") == Labels{{kNamespaceNameLabel, "unknown"}});
}

TEST_CASE("validation names the policy, the field and what to fix; the compiler leaves a bad policy out") {
  auto base = [] { return netpol("x", "p", sel(), {rule({podPeer(sel())})}, {}); };
  CHECK(refusal(base()).empty());

  auto p = base();
  p.ingress[0].peers = {blockPeer("10.0.0.0/33")};
  CHECK(refusal(p) == "networkpolicy x/p: spec.ingress[0].from[0].ipBlock.cidr: '10.0.0.0/33' is not a CIDR; "
                      "write it as 10.0.0.0/16 or fd00::/64");
  p.ingress[0].peers = {blockPeer("10.0.0.0/16", {"10.1.0.0/24"})};
  CHECK(refusal(p) == "networkpolicy x/p: spec.ingress[0].from[0].ipBlock.except[0]: '10.1.0.0/24' is not strictly "
                      "inside cidr 10.0.0.0/16; list only ranges within the cidr");
  p.ingress[0].peers = {blockPeer("10.0.0.0/16", {"10.0.0.0/16"})};
  CHECK_THAT(refusal(p), Catch::Contains("is not strictly inside cidr 10.0.0.0/16"));
  p.ingress[0].peers = {blockPeer("10.0.0.0/16", {"10.0.1.0/24", "fd00::/64"})};
  CHECK(refusal(p) == "networkpolicy x/p: spec.ingress[0].from[0].ipBlock.except[1]: 'fd00::/64' is of another "
                      "address family than cidr 10.0.0.0/16; list only excepts of the cidr's family");
  p.ingress[0].peers = {NetworkPolicyPeer{sel(), std::nullopt, IpBlock{"10.0.0.0/8", {}}}};
  CHECK_THAT(refusal(p), Catch::Contains("spec.ingress[0].from[0]: combines ipBlock with a selector"));
  p.ingress[0].peers = {NetworkPolicyPeer{}};
  CHECK_THAT(refusal(p), Catch::Contains("spec.ingress[0].from[0]: names no peer"));

  p = base();
  p.egress = {rule({}, {portNumber(80), portNumber(90, Protocol::kTcp, 80)})};
  CHECK(refusal(p) == "networkpolicy x/p: spec.egress[0].ports[1].endPort: 80 is below port 90; give an endPort at "
                      "or above port");
  p.egress = {rule({}, {NetworkPolicyPort{Protocol::kTcp, PortRef{0, "http"}, 90}})};
  CHECK_THAT(refusal(p), Catch::Contains("spec.egress[0].ports[0].endPort: follows the named port \"http\""));
  p.egress = {rule({}, {NetworkPolicyPort{Protocol::kTcp, PortRef{}, 90}})};
  CHECK_THAT(refusal(p), Catch::Contains("spec.egress[0].ports[0].endPort: is given without port"));
  p.egress = {rule({}, {portName("HTTP")})};
  CHECK_THAT(refusal(p), Catch::Contains("spec.egress[0].ports[0].port: \"HTTP\" is not a port name"));
  p.egress = {rule({}, {portNumber(80, static_cast<Protocol>(9))})};
  CHECK(refusal(p) == "networkpolicy x/p: spec.egress[0].ports[0].protocol: is not TCP, UDP or SCTP (value 9); use "
                      "one of them");

  p = base();
  p.pod_selector = sel({}, {req("app", static_cast<SelectorOperator>(7), {"a"})});
  CHECK(refusal(p) == "networkpolicy x/p: spec.podSelector.matchExpressions[0].operator: is not one of In, NotIn, "
                      "Exists, DoesNotExist (value 7); use one of them");
  p.pod_selector = sel({}, {req("app", SelectorOperator::kIn)});
  CHECK(refusal(p) == "networkpolicy x/p: spec.podSelector.matchExpressions[0].values: is empty; operator In needs "
                      "at least one value");
  p.pod_selector = sel();
  p.ingress[0].peers = {bothPeer(sel({}, {req("team", SelectorOperator::kExists, {"red"})}), sel())};
  CHECK(refusal(p) == "networkpolicy x/p: spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values: "
                      "must be empty for operator Exists; remove the values or use In/NotIn");
  p.ingress[0].peers = {podPeer(sel({}, {req("", SelectorOperator::kDoesNotExist)}))};
  CHECK_THAT(refusal(p), Catch::Contains("spec.ingress[0].from[0].podSelector.matchExpressions[0].key: is empty"));

  // In the compiler: the bad policy is refused and left out (its earlier
  // version too); the good one stays in force.
  PolicyCompiler c("n1");
  (void)c.upsertPod(pod("x", "a", "n1", {"10.0.0.1"}, {{"app", "a"}}));
  auto good = netpol("x", "good", sel(), {rule({podPeer(sel())})}, {});
  CHECK(c.upsertPolicy(good).pods == std::vector<std::string>{"x/a"});
  auto bad = netpol("x", "bad", sel(), {}, {}, "Egress");
  CHECK(c.upsertPolicy(bad).pods == std::vector<std::string>{"x/a"});  // isolates egress
  bad.egress = {rule({blockPeer("10.0.0.0/8", {"11.0.0.0/16"})})};
  Changes refused = c.upsertPolicy(bad);
  REQUIRE(refused.refused.size() == 1);
  CHECK_THAT(refused.refused[0], Catch::StartsWith("networkpolicy x/bad: spec.egress[0].to[0].ipBlock.except[0]"));
  CHECK(refused.pods == std::vector<std::string>{"x/a"});  // egress no longer isolated
  CHECK(c.refused().count("x/bad") == 1);
  CHECK_FALSE(c.rulesOf("x/a")->egress.isolated);
  CHECK(c.rulesOf("x/a")->ingress.policies == std::vector<std::string>{"x/good"});
  CHECK(c.state().policies.size() == 1);
  (void)c.deletePolicy("x", "bad");
  CHECK(c.refused().empty());
}

TEST_CASE("ipBlock except: cidr minus the excepts as disjoint prefixes") {
  auto cidr = *IpPrefix::parse("10.0.0.0/24");
  CHECK(subtractPrefixes(cidr, {}) == prefixes({"10.0.0.0/24"}));
  CHECK(subtractPrefixes(cidr, prefixes({"10.0.0.0/25"})) == prefixes({"10.0.0.128/25"}));
  CHECK(subtractPrefixes(cidr, prefixes({"10.0.0.5/32"})) ==
        prefixes({"10.0.0.0/30", "10.0.0.4/32", "10.0.0.6/31", "10.0.0.8/29", "10.0.0.16/28", "10.0.0.32/27",
                  "10.0.0.64/26", "10.0.0.128/25"}));
  CHECK(subtractPrefixes(cidr, prefixes({"10.0.0.0/25", "10.0.0.128/25"})).empty());
  CHECK(subtractPrefixes(cidr, prefixes({"fd00::/8"})) == prefixes({"10.0.0.0/24"}));
  auto v6 = subtractPrefixes(*IpPrefix::parse("::/0"), prefixes({"fd00::1/128"}));
  CHECK(v6.size() == 128);
  // Every address of a sample is in the result exactly when the cidr has it and no except does.
  auto parts = subtractPrefixes(*IpPrefix::parse("10.0.0.0/16"), prefixes({"10.0.1.0/24", "10.0.200.7/32"}));
  for (uint32_t host = 0; host < 65536; host += 97) {
    IpAddress a = IpAddress::v4(0x0a000000u + host);
    int in = 0;
    for (const auto& p : parts) in += p.contains(a);
    bool want = !(host >> 8 == 1) && host != (200u << 8 | 7);
    CHECK(in == (want ? 1 : 0));
  }
  // And back: normalizing the pieces with the excepted ranges gives the cidr.
  auto all = parts;
  for (auto& p : prefixes({"10.0.1.0/24", "10.0.200.7/32"})) all.push_back(p);
  CHECK(normalizePrefixes(all) == prefixes({"10.0.0.0/16"}));
  CHECK(normalizePrefixes(prefixes({"10.0.0.7/32", "10.0.0.0/24", "10.0.1.0/24", "fd00::/64", "10.0.0.0/8"})) ==
        prefixes({"10.0.0.0/8", "fd00::/64"}));
}

TEST_CASE("evaluate: not isolated passes all; isolated passes what a rule allows") {
  DirectionRules open;
  CHECK(evaluate(open, ip("1.2.3.4"), kIpProtoTcp, 1));
  DirectionRules r;
  r.isolated = true;
  CHECK_FALSE(evaluate(r, ip("10.0.0.1"), kIpProtoTcp, 80));
  r.rules.push_back(AllowRule{prefixes({"10.0.0.0/24"}), kIpProtoTcp, 80, 90, "x/p"});
  CHECK(evaluate(r, ip("10.0.0.1"), kIpProtoTcp, 80));
  CHECK(evaluate(r, ip("10.0.0.1"), kIpProtoTcp, 90));
  CHECK_FALSE(evaluate(r, ip("10.0.0.1"), kIpProtoTcp, 91));
  CHECK_FALSE(evaluate(r, ip("10.0.0.1"), kIpProtoUdp, 80));
  CHECK_FALSE(evaluate(r, ip("10.0.1.1"), kIpProtoTcp, 80));
  r.rules.push_back(AllowRule{prefixes({"fd00::/64"}), kIpProtoAny, 0, 65535, "x/q"});
  CHECK(evaluate(r, ip("fd00::9"), kIpProtoIcmp, 0));
  CHECK_FALSE(evaluate(r, ip("fd01::9"), kIpProtoIcmp, 0));
}

TEST_CASE("named ports resolve per destination pod") {
  ClusterState s;
  s.pods["x/a"] = pod("x", "a", "n1", {"10.0.0.1"}, {{"app", "a"}}, {{"http", 8080, Protocol::kTcp}, {"dns", 53, Protocol::kUdp}});
  s.pods["x/b"] = pod("x", "b", "n1", {"10.0.0.2", "fd00::2"}, {{"app", "b"}}, {{"http", 9090, Protocol::kTcp}});
  s.pods["y/c"] = pod("y", "c", "n2", {"10.0.1.3"}, {{"app", "c"}}, {{"http", 7070, Protocol::kUdp}});
  s.pods["y/d"] = pod("y", "d", "n2", {"10.0.1.4"}, {{"app", "d"}});
  // Ingress to every pod of x on "http" (TCP): each pod's own number.
  s.policies.push_back(netpol("x", "in-http", sel(), {rule({}, {portName("http")})}, {}));
  auto a = compilePod(s, "x/a");
  REQUIRE(a.ingress.rules.size() == 1);
  CHECK(a.ingress.rules[0] == AllowRule{prefixes({"0.0.0.0/0", "::/0"}), kIpProtoTcp, 8080, 8080, "x/in-http"});
  CHECK(compilePod(s, "x/b").ingress.rules[0].port_first == 9090);
  // A pod without the port is isolated with nothing allowed.
  s.pods["x/e"] = pod("x", "e", "n1", {"10.0.0.5"}, {});
  auto e = compilePod(s, "x/e");
  CHECK(e.ingress.isolated);
  CHECK(e.ingress.rules.empty());

  // Egress from y/d to "http" over TCP to any pod: one rule per resolved
  // number, its peers the pods that have it (y/c's http is UDP: not it).
  s.policies.push_back(netpol("y", "out-http", sel({{"app", "d"}}), {}, {rule({}, {portName("http")})}));
  auto d = compilePod(s, "y/d");
  CHECK(d.egress.isolated);
  CHECK(d.egress.rules == std::vector<AllowRule>{
                              AllowRule{prefixes({"10.0.0.1/32"}), kIpProtoTcp, 8080, 8080, "y/out-http"},
                              AllowRule{prefixes({"10.0.0.2/32", "fd00::2/128"}), kIpProtoTcp, 9090, 9090, "y/out-http"}});
  // With an ipBlock peer, only the pods' addresses inside it.
  s.policies.back().egress[0].peers = {blockPeer("10.0.0.0/24")};
  d = compilePod(s, "y/d");
  CHECK(d.egress.rules == std::vector<AllowRule>{
                              AllowRule{prefixes({"10.0.0.1/32"}), kIpProtoTcp, 8080, 8080, "y/out-http"},
                              AllowRule{prefixes({"10.0.0.2/32"}), kIpProtoTcp, 9090, 9090, "y/out-http"}});
  Endpoint from_d{"y/d", ip("10.0.1.4")};
  CHECK(egressAllowed(s, from_d, Endpoint{"x/b", ip("10.0.0.2")}, kIpProtoTcp, 9090));
  CHECK_FALSE(egressAllowed(s, from_d, Endpoint{"x/b", ip("fd00::2")}, kIpProtoTcp, 9090));
  CHECK_FALSE(egressAllowed(s, from_d, Endpoint{"x/b", ip("10.0.0.2")}, kIpProtoTcp, 8080));
  CHECK_FALSE(egressAllowed(s, from_d, Endpoint{"", ip("10.0.0.9")}, kIpProtoTcp, 8080));  // not a pod: no name
}

TEST_CASE("compiled rules: merged per policy, protocol and ports; sorted; equal input gives equal output") {
  ClusterState s;
  s.pods["x/a"] = pod("x", "a", "n1", {"10.0.0.1"}, {{"app", "a"}});
  s.pods["x/b"] = pod("x", "b", "n1", {"10.0.0.2"}, {{"app", "b"}});
  s.pods["x/c"] = pod("x", "c", "n2", {"10.0.0.3"}, {{"app", "c"}});
  s.pods["h/n"] = pod("h", "n", "n2", {"192.168.0.9"}, {{"app", "b"}});
  s.pods["h/n"].host_network = true;
  s.policies.push_back(netpol("x", "p", sel({{"app", "a"}}),
                              {rule({podPeer(sel({{"app", "b"}})), blockPeer("10.0.0.2/31")}, {portNumber(80)}),
                               rule({podPeer(sel({{"app", "c"}}))}, {portNumber(80), portNumber(1000, Protocol::kUdp, 2000)})},
                              {}));
  auto a = compilePod(s, "x/a");
  CHECK(a.pod == "x/a");
  CHECK(a.ingress.policies == std::vector<std::string>{"x/p"});
  CHECK(a.ingress.rules == std::vector<AllowRule>{
                               AllowRule{prefixes({"10.0.0.2/31"}), kIpProtoTcp, 80, 80, "x/p"},
                               AllowRule{prefixes({"10.0.0.3/32"}), kIpProtoUdp, 1000, 2000, "x/p"}});
  CHECK_FALSE(a.egress.isolated);
  // Whatever the order objects arrive in.
  ClusterState shuffled = s;
  std::reverse(shuffled.policies.begin(), shuffled.policies.end());
  CHECK(compilePod(shuffled, "x/a") == a);
  // Host-network pods are not selected and not picked.
  s.policies.push_back(netpol("h", "q", sel(), {}, {}));
  CHECK_FALSE(compilePod(s, "h/n").ingress.isolated);
}

TEST_CASE("incremental: only the local pods whose rules change are returned") {
  PolicyCompiler c("n1");
  CHECK(c.upsertPod(pod("x", "a", "n1", {"10.0.0.1"}, {{"app", "a"}})).pods == std::vector<std::string>{"x/a"});
  CHECK(c.upsertPod(pod("x", "b", "n1", {"10.0.0.2"}, {{"app", "b"}})).pods == std::vector<std::string>{"x/b"});
  CHECK(c.upsertPod(pod("y", "r", "n2", {"10.0.1.1"}, {{"app", "r"}})).pods.empty());  // remote
  CHECK(c.upsertPolicy(netpol("x", "p", sel({{"app", "a"}}), {rule({nsPeer(sel({{"team", "red"}}))})}, {})).pods ==
        std::vector<std::string>{"x/a"});
  CHECK(c.upsertPolicy(netpol("x", "p", sel({{"app", "a"}}), {rule({nsPeer(sel({{"team", "red"}}))})}, {})).pods.empty());
  // y's label makes y/r a peer of x/a.
  CHECK(c.upsertNamespace(NamespaceInfo{"y", {{kNamespaceNameLabel, "y"}, {"team", "red"}}}).pods ==
        std::vector<std::string>{"x/a"});
  CHECK(c.rulesOf("x/a")->ingress.rules[0].peers == prefixes({"10.0.1.1/32"}));
  CHECK(c.upsertNamespace(NamespaceInfo{"z", {{kNamespaceNameLabel, "z"}, {"team", "red"}}}).pods.empty());  // no pods
  // A remote peer's address moves: x/a's rules change, nothing else.
  CHECK(c.upsertPod(pod("y", "r", "n2", {"10.0.1.9"}, {{"app", "r"}})).pods == std::vector<std::string>{"x/a"});
  CHECK(c.upsertPod(pod("y", "r", "n2", {"10.0.1.9"}, {{"app", "r"}, {"v", "2"}})).pods.empty());
  // x/b's label change makes it selected.
  CHECK(c.upsertPod(pod("x", "b", "n1", {"10.0.0.2"}, {{"app", "a"}})).pods == std::vector<std::string>{"x/b"});
  CHECK(c.deletePod("y", "r").pods == std::vector<std::string>{"x/a", "x/b"});
  CHECK(c.deletePolicy("x", "p").pods == std::vector<std::string>{"x/a", "x/b"});
  CHECK(c.deletePod("x", "a").pods == std::vector<std::string>{"x/a"});
  CHECK(c.rulesOf("x/a") == nullptr);
  CHECK(c.deleteNamespace("y").pods.empty());
}

TEST_CASE("incremental: a peer many policies share is kept once and follows every change that alters it") {
  // Two policies in different namespaces with the same namespaceSelector and
  // podSelector peer, and a third with the same selectors scoped to its own
  // namespace (no namespaceSelector): each change must reach exactly the
  // pods whose peers it alters, and the rules must equal a fresh compile.
  PolicyCompiler c("n1");
  auto check = [&c] {
    const ClusterState now = c.state();
    for (const auto& [k, r] : c.rules()) CHECK(r == compilePod(now, k));
  };
  c.upsertNamespace(NamespaceInfo{"x", {{kNamespaceNameLabel, "x"}, {"env", "prod"}}});
  c.upsertNamespace(NamespaceInfo{"y", {{kNamespaceNameLabel, "y"}, {"env", "dev"}}});
  c.upsertPod(pod("x", "a", "n1", {"10.0.0.1"}, {{"app", "a"}}));
  c.upsertPod(pod("y", "a", "n1", {"10.0.1.1"}, {{"app", "a"}}));
  c.upsertPod(pod("x", "db", "n2", {"10.0.0.9"}, {{"app", "db"}}));
  c.upsertPod(pod("y", "db", "n2", {"10.0.1.9"}, {{"app", "db"}}));
  const auto shared = rule({bothPeer(sel({{"env", "prod"}}), sel({{"app", "db"}}))});
  c.upsertPolicy(netpol("x", "p", sel({{"app", "a"}}), {shared}, {}));
  c.upsertPolicy(netpol("y", "p", sel({{"app", "a"}}), {shared}, {}));
  c.upsertPolicy(netpol("y", "own", sel({{"app", "a"}}), {rule({podPeer(sel({{"app", "db"}}))})}, {}));
  CHECK(c.rulesOf("x/a")->ingress.rules[0].peers == prefixes({"10.0.0.9/32"}));
  CHECK(c.rulesOf("y/a")->ingress.rules.size() == 2);
  check();
  // y becomes prod: its db joins the shared peer of both policies.
  CHECK(c.upsertNamespace(NamespaceInfo{"y", {{kNamespaceNameLabel, "y"}, {"env", "prod"}}}).pods ==
        std::vector<std::string>{"x/a", "y/a"});
  CHECK(c.rulesOf("x/a")->ingress.rules[0].peers == prefixes({"10.0.0.9/32", "10.0.1.9/32"}));
  check();
  // y/db's label changes: it leaves the shared peer and y's own.
  CHECK(c.upsertPod(pod("y", "db", "n2", {"10.0.1.9"}, {{"app", "web"}})).pods == std::vector<std::string>{"x/a", "y/a"});
  CHECK(c.rulesOf("x/a")->ingress.rules[0].peers == prefixes({"10.0.0.9/32"}));
  check();
  // A db in a namespace never delivered (only its name label): picked by no env selector.
  CHECK(c.upsertPod(pod("w", "db", "n2", {"10.0.3.9"}, {{"app", "db"}})).pods.empty());
  check();
  // x/db goes: both shared-peer policies lose it.
  CHECK(c.deletePod("x", "db").pods == std::vector<std::string>{"x/a", "y/a"});
  CHECK(c.rulesOf("x/a")->ingress.rules.empty());
  check();
  // The namespace goes: x/a's peer set stays empty, y/a's own peer is unchanged.
  CHECK(c.deleteNamespace("x").pods.empty());
  check();
}

TEST_CASE("incremental: cross-namespace peers are tested once each and follow policy replacement and deletion") {
  // Policies in three namespaces share one namespaceSelector peer (the
  // compiler tests it once per pod change); one of them is replaced by a
  // version that no longer reaches across namespaces, another deleted: a pod
  // change afterwards reaches exactly the pods whose rules change, reads no
  // policy that is gone, and the rules equal a fresh compile.
  PolicyCompiler c("n1");
  auto check = [&c] {
    const ClusterState now = c.state();
    for (const auto& [k, r] : c.rules()) CHECK(r == compilePod(now, k));
  };
  for (const char* ns : {"x", "y", "z"}) {
    c.upsertNamespace(NamespaceInfo{ns, {{kNamespaceNameLabel, ns}, {"env", "prod"}}});
    c.upsertPod(pod(ns, "a", "n1", {std::string("10.0.") + (ns[0] == 'x' ? "0" : ns[0] == 'y' ? "1" : "2") + ".1"},
                    {{"app", "a"}}));
  }
  c.upsertPod(pod("w", "db", "n2", {"10.0.3.9"}, {{"app", "db"}, {"v", "1"}}));
  c.upsertNamespace(NamespaceInfo{"w", {{kNamespaceNameLabel, "w"}, {"env", "prod"}}});
  const auto shared = rule({bothPeer(sel({{"env", "prod"}}), sel({{"app", "db"}}))});
  for (const char* ns : {"x", "y", "z"}) c.upsertPolicy(netpol(ns, "p", sel({{"app", "a"}}), {shared}, {}));
  CHECK(c.rulesOf("y/a")->ingress.rules[0].peers == prefixes({"10.0.3.9/32"}));
  check();
  // A label the peer does not read: the db stays picked, nothing is recompiled but itself (remote: nothing).
  CHECK(c.upsertPod(pod("w", "db", "n2", {"10.0.3.9"}, {{"app", "db"}, {"v", "2"}})).pods.empty());
  // y's policy no longer reaches across namespaces; z's is deleted.
  CHECK(c.upsertPolicy(netpol("y", "p", sel({{"app", "a"}}), {rule({podPeer(sel({{"app", "db"}}))})}, {})).pods ==
        std::vector<std::string>{"y/a"});
  CHECK(c.deletePolicy("z", "p").pods == std::vector<std::string>{"z/a"});
  check();
  // The db leaves the shared peer: only x/a, the last policy holding it, changes.
  CHECK(c.upsertPod(pod("w", "db", "n2", {"10.0.3.9"}, {{"app", "web"}})).pods == std::vector<std::string>{"x/a"});
  check();
  // It comes back with another address: x/a again.
  CHECK(c.upsertPod(pod("w", "db", "n2", {"10.0.3.7"}, {{"app", "db"}})).pods == std::vector<std::string>{"x/a"});
  CHECK(c.rulesOf("x/a")->ingress.rules[0].peers == prefixes({"10.0.3.7/32"}));
  check();
  // The last crossing policy goes: a pod change touches no other pod.
  CHECK(c.deletePolicy("x", "p").pods == std::vector<std::string>{"x/a"});
  CHECK(c.upsertPod(pod("w", "db", "n2", {"10.0.3.8"}, {{"app", "db"}})).pods.empty());
  check();
}
