// NetworkPolicy in the agent: the compiled rules of a pod as a PortPolicy
// (control/policy_model.h), and the agent feeding the compiler from every
// namespace, pod and policy event — a new pod's port arrives with its rules
// in one Delta, a change reaches only the PortPolicies of the pods it
// touches, a refused policy is named with its field and the rest stays.
#include <catch2/catch.hpp>

#include <algorithm>

#include "../policy/policy_test_util.h"
#include "control/policy_model.h"
#include "model/model.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::readyAgent;
using dpu::control::testing::TempDir;
using policytest::netpol;
using policytest::podPeer;
using policytest::portNumber;
using policytest::sel;

namespace {

attv1::AttachRequest podRequest(const std::string& ns, const std::string& name, uint32_t vf) {
  attv1::AttachRequest r;
  r.set_kind(attv1::POD);
  r.mutable_pod()->set_namespace_(ns);
  r.mutable_pod()->set_name(name);
  r.set_sandbox_id("sandbox-" + ns + "-" + name);
  r.set_ifname("eth0");
  r.set_pf_index(0);
  r.set_vf_index(vf);
  return r;
}

// A pod of the cluster source, without addresses (as before its CNI ADD).
PodInfo sourcePod(const std::string& ns, const std::string& name, const std::string& node,
                  std::map<std::string, std::string> labels, std::vector<std::string> ips = {}) {
  return policytest::pod(ns, name, node, std::move(ips), std::move(labels));
}

// Deny all ingress to the pods labelled app=db of namespace x, except TCP 5432 from app=web.
NetworkPolicyInfo dbPolicy() {
  return netpol("x", "db", sel({{"app", "db"}}), {NetworkPolicyRule{{podPeer(sel({{"app", "web"}}))}, {portNumber(5432)}}},
                {});
}

std::vector<std::string> names(const google::protobuf::RepeatedPtrField<std::string>& v) { return {v.begin(), v.end()}; }
// A rule's peers as text, whichever form they were sent in (the agent packs them).
std::vector<std::string> peersOf(dpv1::PolicyRule r) {
  dpu::model::unpackPolicyPeers(r);
  return names(r.peers());
}

std::vector<std::string> policyPorts(const dpv1::Delta& d) {
  std::vector<std::string> out;
  for (const auto& p : d.upsert_port_policies()) out.push_back(p.port());
  return out;
}

struct Cluster {
  TempDir dir;
  ModelState model;
  std::unique_ptr<Agent> agent = readyAgent(dir.path(), model);
  Cluster() {
    REQUIRE(agent);
    (void)model.takePending();
  }
  std::string attach(const std::string& ns, const std::string& name, uint32_t vf) {
    auto r = agent->attach(podRequest(ns, name, vf));
    REQUIRE(r.ok());
    return r->attachment().id();
  }
  dpv1::Delta pending() {
    auto p = model.takePending();
    return p ? p->delta : dpv1::Delta{};
  }
};

}  // namespace

TEST_CASE("a pod's compiled rules become its port's PortPolicy; a pod isolated in neither direction gets none") {
  dpu::policy::PodRules rules;
  rules.pod = "x/a";
  CHECK_FALSE(portPolicyOf("att-1", rules).has_value());

  rules.ingress.isolated = true;
  rules.ingress.policies = {"x/deny", "x/web"};
  dpu::policy::AllowRule allow;
  allow.peers = {*dpu::IpPrefix::parse("10.0.1.0/24"), *dpu::IpPrefix::parse("fd00::5/128")};
  allow.protocol = dpu::policy::kIpProtoTcp;
  allow.port_first = 80;
  allow.port_last = 81;
  allow.policy = "x/web";
  rules.ingress.rules = {allow};
  auto p = portPolicyOf("att-1", rules);
  REQUIRE(p.has_value());
  CHECK(p->port() == "att-1");
  CHECK(p->pod() == "x/a");
  CHECK(p->ingress().isolated());
  CHECK(names(p->ingress().policies()) == std::vector<std::string>{"x/deny", "x/web"});
  REQUIRE(p->ingress().rules_size() == 1);
  const auto& r = p->ingress().rules(0);
  CHECK(peersOf(r) == std::vector<std::string>{"10.0.1.0/24", "fd00::5/128"});
  CHECK(r.protocol() == 6);
  CHECK(r.port_first() == 80);
  CHECK(r.port_last() == 81);
  CHECK(r.policy() == "x/web");
  CHECK_FALSE(p->egress().isolated());
  CHECK(p->egress().rules_size() == 0);

  // Egress isolated with no rule (default deny egress): sent, with nothing allowed.
  dpu::policy::PodRules deny;
  deny.pod = "x/b";
  deny.egress.isolated = true;
  deny.egress.policies = {"x/deny-egress"};
  p = portPolicyOf("att-2", deny);
  REQUIRE(p.has_value());
  CHECK(p->egress().isolated());
  CHECK(p->egress().rules_size() == 0);
  CHECK_FALSE(p->ingress().isolated());
}

TEST_CASE("the attach of a pod that a policy selects carries its PortPolicy in the same Delta as its port") {
  Cluster c;
  c.agent->namespaceUpserted(NamespaceInfo{"x", {{"kubernetes.io/metadata.name", "x"}}});
  c.agent->networkPolicyUpserted(dbPolicy());
  c.agent->podUpserted(sourcePod("x", "web", "node-b", {{"app", "web"}}, {"10.244.2.7"}));
  c.agent->podUpserted(sourcePod("x", "db", "node-a", {{"app", "db"}}));
  CHECK(c.model.portPolicyCount() == 0);  // no port yet: nothing to program
  (void)c.pending();

  const std::string db = c.attach("x", "db", 1);
  auto d = c.pending();
  REQUIRE(d.upsert_ports_size() == 1);
  CHECK(d.upsert_ports(0).name() == db);
  REQUIRE(d.upsert_port_policies_size() == 1);
  const auto& pp = d.upsert_port_policies(0);
  CHECK(pp.port() == db);
  CHECK(pp.pod() == "x/db");
  CHECK(pp.ingress().isolated());
  CHECK(names(pp.ingress().policies()) == std::vector<std::string>{"x/db"});
  REQUIRE(pp.ingress().rules_size() == 1);
  CHECK(peersOf(pp.ingress().rules(0)) == std::vector<std::string>{"10.244.2.7/32"});
  CHECK(pp.ingress().rules(0).port_first() == 5432);
  CHECK_FALSE(pp.egress().isolated());

  // A pod no policy isolates: its port alone.
  const std::string other = c.attach("x", "cache", 2);
  d = c.pending();
  REQUIRE(d.upsert_ports_size() == 1);
  CHECK(d.upsert_ports(0).name() == other);
  CHECK(d.upsert_port_policies_size() == 0);

  // The full sync holds the PortPolicy of the isolated port only.
  auto m = c.model.snapshot();
  REQUIRE(m.port_policies_size() == 1);
  CHECK(m.port_policies(0).port() == db);

  // Detach: the port and its PortPolicy go in one Delta.
  attv1::DetachRequest del;
  del.set_id(db);
  REQUIRE(c.agent->detach(del).ok());
  d = c.pending();
  CHECK(names(d.delete_ports()) == std::vector<std::string>{db});
  CHECK(names(d.delete_port_policies()) == std::vector<std::string>{db});
  CHECK(c.model.portPolicyCount() == 0);
}

TEST_CASE("without the source's pod, the attachment makes the pod local with its own address") {
  Cluster c;
  // Isolates every pod of namespace default (empty selector): the pod needs no labels.
  c.agent->networkPolicyUpserted(netpol("default", "deny-all", sel(), {}, {}, "Ingress,Egress"));
  const std::string id = c.attach("default", "lonely", 1);
  auto d = c.pending();
  REQUIRE(d.upsert_port_policies_size() == 1);
  CHECK(d.upsert_port_policies(0).port() == id);
  CHECK(d.upsert_port_policies(0).ingress().isolated());
  CHECK(d.upsert_port_policies(0).egress().isolated());

  // A second local pod allowed by address from the first: the rule names the
  // first one's attachment address although the source never gave it.
  c.agent->networkPolicyUpserted(
      netpol("default", "from-lonely", sel({{"app", "api"}}), {NetworkPolicyRule{{podPeer(sel())}, {}}}, {}));
  c.agent->podUpserted(sourcePod("default", "api", "node-a", {{"app", "api"}}));
  (void)c.pending();
  const std::string api = c.attach("default", "api", 2);
  d = c.pending();
  REQUIRE(d.upsert_port_policies_size() == 1);
  const auto& pp = d.upsert_port_policies(0);
  CHECK(pp.port() == api);
  bool found = false;
  for (const auto& r : pp.ingress().rules())
    if (r.policy() == "default/from-lonely") found = peersOf(r) == std::vector<std::string>{"10.244.1.3/32", "10.244.1.4/32"};
  CHECK(found);
}

TEST_CASE("a policy, pod label or namespace change reaches only the PortPolicies of the pods it touches") {
  Cluster c;
  c.agent->namespaceUpserted(NamespaceInfo{"x", {{"kubernetes.io/metadata.name", "x"}}});
  c.agent->podUpserted(sourcePod("x", "db", "node-a", {{"app", "db"}}));
  c.agent->podUpserted(sourcePod("x", "web", "node-a", {{"app", "web"}}));
  c.agent->podUpserted(sourcePod("x", "remote", "node-b", {{"app", "other"}}, {"10.244.2.9"}));
  const std::string db = c.attach("x", "db", 1);
  const std::string web = c.attach("x", "web", 2);
  (void)c.pending();

  // A policy selecting db: a Delta with db's PortPolicy alone, no port.
  c.agent->networkPolicyUpserted(dbPolicy());
  auto d = c.pending();
  CHECK(d.upsert_ports_size() == 0);
  CHECK(policyPorts(d) == std::vector<std::string>{db});

  // The remote pod becomes a web: a peer of db's rule, so db alone changes.
  c.agent->podUpserted(sourcePod("x", "remote", "node-b", {{"app", "web"}}, {"10.244.2.9"}));
  d = c.pending();
  REQUIRE(policyPorts(d) == std::vector<std::string>{db});
  CHECK(peersOf(d.upsert_port_policies(0).ingress().rules(0)) ==
        std::vector<std::string>{"10.244.1.4/32", "10.244.2.9/32"});

  // A label change that touches no policy: nothing is sent.
  c.agent->podUpserted(sourcePod("x", "web", "node-a", {{"app", "web"}, {"tier", "front"}}));
  CHECK_FALSE(c.model.hasPending());

  // A namespace change no selector reads: nothing.
  c.agent->namespaceUpserted(NamespaceInfo{"x", {{"kubernetes.io/metadata.name", "x"}, {"team", "a"}}});
  CHECK_FALSE(c.model.hasPending());

  // A deny-all over the namespace: web gains one; db's changes (one more isolating policy).
  c.agent->networkPolicyUpserted(netpol("x", "deny", sel(), {}, {}));
  d = c.pending();
  auto ports = policyPorts(d);
  std::sort(ports.begin(), ports.end());
  auto want = std::vector<std::string>{db, web};
  std::sort(want.begin(), want.end());
  CHECK(ports == want);

  // Policy deletion: db keeps x/db; web is isolated by nothing and its PortPolicy goes.
  c.agent->networkPolicyDeleted("x", "deny");
  d = c.pending();
  CHECK(policyPorts(d) == std::vector<std::string>{db});
  CHECK(names(d.delete_port_policies()) == std::vector<std::string>{web});

  // The pod is deleted in the source while still attached: it keeps its
  // labels, and so its rules, until its port goes.
  c.agent->podDeleted("x", "db");
  CHECK_FALSE(c.model.hasPending());
  attv1::DetachRequest del;
  del.set_id(db);
  REQUIRE(c.agent->detach(del).ok());
  d = c.pending();
  CHECK(names(d.delete_ports()) == std::vector<std::string>{db});
  CHECK(names(d.delete_port_policies()) == std::vector<std::string>{db});
  // A new pod of that name is a new pod: no labels, nothing isolates it.
  const std::string again = c.attach("x", "db", 3);
  d = c.pending();
  CHECK(d.upsert_ports_size() == 1);
  CHECK(d.upsert_port_policies_size() == 0);
  (void)again;
}

TEST_CASE("a refused policy is named with its field and left out; the other policies stay in force") {
  Cluster c;
  c.agent->podUpserted(sourcePod("x", "db", "node-a", {{"app", "db"}}));
  const std::string db = c.attach("x", "db", 1);
  c.agent->networkPolicyUpserted(dbPolicy());
  (void)c.pending();

  auto bad = netpol("x", "broken", sel(), {NetworkPolicyRule{{policytest::blockPeer("10.0.0.0/16", {"10.1.0.0/24"})}, {}}},
                    {});
  c.agent->networkPolicyUpserted(bad);
  auto refused = c.agent->refusedPolicies();
  REQUIRE(refused.count("x/broken") == 1);
  CHECK_THAT(refused.at("x/broken"), Catch::Contains("networkpolicy x/broken") &&
                                         Catch::Contains("spec.ingress[0].from[0].ipBlock.except[0]"));
  // Still isolated by x/db alone: the broken one changes nothing.
  CHECK_FALSE(c.model.hasPending());
  auto m = c.model.snapshot();
  REQUIRE(m.port_policies_size() == 1);
  CHECK(names(m.port_policies(0).ingress().policies()) == std::vector<std::string>{"x/db"});

  // Fixed: enforced, and no longer reported.
  bad.ingress[0].peers[0].ip_block->except = {"10.0.1.0/24"};
  c.agent->networkPolicyUpserted(bad);
  CHECK(c.agent->refusedPolicies().empty());
  auto d = c.pending();
  REQUIRE(policyPorts(d) == std::vector<std::string>{db});
  CHECK(names(d.upsert_port_policies(0).ingress().policies()) == std::vector<std::string>{"x/broken", "x/db"});
}

TEST_CASE("after a restart the restored ports get their PortPolicies once the cluster view arrives") {
  TempDir dir;
  std::string db;
  {
    ModelState model;
    auto agent = readyAgent(dir.path(), model);
    REQUIRE(agent);
    auto r = agent->attach(podRequest("x", "db", 1));
    REQUIRE(r.ok());
    db = r->attachment().id();
  }
  ModelState model;
  auto agent = readyAgent(dir.path(), model);
  REQUIRE(agent);
  CHECK(model.portPolicyCount() == 0);
  agent->podUpserted(sourcePod("x", "db", "node-a", {{"app", "db"}}));
  agent->networkPolicyUpserted(dbPolicy());
  auto m = model.snapshot();
  REQUIRE(m.port_policies_size() == 1);
  CHECK(m.port_policies(0).port() == db);
}
