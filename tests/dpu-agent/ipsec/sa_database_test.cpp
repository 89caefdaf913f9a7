// The SA database of two nodes, driven step by step through the life of a
// pair: first start, first contact, the two-phase rotation (inbound first,
// publish after the dataplane installed it, switch outbound on the peer's
// first packet or after the grace period, retire the old epoch), sequence
// marks across agent and dataplane restarts, a PSK change, a peer whose key
// file was replaced, and damaged state files.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <memory>

#include "common/atomic_file.h"
#include "esp_test_util.h"
#include "ipsec/sa_database.h"
#include "overlay/esp.h"
#include "temp_dir.h"

using namespace dpu::ipsec;

namespace {

constexpr int64_t kSaGrace = 60'000;

struct SaTempDir : dpu::test::TempDir {
  SaTempDir() : dpu::test::TempDir("ipsec-sadb-test") { REQUIRE(!path.empty()); }
};

// One node: its database, and a dataplane that holds what it was given.
struct SaNode {
  std::string name, ip, dir;
  SaDbOptions options;
  std::unique_ptr<SaDatabase> db;
  std::map<std::string, SaSpec> installed;
  std::map<std::string, SaReport> counters;
  std::string instance = "dp-1";

  SaNode(std::string n, std::string i, const std::string& root)
      : name(std::move(n)), ip(std::move(i)), dir(root + "/" + name) {
    options.node_name = name;
    options.grace_ms = kSaGrace;
    options.sequence_reservation = 1000;
  }
  void start(int64_t now, const SecretBytes& psk = {}) {
    db = std::make_unique<SaDatabase>(options, dir);
    db->setPsk(psk, psk.empty() ? "" : "id-" + std::to_string(psk.size()) + std::to_string(psk[0]), now);
    auto r = db->start(now);
    if (!r) FAIL(r.error());
    db->setDataplane(true, instance, now);
  }
  // The dataplane takes what the database wants and reports what it holds.
  void program(int64_t now) {
    installed = db->desired();
    std::vector<SaReport> reports;
    for (const auto& [n, s] : installed) {
      SaReport r = counters[n];
      r.name = n;
      reports.push_back(r);
    }
    db->dataplaneReport(reports, now);
    if (db->desired() != installed) program(now);
  }
  // Publish whatever the database offers.
  std::optional<Advertisement> publish(int64_t now) {
    auto a = db->advertisement();
    if (a) db->advertisementPublished(a->epoch, now);
    return a;
  }
  PeerAdvert advert() const {
    auto a = db->advertisement();
    REQUIRE(a);
    PeerAdvert p;
    p.name = name;
    p.tunnel_ip = ip;
    p.epoch = a->epoch;
    auto raw = base64Decode(a->public_key);
    std::copy(raw->begin(), raw->end(), p.public_key.begin());
    return p;
  }
  const SaSpec* outboundTo(const std::string& peer) const {
    for (const auto& [n, s] : db->desired()) {
      if (s.peer == peer && s.direction == SaDirection::kOutbound) return &s;
    }
    return nullptr;
  }
  std::vector<const SaSpec*> inboundFrom(const std::string& peer) const {
    std::vector<const SaSpec*> out;
    for (const auto& [n, s] : db->desired()) {
      if (s.peer == peer && s.direction == SaDirection::kInbound) out.push_back(&s);
    }
    return out;
  }
  const SaSpec* inbound(const std::string& peer, uint32_t spi) const {
    for (const auto* s : inboundFrom(peer)) {
      if (s->spi == spi) return s;
    }
    return nullptr;
  }
};

// X's outbound SA to Y is one of Y's inbound SAs, with the same key and salt.
void checkPair(const SaNode& x, const SaNode& y) {
  const SaSpec* out = x.outboundTo(y.name);
  REQUIRE(out != nullptr);
  const SaSpec* in = y.inbound(x.name, out->spi);
  REQUIRE(in != nullptr);
  CHECK(in->key == out->key);
  CHECK(in->salt == out->salt);
  CHECK(in->local_epoch == out->remote_epoch);
  CHECK(in->remote_epoch == out->local_epoch);
  CHECK(in->peer_tunnel_ip == x.ip);
  CHECK(out->peer_tunnel_ip == y.ip);
}

// Two nodes that know each other, each on its epoch 1.
struct Pair {
  SaTempDir root;
  SaNode a{"node-a", "192.168.50.1", root.path};
  SaNode b{"node-b", "192.168.50.2", root.path};
  int64_t now = 1'000'000;

  void bringUp() {
    for (SaNode* n : {&a, &b}) {
      n->start(now);
      n->program(now);
      REQUIRE(n->publish(now));
    }
    a.db->upsertPeer(b.advert(), now);
    b.db->upsertPeer(a.advert(), now);
    a.program(now);
    b.program(now);
  }
};

}  // namespace

TEST_CASE("first start: a key pair, published once the dataplane holds the inbound SAs") {
  SaTempDir root;
  SaNode a("node-a", "192.168.50.1", root.path);
  a.db = std::make_unique<SaDatabase>(a.options, a.dir);
  REQUIRE(a.db->start(0));
  CHECK(a.db->status().pending_epoch == 1);
  CHECK(a.db->status().phase == RotationPhase::kInstalling);
  // A dataplane that does not install SAs never lets a key be published.
  a.db->setDataplane(false, "old-dataplane", 0);
  a.program(0);
  CHECK_FALSE(a.db->advertisement());
  CHECK_THAT(a.db->status().waiting_for, Catch::Contains("does not install IPsec SAs"));
  a.db->setDataplane(true, "dp-1", 0);
  a.program(0);
  auto adv = a.db->advertisement();
  REQUIRE(adv);
  CHECK(adv->epoch == 1);
  CHECK(a.db->status().phase == RotationPhase::kPublishing);
  a.db->advertisementPublished(1, 0);
  CHECK(a.db->status().current_epoch == 1);
  CHECK(a.db->status().phase == RotationPhase::kIdle);
  struct stat st {};
  REQUIRE(::stat(a.db->keyFilePath().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(a.db->stateFilePath().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("first contact: each node's outbound SA is the other's inbound SA") {
  Pair p;
  p.bringUp();
  checkPair(p.a, p.b);
  checkPair(p.b, p.a);
  CHECK(p.a.inboundFrom("node-b").size() == 1);
  const SaSpec* out = p.a.outboundTo("node-b");
  CHECK(out->initial_sequence == 1);
  CHECK(out->sequence_limit == 1000);
  CHECK(out->name == "node-b/out/" + [&] {
    char b[9];
    std::snprintf(b, sizeof b, "%08x", out->spi);
    return std::string(b);
  }());
  // Nothing secret in the state file: no key of any SA, no private key.
  const std::string state = *dpu::readFile(p.a.db->stateFilePath());
  CHECK(state.find(base64Encode(out->key)) == std::string::npos);
  CHECK(state.find(hex(out->key)) == std::string::npos);
}

TEST_CASE("rotation: inbound first, published after the dataplane holds it, outbound on the peer's first packet") {
  Pair p;
  p.bringUp();
  const SaSpec old_out = *p.a.outboundTo("node-b");
  p.a.db->requestRotation("operator", p.now);
  p.a.db->tick(p.now);
  // The current epoch was published just now: the rotation waits until every peer accepts it.
  CHECK(p.a.db->status().pending_epoch == 0);
  CHECK(p.a.db->status().rotation_deferred == "operator");
  p.now += kSaGrace;
  p.a.db->tick(p.now);
  CHECK(p.a.db->status().pending_epoch == 2);
  // Epoch 2's inbound SAs are wanted; the advertisement stays epoch 1 until the dataplane holds them.
  CHECK(p.a.inboundFrom("node-b").size() == 2);
  CHECK(p.a.db->advertisement()->epoch == 1);
  CHECK(p.a.outboundTo("node-b")->spi == old_out.spi);
  p.a.program(p.now);
  CHECK(p.a.db->advertisement()->epoch == 2);
  for (const auto* s : p.a.inboundFrom("node-b")) CHECK(p.a.installed.count(s->name));
  p.a.publish(p.now);
  CHECK(p.a.db->status().phase == RotationPhase::kGrace);
  CHECK(p.a.db->status().previous_epoch == 1);
  // A still sends with epoch 1: B may not have learned epoch 2 yet.
  CHECK(p.a.outboundTo("node-b")->spi == old_out.spi);
  checkPair(p.a, p.b);

  // B learns epoch 2 and sends with it at once (A installed it before publishing).
  p.b.db->upsertPeer(p.a.advert(), p.now + 10);
  p.b.program(p.now + 10);
  CHECK(p.b.outboundTo("node-a")->remote_epoch == 2);
  checkPair(p.b, p.a);
  CHECK(p.b.inboundFrom("node-a").size() == 2);  // A's epoch 1 and 2

  // B's first packet on epoch 2 arrives: A switches its outbound to epoch 2.
  const std::string used = p.b.outboundTo("node-a")->spi ? p.a.inbound("node-b", p.b.outboundTo("node-a")->spi)->name : "";
  p.a.counters[used].first_packet = true;
  p.a.counters[used].packets = 1;
  p.a.program(p.now + 20);
  CHECK(p.a.outboundTo("node-b")->local_epoch == 2);
  checkPair(p.a, p.b);
  // The old epoch's inbound SA stays until the grace period ends, then goes with its private key.
  p.a.db->tick(p.now + kSaGrace - 1);
  CHECK(p.a.inboundFrom("node-b").size() == 2);
  p.a.db->tick(p.now + kSaGrace);
  CHECK(p.a.inboundFrom("node-b").size() == 1);
  CHECK(p.a.db->status().previous_epoch == 0);
  const std::string keys = *dpu::readFile(p.a.db->keyFilePath());
  CHECK(keys.find("\"epoch\": 1,") == std::string::npos);
  CHECK(keys.find("\"epoch\": 2,") != std::string::npos);
  // B drops A's epoch 1 after it saw A send with 2, and the grace.
  auto& b_counters = p.b.counters[p.b.inbound("node-a", p.a.outboundTo("node-b")->spi)->name];
  b_counters.first_packet = true;
  p.b.program(p.now + kSaGrace);
  p.b.db->tick(p.now + 2 * kSaGrace);
  CHECK(p.b.inboundFrom("node-a").size() == 1);
  checkPair(p.a, p.b);
  checkPair(p.b, p.a);
}

TEST_CASE("rotation: with no traffic back, the outbound switches when the grace period ends") {
  Pair p;
  p.bringUp();
  p.now += kSaGrace;
  p.a.db->requestRotation("operator", p.now);
  p.a.db->tick(p.now);
  p.a.program(p.now);
  p.a.publish(p.now);
  p.b.db->upsertPeer(p.a.advert(), p.now + 5);
  p.b.program(p.now + 5);
  CHECK(p.a.outboundTo("node-b")->local_epoch == 1);
  p.a.db->tick(p.now + kSaGrace);
  CHECK(p.a.outboundTo("node-b")->local_epoch == 2);
  checkPair(p.a, p.b);
}

TEST_CASE("sequence marks: written ahead of use, moved on when half is used, above them after a restart") {
  Pair p;
  p.bringUp();
  const std::string out = p.a.outboundTo("node-b")->name;
  // The dataplane used 600 of 1000: the mark moves to 1600 before the limit does.
  p.a.counters[out].highest_sequence = 600;
  p.a.program(p.now);
  CHECK(p.a.outboundTo("node-b")->sequence_limit == 1600);
  CHECK(dpu::readFile(p.a.db->stateFilePath())->find("\"reserved\": \"1600\"") != std::string::npos);

  // The agent restarts, the dataplane did not: the same SAs, nothing changes.
  const auto before = p.a.db->desired();
  p.a.start(p.now);
  p.a.db->upsertPeer(p.b.advert(), p.now);
  CHECK(p.a.db->desired() == before);

  // The dataplane restarts: the outbound SA starts above everything it may have sent.
  p.a.instance = "dp-2";
  p.a.db->setDataplane(true, p.a.instance, p.now);
  CHECK(p.a.outboundTo("node-b")->initial_sequence == 1601);
  CHECK(p.a.outboundTo("node-b")->sequence_limit == 2600);
  // The inbound SA's replay window starts above what was reported seen.
  const std::string in = p.a.inboundFrom("node-b")[0]->name;
  p.a.counters[in].highest_sequence = 42;
  p.a.program(p.now);
  p.a.db->tick(p.now + 20'000);  // the lazy write of "highest seen"
  p.a.instance = "dp-3";
  p.a.db->setDataplane(true, p.a.instance, p.now + 20'000);
  CHECK(p.a.inboundFrom("node-b")[0]->initial_sequence == 43);
  // ... and an agent restarted along with it (a DPU reboot) does the same from the file.
  p.a.instance = "dp-4";
  p.a.start(p.now + 30'000);
  p.a.db->upsertPeer(p.b.advert(), p.now + 30'000);
  CHECK(p.a.inboundFrom("node-b")[0]->initial_sequence == 43);
  CHECK(p.a.outboundTo("node-b")->initial_sequence == 3601);
  checkPair(p.a, p.b);
}

// The numbers the database gives a restarted dataplane, on real ESP SAs:
// the peer's receiver (ESN, RFC 4303 Appendix A2.2) infers the new high half
// from its window and authenticates the first packet. Both sides of the
// mark's move: just before it (the new start half a reservation above what
// was seen) and just after (a whole reservation above). A jump of 2^32 or
// more (the 2^40 reservation this replaced) fails every ICV.
TEST_CASE("sequence marks: after a dataplane restart the peer's ESN receiver follows the new start") {
  for (const bool after_move : {false, true}) {
    INFO((after_move ? "just after the mark moved" : "just before the mark moves"));
    Pair p;
    for (SaNode* n : {&p.a, &p.b}) n->options.sequence_reservation = SaDbOptions{}.sequence_reservation;
    p.bringUp();
    const SaSpec out = *p.a.outboundTo("node-b");
    const SaSpec* in = p.b.inbound("node-a", out.spi);
    REQUIRE(in != nullptr);
    auto config = [](const SaSpec& s) {
      dpu::overlay::EspSaConfig c;
      c.spi = s.spi;
      c.key.assign(s.key.begin(), s.key.end());
      std::copy(s.salt.begin(), s.salt.end(), c.salt.begin());
      c.esn = true;
      c.initial_sequence = s.initial_sequence;
      if (s.replay_window != 0) c.replay_window = s.replay_window;
      return c;
    };
    auto sender = dpu::overlay::EspOutboundSa::create(config(out));
    auto receiver = dpu::overlay::EspInboundSa::create(config(*in));
    REQUIRE(sender.ok());
    REQUIRE(receiver.ok());
    auto deliver = [&](dpu::overlay::EspOutboundSa& tx) {
      dpu::test::TestPacket pkt(dpu::test::ipv4Udp(40));
      REQUIRE(tx.encrypt(pkt.buf) == dpu::overlay::Status::kOk);
      return receiver->decrypt(pkt.buf);
    };
    REQUIRE(deliver(*sender) == dpu::overlay::Status::kOk);
    // The dataplane sent up to H (the receiver saw it, in steps it can
    // follow, as it sees every packet) and reported it.
    const uint64_t reservation = SaDbOptions{}.sequence_reservation;
    const uint64_t h = after_move ? reservation / 2 : reservation / 2 - 1;
    while (sender->lastSequence() + (uint64_t{1} << 30) < h) {
      sender->advanceTo(sender->lastSequence() + (uint64_t{1} << 30));
      REQUIRE(deliver(*sender) == dpu::overlay::Status::kOk);
    }
    sender->advanceTo(h - 1);
    REQUIRE(deliver(*sender) == dpu::overlay::Status::kOk);
    REQUIRE(sender->lastSequence() == h);
    p.a.counters[out.name].highest_sequence = h;
    p.a.program(p.now);
    CHECK(p.a.outboundTo("node-b")->sequence_limit == (after_move ? h + reservation : reservation));
    // kill -9: a new instance, the SA offered again above its mark.
    p.a.instance = "dp-2";
    p.a.db->setDataplane(true, p.a.instance, p.now);
    const SaSpec* again = p.a.outboundTo("node-b");
    REQUIRE(again != nullptr);
    CHECK(again->initial_sequence > h);
    CHECK(again->initial_sequence - h < (uint64_t{1} << 32) - in->replay_window);
    auto restarted = dpu::overlay::EspOutboundSa::create(config(*again));
    REQUIRE(restarted.ok());
    CHECK(deliver(*restarted) == dpu::overlay::Status::kOk);
    CHECK(deliver(*restarted) == dpu::overlay::Status::kOk);
  }
}

TEST_CASE("sequence soft limit and byte soft limit start a rotation") {
  Pair p;
  p.a.options.esn_soft_limit = 500;
  p.a.options.byte_soft_limit = 1 << 20;
  p.bringUp();
  p.now += kSaGrace;
  const std::string out = p.a.outboundTo("node-b")->name;
  p.a.counters[out].highest_sequence = 499;
  p.a.program(p.now);
  p.a.db->tick(p.now);
  CHECK(p.a.db->status().pending_epoch == 0);
  p.a.counters[out].highest_sequence = 500;
  p.a.program(p.now);
  p.a.db->tick(p.now);
  CHECK(p.a.db->status().pending_epoch == 2);
  CHECK(p.a.db->status().rotations_started == 1);
}

TEST_CASE("a new PSK derives every SA anew and starts a rotation; a node without it derives other keys") {
  Pair p;
  const SecretBytes psk(32, 7), other(32, 9);
  for (SaNode* n : {&p.a, &p.b}) {
    n->start(p.now, psk);
    n->program(p.now);
    n->publish(p.now);
  }
  p.a.db->upsertPeer(p.b.advert(), p.now);
  p.b.db->upsertPeer(p.a.advert(), p.now);
  p.a.program(p.now);
  p.b.program(p.now);
  checkPair(p.a, p.b);
  const SaSpec before = *p.a.outboundTo("node-b");
  p.a.db->setPsk(other, "other", p.now);
  CHECK(p.a.outboundTo("node-b")->key != before.key);
  CHECK(p.b.inbound("node-a", p.a.outboundTo("node-b")->spi) == nullptr);  // B cannot receive it
  CHECK(p.a.db->status().rotation_deferred == "new PSK");
  // A restart with yet another PSK (changed while stopped) asks for a rotation too.
  p.now += kSaGrace;
  p.a.start(p.now, SecretBytes(48, 3));
  p.a.db->tick(p.now);
  CHECK(p.a.db->status().pending_epoch != 0);
}

TEST_CASE("a peer whose key file was replaced (a new key, epoch not above) is taken as a new node") {
  Pair p;
  p.bringUp();
  const SaSpec before = *p.a.outboundTo("node-b");
  std::filesystem::remove_all(p.b.dir);
  p.b.start(p.now);
  p.b.program(p.now);
  p.b.publish(p.now);
  const PeerAdvert reset = p.b.advert();
  CHECK(reset.epoch == 1);
  p.a.db->upsertPeer(reset, p.now);
  p.b.db->upsertPeer(p.a.advert(), p.now);
  p.a.program(p.now);
  p.b.program(p.now);
  CHECK(p.a.outboundTo("node-b")->key != before.key);
  CHECK(p.a.inboundFrom("node-b").size() == 1);
  checkPair(p.a, p.b);
  checkPair(p.b, p.a);
}

TEST_CASE("damaged state: a missing state file with keys starts a new epoch; a bad key file stops the start") {
  Pair p;
  p.bringUp();
  std::filesystem::remove(p.a.db->stateFilePath());
  p.a.db = std::make_unique<SaDatabase>(p.a.options, p.a.dir);
  REQUIRE(p.a.db->start(p.now));
  CHECK(p.a.db->status().pending_epoch == 2);  // epoch 1's marks are gone: its keys are not used again
  CHECK_THAT(p.a.db->status().last_error, Catch::Contains("were dropped"));
  CHECK(dpu::readFile(p.a.db->keyFilePath())->find("\"epoch\": 1,") == std::string::npos);

  REQUIRE(dpu::writeFileAtomic(p.a.db->stateFilePath(), "{not json", 0600));
  p.a.db = std::make_unique<SaDatabase>(p.a.options, p.a.dir);
  REQUIRE(p.a.db->start(p.now));
  CHECK(dpu::fileExists(p.a.db->stateFilePath() + ".corrupt"));
  CHECK(p.a.db->status().pending_epoch == 3);

  ::chmod(p.a.db->keyFilePath().c_str(), 0644);
  p.a.db = std::make_unique<SaDatabase>(p.a.options, p.a.dir);
  auto r = p.a.db->start(p.now);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("chmod 600"));
}

TEST_CASE("a peer with an unusable public key gets no SA and says why") {
  Pair p;
  p.bringUp();
  PeerAdvert bad;
  bad.name = "node-c";
  bad.tunnel_ip = "192.168.50.3";
  bad.epoch = 1;  // all-zero public key: a low-order point
  p.a.db->upsertPeer(bad, p.now);
  CHECK(p.a.inboundFrom("node-c").empty());
  CHECK(p.a.outboundTo("node-c") == nullptr);
  bool found = false;
  for (const auto& ps : p.a.db->status().peers) {
    if (ps.name == "node-c") {
      found = true;
      CHECK_THAT(ps.problem, Catch::Contains("low-order"));
    }
  }
  CHECK(found);
  checkPair(p.a, p.b);
  p.a.db->removePeer("node-c", p.now);
  CHECK(p.a.db->status().peers.size() == 1);
}

TEST_CASE("a key published while a newly learned peer's SA was still on its way is current all the same") {
  Pair p;
  p.bringUp();
  p.now += kSaGrace;
  p.a.db->requestRotation("operator", p.now);
  p.a.db->tick(p.now);
  p.a.program(p.now);
  auto offered = p.a.db->advertisement();
  REQUIRE(offered);
  REQUIRE(offered->epoch == 2);
  // node-c appears between the offer and the publication: epoch 2 waits for its SA again...
  SaNode c("node-c", "192.168.50.3", p.root.path);
  c.start(p.now);
  c.program(p.now);
  c.publish(p.now);
  p.a.db->upsertPeer(c.advert(), p.now);
  CHECK(p.a.db->status().phase == RotationPhase::kInstalling);
  // ... but the key went out: it is the current epoch, and its grace runs.
  p.a.db->advertisementPublished(2, p.now);
  CHECK(p.a.db->status().current_epoch == 2);
  CHECK(p.a.db->status().previous_epoch == 1);
  p.a.program(p.now);
  CHECK(p.a.inboundFrom("node-c").size() == 2);
}
