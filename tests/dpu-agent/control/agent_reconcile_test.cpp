// The agent's pod attachments by network, and the reconcile against
// host-shim's list: one attachment per (network, sandbox, ifname), a retried
// attach answered the same; a reconcile releases what host-shim does not hold
// (IP and port freed, checkpointed), never an attach newer than its list nor
// the management port, and the agent then refuses an older attach the list
// did not hold (an ADD host-shim gave up on, arriving late).
#include <catch2/catch.hpp>

#include "control/agent.h"
#include "control/api_router.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::readyAgent;
using dpu::control::testing::TempDir;

namespace {

struct ReconcileFixture {
  TempDir dir;
  ModelState model;
  std::unique_ptr<Agent> agent;
  ReconcileFixture() { start(); }
  void start() {
    agent = readyAgent(dir.path(), model);
    REQUIRE(agent);
  }
};

attv1::AttachRequest pod(const std::string& network, const std::string& sandbox, const std::string& ifname,
                         uint32_t vf, uint64_t seq, const std::string& instance = "hs-1") {
  attv1::AttachRequest r;
  r.set_kind(attv1::POD);
  r.mutable_pod()->set_namespace_("default");
  r.mutable_pod()->set_name("pod-" + sandbox);
  r.set_sandbox_id(sandbox);
  r.set_ifname(ifname);
  r.set_network(network);
  r.set_pf_index(0);
  r.set_vf_index(vf);
  r.set_host_instance(instance);
  r.set_host_seq(seq);
  return r;
}

attv1::ReconcileRequest list(uint64_t as_of, std::vector<attv1::AttachRequest> held,
                             const std::string& instance = "hs-1") {
  attv1::ReconcileRequest r;
  r.set_host_instance(instance);
  r.set_as_of_seq(as_of);
  for (const auto& a : held) {
    auto* h = r.add_held();
    h->set_network(a.network());
    h->set_sandbox_id(a.sandbox_id());
    h->set_ifname(a.ifname());
    h->set_pf_index(a.pf_index());
    h->set_vf_index(a.vf_index());
  }
  return r;
}

}  // namespace

TEST_CASE("a pod attachment is named by network, sandbox and ifname") {
  ReconcileFixture f;
  auto a = f.agent->attach(pod("net-a", "c1", "eth0", 1, 1));
  REQUIRE(a.ok());
  CHECK(a->attachment().network() == "net-a");
  // Same sandbox and ifname on another network: another attachment's VF is
  // needed, and the name alone does not collide.
  auto b = f.agent->attach(pod("net-b", "c1", "eth1", 2, 2));
  REQUIRE(b.ok());
  // The same (network, sandbox, ifname) twice: one attachment, the same answer.
  auto again = f.agent->attach(pod("net-a", "c1", "eth0", 1, 3));
  REQUIRE(again.ok());
  CHECK(again->attachment().id() == a->attachment().id());
  CHECK(again->attachment().ips(0).address() == a->attachment().ips(0).address());
  CHECK(again->attachment().host_seq() == 3);
  CHECK(f.agent->attachmentCount() == 2);
  // Detach by sandbox names the network: another network's attachment of the sandbox stays.
  attv1::DetachRequest d;
  d.set_sandbox_id("c1");
  d.set_ifname("eth0");
  d.set_network("net-b");
  CHECK_FALSE(f.agent->detach(d)->found());
  d.set_network("net-a");
  CHECK(f.agent->detach(d)->found());
  CHECK(f.agent->attachmentCount() == 1);
  // The network survives a restart.
  f.agent.reset();
  f.start();
  auto l = f.agent->list();
  REQUIRE(l.attachments_size() == 1);
  CHECK(l.attachments(0).network() == "net-b");
}

TEST_CASE("reconcile releases what host-shim does not hold, and keeps what is newer than its list") {
  ReconcileFixture f;
  attv1::AttachRequest mgmt;
  mgmt.set_kind(attv1::MANAGEMENT);
  mgmt.set_pf_index(0);
  mgmt.set_vf_index(7);
  REQUIRE(f.agent->attach(mgmt).ok());
  auto held = pod("net-a", "c1", "eth0", 1, 1);
  auto orphan = pod("net-a", "c2", "eth0", 2, 2);  // an ADD host-shim gave up on
  auto newer = pod("net-a", "c3", "eth0", 3, 4);   // an ADD that started after the list was taken
  auto other = pod("net-a", "c4", "eth0", 4, 1, "hs-old");  // from a host-shim state that is gone
  auto moved = pod("net-a", "c5", "eth0", 5, 3);   // host-shim holds c5/eth0, but on VF 6
  for (const auto& r : {held, orphan, newer, other, moved}) REQUIRE(f.agent->attach(r).ok());
  auto moved_held = moved;
  moved_held.set_vf_index(6);

  auto r = f.agent->reconcile(list(3, {held, moved_held}));
  REQUIRE(r.ok());
  std::set<std::string> released;
  for (const auto& a : r->released()) released.insert(a.sandbox_id());
  CHECK(released == std::set<std::string>{"c2", "c4", "c5"});
  CHECK(r->kept() == 2);
  CHECK(r->boot_id() == f.agent->bootId());
  CHECK(f.agent->releasedByReconcile() == 3);
  // Their addresses and ports are free, and it is so after a restart.
  CHECK(f.model.snapshot().ports_size() == 3);  // management, c1, c3
  f.agent.reset();
  f.start();
  CHECK(f.agent->attachmentCount() == 3);
  auto again = f.agent->attach(pod("net-a", "c9", "eth0", 2, 5));
  REQUIRE(again.ok());  // c2's VF is free again
}

TEST_CASE("after a reconcile an older attach its list did not hold is refused") {
  ReconcileFixture f;
  auto c1 = pod("net-a", "c1", "eth0", 1, 1);
  REQUIRE(f.agent->attach(c1).ok());
  // host-shim gave up on its ADD number 2 (c2) and sent its list as of 3.
  REQUIRE(f.agent->reconcile(list(3, {c1})).ok());
  auto late = f.agent->attach(pod("net-a", "c2", "eth0", 2, 2));
  REQUIRE_FALSE(late.ok());
  CHECK(httpStatusOf(late.code()) == 409);
  CHECK_THAT(late.error(), Catch::Contains("gave up"));
  CHECK(f.agent->attachmentCount() == 1);
  // What the list held, or what is newer, or another host-shim state's, attaches.
  CHECK(f.agent->attach(pod("net-a", "c1", "eth0", 1, 2)).ok());
  CHECK(f.agent->attach(pod("net-a", "c3", "eth0", 3, 4)).ok());
  CHECK(f.agent->attach(pod("net-a", "c4", "eth0", 4, 1, "hs-new")).ok());
  CHECK(f.agent->attachmentCount() == 3);
}

TEST_CASE("POST /v1/attachments:reconcile through the router") {
  ReconcileFixture f;
  REQUIRE(f.agent->attach(pod("net-a", "c1", "eth0", 1, 1)).ok());
  ApiRouter router(*f.agent, {});
  ApiRequest req;
  req.method = "POST";
  req.path = "/v1/attachments:reconcile";
  req.content_type = "application/json";
  req.accept = "application/json";
  req.body = R"({"hostInstance": "hs-1", "asOfSeq": "1", "held": []})";
  auto a = router.handle(req);
  CHECK(a.status == 200);
  CHECK_THAT(a.body, Catch::Contains("\"released\""));
  CHECK(f.agent->attachmentCount() == 0);
  req.body = R"({"asOfSeq": "1"})";
  CHECK(router.handle(req).status == 400);
  req.method = "GET";
  CHECK(router.handle(req).status == 405);
}
