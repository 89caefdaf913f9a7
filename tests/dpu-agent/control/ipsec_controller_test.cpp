// dpu-agent's IPsec controller between its neighbours, in one process: two
// nodes, each with its Agent, its model and a fake dataplane that validates
// and installs IpsecSa objects like the real one must. The SAs reach the
// dataplanes as model objects (A's outbound SA is B's inbound SA), a key is
// offered for publication only once the dataplane holds its inbound SAs (and
// never by a dataplane without IPsec), a rotation goes through its phases,
// unusable advertisements are refused and counted, and nothing the operator
// sees (metrics, the fake's dump) holds a key.
#include <catch2/catch.hpp>

#include "control/agent.h"
#include "control/ipsec_controller.h"
#include "control_test_util.h"
#include "fake_dataplane_model.h"
#include "common/atomic_file.h"
#include "ipsec/crypto.h"

using namespace dpu::control;
using dpu::control::testing::baseConfig;
using dpu::control::testing::TempDir;
using dpu::fakes::FakeDataplaneModel;

namespace {

struct Node {
  TempDir dir;
  AgentConfig config;
  ModelState model;
  std::unique_ptr<Agent> agent;
  std::unique_ptr<IpsecController> ipsec;
  std::unique_ptr<ClusterTee> tee;
  FakeDataplaneModel dataplane;
  uint64_t generation = 0;
  int64_t& now;

  Node(const std::string& name, const std::string& tip, const std::string& cidr, int64_t& clock,
       const std::string& mode = "keys", bool rollout = false)
      : now(clock) {
    doc = baseConfig(dir.path());
    doc["nodeName"] = name;
    doc["tunnelIP"] = tip;
    doc["podCIDR"] = cidr;
    restart(mode, rollout);
  }
  // A new agent process (Agent and controller) over the same state directory
  // and model, with the dataplane still running.
  void restart(const std::string& mode, bool rollout = false) {
    tee.reset();
    ipsec.reset();
    agent.reset();
    doc["ipsec"] = {{"mode", mode}, {"gracePeriodSeconds", 5}, {"rotationPeriodSeconds", 0}, {"rollout", rollout}};
    auto c = parseAgentConfig(doc);
    REQUIRE(c);
    config = *c;
    agent = std::make_unique<Agent>(config, model, false);
    REQUIRE(agent->restore());
    ipsec = std::make_unique<IpsecController>(config, model, [this] { return now; });
    auto started = ipsec->start();
    if (!started) FAIL(started.error());
    tee = std::make_unique<ClusterTee>(*agent, *ipsec);
  }
  nlohmann::json doc;

  // The dataplane connection: Hello, then a full sync of the model; every
  // reply goes to the controller, as the DataplaneClient does.
  void connect() {
    dpv1::ProgramRequest hello;
    hello.mutable_hello()->set_agent_id("test");
    auto r = dataplane.apply(hello);
    ipsec->dataplaneHello(r.hello());
    ipsec->dataplaneReply(r);
    sync();
  }
  void sync() {
    for (int round = 0; round < 5; ++round) {
      dpv1::ProgramRequest req;
      *req.mutable_full_sync()->mutable_model() = model.snapshotAndClear();
      req.mutable_full_sync()->set_generation(++generation);
      auto r = dataplane.apply(req);
      REQUIRE(r.status() == dpv1::OK);
      ipsec->dataplaneReply(r);
      if (!model.hasPending()) return;
    }
  }
  // Publish what the controller offers; the others learn it through their tee.
  NodeInfo publish() {
    NodeInfo n;
    n.name = config.node_name;
    n.tunnel_ip = config.tunnel_ip.str();
    n.pod_cidrs = {config.pod_cidrs[0].str()};
    if (auto a = ipsec->advertisement()) {
      n.ipsec_public_key = a->public_key;
      n.ipsec_epoch = a->epoch;
      n.ipsec_mode = a->mode;
      ipsec->published(a->epoch, a->mode);
    }
    return n;
  }
  const dpu::model::ModelIpsecSa* sa(const std::string& peer, dpv1::IpsecDirection dir, uint32_t spi = 0) const {
    for (const auto& s : dataplane.inForce().ipsec_sas) {
      if (s.remote_node == peer && s.direction == dir && (spi == 0 || s.spi == spi)) return &s;
    }
    return nullptr;
  }
  // What the dataplane holds: whether it encrypts, and whether the plaintext
  // of `peer` is accepted (its inbound SAs say so).
  bool encrypts() const { return dataplane.model().node().ipsec(); }
  bool plaintextAccepted(const std::string& peer) const {
    bool any = false, accepted = false;
    for (const auto& s : dataplane.inForce().ipsec_sas) {
      if (s.remote_node != peer || s.direction != dpv1::INBOUND) continue;
      any = true;
      accepted = accepted || s.plaintext_accepted;
    }
    REQUIRE(any);
    return accepted;
  }
};

// Both publish (each once its dataplane holds its SAs) and learn the other.
void meet(Node& a, Node& b) {
  const NodeInfo na = a.publish(), nb = b.publish();
  REQUIRE(na.ipsec_epoch != 0);
  REQUIRE(nb.ipsec_epoch != 0);
  a.tee->nodeUpserted(nb);
  b.tee->nodeUpserted(na);
  a.sync();
  b.sync();
}

// Both connected to their dataplanes, then met.
void connectAndMeet(Node& a, Node& b) {
  a.connect();
  b.connect();
  meet(a, b);
}

std::string metrics(const Node& n) {
  PromWriter w;
  n.ipsec->writeMetrics(w);
  return w.text();
}

// The DataplaneClient's status poll (the acknowledgement and the rotation
// state out, the reply in), then what `dpuctl ipsec` shows of the rotation.
dpv1::IpsecRotationState pollAndShow(Node& n) {
  dpv1::ProgramRequest req;
  n.ipsec->statusPoll(*req.mutable_status());
  const auto reply = n.dataplane.apply(req);
  REQUIRE(reply.status() == dpv1::OK);
  n.ipsec->dataplaneReply(reply);
  dpv1::IpsecInfo info;
  n.dataplane.describeIpsec(info);
  REQUIRE(info.has_rotation());
  return info.rotation();
}

}  // namespace

TEST_CASE("IPsec controller: the SAs reach both dataplanes, each outbound SA the other's inbound SA") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  CHECK_FALSE(a.ipsec->advertisement());  // nothing before the dataplane said it holds the SAs
  a.connect();
  b.connect();
  REQUIRE(a.ipsec->advertisement());
  CHECK(a.ipsec->advertisement()->epoch == 1);
  const NodeInfo na = a.publish(), nb = b.publish();
  a.tee->nodeUpserted(nb);
  b.tee->nodeUpserted(na);
  a.sync();
  b.sync();
  CHECK(a.dataplane.problems().empty());
  CHECK(b.dataplane.problems().empty());
  for (auto [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const auto* out = x->sa(y->config.node_name, dpv1::OUTBOUND);
    REQUIRE(out != nullptr);
    const auto* in = y->sa(x->config.node_name, dpv1::INBOUND, out->spi);
    REQUIRE(in != nullptr);
    CHECK(in->key == out->key);
    CHECK(in->salt == out->salt);
    CHECK(out->peer_tunnel_ip == y->config.tunnel_ip);
    CHECK(in->peer_tunnel_ip == x->config.tunnel_ip);
    CHECK(out->algorithm == dpv1::AES_128_GCM);
    CHECK(out->initial_sequence == 1);
    CHECK(out->sequence_limit >= 1);
  }
  // What the operator sees names SAs and epochs, never a key.
  const std::string text = metrics(a);
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_epoch{state=\"current\"} 1"));
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_sas{direction=\"outbound\"} 1"));
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_peer_epoch{node=\"node-b\",epoch=\"advertised\"} 1"));
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_rotation_phase{phase=\"idle\"} 1"));
  const auto& key = a.sa("node-b", dpv1::OUTBOUND)->key;
  const std::vector<uint8_t> kb(key.begin(), key.end());
  for (const std::string& secret : {dpu::ipsec::hex(kb), dpu::ipsec::base64Encode(kb)}) {
    CHECK(text.find(secret) == std::string::npos);
    CHECK(a.dataplane.dump().dump().find(secret) == std::string::npos);
  }
}

TEST_CASE("IPsec controller: a rotation installs, then publishes, then switches, then retires") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  connectAndMeet(a, b);
  now += 5'000;
  a.ipsec->requestRotation("test");
  a.ipsec->tick();
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kInstalling);
  CHECK(a.ipsec->advertisement()->epoch == 1);
  CHECK_THAT(metrics(a), Catch::Contains("dpu_agent_ipsec_rotation_phase{phase=\"installing\"} 1"));
  {
    // The dataplane learns the phase on the next status poll, for dpuctl ipsec.
    const auto shown = pollAndShow(a);
    CHECK(shown.phase() == "installing");
    CHECK(shown.current_epoch() == 1);
    CHECK(shown.next_epoch() == 2);
    CHECK_THAT(shown.waiting_for(), Catch::Contains("inbound SAs of epoch 2"));
    CHECK(shown.rotations_started() == 1);
    REQUIRE(shown.peers_size() == 1);
    CHECK(shown.peers(0).node() == "node-b");
    CHECK(shown.peers(0).sending_epoch() == 1);
  }
  a.sync();  // the dataplane holds epoch 2's inbound SA now
  CHECK(a.ipsec->advertisement()->epoch == 2);
  b.tee->nodeUpserted(a.publish());
  b.sync();
  // B sends with A's new epoch at once; A still sends with epoch 1.
  REQUIRE(b.sa("node-a", dpv1::OUTBOUND) != nullptr);
  REQUIRE(a.sa("node-b", dpv1::OUTBOUND) != nullptr);
  CHECK(b.sa("node-a", dpv1::OUTBOUND)->remote_epoch == 2);
  CHECK(a.sa("node-b", dpv1::OUTBOUND)->local_epoch == 1);
  // B's first packet on it arrives at A: A switches.
  const auto* used = a.sa("node-b", dpv1::INBOUND, b.sa("node-a", dpv1::OUTBOUND)->spi);
  REQUIRE(used != nullptr);
  REQUIRE(a.dataplane.transfer(used->name, 1));
  a.sync();
  REQUIRE(a.sa("node-b", dpv1::OUTBOUND) != nullptr);
  CHECK(a.sa("node-b", dpv1::OUTBOUND)->local_epoch == 2);
  CHECK(b.sa("node-a", dpv1::INBOUND, a.sa("node-b", dpv1::OUTBOUND)->spi) != nullptr);
  CHECK(a.dataplane.inForce().ipsec_sas.size() == 3);  // in 1/1, in 2/1, out 2/1
  {
    const auto shown = pollAndShow(a);
    CHECK(shown.phase() == "grace");
    CHECK(shown.current_epoch() == 2);
    CHECK(shown.previous_epoch() == 1);
    CHECK(shown.previous_accepted_for_ms() > 0);
    CHECK(shown.previous_accepted_for_ms() <= 5'000);  // the configured grace period
    REQUIRE(shown.peers_size() == 1);
    CHECK(shown.peers(0).sending_epoch() == 2);
    CHECK(shown.peers(0).inbound_sas() == 2);
  }
  now += 5'000;
  a.ipsec->tick();
  a.sync();
  CHECK(a.dataplane.inForce().ipsec_sas.size() == 2);
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kIdle);
  CHECK(a.ipsec->status().rotations_started == 1);
  const auto shown = pollAndShow(a);
  CHECK(shown.phase() == "idle");
  CHECK(shown.current_epoch() == 2);
  CHECK(shown.previous_epoch() == 0);
  CHECK(shown.peers(0).inbound_sas() == 1);
}

TEST_CASE("IPsec controller: dpuctl ipsec rotate reaches it through the dataplane, once; restarts take it again never") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  connectAndMeet(a, b);
  now += 5'000;
  // The DataplaneClient's status poll: the acknowledgement out, the reply in.
  auto poll = [&](Node& n) {
    pollAndShow(n);
    n.ipsec->tick();
  };
  poll(a);
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kIdle);
  REQUIRE(a.dataplane.requestRotation());
  REQUIRE(a.dataplane.requestRotation());  // twice before the agent looks: one rotation
  poll(a);
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kInstalling);
  CHECK(a.ipsec->status().rotations_started == 1);
  CHECK(a.ipsec->rotationsTaken() == 2);
  poll(a);  // carries the acknowledgement
  CHECK(a.dataplane.rotationsTaken() == 2);
  // The rotation runs to its end (as in the test above); nothing else starts.
  a.sync();
  b.tee->nodeUpserted(a.publish());
  b.sync();
  REQUIRE(a.dataplane.transfer(a.sa("node-b", dpv1::INBOUND, b.sa("node-a", dpv1::OUTBOUND)->spi)->name, 1));
  a.sync();
  now += 5'000;
  poll(a);
  a.sync();
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kIdle);
  CHECK(a.ipsec->status().rotations_started == 1);
  CHECK(a.ipsec->status().rotation_deferred.empty());
  // A restarted agent reads the dataplane's acknowledgement on its Hello: no rotation.
  a.restart("keys");
  a.connect();
  const uint64_t started = a.ipsec->status().rotations_started;  // as the state file keeps it
  poll(a);
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kIdle);
  CHECK(a.ipsec->status().rotations_started == started);
  CHECK(a.ipsec->rotationsTaken() == 2);
  // A restarted dataplane counts from zero: its first request is taken.
  a.dataplane.wipe();
  a.connect();
  CHECK(a.ipsec->rotationsTaken() == 0);
  REQUIRE(a.dataplane.requestRotation());
  poll(a);
  CHECK(a.ipsec->status().phase == dpu::ipsec::RotationPhase::kInstalling);
  CHECK(a.ipsec->status().rotations_started == started + 1);
  // No SA: the dataplane refuses, naming why.
  FakeDataplaneModel bare;
  auto refused = bare.requestRotation();
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("holds no IPsec SA"));
}

TEST_CASE("IPsec controller: a dataplane without IPsec never gets a key published") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now);
  a.dataplane.setIpsec(false);
  a.connect();
  CHECK_FALSE(a.ipsec->advertisement());
  CHECK_THAT(a.ipsec->status().waiting_for, Catch::Contains("does not install IPsec SAs"));
  CHECK_THAT(metrics(a), Catch::Contains("dpu_agent_ipsec_dataplane_support 0"));
  // The real dataplane, once it installs SAs, gets it published.
  a.dataplane.setIpsec(true);
  a.connect();
  CHECK(a.ipsec->advertisement());
}

TEST_CASE("IPsec controller: unusable advertisements are refused and counted, the node's traffic is not touched") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now);
  a.connect();
  NodeInfo bad;
  bad.name = "node-c";
  bad.tunnel_ip = "192.168.50.3";
  bad.pod_cidrs = {"10.244.3.0/24"};
  bad.ipsec_public_key = "not base64!";
  bad.ipsec_epoch = 3;
  a.tee->nodeUpserted(bad);
  bad.name = "node-d";
  bad.tunnel_ip = "192.168.50.4";
  bad.pod_cidrs = {"10.244.4.0/24"};
  bad.ipsec_public_key = dpu::ipsec::base64Encode(std::vector<uint8_t>(32, 0));  // a low-order point
  a.tee->nodeUpserted(bad);
  bad.name = "node-e";
  bad.tunnel_ip = "192.168.50.5";
  bad.pod_cidrs = {"10.244.5.0/24"};
  bad.ipsec_public_key = dpu::ipsec::base64Encode(std::vector<uint8_t>(32, 9));
  bad.ipsec_epoch = 0;
  a.tee->nodeUpserted(bad);
  a.sync();
  const std::string text = metrics(a);
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_peer_problem{node=\"node-c\"} 1"));
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_peer_problem{node=\"node-d\"} 1"));
  CHECK_THAT(text, Catch::Contains("dpu_agent_ipsec_peer_problem{node=\"node-e\"} 1"));
  CHECK(a.dataplane.inForce().ipsec_sas.empty());
  CHECK(a.dataplane.inForce().remote_nodes.size() == 3);  // plain routing to them is unaffected
  // A node that publishes nothing is simply not an IPsec peer (yet).
  NodeInfo plain;
  plain.name = "node-c";
  plain.tunnel_ip = "192.168.50.3";
  plain.pod_cidrs = {"10.244.3.0/24"};
  a.tee->nodeUpserted(plain);
  CHECK(metrics(a).find("node=\"node-c\"") == std::string::npos);
}

TEST_CASE("IPsec controller: restarted with the dataplane still running, it programs exactly the same SAs") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  connectAndMeet(a, b);
  const NodeInfo nb = b.publish();
  const auto before = a.dataplane.model();
  // A new agent process: new model, controller and Agent over the same state directory.
  ModelState model;
  Agent agent(a.config, model, false);
  REQUIRE(agent.restore());
  IpsecController again(a.config, model, [&] { return now; });
  REQUIRE(again.start());
  ClusterTee tee(agent, again);
  tee.nodeUpserted(nb);
  tee.synced();
  dpv1::ProgramRequest hello;
  hello.mutable_hello();
  auto h = a.dataplane.apply(hello);
  again.dataplaneHello(h.hello());
  again.dataplaneReply(h);
  dpv1::ProgramRequest full;
  *full.mutable_full_sync()->mutable_model() = model.snapshotAndClear();
  full.mutable_full_sync()->set_generation(100);
  REQUIRE(a.dataplane.apply(full).status() == dpv1::OK);
  CHECK(a.dataplane.history().back().objects.empty());  // the resync changed nothing
  CHECK(a.dataplane.model().ipsec_sas_size() == before.ipsec_sas_size());
}

TEST_CASE("IPsec rollout: a node on refuses plaintext only from peers that advertise on, with rollout: true") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now, "on", true), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  a.connect();
  b.connect();
  // "on" is advertised once the dataplane was programmed to encrypt.
  REQUIRE(a.ipsec->advertisement());
  CHECK(a.ipsec->advertisement()->mode == "on");
  CHECK(b.ipsec->advertisement()->mode == "keys");
  meet(a, b);
  CHECK(a.encrypts());
  CHECK_FALSE(b.encrypts());
  CHECK(a.plaintextAccepted("node-b"));  // b advertises keys: it still sends plaintext
  CHECK(b.plaintextAccepted("node-a"));  // b does not encrypt: it refuses nothing
  CHECK(a.sa("node-b", dpv1::OUTBOUND) != nullptr);  // a sends ESP, which b accepts
  CHECK(b.sa("node-a", dpv1::INBOUND, a.sa("node-b", dpv1::OUTBOUND)->spi) != nullptr);
  CHECK_THAT(metrics(a), Catch::Contains("dpu_agent_ipsec_peer_plaintext_accepted{node=\"node-b\",mode=\"keys\"} 1"));
  const std::string in_name = a.sa("node-b", dpv1::INBOUND)->name;

  // b turns on (an agent restart): it advertises "keys" until its dataplane
  // encrypts, then "on"; a then refuses b's plaintext, on the same SA.
  b.restart("on", true);
  b.tee->nodeUpserted(a.publish());
  b.connect();
  CHECK(b.encrypts());
  REQUIRE(b.ipsec->advertisement());
  CHECK(b.ipsec->advertisement()->mode == "on");
  a.tee->nodeUpserted(b.publish());
  a.sync();
  CHECK_FALSE(a.plaintextAccepted("node-b"));
  CHECK(a.sa("node-b", dpv1::INBOUND)->name == in_name);
  CHECK_FALSE(b.plaintextAccepted("node-a"));  // a advertises on too
  CHECK(a.dataplane.problems().empty());
}

TEST_CASE("IPsec rollout: without rollout, mode on refuses every IPsec peer's plaintext (fail closed)") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now, "on"), b("node-b", "192.168.50.2", "10.244.2.0/24", now);
  connectAndMeet(a, b);
  CHECK_FALSE(a.plaintextAccepted("node-b"));
  // A peer advertising a mode neither keys nor on is taken as encrypting.
  NodeInfo nb = b.publish();
  nb.ipsec_mode = "strict";
  Node c("node-c", "192.168.50.3", "10.244.3.0/24", now, "on", true);
  c.connect();
  c.tee->nodeUpserted(nb);
  c.sync();
  CHECK_FALSE(c.plaintextAccepted("node-b"));
}

TEST_CASE("IPsec rollout: leaving mode on advertises keys, encrypts for the grace period after, then sends plaintext") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now, "on", true), b("node-b", "192.168.50.2", "10.244.2.0/24", now,
                                                                          "on", true);
  connectAndMeet(a, b);
  CHECK_FALSE(b.plaintextAccepted("node-a"));
  // a goes back to keys: it keeps encrypting, and advertises keys.
  a.restart("keys");
  a.tee->nodeUpserted(b.publish());
  a.connect();
  CHECK(a.ipsec->encrypting());
  CHECK(a.encrypts());
  REQUIRE(a.ipsec->advertisement());
  CHECK(a.ipsec->advertisement()->mode == "keys");
  CHECK(a.plaintextAccepted("node-b"));
  now += 1'000;
  b.tee->nodeUpserted(a.publish());  // "keys" is out: the grace period starts
  b.sync();
  CHECK(b.plaintextAccepted("node-a"));
  now += 4'000;
  a.ipsec->tick();
  a.sync();
  CHECK(a.encrypts());  // 4 s of 5
  // A restart in the middle keeps the deadline.
  a.restart("keys");
  a.tee->nodeUpserted(b.publish());
  a.connect();
  CHECK(a.encrypts());
  now += 999;
  a.ipsec->tick();
  a.sync();
  CHECK(a.encrypts());
  now += 1;
  a.ipsec->tick();
  a.sync();
  CHECK_FALSE(a.encrypts());
  CHECK_FALSE(a.ipsec->encrypting());
  CHECK_THAT(metrics(a), Catch::Contains("dpu_agent_ipsec_encrypting 0"));
  // And after another restart it stays plaintext.
  a.restart("keys");
  a.tee->nodeUpserted(b.publish());
  a.connect();
  CHECK_FALSE(a.encrypts());
}

TEST_CASE("IPsec rollout: a malformed mode file stops the start with a message naming it") {
  int64_t now = 1'700'000'000'000;
  Node a("node-a", "192.168.50.1", "10.244.1.0/24", now);
  REQUIRE(dpu::writeFileAtomic(a.config.ipsec.state_dir + "/mode.json", "{\"encrypting\": 3}"));
  IpsecController again(a.config, a.model, [&] { return now; });
  auto r = again.start();
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("mode.json"));
  CHECK_THAT(r.error(), Catch::Contains("encrypting"));
  // What the message says to write is accepted: the node leaves mode on with a grace period.
  REQUIRE(dpu::writeFileAtomic(a.config.ipsec.state_dir + "/mode.json",
                               "{\"version\": 1, \"encrypting\": true, \"plaintextAtMs\": 0, \"confirmed\": \"x\"}"));
  IpsecController fixed(a.config, a.model, [&] { return now; });
  REQUIRE(fixed.start());
  CHECK(fixed.encrypting());
}
