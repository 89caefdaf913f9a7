// The programming protocol end to end in one process: the agent's
// DataplaneClient against the fake dataplane's state machine served on a
// unix socket — full sync on connect, one Delta per change, RESYNC_NEEDED and
// a dataplane restart lead to a full sync that changes only what differs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/ipc_proto.h"
#include "control/dataplane_client.h"
#include "control_test_util.h"
#include "fake_dataplane_model.h"
#include "model/model.h"

using namespace dpu::control;
using dpu::control::testing::TempDir;
using dpu::fakes::FakeDataplaneModel;

namespace {

// A fake dataplane on a socket, one connection at a time.
class Server {
 public:
  explicit Server(std::string path) : path_(std::move(path)) {
    auto l = dpu::ipc::listenUnix(path_);
    REQUIRE(l.ok());
    listener_ = std::move(*l);
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
  }
  // Restart: drop the connection and forget everything.
  void restart() { restart_ = true; }
  template <typename F>
  auto with(F f) {
    std::lock_guard lock(mu_);
    return f(model_);
  }

 private:
  void run() {
    while (!stop_) {
      auto c = dpu::ipc::acceptUnix(listener_, dpu::ipc::after(std::chrono::milliseconds(20)));
      if (!c || !c->valid()) continue;
      while (!stop_) {
        if (restart_.exchange(false)) {
          std::lock_guard lock(mu_);
          model_.wipe();
          break;
        }
        dpv1::ProgramRequest req;
        auto got = dpu::ipc::recvMessage(*c, req, dpu::ipc::after(std::chrono::milliseconds(20)));
        if (!got && got.code() == dpu::ErrorCode::kTimeout) continue;
        if (!got) break;
        dpv1::ProgramReply reply;
        {
          std::lock_guard lock(mu_);
          reply = model_.apply(req);
        }
        if (!dpu::ipc::sendMessage(*c, reply, dpu::ipc::after(std::chrono::seconds(2)))) break;
      }
    }
  }
  std::string path_;
  dpu::ipc::Socket listener_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, restart_{false};
  std::mutex mu_;
  FakeDataplaneModel model_;
};

// Whether f() comes true within `tries` 10 ms polls (3 s by default).
template <typename F>
bool eventually(F f, int tries = 300) {
  for (int i = 0; i < tries; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

dpv1::LogicalPort port(const std::string& name, uint32_t key) {
  dpv1::LogicalPort p;
  p.set_name(name);
  p.set_key(key);
  p.set_kind(dpv1::POD);
  p.set_representor("pf0vf" + std::to_string(key));
  p.set_mac("0a:58:0a:f4:01:0" + std::to_string(key));
  p.add_ips("10.244.1." + std::to_string(10 + key));
  p.set_datapath_key(2);
  return p;
}

// Usable node settings and the local subnet the ports above are on.
void addNode(ModelState& model) {
  dpv1::NodeSettings n;
  n.set_name("node-a");
  n.set_tunnel_ip("192.168.50.1");
  n.set_pod_mtu(1400);
  n.set_router_mac("0a:58:a9:fe:00:01");
  model.setNode(n);
  dpv1::Subnet s;
  s.set_cidr("10.244.1.0/24");
  s.set_gateway_ip("10.244.1.1");
  s.set_datapath_key(2);
  model.upsertLocalSubnet(s);
}

dpv1::RemoteNode remote(const std::string& name, const std::string& tip) {
  dpv1::RemoteNode r;
  r.set_name(name);
  r.set_tunnel_ip(tip);
  auto* s = r.add_subnets();
  s->set_cidr("10.244.9.0/24");
  s->set_gateway_ip("10.244.9.1");
  s->set_datapath_key(10);
  return r;
}

// A client of a fake dataplane whose model has node-a's settings and port a.
struct OnePortClient {
  static ModelState& withPortA(ModelState& m) {
    addNode(m);
    m.upsertPort(port("a", 1));
    return m;
  }
  TempDir dir;
  Server server{dir / "dp.sock"};
  ModelState model;
  Histogram latency{Histogram::latencyBounds()};
  DataplaneClient client{dir / "dp.sock", "test", withPortA(model), latency};
};

}  // namespace

TEST_CASE_METHOD(OnePortClient, "full sync on connect, then one Delta per change, restarts resync") {
  client.start(0);
  REQUIRE(eventually([&] { return client.status().programmed; }));
  CHECK(server.with([](auto& m) { return m.model().ports_size(); }) == 1);

  model.upsertRemoteNode(remote("node-c", "192.168.50.3"));
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().remote_nodes_size() == 1; }); }));
  auto last = server.with([](auto& m) { return m.history().back(); });
  CHECK(last.request == "delta");
  CHECK(last.objects == std::vector<std::string>{"+remote:node-c"});

  model.deleteRemoteNode("node-c");
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().remote_nodes_size() == 0; }); }));
  last = server.with([](auto& m) { return m.history().back(); });
  CHECK(last.objects == std::vector<std::string>{"-remote:node-c"});
  REQUIRE(eventually([&] { return client.status().generation == server.with([](auto& m) { return m.generation(); }); }));
  uint64_t gen = client.status().generation;

  // The dataplane restarts: the agent reconnects and programs everything again.
  std::string old_instance = client.status().instance_id;
  server.restart();
  REQUIRE(eventually([&] { return client.status().programmed && client.status().instance_id != old_instance; }));
  auto h = server.with([](auto& m) { return m.history(); });
  REQUIRE(h.size() == 2);
  CHECK(h[1].request == "full_sync");
  CHECK(h[1].added == 3);  // node settings, the subnet and the one port
  CHECK(client.status().generation > gen);  // generations never go back
  CHECK(latency.snapshot().count >= 4);
  client.stop();
}

TEST_CASE_METHOD(OnePortClient, "a Delta on a stale base gets RESYNC_NEEDED and a full sync that changes nothing extra") {
  client.start(0);
  REQUIRE(eventually([&] { return client.status().programmed; }));
  // Someone else moved the dataplane's generation (as a second writer would).
  server.with([](FakeDataplaneModel& m) {
    dpv1::ProgramRequest r;
    r.mutable_delta()->set_base_generation(m.generation());
    r.mutable_delta()->set_generation(m.generation() + 5);
    return m.apply(r).status();
  });
  model.upsertPort(port("b", 2));
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().ports_size() == 2; }); }));
  REQUIRE(eventually([&] { return client.status().resyncs_requested == 1; }));
  auto h = server.with([](auto& m) { return m.history(); });
  CHECK(h.back().request == "full_sync");
  CHECK(h.back().objects == std::vector<std::string>{"+port:b"});
  client.stop();
}

TEST_CASE_METHOD(OnePortClient, "the client tracks what the dataplane does not forward for: from replies, and by polling Status") {
  CHECK_THAT(client.portState("a"), Catch::StartsWith("dataplane not connected"));
  client.start(0);
  REQUIRE(eventually([&] { return client.portState("a") == kProgrammed; }));
  CHECK(client.status().problems.empty());

  // A port the dataplane refuses (b asks for a's MAC): its state says why,
  // a's does not change, and the node stays programmed.
  auto b = port("b", 2);
  b.set_mac(port("a", 1).mac());
  model.upsertPort(b);
  REQUIRE(eventually([&] { return client.portState("b") != kPending; }));
  CHECK_THAT(client.portState("b"), Catch::StartsWith("refused: mac 0a:58:0a:f4:01:01 is used by port a"));
  CHECK(client.portState("a") == kProgrammed);
  CHECK(client.status().programmed);
  REQUIRE(client.status().problems.size() == 1);
  // Fixed: acknowledged and forwarding.
  model.upsertPort(port("b", 2));
  REQUIRE(eventually([&] { return client.portState("b") == kProgrammed; }));
  CHECK(client.status().problems.empty());

  // A problem the dataplane finds on its own (a representor it cannot open)
  // reaches the agent with no change of ours: the client polls Status.
  const uint64_t polls = client.status().status_polls;
  server.with([](FakeDataplaneModel& m) {
    dpv1::ObjectProblem p;
    p.set_kind(dpv1::ObjectProblem::PORT);
    p.set_name("a");
    p.set_state(dpv1::ObjectProblem::PORT_UNAVAILABLE);
    p.set_reason("pf0vf1: no such device; retrying in 2s");
    m.setExtraProblems({p});
    return 0;
  });
  REQUIRE(eventually([&] { return client.portState("a") != kProgrammed; }));
  CHECK(client.portState("a") == "port unavailable: pf0vf1: no such device; retrying in 2s");
  // The poll count is bumped after the answer is applied: wait for it too.
  CHECK(eventually([&] { return client.status().status_polls > polls; }));
  CHECK(client.portState("nope") == kPending);  // not in the model at all
  client.stop();
}

TEST_CASE_METHOD(OnePortClient, "a status poll the dataplane refuses is counted and named; the connection and the model stay") {
  std::atomic<bool> broken{true};
  // What a broken agent would report: a rotation phase no dataplane knows.
  client.onStatusPoll([&](dpv1::StatusRequest& s) {
    s.mutable_ipsec_rotation()->set_phase(broken ? "rotating" : "idle");
  });
  client.start(0);
  REQUIRE(eventually([&] { return client.portState("a") == kProgrammed; }));
  REQUIRE(eventually([&] { return client.status().refused >= 1; }, 600));
  CHECK_THAT(client.status().last_error, Catch::StartsWith("the dataplane refused a status poll: StatusRequest: "
                                                           "ipsec_rotation.phase \"rotating\" is not a rotation phase"));
  CHECK(client.status().connected);
  CHECK(client.status().reconnects == 0);
  CHECK(client.portState("a") == kProgrammed);
  // Fixed: the polls are taken again, and the dataplane keeps the state.
  broken = false;
  const uint64_t refused = client.status().refused;
  const uint64_t polls = client.status().status_polls;
  REQUIRE(eventually([&] { return client.status().status_polls > polls + 1; }, 600));  // two polls, 1 s apart
  CHECK(client.status().refused <= refused + 1);  // at most one already on its way
  CHECK(server.with([](FakeDataplaneModel& m) {
    dpv1::IpsecInfo info;
    m.describeIpsec(info);
    return info.rotation().phase() == "idle";
  }));
  client.stop();
}

TEST_CASE("the fake dataplane refuses what the engine refuses: whole requests and single objects") {
  FakeDataplaneModel m;
  ModelState state;
  addNode(state);
  dpv1::ProgramRequest r;
  auto* fs = r.mutable_full_sync();
  fs->set_generation(1);
  *fs->mutable_model() = state.snapshot();
  fs->mutable_model()->mutable_node()->set_router_mac("");
  auto reply = m.apply(r);
  CHECK(reply.status() == dpv1::INVALID);  // node settings that make nothing work
  CHECK_THAT(reply.message(), Catch::Contains("node.router_mac"));
  CHECK(m.generation() == 0);
  *fs->mutable_model() = state.snapshot();
  *fs->mutable_model()->add_ports() = port("a", 1);
  *fs->mutable_model()->add_ports() = port("b", 1);  // the same key twice: b is refused, a is in force
  reply = m.apply(r);
  REQUIRE(reply.status() == dpv1::OK);
  REQUIRE(reply.problems_size() == 1);
  CHECK(reply.problems(0).name() == "b");
  CHECK(reply.problems(0).state() == dpv1::ObjectProblem::REFUSED);
  CHECK_THAT(reply.problems(0).reason(), Catch::Contains("key 1 is not unique: port a holds it"));
  CHECK(m.generation() == 1);
  CHECK(m.model().ports_size() == 2);  // as programmed
  REQUIRE(m.inForce().ports.size() == 1);
  CHECK(m.inForce().ports[0].name == "a");
  // Status answers the same problems, and changes nothing.
  dpv1::ProgramRequest status;
  status.mutable_status();
  CHECK(m.apply(status).problems_size() == 1);
  fs->mutable_model()->mutable_ports(1)->set_key(2);
  fs->mutable_model()->mutable_ports(1)->set_mac("0a:58:0a:f4:01:09");
  fs->mutable_model()->mutable_ports(1)->set_ips(0, "10.244.1.9");
  fs->mutable_model()->mutable_ports(1)->set_representor("pf0vf9");
  fs->set_generation(2);
  reply = m.apply(r);
  CHECK(reply.status() == dpv1::OK);
  CHECK(reply.problems().empty());
  // The same full sync again changes nothing.
  fs->set_generation(3);
  CHECK(m.apply(r).status() == dpv1::OK);
  CHECK(m.history().back().added + m.history().back().changed + m.history().back().removed == 0);
  CHECK(m.dump()["generation"] == 3);
  CHECK(m.dump()["counts"]["refused"] == 1);
  // A Delta deleting what is not there needs a FullSync, as the engine says.
  dpv1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(3);
  d.mutable_delta()->set_generation(4);
  d.mutable_delta()->add_delete_ports("nope");
  CHECK(m.apply(d).status() == dpv1::RESYNC_NEEDED);
  CHECK(m.generation() == 3);
}

TEST_CASE("the fake dataplane holds port policies: refuses a bad one alone and records their changes") {
  FakeDataplaneModel m;
  ModelState state;
  addNode(state);
  dpv1::ProgramRequest r;
  auto* fs = r.mutable_full_sync();
  fs->set_generation(1);
  *fs->mutable_model() = state.snapshot();
  *fs->mutable_model()->add_ports() = port("a", 1);
  auto* pp = fs->mutable_model()->add_port_policies();
  pp->set_port("a");
  pp->mutable_ingress()->set_isolated(true);
  pp->mutable_ingress()->add_policies("x/deny-all");
  auto* orphan = fs->mutable_model()->add_port_policies();
  *orphan = *pp;
  orphan->set_port("gone");
  auto reply = m.apply(r);
  REQUIRE(reply.status() == dpv1::OK);
  REQUIRE(reply.problems_size() == 1);
  CHECK(reply.problems(0).kind() == dpv1::ObjectProblem::PORT_POLICY);
  CHECK(reply.problems(0).name() == "gone");
  CHECK_THAT(reply.problems(0).reason(), Catch::Contains("port gone is not in force"));
  REQUIRE(m.inForce().port_policies.size() == 1);
  CHECK(m.inForce().port_policies[0].port == "a");
  dpv1::ProgramRequest d;
  d.mutable_delta()->set_base_generation(1);
  d.mutable_delta()->set_generation(2);
  d.mutable_delta()->add_delete_port_policies("gone");
  auto* up = d.mutable_delta()->add_upsert_port_policies();
  *up = *pp;
  up->mutable_egress()->set_isolated(true);
  up->mutable_egress()->add_policies("x/deny-all");
  reply = m.apply(d);
  REQUIRE(reply.status() == dpv1::OK);
  CHECK(reply.problems().empty());
  CHECK(m.history().back().objects == std::vector<std::string>{"-port-policy:gone", "~port-policy:a"});
}

TEST_CASE("the client learns the dataplane's port capacity and which ports it could not open") {
  TempDir dir;
  const std::string sock = dir / "dp.sock";
  Server server(sock);
  server.with([](FakeDataplaneModel& m) {
    m.setPortCapacity(1, 32);
    return 0;
  });
  ModelState model;
  Histogram latency(Histogram::latencyBounds());
  addNode(model);
  model.upsertPort(port("att-1", 1));
  model.upsertPort(port("att-2", 2));
  DataplaneClient client(sock, "test", model, latency);
  std::atomic<uint32_t> told{0}, told_max{0};
  client.onPortCapacity([&](uint32_t capacity, uint32_t max) {
    told_max = max;
    told = capacity;
  });
  client.start();
  REQUIRE(eventually([&] { return client.status().programmed; }));
  CHECK(told.load() == 1);
  CHECK(told_max.load() == 32);
  CHECK(client.status().port_capacity == 1);
  CHECK(client.status().max_ethports == 32);
  CHECK(client.status().ports_unavailable == 1);  // att-2, beyond the capacity
  model.deletePort("att-2");
  REQUIRE(eventually([&] { return client.status().ports_unavailable == 0; }));
  client.stop();
}

TEST_CASE("a dataplane older than packed policy peers gets them as text, and the policy holds") {
  // The agent packs a rule's peers (PolicyRule.peers_v4, peers_v6). A
  // dataplane that does not read them would see a rule without peers, refuse
  // the PortPolicy and leave the pod open: it is sent the peers as text, in
  // the full sync and in every Delta. One that reads them gets them packed.
  dpv1::PortPolicy pp;
  pp.set_port("att-1");
  pp.set_pod("default/web");
  pp.mutable_ingress()->set_isolated(true);
  pp.mutable_ingress()->add_policies("default/allow-frontend");
  auto* rule = pp.mutable_ingress()->add_rules();
  rule->set_policy("default/allow-frontend");
  rule->set_protocol(6);
  rule->set_port_first(80);
  rule->set_port_last(80);
  dpu::model::packPolicyPeers({*dpu::IpPrefix::parse("10.244.2.7/32"), *dpu::IpPrefix::parse("fd00::7/128")}, *rule);
  auto peersInForce = [](FakeDataplaneModel& m) {
    std::vector<std::string> out;
    for (const auto& p : m.inForce().port_policies) {
      for (const auto& r : p.ingress.rules) {
        for (const auto& peer : r.peers) out.push_back(p.port + " " + peer.str());
      }
    }
    return out;
  };
  const std::vector<std::string> expected = {"att-1 10.244.2.7/32", "att-1 fd00::7/128"};
  for (bool packed : {false, true}) {
    DYNAMIC_SECTION((packed ? "a dataplane that reads packed peers" : "an older dataplane")) {
      TempDir dir;
      const std::string sock = dir / "dp.sock";
      Server server(sock);
      server.with([&](FakeDataplaneModel& m) {
        m.setPackedPeers(packed);
        return 0;
      });
      ModelState model;
      Histogram latency(Histogram::latencyBounds());
      addNode(model);
      model.upsertPort(port("att-1", 1));
      model.upsertPortPolicy(pp);
      DataplaneClient client(sock, "test", model, latency);
      client.start();
      REQUIRE(eventually([&] { return client.status().programmed; }));
      CHECK(client.status().packed_peers == packed);
      CHECK(server.with([](FakeDataplaneModel& m) { return m.problems().size(); }) == 0);
      CHECK(server.with(peersInForce) == expected);
      // What went over the wire: packed only to a dataplane that reads it.
      auto sent = server.with([](FakeDataplaneModel& m) { return m.model().port_policies(0).ingress().rules(0); });
      CHECK(sent.peers_v4().empty() == !packed);
      CHECK(sent.peers().empty() == packed);

      // A Delta: one more peer.
      dpv1::PortPolicy changed = pp;
      auto* r = changed.mutable_ingress()->mutable_rules(0);
      r->clear_peers_v4();
      r->clear_peers_v6();
      dpu::model::packPolicyPeers({*dpu::IpPrefix::parse("10.244.2.7/32"), *dpu::IpPrefix::parse("10.244.3.0/24")},
                                  *r);
      model.upsertPortPolicy(changed);
      const std::vector<std::string> after = {"att-1 10.244.2.7/32", "att-1 10.244.3.0/24"};
      REQUIRE(eventually([&] { return server.with(peersInForce) == after; }));
      CHECK(server.with([](FakeDataplaneModel& m) { return m.history().back().request; }) == "delta");
      CHECK(server.with([](FakeDataplaneModel& m) { return m.problems().size(); }) == 0);
      client.stop();
    }
  }
}

TEST_CASE("reconnecting: every 10 ms for 3 s after a dataplane went away, then backing off to 2 s") {
  using Clock = ReconnectBackoff::Clock;
  using std::chrono::milliseconds;
  const Clock::time_point t0{std::chrono::hours(1)};
  ReconnectBackoff backoff(t0, 7);
  // The agent starts: the dataplane may be starting too.
  CHECK(backoff.next(t0, t0 + milliseconds(1), false) == milliseconds(10));
  CHECK(backoff.next(t0, t0 + milliseconds(2999), false) == milliseconds(10));
  // No dataplane for 3 s: 100 ms doubling to 2 s, each with at most a quarter more.
  Clock::time_point now = t0 + std::chrono::seconds(3);
  std::vector<Clock::duration> waits;
  for (int i = 0; i < 7; ++i) waits.push_back(backoff.next(now, now + milliseconds(1), false));
  const int base[] = {100, 200, 400, 800, 1600, 2000, 2000};
  for (int i = 0; i < 7; ++i) {
    CHECK(waits[i] >= milliseconds(base[i]));
    CHECK(waits[i] <= milliseconds(base[i] + base[i] / 4));
  }
  // Connected for a moment, then the dataplane went away (killed): quick
  // again, for 3 s from then.
  now += std::chrono::seconds(60);
  CHECK(backoff.next(now, now + milliseconds(200), true) == milliseconds(10));
  CHECK(backoff.next(now, now + milliseconds(3100), false) == milliseconds(10));
  const auto slow = backoff.next(now, now + milliseconds(3300), false);
  CHECK(slow >= milliseconds(2000));  // the backoff kept its place: the sessions were short
  // A session that lasted over 5 s starts the backoff over at 100 ms.
  now += std::chrono::seconds(60);
  const auto after_long = backoff.next(now, now + std::chrono::seconds(6), false);
  CHECK(after_long >= milliseconds(100));
  CHECK(after_long <= milliseconds(125));
}

TEST_CASE("a dataplane that goes away is noticed at once and reconnected to when it is back") {
  TempDir dir;
  ModelState model;
  addNode(model);
  Histogram latency(Histogram::latencyBounds());
  DataplaneClient client(dir / "dp.sock", "test", model, latency);
  {
    Server server(dir / "dp.sock");
    client.start(0);
    REQUIRE(eventually([&] { return client.status().programmed; }));
  }
  // Gone (its socket with it): the client knows without waiting for a Status poll.
  CHECK(eventually([&] { return !client.status().connected; }));
  ::unlink((dir / "dp.sock").c_str());
  // Back after a while: the client is still trying often (not 100, 200, 400 ms apart) and programs it.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t tries = client.status().reconnects;
  CHECK(tries >= 10);
  Server again(dir / "dp.sock");
  REQUIRE(eventually([&] { return client.status().programmed; }));
  auto h = again.with([](auto& m) { return m.history(); });
  REQUIRE(h.size() >= 2);
  CHECK(h[0].request == "hello");
  CHECK(h[1].request == "full_sync");
  client.stop();
}

TEST_CASE("the client hands the Hello to IPsec before the full sync, and every reply's SA states after it") {
  TempDir dir;
  const std::string sock = dir / "dp.sock";
  Server server(sock);
  ModelState model;
  Histogram latency(Histogram::latencyBounds());
  addNode(model);
  DataplaneClient client(sock, "test", model, latency);
  std::mutex mu;
  std::vector<std::string> seen;
  // What onHello adds to the model is in the full sync that follows it.
  client.onHello([&](const dpv1::HelloReply& h) {
    std::lock_guard lock(mu);
    seen.push_back(std::string("hello ipsec=") + (h.ipsec() ? "1" : "0"));
    dpv1::IpsecSa a;
    a.set_name("x");
    model.setIpsecSas({{"x", a}});
  });
  client.onReply([&](const dpv1::ProgramReply& r) {
    std::lock_guard lock(mu);
    seen.push_back("reply " + std::to_string(r.ipsec_sas_size()));
  });
  client.start();
  REQUIRE(eventually([&] { return client.status().programmed; }));
  REQUIRE(eventually([&] {
    std::lock_guard lock(mu);
    return seen.size() >= 3;
  }));
  {
    std::lock_guard lock(mu);
    CHECK(seen[0] == "hello ipsec=1");
    CHECK(seen[1] == "reply 0");  // the Hello's own reply, after onHello
    CHECK(seen[2] == "reply 0");  // the full sync's: "x" is refused (no remote node), not installed
  }
  server.with([](FakeDataplaneModel& m) {
    CHECK(m.model().ipsec_sas_size() == 1);
    REQUIRE(m.problems().size() == 1);
    CHECK(m.problems()[0].kind() == dpv1::ObjectProblem::IPSEC_SA);
    return 0;
  });
  client.stop();
}
