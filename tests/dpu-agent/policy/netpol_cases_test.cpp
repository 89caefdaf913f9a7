// Cases of the upstream NetworkPolicy e2e suite (test/e2e/network/netpol), in
// our own words, as truth tables on its shape: namespaces x, y, z with pods a,
// b, c. Each case states the expected reachability the way the suite does
// (all allowed, then the denied cells), and the compiled rules of both nodes
// — and the reference evaluator — must give exactly that matrix.
#include <catch2/catch.hpp>

#include "policy_test_util.h"

using namespace policytest;

namespace {

constexpr uint8_t kTcp = kIpProtoTcp, kUdp = kIpProtoUdp, kSctp = kIpProtoSctp;

void check(const Harness& h, const Reachability& want, uint8_t proto, uint16_t port) {
  std::string diff = validate(h, want, proto, port);
  INFO(diff);
  CHECK(diff.empty());
}

NetworkPolicyRule from(std::vector<NetworkPolicyPeer> peers, std::vector<NetworkPolicyPort> ports = {}) {
  return NetworkPolicyRule{std::move(peers), std::move(ports)};
}

}  // namespace

TEST_CASE("netpol: should support a 'default-deny-ingress' policy") {
  Harness h;
  h.apply(netpol("x", "deny-ingress", sel(), {}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectPeer("", "", "x", "", false);
  check(h, r, kTcp, 80);
  check(h, r, kUdp, 81);
}

TEST_CASE("netpol: should support a 'default-deny-all' policy") {
  Harness h;
  h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress,Egress"));
  Reachability r(h.pods());
  r.expectPeer("", "", "x", "", false);
  r.expectPeer("x", "", "", "", false);
  check(h, r, kTcp, 80);
  check(h, r, kIpProtoIcmp, 0);
}

TEST_CASE("netpol: should enforce policy to allow traffic from pods within server namespace based on PodSelector") {
  Harness h;
  h.apply(netpol("x", "x-a-allows-x-b", sel({{"pod", "a"}}), {from({podPeer(sel({{"pod", "b"}}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllIngress("x/a", false);
  r.expect("x/b", "x/a", true);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy to allow ingress traffic for a target") {
  Harness h;
  h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress"));
  h.apply(netpol("x", "allow-all-to-a", sel({{"pod", "a"}}), {from({bothPeer(sel(), sel())})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllIngress("x/a", true);
  r.expectAllIngress("x/b", false);
  r.expectAllIngress("x/c", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-ns-selector", sel({{"pod", "a"}}),
                 {from({nsPeer(sel({{kNamespaceNameLabel, "y"}}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectPeer("x", "", "x", "a", false);
  r.expectPeer("z", "", "x", "a", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy based on PodSelector with MatchExpressions") {
  Harness h;
  h.apply(netpol("x", "x-a-allows-x-b", sel({{"pod", "a"}}),
                 {from({podPeer(sel({}, {req("pod", SelectorOperator::kIn, {"b"})}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllIngress("x/a", false);
  r.expect("x/b", "x/a", true);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy based on PodSelector or NamespaceSelector") {
  Harness h;
  auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
  h.apply(netpol("x", "allow-ns-y-match-selector", sel({{"pod", "a"}}),
                 {from({nsPeer(not_x), podPeer(sel({{"pod", "b"}}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expect("x/c", "x/a", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy based on PodSelector and NamespaceSelector") {
  Harness h;
  auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
  h.apply(netpol("x", "allow-ns-y-podselector-and-nsselector", sel({{"pod", "a"}}),
                 {from({bothPeer(not_x, sel({{"pod", "b"}}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllIngress("x/a", false);
  r.expect("y/b", "x/a", true);
  r.expect("z/b", "x/a", true);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy based on Multiple PodSelectors and NamespaceSelectors") {
  Harness h;
  auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
  h.apply(netpol("x", "allow-ns-y-z-pod-b-c", sel({{"pod", "a"}}),
                 {from({bothPeer(not_x, sel({}, {req("pod", SelectorOperator::kIn, {"b", "c"})}))})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectPeer("x", "", "x", "a", false);
  r.expect("y/a", "x/a", false);
  r.expect("z/a", "x/a", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce policy based on Ports, and multiple stacked policies with overlapping podSelectors") {
  Harness h;
  auto ns_y = nsPeer(sel({{kNamespaceNameLabel, "y"}}));
  h.apply(netpol("x", "allow-client-a-via-ns-selector", sel({{"pod", "a"}}), {from({ns_y}, {portNumber(81)})}, {},
                 "Ingress"));
  Reachability allow(h.pods());
  allow.expectPeer("x", "", "x", "a", false);
  allow.expectPeer("z", "", "x", "a", false);
  Reachability deny(h.pods());
  deny.expectAllIngress("x/a", false);
  check(h, allow, kTcp, 81);
  check(h, deny, kTcp, 80);
  check(h, deny, kUdp, 81);  // the rule names TCP
  h.apply(netpol("x", "allow-client-a-via-ns-selector-80", sel({{"pod", "a"}}), {from({ns_y}, {portNumber(80)})}, {},
                 "Ingress"));
  check(h, allow, kTcp, 80);
  check(h, allow, kTcp, 81);
}

TEST_CASE("netpol: should support allow-all policy") {
  Harness h;
  h.apply(netpol("x", "allow-all", sel(), {from({})}, {}, "Ingress"));
  Reachability r(h.pods());
  check(h, r, kTcp, 80);
  check(h, r, kUdp, 81);
  check(h, r, kIpProtoIcmp, 0);
}

TEST_CASE("netpol: should allow ingress access on one named port") {
  Harness h;
  h.apply(netpol("x", "allow-all", sel(), {from({}, {portName("serve-81-tcp")})}, {}, "Ingress"));
  Reachability open(h.pods());
  check(h, open, kTcp, 81);
  Reachability closed(h.pods());
  closed.expectPeer("", "", "x", "", false);
  check(h, closed, kTcp, 80);
  check(h, closed, kUdp, 81);  // serve-81-tcp is TCP's
}

TEST_CASE("netpol: should allow ingress access from namespace on one named port") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-ns-selector-80", sel({{"pod", "a"}}),
                 {from({nsPeer(sel({{kNamespaceNameLabel, "y"}}))}, {portName("serve-80-tcp")})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectPeer("x", "", "x", "a", false);
  r.expectPeer("z", "", "x", "a", false);
  check(h, r, kTcp, 80);
  Reachability fail(h.pods());
  fail.expectAllIngress("x/a", false);
  check(h, fail, kTcp, 81);
}

TEST_CASE("netpol: should allow egress access on one named port") {
  Harness h;
  h.apply(netpol("x", "allow-egress", sel(), {}, {from({}, {portName("serve-80-tcp")})}, "Egress"));
  Reachability r80(h.pods());
  check(h, r80, kTcp, 80);
  Reachability r81(h.pods());
  r81.expectPeer("x", "", "", "", false);
  check(h, r81, kTcp, 81);
}

TEST_CASE("netpol: should enforce updated policy") {
  Harness h;
  // Allows ingress to x/a from every namespace on 81, then is changed to allow x only.
  h.apply(netpol("x", "allow-all-mutate-to-deny-all", sel(), {from({nsPeer(sel())}, {portNumber(81)})}, {},
                 "Ingress"));
  Reachability all(h.pods());
  check(h, all, kTcp, 81);
  h.apply(netpol("x", "allow-all-mutate-to-deny-all", sel(), {from({podPeer(sel())}, {portNumber(81)})}, {},
                 "Ingress"));
  Reachability only_x(h.pods());
  only_x.expectPeer("y", "", "x", "", false);
  only_x.expectPeer("z", "", "x", "", false);
  check(h, only_x, kTcp, 81);
}

TEST_CASE("netpol: should stop enforcing policies after they are deleted") {
  Harness h;
  h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress,Egress"));
  Reachability r(h.pods());
  r.expectPeer("x", "", "", "", false);
  r.expectPeer("", "", "x", "", false);
  check(h, r, kTcp, 80);
  h.remove("x/deny-all");
  check(h, Reachability(h.pods()), kTcp, 80);
}

TEST_CASE("netpol: should allow egress access to server in CIDR block") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                 {from({blockPeer(h.ipOf("y/b") + "/32")})}, "Egress"));
  Reachability r(h.pods());
  r.expectAllEgress("x/a", false);
  r.expect("x/a", "y/b", true);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should enforce except clause while egress access to server in CIDR block") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                 {from({blockPeer("10.0.0.0/12", {h.ipOf("x/b") + "/32"})})}, "Egress"));
  Reachability r(h.pods());
  r.expect("x/a", "x/b", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                 {from({blockPeer("10.0.0.0/12", {h.ipOf("x/b") + "/32"})})}, "Egress"));
  Reachability r(h.pods());
  r.expect("x/a", "x/b", false);
  check(h, r, kTcp, 80);
  // The same policy, updated to allow x/b's address alone.
  h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                 {from({blockPeer(h.ipOf("x/b") + "/32")})}, "Egress"));
  Reachability only_b(h.pods());
  only_b.expectAllEgress("x/a", false);
  only_b.expect("x/a", "x/b", true);
  check(h, only_b, kTcp, 80);
}

TEST_CASE("netpol: should enforce policies to check ingress and egress policies can be controlled independently") {
  Harness h;
  h.apply(netpol("x", "allow-egress-for-target", sel({{"pod", "a"}}), {}, {from({})}, "Egress"));
  check(h, Reachability(h.pods()), kTcp, 80);
  h.apply(netpol("x", "deny-ingress-via-label-selector", sel({{"pod", "a"}}), {}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllIngress("x/a", false);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP'") {
  Harness h;
  h.apply(netpol("x", "deny-ingress", sel(), {}, {}, "Ingress"));
  h.apply(netpol("x", "allow-only-sctp-ingress-on-port-81", sel({{"pod", "a"}}),
                 {from({}, {portNumber(81, Protocol::kSctp)})}, {}, "Ingress"));
  Reachability tcp(h.pods());
  tcp.expectPeer("", "", "x", "", false);
  check(h, tcp, kTcp, 81);
  Reachability sctp = tcp;
  sctp.expectAllIngress("x/a", true);
  check(h, sctp, kSctp, 81);
}

TEST_CASE("netpol: should not allow access by TCP when a policy specifies only UDP") {
  Harness h;
  h.apply(netpol("x", "allow-only-udp-ingress-on-port-81", sel({{"pod", "a"}}),
                 {from({}, {portNumber(81, Protocol::kUdp)})}, {}, "Ingress"));
  Reachability tcp(h.pods());
  tcp.expectAllIngress("x/a", false);
  check(h, tcp, kTcp, 81);
  check(h, Reachability(h.pods()), kUdp, 81);
}

TEST_CASE("netpol: should enforce multiple ingress policies with ingress allow-all policy taking precedence") {
  Harness h;
  h.apply(netpol("x", "allow-ingress-port-80", sel(), {from({}, {portNumber(80)})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectPeer("", "", "x", "", false);
  check(h, r, kTcp, 81);
  h.apply(netpol("x", "allow-ingress", sel(), {from({})}, {}, "Ingress"));
  check(h, Reachability(h.pods()), kTcp, 81);
}

TEST_CASE("netpol: should support denying of egress traffic on the client side (even if the server explicitly allows)") {
  Harness h;
  h.apply(netpol("x", "allow-to-ns-y-pod-a", sel({{"pod", "a"}}), {},
                 {from({bothPeer(sel({{kNamespaceNameLabel, "y"}}), sel({{"pod", "a"}}))})}, "Egress"));
  h.apply(netpol("y", "allow-all-ingress", sel(), {from({})}, {}, "Ingress"));
  Reachability r(h.pods());
  r.expectAllEgress("x/a", false);
  r.expect("x/a", "y/a", true);
  check(h, r, kTcp, 80);
}

TEST_CASE("netpol: should allow ingress access from updated namespace and updated pod (label updates)") {
  Harness h;
  h.apply(netpol("x", "allow-client-a-via-ns-selector", sel({{"pod", "a"}}),
                 {from({bothPeer(sel({{"ns2", "updated"}}), sel({{"pod", "b"}}))})}, {}, "Ingress"));
  Reachability before(h.pods());
  before.expectAllIngress("x/a", false);
  check(h, before, kTcp, 80);

  // The compiler of node-1 (x/a's) sees the namespace's new label as one change.
  PolicyCompiler node1("node-1");
  for (const auto& [n, ns] : h.cluster.namespaces) (void)node1.upsertNamespace(ns);
  for (const auto& [k, p] : h.cluster.pods) (void)node1.upsertPod(p);
  for (const auto& [k, p] : h.policies) (void)node1.upsertPolicy(p);
  NamespaceInfo y = h.cluster.namespaces["y"];
  y.labels["ns2"] = "updated";
  CHECK(node1.upsertNamespace(y).pods == std::vector<std::string>{"x/a"});
  h.cluster.namespaces["y"] = y;
  Reachability after(h.pods());
  after.expectAllIngress("x/a", false);
  after.expect("y/b", "x/a", true);
  check(h, after, kTcp, 80);
  CHECK(node1.rulesOf("x/a")->ingress == compileAll(h.state()).at("x/a").ingress);

  // A pod's label change: y/c becomes pod=b too.
  PodInfo yc = h.cluster.pods["y/c"];
  yc.labels["pod"] = "b";
  CHECK(node1.upsertPod(yc).pods == std::vector<std::string>{"x/a"});
  h.cluster.pods["y/c"] = yc;
  after.expect("y/c", "x/a", true);
  check(h, after, kTcp, 80);
  CHECK(*node1.rulesOf("x/a") == compileAll(h.state()).at("x/a"));
}
