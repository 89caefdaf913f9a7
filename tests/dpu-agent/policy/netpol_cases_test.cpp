// Cases of the upstream NetworkPolicy e2e suite (netpol_cases.h): the
// compiled rules of both nodes — and the reference evaluator — must give
// exactly each case's matrices.
#include <catch2/catch.hpp>

#include "netpol_cases.h"

using namespace policytest;

TEST_CASE("netpol: the upstream cases' matrices") {
  for (const auto& c : netpolCases()) {
    Harness h;
    int checks = 0;
    c.run(h, [&](const Harness& at, const Reachability& want, uint8_t proto, uint16_t port) {
      std::string diff = validate(at, want, proto, port);
      INFO("netpol: " << c.name << ", check " << checks << "\n" << diff);
      CHECK(diff.empty());
      ++checks;
    });
    INFO("netpol: " << c.name);
    CHECK(checks > 0);
  }
}

namespace {

void check(const Harness& h, const Reachability& want, uint8_t proto, uint16_t port) {
  std::string diff = validate(h, want, proto, port);
  INFO(diff);
  CHECK(diff.empty());
}

}  // namespace

// The label update case again, with each node's compiler fed the changes one
// at a time: the change reports x/a alone, and its rules equal a fresh compile.
TEST_CASE("netpol label updates: each compiler sees a namespace or pod label change as one change of x/a") {
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
