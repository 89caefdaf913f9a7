// The Agent: attach validation, idempotency, IPs and boot id across restarts,
// the checkpoint, and what the model gets.
#include <catch2/catch.hpp>

#include "common/atomic_file.h"
#include "control/agent.h"
#include "control/api_router.h"
#include "control/checkpoint.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::baseConfig;
using dpu::control::testing::TempDir;

namespace {

AgentConfig config(const TempDir& dir, nlohmann::json edits = nlohmann::json::object()) {
  auto j = baseConfig(dir.path());
  j.merge_patch(edits);
  auto c = parseAgentConfig(j);
  REQUIRE(c.ok());
  return *c;
}

attv1::AttachRequest podRequest(const std::string& name, uint32_t vf, const std::string& sandbox = "") {
  attv1::AttachRequest r;
  r.set_kind(attv1::POD);
  r.mutable_pod()->set_namespace_("default");
  r.mutable_pod()->set_name(name);
  r.set_sandbox_id(sandbox.empty() ? "sandbox-" + name : sandbox);
  r.set_ifname("eth0");
  r.set_pf_index(0);
  r.set_vf_index(vf);
  return r;
}

struct Fixture {
  TempDir dir;
  ModelState model;
  std::unique_ptr<Agent> agent;
  explicit Fixture(bool pods_checked = false, nlohmann::json edits = nlohmann::json::object()) {
    agent = std::make_unique<Agent>(config(dir, edits), model, pods_checked);
    REQUIRE(agent->restore().ok());
    agent->synced();
  }
  void restart(bool pods_checked = false) {
    agent.reset();
    agent = std::make_unique<Agent>(config(dir), model, pods_checked);
    REQUIRE(agent->restore().ok());
  }
};

}  // namespace

TEST_CASE("attach answers MAC, IP, gateway, routes, MTU and representor") {
  Fixture f;
  auto r = f.agent->attach(podRequest("web-1", 3));
  REQUIRE(r.ok());
  const auto& a = r->attachment();
  CHECK(a.id().rfind("att-", 0) == 0);
  CHECK(a.representor() == "pf0vf3");
  REQUIRE(a.ips_size() == 1);
  CHECK(a.ips(0).address() == "10.244.1.3/24");
  CHECK(a.ips(0).gateway() == "10.244.1.1");
  CHECK(a.mac() == "0a:58:0a:f4:01:03");
  CHECK(a.mtu() == 1442);
  REQUIRE(a.routes_size() == 1);
  CHECK(a.routes(0).dst() == "0.0.0.0/0");
  CHECK(r->boot_id() == f.agent->bootId());
  auto model = f.model.snapshot();
  REQUIRE(model.ports_size() == 1);
  CHECK(model.ports(0).name() == a.id());
  CHECK(model.ports(0).mac() == a.mac());
  CHECK(model.ports(0).ips(0) == "10.244.1.3");
  CHECK(model.ports(0).datapath_key() == 2);
  CHECK(model.ports(0).key() >= 1);
  CHECK(model.local_subnets(0).cidr() == "10.244.1.0/24");
  CHECK(model.node().router_mac() == kRouterMac);
}

TEST_CASE("attach refuses what it cannot honour, with the reason") {
  Fixture f;
  auto expect = [&](attv1::AttachRequest r, uint32_t status, const std::string& text) {
    auto res = f.agent->attach(r);
    REQUIRE_FALSE(res.ok());
    CHECK(httpStatusOf(res.code()) == status);
    CHECK_THAT(res.error(), Catch::Contains(text));
  };
  auto r = podRequest("web-1", 8);
  expect(r, 400, "vf_index 8 is out of range: PF 0 has VFs 0-7");
  r = podRequest("web-1", 1);
  r.set_pf_index(1);
  expect(r, 400, "pf_index 1 is not a PF this DPU manages");
  r = podRequest("web-1", 1);
  r.set_kind(attv1::KIND_UNSPECIFIED);
  expect(r, 400, "kind must be POD or MANAGEMENT");
  r = podRequest("web-1", 1);
  r.set_ifname("this-name-is-too-long");
  expect(r, 400, "ifname");
  r = podRequest("web-1", 1);
  r.set_sandbox_id("");
  expect(r, 400, "sandbox_id");
  r = podRequest("web-1", 1);
  r.mutable_pod()->set_name("bad\nname");
  expect(r, 400, "pod.name");
  r = podRequest("web-1", 1);
  r.set_requested_mac("01:00:5e:00:00:01");
  expect(r, 400, "unicast");
  r = podRequest("web-1", 1);
  r.set_requested_mac("zz");
  expect(r, 400, "requested_mac");
  r = podRequest("web-1", 1);
  r.set_requested_mtu(9000);
  expect(r, 400, "requested_mtu 9000");
  r = podRequest("web-1", 1);
  r.set_kind(attv1::MANAGEMENT);
  expect(r, 400, "MANAGEMENT attachment has no sandbox_id");
  CHECK(f.agent->attachmentCount() == 0);
}

TEST_CASE("outside Kubernetes the pod identity is a label: none (libcni) or a container name (podman)") {
  auto anonymous = podRequest("", 1, "libcni-sandbox");
  anonymous.mutable_pod()->clear_namespace_();
  auto podman = podRequest("My_Container", 2, "podman-sandbox");  // podman: K8S_POD_NAME only
  podman.mutable_pod()->clear_namespace_();
  Fixture file_source;
  auto ok = file_source.agent->attach(anonymous);
  REQUIRE(ok.ok());
  CHECK(ok->attachment().ips(0).address() == "10.244.1.3/24");
  CHECK(file_source.agent->attach(podman).ok());
  // With the Kubernetes source the placement check needs real object names.
  Fixture kube(true);
  for (const auto& r : {anonymous, podman}) {
    auto refused = kube.agent->attach(r);
    REQUIRE_FALSE(refused.ok());
    CHECK(httpStatusOf(refused.code()) == 400);
    CHECK_THAT(refused.error(), Catch::Contains("K8S_POD_NAMESPACE"));
  }
  auto bad_name = podRequest("Web_1", 3);
  CHECK_THAT(kube.agent->attach(bad_name).error(), Catch::Contains("pod.name"));
}

TEST_CASE("after a DPU reboot, replayed MACs do not block new pods") {
  // host-shim replays a pod that had 10.244.1.4 with its old MAC; the fresh
  // agent gives it .3. The next pod must not get .4, whose derived MAC is taken.
  Fixture f;
  auto replayed = podRequest("old", 1);
  replayed.set_requested_mac("0a:58:0a:f4:01:04");
  REQUIRE(f.agent->attach(replayed).ok());
  auto fresh = f.agent->attach(podRequest("new", 2));
  REQUIRE(fresh.ok());
  CHECK(fresh->attachment().ips(0).address() == "10.244.1.5/24");
  CHECK(fresh->attachment().mac() == "0a:58:0a:f4:01:05");
}

TEST_CASE("requested addresses are granted when free, refused with the reason otherwise") {
  // host-shim replays a pod after a DPU reboot with the address it runs on.
  Fixture f;
  auto replayed = podRequest("old", 1);
  replayed.add_requested_ips("10.244.1.9");
  auto got = f.agent->attach(replayed);
  REQUIRE(got.ok());
  CHECK(got->attachment().ips(0).address() == "10.244.1.9/24");
  CHECK(got->attachment().mac() == "0a:58:0a:f4:01:09");

  auto taken = podRequest("thief", 2);
  taken.add_requested_ips("10.244.1.9");
  auto refused = f.agent->attach(taken);
  REQUIRE_FALSE(refused.ok());
  CHECK(httpStatusOf(refused.code()) == 409);
  CHECK(refused.failure().holder == got->attachment().id());

  for (const char* bad : {"10.244.1.1", "10.244.1.2", "10.244.1.255", "10.9.9.9", "fd00::5", "not-an-ip", "10.244.1.7/24"}) {
    auto r = podRequest("bad", 3);
    r.add_requested_ips(bad);
    auto res = f.agent->attach(r);
    INFO(bad);
    REQUIRE_FALSE(res.ok());
    CHECK(httpStatusOf(res.code()) == 400);
  }
  auto two = podRequest("two", 3);
  two.add_requested_ips("10.244.1.20");
  two.add_requested_ips("10.244.1.21");
  CHECK(httpStatusOf(f.agent->attach(two).code()) == 400);
  // Nothing was taken by the refusals: the next fresh pod gets the lowest free address.
  auto fresh = f.agent->attach(podRequest("new", 4));
  REQUIRE(fresh.ok());
  CHECK(fresh->attachment().ips(0).address() == "10.244.1.3/24");
}

TEST_CASE("one VF, one attachment: the holder is named; a retry gets the same answer") {
  Fixture f;
  auto first = f.agent->attach(podRequest("web-1", 2));
  REQUIRE(first.ok());
  auto again = f.agent->attach(podRequest("web-1", 2));
  REQUIRE(again.ok());
  CHECK(again->SerializeAsString() == first->SerializeAsString());

  auto other = f.agent->attach(podRequest("web-2", 2));
  REQUIRE_FALSE(other.ok());
  CHECK(httpStatusOf(other.code()) == 409);
  CHECK(other.failure().holder == first->attachment().id());
  CHECK_THAT(other.error(), Catch::Contains("pod default/web-1"));

  // The same sandbox+ifname on another VF is a conflict, not a second attachment.
  auto moved = f.agent->attach(podRequest("web-1", 5));
  REQUIRE_FALSE(moved.ok());
  CHECK(httpStatusOf(moved.code()) == 409);
  CHECK(f.agent->attachmentCount() == 1);

  // Requested MACs must not collide: a request to fix (CNI code 7), naming the holder.
  auto mac = podRequest("web-3", 4);
  mac.set_requested_mac(first->attachment().mac());
  auto dup = f.agent->attach(mac);
  REQUIRE_FALSE(dup.ok());
  CHECK(httpStatusOf(dup.code()) == 400);
  CHECK(dup.failure().holder == first->attachment().id());
}

TEST_CASE("a requested MAC the dataplane would refuse is refused at attach, with the reason") {
  Fixture f;
  auto mgmt = attv1::AttachRequest();
  mgmt.set_kind(attv1::MANAGEMENT);
  mgmt.set_pf_index(0);
  mgmt.set_vf_index(0);
  auto m = f.agent->attach(mgmt);
  REQUIRE(m.ok());
  struct Case {
    std::string mac, reason;
  };
  const std::vector<Case> cases = {
      {kRouterMac, "is the router MAC"},
      {"00:00:00:00:00:00", "is zero"},
      {"ff:ff:ff:ff:ff:ff", "is the broadcast address"},
      {"33:33:00:00:00:01", "is a multicast address"},
      {m->attachment().mac(), "is in use on this node by attachment " + m->attachment().id() +
                                        " (the host management port)"},
  };
  for (const auto& c : cases) {
    auto r = podRequest("web-1", 2);
    r.set_requested_mac(c.mac);
    auto res = f.agent->attach(r);
    INFO(c.mac);
    REQUIRE_FALSE(res.ok());
    CHECK(httpStatusOf(res.code()) == 400);
    CHECK_THAT(res.error(), Catch::StartsWith("requested_mac (runtimeConfig.mac): "));
    CHECK_THAT(res.error(), Catch::Contains(c.reason));
  }
  // Nothing was held: no address, no attachment, no port in the model.
  CHECK(f.agent->attachmentCount() == 1);
  CHECK(f.model.snapshot().ports_size() == 1);
  auto ok = podRequest("web-1", 2);
  ok.set_requested_mac("0a:58:0a:f4:01:77");
  auto good = f.agent->attach(ok);
  REQUIRE(good.ok());
  CHECK(good->attachment().ips(0).address() == "10.244.1.3/24");  // the first pod address, still free
}

TEST_CASE("attachments carry the dataplane's state; GET one; port keys for publishing") {
  Fixture f;
  CHECK(f.agent->portKeys().empty());
  const uint64_t v0 = f.agent->portKeysVersion();
  auto a = f.agent->attach(podRequest("web-1", 1));
  REQUIRE(a.ok());
  const std::string id = a->attachment().id();
  CHECK(a->attachment().dataplane_state() == "pending");  // no view: nothing acknowledged
  std::map<std::string, std::string> states{{id, "refused: mac is bad"}};
  f.agent->setDataplaneView([&states](const std::string& port) { return states.count(port) ? states[port] : "?"; });
  CHECK(f.agent->list().attachments(0).dataplane_state() == "refused: mac is bad");
  auto one = f.agent->get(id);
  REQUIRE(one.ok());
  CHECK(one->attachment().id() == id);
  CHECK(one->attachment().dataplane_state() == "refused: mac is bad");
  CHECK(one->boot_id() == f.agent->bootId());
  auto none = f.agent->get("att-nope");
  REQUIRE_FALSE(none.ok());
  CHECK(httpStatusOf(none.code()) == 404);

  auto keys = f.agent->portKeys();
  REQUIRE(keys.size() == 1);
  CHECK(keys.at("10.244.1.3") == f.model.snapshot().ports(0).key());
  CHECK(f.agent->portKeysVersion() != v0);
  const uint64_t v1 = f.agent->portKeysVersion();
  attv1::DetachRequest d;
  d.set_id(id);
  REQUIRE(f.agent->detach(d).ok());
  CHECK(f.agent->portKeys().empty());
  CHECK(f.agent->portKeysVersion() != v1);
}

TEST_CASE("the management port gets the reserved second address and cluster routes") {
  Fixture f;
  attv1::AttachRequest r;
  r.set_kind(attv1::MANAGEMENT);
  r.set_pf_index(0);
  r.set_vf_index(0);
  auto m = f.agent->attach(r);
  REQUIRE(m.ok());
  CHECK(m->attachment().ips(0).address() == "10.244.1.2/24");
  REQUIRE(m->attachment().routes_size() == 2);
  CHECK(m->attachment().routes(0).dst() == "10.244.0.0/16");
  CHECK(m->attachment().routes(1).dst() == "10.96.0.0/12");
  CHECK(f.model.snapshot().ports(0).kind() == dpv1::MANAGEMENT);
  auto again = f.agent->attach(r);
  REQUIRE(again.ok());
  CHECK(again->attachment().id() == m->attachment().id());
  r.set_vf_index(1);
  auto second = f.agent->attach(r);
  REQUIRE_FALSE(second.ok());
  CHECK(httpStatusOf(second.code()) == 409);
  CHECK(second.failure().holder == m->attachment().id());
}

TEST_CASE("detach by id, by VF, by sandbox; unknown is found=false") {
  Fixture f;
  auto a = f.agent->attach(podRequest("a", 1));
  auto b = f.agent->attach(podRequest("b", 2));
  auto c = f.agent->attach(podRequest("c", 3));
  REQUIRE((a.ok() && b.ok() && c.ok()));
  attv1::DetachRequest d;
  d.set_id(a->attachment().id());
  CHECK(f.agent->detach(d)->found());
  CHECK_FALSE(f.agent->detach(d)->found());
  d.Clear();
  d.set_by_vf(true);
  d.set_vf_index(2);
  CHECK(f.agent->detach(d)->found());
  d.Clear();
  d.set_sandbox_id("sandbox-c");
  d.set_ifname("eth0");
  CHECK(f.agent->detach(d)->found());
  CHECK(f.agent->attachmentCount() == 0);
  CHECK(f.model.snapshot().ports_size() == 0);
  d.Clear();
  auto none = f.agent->detach(d);
  REQUIRE_FALSE(none.ok());
  CHECK(httpStatusOf(none.code()) == 400);
  d.set_id("x");
  d.set_sandbox_id("y");
  CHECK(httpStatusOf(f.agent->detach(d).code()) == 400);
}

TEST_CASE("an attach beyond the dataplane's port capacity is refused at once, leaving nothing behind") {
  Fixture f;
  // Unknown capacity (no dataplane yet): nothing is refused for it.
  REQUIRE(f.agent->attach(podRequest("a", 1)).ok());
  f.agent->setPortCapacity(2, 32);
  CHECK(f.agent->portCapacity() == 2);
  REQUIRE(f.agent->attach(podRequest("b", 2)).ok());
  const auto before = f.agent->ipamUsage();
  const auto model_before = f.model.snapshot().ports_size();
  auto refused = f.agent->attach(podRequest("c", 3));
  REQUIRE_FALSE(refused.ok());
  CHECK(httpStatusOf(refused.code()) == 507);
  CHECK_THAT(refused.error(), Catch::Contains("can open 2 representor ports"));
  CHECK_THAT(refused.error(), Catch::Contains("RTE_MAX_ETHPORTS 32"));
  CHECK_THAT(refused.error(), Catch::Contains("-Dmax_ethports=N (N > 32)"));
  // No address, VF, port key or model port was taken.
  CHECK(f.agent->attachmentCount() == 2);
  CHECK(f.agent->ipamUsage().front().used == before.front().used);
  CHECK(f.model.snapshot().ports_size() == model_before);
  CHECK(f.agent->list().attachments_size() == 2);
  // A retried ADD of an existing attachment is still answered.
  CHECK(f.agent->attach(podRequest("b", 2)).ok());
  // A pod leaves: the next attach fits, and gets the address the refused one did not take.
  attv1::DetachRequest d;
  d.set_sandbox_id("sandbox-a");
  d.set_ifname("eth0");
  REQUIRE(f.agent->detach(d)->found());
  auto again = f.agent->attach(podRequest("c", 3));
  REQUIRE(again.ok());
  CHECK(again->attachment().representor() == "pf0vf3");
}

TEST_CASE("after a restart: same attachments, IPs, port keys and boot id; no IP handed out twice") {
  Fixture f;
  auto a = f.agent->attach(podRequest("a", 1));
  auto b = f.agent->attach(podRequest("b", 2));
  REQUIRE((a.ok() && b.ok()));
  std::string boot = f.agent->bootId();
  auto ports_before = f.model.snapshot();
  attv1::DetachRequest d;
  d.set_id(a->attachment().id());
  REQUIRE(f.agent->detach(d).ok());
  std::string released = a->attachment().ips(0).address();

  f.restart();
  CHECK(f.agent->bootId() == boot);
  auto list = f.agent->list();
  REQUIRE(list.attachments_size() == 1);
  CHECK(list.attachments(0).SerializeAsString() == b->attachment().SerializeAsString());
  auto ports_after = f.model.snapshot();
  REQUIRE(ports_after.ports_size() == 1);
  CHECK(ports_after.ports(0).key() != 0);
  bool same_key = false;
  for (const auto& p : ports_before.ports()) same_key |= p.name() == ports_after.ports(0).name() && p.key() == ports_after.ports(0).key();
  CHECK(same_key);
  f.agent->synced();
  for (uint32_t vf = 3; vf < 8; ++vf) {
    auto n = f.agent->attach(podRequest("n" + std::to_string(vf), vf));
    REQUIRE(n.ok());
    CHECK(n->attachment().ips(0).address() != released);
    CHECK(n->attachment().ips(0).address() != b->attachment().ips(0).address());
  }
}

TEST_CASE("a lost or corrupt checkpoint means a new boot id") {
  Fixture f;
  REQUIRE(f.agent->attach(podRequest("a", 1)).ok());
  std::string boot = f.agent->bootId();
  auto path = f.agent->config().checkpointPath();
  REQUIRE(dpu::writeFileAtomic(path, "\xff\xff garbage").ok());
  f.restart();
  CHECK(f.agent->bootId() != boot);
  CHECK(f.agent->attachmentCount() == 0);
  CHECK(dpu::fileExists(path + ".corrupt"));
  std::string boot2 = f.agent->bootId();
  std::remove(path.c_str());
  f.restart();
  CHECK(f.agent->bootId() != boot2);
}

TEST_CASE("the checkpoint round-trips every field") {
  TempDir dir;
  dpu::checkpoint::v1::AgentCheckpoint cp;
  cp.set_version(kAgentCheckpointVersion);
  cp.set_boot_id("b");
  cp.set_generation(7);
  cp.set_next_port_key(9);
  cp.add_recently_released("10.244.1.9");
  auto* a = cp.add_attachments();
  a->set_id("att-1");
  a->add_ips()->set_address("10.244.1.3/24");
  (*cp.mutable_port_keys())["att-1"] = 4;
  REQUIRE(saveAgentCheckpoint(dir / "cp", cp).ok());
  auto back = loadAgentCheckpoint(dir / "cp");
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->SerializeAsString() == cp.SerializeAsString());
  CHECK_FALSE(loadAgentCheckpoint(dir / "none")->has_value());
  cp.set_version(99);
  REQUIRE(saveAgentCheckpoint(dir / "cp", cp).ok());
  auto wrong = loadAgentCheckpoint(dir / "cp");
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.error(), Catch::Contains("version 99"));
}

TEST_CASE("with a Kubernetes source the pod must be scheduled here, and vanished pods are released") {
  TempDir dir;
  ModelState model;
  auto agent = std::make_unique<Agent>(config(dir), model, true);
  REQUIRE(agent->restore().ok());
  auto early = agent->attach(podRequest("web-1", 1));
  REQUIRE_FALSE(early.ok());
  CHECK(httpStatusOf(early.code()) == 503);
  agent->podUpserted(PodInfo{"default", "web-1", "uid-1", "node-a", {}, {}, false});
  agent->podUpserted(PodInfo{"default", "web-2", "uid-2", "node-b", {}, {}, false});
  agent->synced();
  REQUIRE(agent->attach(podRequest("web-1", 1)).ok());
  auto elsewhere = agent->attach(podRequest("web-2", 2));
  REQUIRE_FALSE(elsewhere.ok());
  CHECK(httpStatusOf(elsewhere.code()) == 403);
  CHECK_THAT(elsewhere.error(), Catch::Contains("scheduled on node 'node-b'"));
  auto unknown = agent->attach(podRequest("web-3", 3));
  CHECK(httpStatusOf(unknown.code()) == 404);

  // Restart while web-1 was deleted: released after the first sync.
  agent.reset();
  agent = std::make_unique<Agent>(config(dir), model, true);
  REQUIRE(agent->restore().ok());
  CHECK(agent->attachmentCount() == 1);
  agent->podUpserted(PodInfo{"default", "web-2", "uid-2", "node-b", {}, {}, false});
  agent->synced();
  CHECK(agent->attachmentCount() == 0);
  CHECK(agent->releasedOrphans() == 1);
  CHECK(model.snapshot().ports_size() == 0);
}

TEST_CASE("the pod CIDR can come from this node's Node; remote nodes become tunnel endpoints") {
  TempDir dir;
  ModelState model;
  auto j = baseConfig(dir.path());
  j.erase("podCIDR");
  auto cfg = parseAgentConfig(j);
  REQUIRE(cfg.ok());
  Agent agent(*cfg, model, false);
  REQUIRE(agent.restore().ok());
  agent.synced();
  auto early = agent.attach(podRequest("a", 1));
  REQUIRE_FALSE(early.ok());
  CHECK(httpStatusOf(early.code()) == 503);
  CHECK_THAT(agent.notReadyReason(), Catch::Contains("pod CIDR is not known"));
  agent.nodeUpserted(NodeInfo{"node-a", "192.168.50.1", {"10.244.7.0/24"}, "", {}});
  CHECK(agent.notReadyReason().empty());
  auto a = agent.attach(podRequest("a", 1));
  REQUIRE(a.ok());
  CHECK(a->attachment().ips(0).address() == "10.244.7.3/24");

  agent.nodeUpserted(NodeInfo{"node-b", "192.168.50.2", {"10.244.2.0/24"}, "key", {}});
  agent.nodeUpserted(NodeInfo{"node-c", "", {"10.244.3.0/24"}, "", {}});  // no tunnel IP yet: not routable
  auto m = model.snapshot();
  REQUIRE(m.remote_nodes_size() == 1);
  CHECK(m.remote_nodes(0).name() == "node-b");
  CHECK(m.remote_nodes(0).tunnel_ip() == "192.168.50.2");
  CHECK(m.remote_nodes(0).subnets(0).datapath_key() == 3);
  CHECK(m.remote_nodes(0).subnets(0).gateway_ip() == "10.244.2.1");
  CHECK(m.remote_nodes(0).ipsec_public_key() == "key");
  CHECK(m.remote_nodes(0).ports_size() == 0);
  // Its published port keys, sorted by address; an entry that is not one of
  // its pod addresses (or not a 15-bit key) is left out, the node stays.
  NodeInfo b{"node-b", "192.168.50.2", {"10.244.2.0/24"}, "key", {}};
  b.port_keys = {{"10.244.2.9", 4}, {"10.244.2.10", 5}, {"10.244.9.9", 6}, {"10.244.2.11", 40000}};
  agent.nodeUpserted(b);
  m = model.snapshot();
  REQUIRE(m.remote_nodes(0).ports_size() == 2);
  CHECK(m.remote_nodes(0).ports(0).ip() == "10.244.2.9");
  CHECK(m.remote_nodes(0).ports(0).key() == 4);
  CHECK(m.remote_nodes(0).ports(1).ip() == "10.244.2.10");
  agent.nodeDeleted("node-b");
  CHECK(model.snapshot().remote_nodes_size() == 0);
}

TEST_CASE("a node behind a NAT is given to the dataplane at its NAT address, unless it is behind ours") {
  TempDir dir;
  ModelState model;
  Agent agent(config(dir, {{"ipsec", {{"mode", "on"}, {"natTraversal", true}, {"natAddress", "198.51.100.1"}}}}), model,
              false);
  REQUIRE(agent.restore().ok());
  NodeInfo b{"node-b", "10.200.2.2", {"10.244.2.0/24"}, "key", {}};
  b.ipsec_nat_address = "198.51.100.2";  // its own NAT
  NodeInfo c{"node-c", "10.200.1.3", {"10.244.3.0/24"}, "key", {}};
  c.ipsec_nat_address = "198.51.100.1";  // our NAT: the same site
  NodeInfo d{"node-d", "192.168.50.4", {"10.244.4.0/24"}, "key", {}};  // no NAT
  for (const auto& n : {b, c, d}) agent.nodeUpserted(n);
  const auto m = model.snapshot();
  REQUIRE(m.remote_nodes_size() == 3);
  CHECK(m.remote_nodes(0).nat_address() == "198.51.100.2");
  CHECK(m.remote_nodes(0).tunnel_ip() == "10.200.2.2");
  CHECK(m.remote_nodes(1).nat_address().empty());
  CHECK(m.remote_nodes(2).nat_address().empty());
  CHECK(m.node().ipsec_nat_traversal());
  CHECK(m.node().ipsec_nat_keepalive_seconds() == 20);
}

TEST_CASE("with a Kubernetes source a pod deleted after the sync releases its attachment") {
  TempDir dir;
  ModelState model;
  Agent agent(config(dir), model, true);
  REQUIRE(agent.restore().ok());
  agent.podUpserted(PodInfo{"default", "web-1", "uid-1", "node-a", {}, {}, false});
  agent.podUpserted(PodInfo{"default", "web-2", "uid-2", "node-a", {}, {}, false});
  agent.synced();
  auto a = agent.attach(podRequest("web-1", 1));
  REQUIRE(agent.attach(podRequest("web-2", 2)).ok());
  REQUIRE(a.ok());
  agent.podDeleted("default", "web-1");
  CHECK(agent.attachmentCount() == 1);
  CHECK(agent.list().attachments(0).pod().name() == "web-2");
  CHECK(model.snapshot().ports_size() == 1);
  // host-shim's DEL arriving afterwards is still a success.
  attv1::DetachRequest d;
  d.set_id(a->attachment().id());
  auto late = agent.detach(d);
  REQUIRE(late.ok());
  CHECK_FALSE(late->found());
}
