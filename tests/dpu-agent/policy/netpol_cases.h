// Cases of the upstream NetworkPolicy e2e suite (test/e2e/network/netpol), in
// our own words, as truth tables on its shape: namespaces x, y, z with pods a,
// b, c. Each case changes the cluster (policies, labels) the way the suite
// does and states the expected reachability after each change the way the
// suite does (all allowed, then the denied cells). One table, two readers:
// the unit test (netpol_cases_test.cpp) holds the compiled rules and the
// reference evaluator to each matrix, and the netpol-cases tool hands the
// same states and matrices to the lab's end-to-end test
// (tests/lab/lab_netpol_test.sh), which probes them through real daemons.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "policy_test_util.h"

namespace policytest {

inline constexpr uint8_t kTcp = kIpProtoTcp, kUdp = kIpProtoUdp, kSctp = kIpProtoSctp;

// Called at each point a case states a matrix: the cluster as it is then,
// what must be reachable, over which protocol and destination port.
using Check = std::function<void(const Harness&, const Reachability&, uint8_t proto, uint16_t port)>;

struct NetpolCase {
  std::string name;  // the upstream case's name, after "netpol: "
  std::function<void(Harness&, const Check&)> run;
};

inline NetworkPolicyRule from(std::vector<NetworkPolicyPeer> peers, std::vector<NetworkPolicyPort> ports = {}) {
  return NetworkPolicyRule{std::move(peers), std::move(ports)};
}

inline std::vector<NetpolCase> netpolCases() {
  return {
      {"should support a 'default-deny-ingress' policy",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "deny-ingress", sel(), {}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectPeer("", "", "x", "", false);
    check(h, r, kTcp, 80);
    check(h, r, kUdp, 81);
       }},
      {"should support a 'default-deny-all' policy",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress,Egress"));
    Reachability r(h.pods());
    r.expectPeer("", "", "x", "", false);
    r.expectPeer("x", "", "", "", false);
    check(h, r, kTcp, 80);
    check(h, r, kIpProtoIcmp, 0);
       }},
      {"should enforce policy to allow traffic from pods within server namespace based on PodSelector",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "x-a-allows-x-b", sel({{"pod", "a"}}), {from({podPeer(sel({{"pod", "b"}}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllIngress("x/a", false);
    r.expect("x/b", "x/a", true);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy to allow ingress traffic for a target",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress"));
    h.apply(netpol("x", "allow-all-to-a", sel({{"pod", "a"}}), {from({bothPeer(sel(), sel())})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllIngress("x/a", true);
    r.expectAllIngress("x/b", false);
    r.expectAllIngress("x/c", false);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-ns-selector", sel({{"pod", "a"}}),
                   {from({nsPeer(sel({{kNamespaceNameLabel, "y"}}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectPeer("x", "", "x", "a", false);
    r.expectPeer("z", "", "x", "a", false);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy based on PodSelector with MatchExpressions",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "x-a-allows-x-b", sel({{"pod", "a"}}),
                   {from({podPeer(sel({}, {req("pod", SelectorOperator::kIn, {"b"})}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllIngress("x/a", false);
    r.expect("x/b", "x/a", true);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy based on PodSelector or NamespaceSelector",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
    h.apply(netpol("x", "allow-ns-y-match-selector", sel({{"pod", "a"}}),
                   {from({nsPeer(not_x), podPeer(sel({{"pod", "b"}}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expect("x/c", "x/a", false);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy based on PodSelector and NamespaceSelector",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
    h.apply(netpol("x", "allow-ns-y-podselector-and-nsselector", sel({{"pod", "a"}}),
                   {from({bothPeer(not_x, sel({{"pod", "b"}}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllIngress("x/a", false);
    r.expect("y/b", "x/a", true);
    r.expect("z/b", "x/a", true);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy based on Multiple PodSelectors and NamespaceSelectors",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    auto not_x = sel({}, {req(kNamespaceNameLabel, SelectorOperator::kNotIn, {"x"})});
    h.apply(netpol("x", "allow-ns-y-z-pod-b-c", sel({{"pod", "a"}}),
                   {from({bothPeer(not_x, sel({}, {req("pod", SelectorOperator::kIn, {"b", "c"})}))})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectPeer("x", "", "x", "a", false);
    r.expect("y/a", "x/a", false);
    r.expect("z/a", "x/a", false);
    check(h, r, kTcp, 80);
       }},
      {"should enforce policy based on Ports, and multiple stacked policies with overlapping podSelectors",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
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
       }},
      {"should support allow-all policy",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-all", sel(), {from({})}, {}, "Ingress"));
    Reachability r(h.pods());
    check(h, r, kTcp, 80);
    check(h, r, kUdp, 81);
    check(h, r, kIpProtoIcmp, 0);
       }},
      {"should allow ingress access on one named port",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-all", sel(), {from({}, {portName("serve-81-tcp")})}, {}, "Ingress"));
    Reachability open(h.pods());
    check(h, open, kTcp, 81);
    Reachability closed(h.pods());
    closed.expectPeer("", "", "x", "", false);
    check(h, closed, kTcp, 80);
    check(h, closed, kUdp, 81);  // serve-81-tcp is TCP's
       }},
      {"should allow ingress access from namespace on one named port",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-ns-selector-80", sel({{"pod", "a"}}),
                   {from({nsPeer(sel({{kNamespaceNameLabel, "y"}}))}, {portName("serve-80-tcp")})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectPeer("x", "", "x", "a", false);
    r.expectPeer("z", "", "x", "a", false);
    check(h, r, kTcp, 80);
    Reachability fail(h.pods());
    fail.expectAllIngress("x/a", false);
    check(h, fail, kTcp, 81);
       }},
      {"should allow egress access on one named port",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-egress", sel(), {}, {from({}, {portName("serve-80-tcp")})}, "Egress"));
    Reachability r80(h.pods());
    check(h, r80, kTcp, 80);
    Reachability r81(h.pods());
    r81.expectPeer("x", "", "", "", false);
    check(h, r81, kTcp, 81);
       }},
      {"should enforce updated policy",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
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
       }},
      {"should stop enforcing policies after they are deleted",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "deny-all", sel(), {}, {}, "Ingress,Egress"));
    Reachability r(h.pods());
    r.expectPeer("x", "", "", "", false);
    r.expectPeer("", "", "x", "", false);
    check(h, r, kTcp, 80);
    h.remove("x/deny-all");
    check(h, Reachability(h.pods()), kTcp, 80);
       }},
      {"should allow egress access to server in CIDR block",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                   {from({blockPeer(h.ipOf("y/b") + "/32")})}, "Egress"));
    Reachability r(h.pods());
    r.expectAllEgress("x/a", false);
    r.expect("x/a", "y/b", true);
    check(h, r, kTcp, 80);
       }},
      {"should enforce except clause while egress access to server in CIDR block",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                   {from({blockPeer("10.0.0.0/8", {h.ipOf("x/b") + "/32"})})}, "Egress"));
    Reachability r(h.pods());
    r.expect("x/a", "x/b", false);
    check(h, r, kTcp, 80);
       }},
      {"should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-cidr-egress-rule", sel({{"pod", "a"}}), {},
                   {from({blockPeer("10.0.0.0/8", {h.ipOf("x/b") + "/32"})})}, "Egress"));
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
       }},
      {"should enforce policies to check ingress and egress policies can be controlled independently",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-egress-for-target", sel({{"pod", "a"}}), {}, {from({})}, "Egress"));
    check(h, Reachability(h.pods()), kTcp, 80);
    h.apply(netpol("x", "deny-ingress-via-label-selector", sel({{"pod", "a"}}), {}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllIngress("x/a", false);
    check(h, r, kTcp, 80);
       }},
      {"should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP'",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "deny-ingress", sel(), {}, {}, "Ingress"));
    h.apply(netpol("x", "allow-only-sctp-ingress-on-port-81", sel({{"pod", "a"}}),
                   {from({}, {portNumber(81, Protocol::kSctp)})}, {}, "Ingress"));
    Reachability tcp(h.pods());
    tcp.expectPeer("", "", "x", "", false);
    check(h, tcp, kTcp, 81);
    Reachability sctp = tcp;
    sctp.expectAllIngress("x/a", true);
    check(h, sctp, kSctp, 81);
       }},
      {"should not allow access by TCP when a policy specifies only UDP",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-only-udp-ingress-on-port-81", sel({{"pod", "a"}}),
                   {from({}, {portNumber(81, Protocol::kUdp)})}, {}, "Ingress"));
    Reachability tcp(h.pods());
    tcp.expectAllIngress("x/a", false);
    check(h, tcp, kTcp, 81);
    check(h, Reachability(h.pods()), kUdp, 81);
       }},
      {"should enforce multiple ingress policies with ingress allow-all policy taking precedence",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-ingress-port-80", sel(), {from({}, {portNumber(80)})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectPeer("", "", "x", "", false);
    check(h, r, kTcp, 81);
    h.apply(netpol("x", "allow-ingress", sel(), {from({})}, {}, "Ingress"));
    check(h, Reachability(h.pods()), kTcp, 81);
       }},
      {"should support denying of egress traffic on the client side (even if the server explicitly allows)",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-to-ns-y-pod-a", sel({{"pod", "a"}}), {},
                   {from({bothPeer(sel({{kNamespaceNameLabel, "y"}}), sel({{"pod", "a"}}))})}, "Egress"));
    h.apply(netpol("y", "allow-all-ingress", sel(), {from({})}, {}, "Ingress"));
    Reachability r(h.pods());
    r.expectAllEgress("x/a", false);
    r.expect("x/a", "y/a", true);
    check(h, r, kTcp, 80);
       }},
      {"should allow ingress access from updated namespace and updated pod (label updates)",
       [](Harness& harness, const Check& check) {
    Harness& h = harness;
    h.apply(netpol("x", "allow-client-a-via-ns-selector", sel({{"pod", "a"}}),
                   {from({bothPeer(sel({{"ns2", "updated"}}), sel({{"pod", "b"}}))})}, {}, "Ingress"));
    Reachability before(h.pods());
    before.expectAllIngress("x/a", false);
    check(h, before, kTcp, 80);
    h.cluster.namespaces["y"].labels["ns2"] = "updated";
    Reachability after(h.pods());
    after.expectAllIngress("x/a", false);
    after.expect("y/b", "x/a", true);
    check(h, after, kTcp, 80);
    // A pod's label change: y/c becomes pod=b too.
    h.cluster.pods["y/c"].labels["pod"] = "b";
    after.expect("y/c", "x/a", true);
    check(h, after, kTcp, 80);
       }},
  };
}

}  // namespace policytest
