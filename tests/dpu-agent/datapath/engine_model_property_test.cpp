// Property test of per-object refusals: random sequences of Deltas (and now
// and then a FullSync or a request that must be refused whole), valid and
// invalid objects mixed, sent to the real Engine and to the fake dataplane.
// After every request both answer alike (status, generation, the problems
// word for word, what is in force, the refusal count), the node stays
// programmed, and an oracle that knows which objects were made valid says
// which are in force: every valid object, never an invalid one.
//
// The oracle's rules are the contract's (dpu-agent/model/include/model/model.h),
// kept simple by the generator: an object is built valid (its own unique
// key, representor, MAC and addresses, or tunnel IP and subnet), with one
// defect of its own, or as a clash: a copy of one thing an object in force
// holds. A clash is refused while that holder stays; when the holder is
// deleted the clash gets what it asked for and is valid from then on. At
// most one clash per holder, and a holder is not changed while clashed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "fake_dataplane_model.h"

using namespace dpu;
namespace v1 = dpu::dataplane::v1;

namespace {

constexpr const char* kRouterMac = "0a:58:a9:fe:00:01";

v1::NodeSettings node() {
  v1::NodeSettings n;
  n.set_name("node1");
  n.set_tunnel_ip("192.168.100.1");
  n.set_underlay_mtu(1500);
  n.set_pod_mtu(1400);
  n.set_router_mac(kRouterMac);
  n.add_cluster_cidrs("10.244.0.0/16");
  return n;
}

v1::Subnet localSubnet() {
  v1::Subnet s;
  s.set_cidr("10.244.1.0/24");
  s.set_gateway_ip("10.244.1.1");
  s.set_datapath_key(10);
  return s;
}

std::string hex2(unsigned v) {
  char b[3];
  std::snprintf(b, sizeof b, "%02x", v & 0xff);
  return b;
}

// What the oracle knows of each object it made.
struct Tag {
  enum Kind { kValid, kDefect, kClash } kind = kValid;
  std::string holder;  // kClash: the object whose claim it copies
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  // A port whose claims are its own (resource number n).
  v1::LogicalPort port(const std::string& name, unsigned n) const {
    v1::LogicalPort p;
    p.set_name(name);
    p.set_key(n);
    p.set_kind(v1::POD);
    p.set_representor("pf0vf" + std::to_string(n));
    p.set_mac("0a:58:0a:f4:" + hex2(n >> 8) + ":" + hex2(n));
    p.add_ips("10.244.1." + std::to_string(2 + n % 250));
    p.set_datapath_key(10);
    return p;
  }
  v1::RemoteNode remote(const std::string& name, unsigned n) const {
    v1::RemoteNode r;
    r.set_name(name);
    r.set_tunnel_ip("192.168.101." + std::to_string(n));
    auto* s = r.add_subnets();
    s->set_cidr("10.244." + std::to_string(10 + n) + ".0/24");
    s->set_datapath_key(100 + n);
    auto* k = r.add_ports();
    k->set_ip("10.244." + std::to_string(10 + n) + ".5");
    k->set_key(1 + n);
    return r;
  }

  unsigned pick(unsigned n) { return std::uniform_int_distribution<unsigned>(0, n - 1)(rng_); }
  bool chance(unsigned percent) { return pick(100) < percent; }
  std::mt19937& rng() { return rng_; }

  // Addresses 10.244.1.2..251 are 250: a port's number cycles through them
  // and the generator never has two live ports on one number.
  std::optional<unsigned> freePortNumber() const {
    for (int tries = 0; tries < 250; ++tries) {
      const unsigned n = 1 + (next_port_ + tries) % 249;
      if (!port_numbers_.count(n)) return n;
    }
    return std::nullopt;
  }
  std::optional<unsigned> freeRemoteNumber() const {
    for (int tries = 0; tries < 200; ++tries) {
      const unsigned n = 1 + (next_remote_ + tries) % 200;
      if (!remote_numbers_.count(n)) return n;
    }
    return std::nullopt;
  }
  void usePort(unsigned n) {
    port_numbers_.insert(n);
    next_port_ = n + 1;
  }
  void freePort(unsigned n) { port_numbers_.erase(n); }
  void useRemote(unsigned n) {
    remote_numbers_.insert(n);
    next_remote_ = n + 1;
  }
  void freeRemote(unsigned n) { remote_numbers_.erase(n); }

 private:
  std::mt19937 rng_;
  std::set<unsigned> port_numbers_, remote_numbers_;
  unsigned next_port_ = 1, next_remote_ = 1;
};

struct Object {
  Tag tag;
  unsigned number = 0;           // its own resources (a clash owns its others too)
  std::vector<unsigned> numbers; // every resource number it may hold: its own, and a deleted holder's
  bool remote = false;
  v1::LogicalPort port;
  v1::RemoteNode node;
};

// One run: the requested model as the oracle keeps it, and both dataplanes.
class Run {
 public:
  explicit Run(uint32_t seed) : gen_(seed) {
    auto created = datapath::Engine::create(datapath::EngineConfig{});
    REQUIRE(created.ok());
    engine_ = std::move(*created);
    // The engine alone opens no ports: the fake dataplane must not run out of them either.
    fake_.setPortCapacity(1u << 20, 1u << 20);
  }

  void step(int i) {
    INFO("step " << i);
    v1::ProgramRequest req;
    const unsigned what = gen_.pick(100);
    bool whole_refusal = false;
    if (generation_ == 0 || what < 5) {
      mutate(nullptr);
      auto* fs = req.mutable_full_sync();
      fs->set_generation(++next_generation_);
      *fs->mutable_model()->mutable_node() = node();
      *fs->mutable_model()->add_local_subnets() = localSubnet();
      for (const auto& [name, o] : objects_) {
        if (o.remote) *fs->mutable_model()->add_remote_nodes() = o.node;
        else *fs->mutable_model()->add_ports() = o.port;
      }
      // The order of a request's fields never matters.
      std::shuffle(fs->mutable_model()->mutable_ports()->begin(), fs->mutable_model()->mutable_ports()->end(),
                   gen_.rng());
    } else if (what < 8) {
      // Node settings that make nothing work: refused whole, nothing changes.
      whole_refusal = true;
      auto* d = req.mutable_delta();
      d->set_base_generation(generation_);
      d->set_generation(next_generation_ + 1);
      *d->mutable_node() = node();
      d->mutable_node()->set_router_mac(gen_.chance(50) ? "" : "01:00:5e:00:00:01");
      auto p = gen_.port("doomed", 250);
      *d->add_upsert_ports() = p;
    } else {
      auto* d = req.mutable_delta();
      d->set_base_generation(generation_);
      d->set_generation(++next_generation_);
      mutate(d);
    }
    const auto engine_reply = engine_->program(req);
    const auto fake_reply = fake_.apply(req);
    INFO("engine: " << engine_reply.ShortDebugString());
    INFO("fake: " << fake_reply.ShortDebugString());
    REQUIRE(engine_reply.status() == fake_reply.status());
    REQUIRE(engine_reply.generation() == fake_reply.generation());
    REQUIRE(engine_reply.message() == fake_reply.message());
    REQUIRE(engine_reply.problems_size() == fake_reply.problems_size());
    for (int k = 0; k < engine_reply.problems_size(); ++k) {
      REQUIRE(engine_reply.problems(k).SerializeAsString() == fake_reply.problems(k).SerializeAsString());
    }
    if (whole_refusal) {
      REQUIRE(engine_reply.status() == v1::INVALID);
      REQUIRE(engine_reply.generation() == generation_);
    } else {
      // The node stays programmed: every request is taken.
      REQUIRE(engine_reply.status() == v1::OK);
      generation_ = engine_reply.generation();
      REQUIRE(generation_ == next_generation_);
      settle();
    }
    checkInForce(engine_reply);
  }

  uint64_t refusals() const { return refusals_seen_; }

 private:
  // Changes to the requested model, recorded in `d` (nullptr: a FullSync follows).
  void mutate(v1::Delta* d) {
    const unsigned n_ops = 1 + gen_.pick(4);
    std::set<std::string> touched;
    for (unsigned op = 0; op < n_ops; ++op) {
      const unsigned r = gen_.pick(100);
      if (r < 25) addPort(d, Tag::kValid, touched);
      else if (r < 35) addPort(d, Tag::kDefect, touched);
      else if (r < 45) addPort(d, Tag::kClash, touched);
      else if (r < 55) addRemote(d, Tag::kValid, touched);
      else if (r < 60) addRemote(d, Tag::kDefect, touched);
      else if (r < 65) addRemote(d, Tag::kClash, touched);
      else if (r < 75) changePort(d, touched);
      else remove(d, touched);
    }
  }

  std::string fresh(const char* prefix) {
    // Names in a random order relative to age, so "the lowest name wins" and
    // "the established object wins" do not coincide.
    return std::string(prefix) + hex2(gen_.pick(256)) + "-" + std::to_string(serial_++);
  }

  // An object in force that no clash copies yet and no op of this request touches.
  std::optional<std::string> holderFor(bool remote, const std::set<std::string>& touched) {
    std::vector<std::string> candidates;
    for (const auto& name : in_force_) {
      if (touched.count(name) || clashed_.count(name)) continue;  // a name deleted here is touched
      const Object& o = objects_.at(name);
      if (o.remote != remote) continue;
      candidates.push_back(name);
    }
    if (candidates.empty()) return std::nullopt;
    return candidates[gen_.pick(static_cast<unsigned>(candidates.size()))];
  }

  void addPort(v1::Delta* d, Tag::Kind kind, std::set<std::string>& touched) {
    auto n = gen_.freePortNumber();
    if (!n) return;
    Object o;
    o.tag.kind = kind;
    o.number = *n;
    o.numbers = {*n};
    const std::string name = fresh("p");
    o.port = gen_.port(name, *n);
    if (kind == Tag::kDefect) {
      switch (gen_.pick(7)) {
        case 0: o.port.set_mac(kRouterMac); break;
        case 1: o.port.set_mac("00:00:00:00:00:00"); break;
        case 2: o.port.set_mac("33:33:00:00:00:01"); break;
        case 3: o.port.set_key(40000); break;
        case 4: o.port.set_ips(0, "10.9.9.9"); break;
        case 5: o.port.set_datapath_key(77); break;
        default: o.port.set_representor(""); break;
      }
    } else if (kind == Tag::kClash) {
      auto holder = holderFor(false, touched);
      if (!holder) return;
      const auto& h = objects_.at(*holder).port;
      switch (gen_.pick(4)) {
        case 0: o.port.set_mac(h.mac()); break;
        case 1: o.port.set_ips(0, h.ips(0)); break;
        case 2: o.port.set_key(h.key()); break;
        default: o.port.set_representor(h.representor()); break;
      }
      o.tag.holder = *holder;
      clashed_.insert(*holder);
      touched.insert(*holder);
    }
    gen_.usePort(*n);
    touched.insert(name);
    if (d != nullptr) *d->add_upsert_ports() = o.port;
    objects_[name] = std::move(o);
  }

  void addRemote(v1::Delta* d, Tag::Kind kind, std::set<std::string>& touched) {
    auto n = gen_.freeRemoteNumber();
    if (!n) return;
    Object o;
    o.remote = true;
    o.tag.kind = kind;
    o.number = *n;
    o.numbers = {*n};
    const std::string name = fresh("n");
    o.node = gen_.remote(name, *n);
    if (kind == Tag::kDefect) {
      switch (gen_.pick(4)) {
        case 0: o.node.set_tunnel_ip("192.168.100.1"); break;  // ours
        case 1: o.node.mutable_subnets(0)->set_cidr("10.244.1.0/25"); o.node.clear_ports(); break;  // our subnet
        case 2: o.node.mutable_ports(0)->set_key(0); break;
        default: o.node.mutable_subnets(0)->set_datapath_key(1 << 24); break;
      }
    } else if (kind == Tag::kClash) {
      auto holder = holderFor(true, touched);
      if (!holder) return;
      const auto& h = objects_.at(*holder).node;
      if (gen_.chance(50)) {
        o.node.set_tunnel_ip(h.tunnel_ip());
      } else {
        *o.node.mutable_subnets(0) = h.subnets(0);
        o.node.mutable_subnets(0)->set_datapath_key(o.node.subnets(0).datapath_key() + 1);
        o.node.clear_ports();
      }
      o.tag.holder = *holder;
      clashed_.insert(*holder);
      touched.insert(*holder);
    }
    gen_.useRemote(*n);
    touched.insert(name);
    if (d != nullptr) *d->add_upsert_remote_nodes() = o.node;
    objects_[name] = std::move(o);
  }

  // A port changes content but none of its claims (an established port that
  // changes stays in force), or a port with a defect is fixed.
  void changePort(v1::Delta* d, std::set<std::string>& touched) {
    std::vector<std::string> names;
    for (const auto& [name, o] : objects_) {
      if (!o.remote && !touched.count(name) && !clashed_.count(name) && o.tag.kind != Tag::kClash) names.push_back(name);
    }
    if (names.empty()) return;
    const std::string name = names[gen_.pick(static_cast<unsigned>(names.size()))];
    Object& o = objects_.at(name);
    if (o.tag.kind == Tag::kDefect) {
      o.port = gen_.port(name, o.number);  // fixed: valid, its own claims
      o.tag.kind = Tag::kValid;
    } else {
      o.port.set_pf_index(o.port.pf_index() + 1);  // content only
    }
    touched.insert(name);
    if (d != nullptr) *d->add_upsert_ports() = o.port;
  }

  void remove(v1::Delta* d, std::set<std::string>& touched) {
    std::vector<std::string> names;
    for (const auto& [name, o] : objects_) {
      if (!touched.count(name)) names.push_back(name);
    }
    if (names.empty()) return;
    const std::string name = names[gen_.pick(static_cast<unsigned>(names.size()))];
    Object o = objects_.at(name);
    objects_.erase(name);
    touched.insert(name);
    if (o.tag.kind == Tag::kClash) clashed_.erase(o.tag.holder);
    // Its clash, if any, now holds the claim alone: valid from this request
    // on, and the resource numbers stay taken while it may hold one of them.
    Object* heir = nullptr;
    for (auto& [other_name, other] : objects_) {
      if (other.tag.kind == Tag::kClash && other.tag.holder == name) heir = &other;
    }
    if (heir != nullptr) {
      heir->tag = Tag{};
      heir->numbers.insert(heir->numbers.end(), o.numbers.begin(), o.numbers.end());
      clashed_.erase(name);
    } else {
      for (unsigned n : o.numbers) (o.remote ? gen_.freeRemote(n) : gen_.freePort(n));
    }
    if (d == nullptr) return;
    if (o.remote) d->add_delete_remote_nodes(name);
    else d->add_delete_ports(name);
  }

  // After an accepted request: what the oracle expects in force.
  void settle() {
    in_force_.clear();
    for (const auto& [name, o] : objects_) {
      if (o.tag.kind == Tag::kValid) in_force_.insert(name);
    }
  }

  void checkInForce(const v1::ProgramReply& reply) {
    std::set<std::string> expected_refused;
    for (const auto& [name, o] : objects_) {
      if (!in_force_.count(name)) expected_refused.insert(name);
    }
    std::set<std::string> refused;
    for (const auto& p : reply.problems()) {
      REQUIRE(p.state() == v1::ObjectProblem::REFUSED);
      refused.insert(p.name());
    }
    REQUIRE(refused == expected_refused);
    std::set<std::string> ports, peers, want_ports, want_peers;
    for (const auto& p : fake_.inForce().ports) ports.insert(p.name);
    for (const auto& r : fake_.inForce().remote_nodes) peers.insert(r.name);
    for (const auto& name : in_force_) (objects_.at(name).remote ? want_peers : want_ports).insert(name);
    REQUIRE(ports == want_ports);
    REQUIRE(peers == want_peers);
    // The engine has the same in force: the representors it wants opened and
    // the tunnel peers it wants resolved.
    std::set<std::string> reps, want_reps;
    for (const auto& r : engine_->wantedRepresentors()) reps.insert(r);
    for (const auto& name : want_ports) want_reps.insert(objects_.at(name).port.representor());
    REQUIRE(reps == want_reps);
    std::set<IpAddress> tips, want_tips;
    for (const auto& t : engine_->wantedTunnelPeers()) tips.insert(t);
    for (const auto& name : want_peers) want_tips.insert(*IpAddress::parse(objects_.at(name).node.tunnel_ip()));
    REQUIRE(tips == want_tips);
    // Both count each refusal once.
    v1::OperatorRequest stats;
    stats.mutable_stats();
    uint64_t engine_refused = 0;
    const auto counters = engine_->operate(stats);
    for (const auto& c : counters.counters()) {
      if (c.name() == "ObjectRefused") engine_refused = c.value();
    }
    REQUIRE(engine_refused == fake_.refusedCount());
    refusals_seen_ = engine_refused;
  }

  Generator gen_;
  std::unique_ptr<datapath::Engine> engine_;
  fakes::FakeDataplaneModel fake_;
  std::map<std::string, Object> objects_;
  std::set<std::string> clashed_;   // holders a clash copies
  std::set<std::string> in_force_;  // as the oracle expects after the last accepted request
  uint64_t generation_ = 0, next_generation_ = 0;
  unsigned serial_ = 0;
  uint64_t refusals_seen_ = 0;
};

}  // namespace

TEST_CASE("engine and fake: random delta sequences refuse the same objects and keep the rest in force",
          "[engine][property]") {
  for (uint32_t seed : {1u, 2u, 20261201u}) {
    INFO("seed " << seed);
    Run run(seed);
    for (int i = 0; i < 250; ++i) run.step(i);
    CHECK(run.refusals() > 30);  // the sequences did refuse things
  }
}

TEST_CASE("engine and fake: node addresses are in force alike, and a bad one refuses the request whole in both",
          "[engine][north-south]") {
  auto created = datapath::Engine::create(datapath::EngineConfig{});
  REQUIRE(created.ok());
  auto& engine = **created;
  fakes::FakeDataplaneModel fake;
  uint64_t generation = 0;
  auto sync = [&](const v1::NodeSettings& n) {
    v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(++generation);
    *req.mutable_full_sync()->mutable_model()->mutable_node() = n;
    *req.mutable_full_sync()->mutable_model()->add_local_subnets() = localSubnet();
    const auto real = engine.program(req);
    const auto faked = fake.apply(req);
    CHECK(real.status() == faked.status());
    CHECK(real.message() == faked.message());
    CHECK(real.generation() == faked.generation());
    return real;
  };
  v1::NodeSettings good = node();
  good.add_node_ips("172.18.0.1/24");
  good.add_node_gateways("172.18.0.254");
  REQUIRE(sync(good).status() == v1::OK);
  REQUIRE(fake.inForce().node_ips.size() == 1);
  CHECK(fake.inForce().node_ips[0].str() == "172.18.0.1/24");
  CHECK(engine.hostSteering().node_ips.at(0).str() == "172.18.0.1");
  for (const auto& [ip, gw] : std::vector<std::pair<std::string, std::string>>{
           {"172.18.0.0/24", ""}, {"10.244.3.3/24", ""}, {"172.18.0.1/24", "172.19.0.1"}, {"192.168.100.1/24", ""}}) {
    INFO(ip << " via " << gw);
    v1::NodeSettings bad = node();
    bad.add_node_ips(ip);
    if (!gw.empty()) bad.add_node_gateways(gw);
    const auto r = sync(bad);
    CHECK(r.status() == v1::INVALID);
    // Nothing changed: the node addresses in force are the good ones.
    CHECK(fake.inForce().node_ips.at(0).str() == "172.18.0.1/24");
    CHECK(engine.hostSteering().node_ips.at(0).str() == "172.18.0.1");
  }
}
