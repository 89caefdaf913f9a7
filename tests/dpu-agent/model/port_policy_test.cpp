// PortPolicy in the logical model: validation object by object (a refusal
// names the field and what to fix, the other policies stay in force), the
// Delta arithmetic, and the dataplane's fast matcher (model/policy_match.h)
// held equal to the compiler's dpu::policy::evaluate on random rule sets.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "model/model.h"
#include "model/policy_match.h"
#include "policy/rules.h"

using namespace dpu;
using namespace dpu::model;
using dpv1::ObjectProblem;

namespace {

dpv1::LogicalModel baseModel() {
  dpv1::LogicalModel m;
  auto* n = m.mutable_node();
  n->set_name("node1");
  n->set_tunnel_ip("192.168.100.1");
  n->set_pod_mtu(1400);
  n->set_router_mac("0a:58:a9:fe:00:01");
  auto* s4 = m.add_local_subnets();
  s4->set_cidr("10.244.1.0/24");
  s4->set_gateway_ip("10.244.1.1");
  s4->set_datapath_key(10);
  int key = 1;
  for (const char* name : {"pod-a", "pod-b", "pod-c"}) {
    auto* p = m.add_ports();
    p->set_name(name);
    p->set_key(key);
    p->set_kind(dpv1::POD);
    p->set_representor("pf0vf" + std::to_string(key));
    p->set_mac("0a:58:0a:f4:01:0" + std::to_string(key + 4));
    p->add_ips("10.244.1." + std::to_string(key + 4));
    p->set_datapath_key(10);
    ++key;
  }
  return m;
}

dpv1::PortPolicy* addPolicy(dpv1::LogicalModel& m, const std::string& port) {
  auto* pp = m.add_port_policies();
  pp->set_port(port);
  pp->set_pod("x/" + port);
  auto* in = pp->mutable_ingress();
  in->set_isolated(true);
  in->add_policies("x/deny-all");
  auto* r = in->add_rules();
  r->add_peers("10.244.2.0/24");
  r->set_protocol(6);
  r->set_port_first(80);
  r->set_port_last(81);
  r->set_policy("x/allow-web");
  return pp;
}

Verdict check(const dpv1::LogicalModel& m, const Model* previous = nullptr) {
  auto v = validate(m, previous);
  INFO((v.ok() ? std::string() : v.error()));
  REQUIRE(v.ok());
  return std::move(*v);
}

std::string reasonFor(const Verdict& v, const std::string& port) {
  for (const auto& p : v.problems) {
    if (p.kind() == ObjectProblem::PORT_POLICY && p.name() == port) return p.reason();
  }
  return "";
}

}  // namespace

TEST_CASE("port policy: a valid one is in force with its rules", "[model][policy]") {
  auto m = baseModel();
  addPolicy(m, "pod-b");
  addPolicy(m, "pod-a")->mutable_egress()->set_isolated(false);
  const Verdict v = check(m);
  for (const auto& p : v.problems) CHECK(p.name() + ": " + p.reason() == "");
  REQUIRE(v.model.port_policies.size() == 2);
  const ModelPortPolicy& a = v.model.port_policies[0];
  CHECK(a.port == "pod-a");
  CHECK(a.pod == "x/pod-a");
  CHECK(a.ingress.isolated);
  CHECK(a.ingress.policies == std::vector<std::string>{"x/deny-all"});
  REQUIRE(a.ingress.rules.size() == 1);
  CHECK(a.ingress.rules[0].protocol == 6);
  CHECK(a.ingress.rules[0].port_first == 80);
  CHECK(a.ingress.rules[0].port_last == 81);
  CHECK(a.ingress.rules[0].peers[0].str() == "10.244.2.0/24");
  CHECK(a.ingress.rules[0].policy == "x/allow-web");
  CHECK_FALSE(a.egress.isolated);
  CHECK(v.model.port_policies[1].port == "pod-b");
}

TEST_CASE("port policy: peers sent packed are the same peers as text", "[model][policy]") {
  // The agent packs peers (PolicyRule.peers_v4, peers_v6); text and packed
  // may mix, and both give the rule's peers in order: text, IPv4, IPv6.
  const std::vector<IpPrefix> packed = {*IpPrefix::parse("10.128.0.2/32"), *IpPrefix::parse("fd00::/64"),
                                        *IpPrefix::parse("0.0.0.0/0"), *IpPrefix::parse("::/0"),
                                        *IpPrefix::parse("fd00::7/128")};
  auto m = baseModel();
  auto* rule = addPolicy(m, "pod-a")->mutable_ingress()->mutable_rules(0);
  packPolicyPeers(packed, *rule);
  CHECK(rule->peers_v4().size() == 2 * 5);
  CHECK(rule->peers_v6().size() == 3 * 17);
  const Verdict v = check(m);
  REQUIRE(v.problems.empty());
  std::vector<std::string> got;
  for (const auto& p : v.model.port_policies[0].ingress.rules[0].peers) got.push_back(p.str());
  CHECK(got == std::vector<std::string>{"10.244.2.0/24", "10.128.0.2/32", "0.0.0.0/0", "fd00::/64", "::/0",
                                        "fd00::7/128"});
  // Packed alone is a rule with peers.
  rule->clear_peers();
  CHECK(check(m).problems.empty());
  // As the operator reads them: text.
  dpv1::PolicyRule shown = *rule;
  unpackPolicyPeers(shown);
  CHECK(shown.peers_v4().empty());
  CHECK(shown.peers_v6().empty());
  CHECK(std::vector<std::string>(shown.peers().begin(), shown.peers().end()) ==
        std::vector<std::string>{"10.128.0.2/32", "0.0.0.0/0", "fd00::/64", "::/0", "fd00::7/128"});
}

TEST_CASE("port policy: a bad one is refused naming the field, the others stay in force", "[model][policy]") {
  struct Case {
    const char* what;
    std::function<void(dpv1::PortPolicy&)> spoil;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"bad prefix", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_peers(0, "10.244.2.0/33"); },
       "ingress.rules[0].peers \"10.244.2.0/33\""},
      {"host bits", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_peers(0, "10.244.2.1/24"); },
       "ingress.rules[0].peers \"10.244.2.1/24\""},
      {"no peers", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->clear_peers(); },
       "ingress.rules[0].peers is empty"},
      {"packed v4 length", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_peers_v4(std::string("\x0a\xf4\x02\x00\x21", 5)); },
       "ingress.rules[0].peers_v4[0] 10.244.2.0/33: the length is above 32"},
      {"packed v4 host bits", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_peers_v4(std::string("\x0a\xf4\x02\x00\x18\x0a\xf4\x02\x01\x18", 10)); },
       "ingress.rules[0].peers_v4[1] 10.244.2.1/24 has host bits set (did you mean 10.244.2.0/24?)"},
      {"packed v4 size", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_peers_v4(std::string("\x0a\xf4\x02\x00", 4)); },
       "ingress.rules[0].peers_v4 holds 4 bytes, not a whole number of 5-byte records"},
      {"packed v6 host bits", [](dpv1::PortPolicy& p) {
         std::string r(17, '\0');
         r[0] = '\xfd';
         r[15] = 1;
         r[16] = 64;
         p.mutable_ingress()->mutable_rules(0)->set_peers_v6(r);
       },
       "ingress.rules[0].peers_v6[0] fd00::1/64 has host bits set (did you mean fd00::/64?)"},
      {"protocol", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_protocol(47); },
       "ingress.rules[0].protocol 47 is not one NetworkPolicy names"},
      {"port order", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_port_first(90); },
       "ingress.rules[0] ports 90-81 are not a range"},
      {"port too big", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->set_port_last(65536); },
       "ingress.rules[0] ports 80-65536 are not a range"},
      {"rule policy", [](dpv1::PortPolicy& p) { p.mutable_ingress()->mutable_rules(0)->clear_policy(); },
       "ingress.rules[0].policy is empty"},
      {"direction policy", [](dpv1::PortPolicy& p) { p.mutable_ingress()->set_policies(0, ""); },
       "ingress.policies[0] is empty"},
      {"isolated without policy", [](dpv1::PortPolicy& p) { p.mutable_ingress()->clear_policies(); },
       "ingress is isolated but names no policy"},
      {"rules while open", [](dpv1::PortPolicy& p) { *p.mutable_egress()->add_rules() = p.ingress().rules(0); },
       "egress is not isolated but has 1 rules"},
      {"port not in force", [](dpv1::PortPolicy& p) { p.set_port("pod-z"); },
       "port pod-z is not in force: the model has no such port"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto m = baseModel();
    addPolicy(m, "pod-a");
    auto* bad = addPolicy(m, "pod-b");
    c.spoil(*bad);
    const Verdict v = check(m);
    REQUIRE(v.problems.size() == 1);
    CHECK(v.problems[0].kind() == ObjectProblem::PORT_POLICY);
    CHECK(v.problems[0].state() == ObjectProblem::REFUSED);
    CHECK_THAT(v.problems[0].reason(), Catch::Contains(c.reason));
    if (bad->port() == "pod-z") {  // no port to protect
      REQUIRE(v.model.port_policies.size() == 1);
      CHECK(v.model.port_policies[0].port == "pod-a");
      continue;
    }
    // A port in force whose policy cannot be read fails closed: both ways
    // isolated, no rule, named as refused.
    REQUIRE(v.model.port_policies.size() == 2);
    CHECK(v.model.port_policies[0].port == "pod-a");
    const auto& closed = v.model.port_policies[1];
    CHECK(closed.port == "pod-b");
    for (const auto* d : {&closed.ingress, &closed.egress}) {
      CHECK(d->isolated);
      CHECK(d->rules.empty());
      CHECK(d->policies == std::vector<std::string>{model::kRefusedPortPolicyName});
    }
    CHECK(closed.content != bad->SerializeAsString());
  }
  SECTION("a policy of a refused port names the port's refusal") {
    auto m = baseModel();
    m.mutable_ports(1)->set_key(0);
    addPolicy(m, "pod-b");
    const Verdict v = check(m);
    CHECK_THAT(reasonFor(v, "pod-b"), Catch::Contains("port pod-b is not in force (refused: key 0"));
    CHECK(v.model.port_policies.empty());
  }
  SECTION("sane protocols pass: any, ICMP, ICMPv6, UDP, SCTP") {
    for (uint32_t proto : {0u, 1u, 17u, 58u, 132u}) {
      auto m = baseModel();
      addPolicy(m, "pod-a")->mutable_ingress()->mutable_rules(0)->set_protocol(proto);
      CHECK(check(m).problems.empty());
    }
  }
}

TEST_CASE("port policy: an empty or repeated port refuses the request whole", "[model][policy]") {
  auto m = baseModel();
  addPolicy(m, "");
  auto r = validate(m, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == ErrorCode::kInvalid);
  CHECK_THAT(r.error(), Catch::Contains("a port policy has an empty port"));
  m = baseModel();
  addPolicy(m, "pod-a");
  addPolicy(m, "pod-a");
  r = validate(m, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("port pod-a has two port policies"));
}

TEST_CASE("port policy: Deltas upsert and delete by port; deleting the unknown needs a FullSync", "[model][policy]") {
  auto base = baseModel();
  addPolicy(base, "pod-a");
  dpv1::Delta d;
  auto* up = d.add_upsert_port_policies();
  *up = base.port_policies(0);
  up->mutable_ingress()->mutable_rules(0)->set_port_last(8080);
  *d.add_upsert_port_policies() = base.port_policies(0);
  d.mutable_upsert_port_policies(1)->set_port("pod-b");
  auto next = applyDelta(base, d);
  REQUIRE(next.ok());
  REQUIRE(next->port_policies_size() == 2);
  CHECK(next->port_policies(0).ingress().rules(0).port_last() == 8080);
  CHECK(next->port_policies(1).port() == "pod-b");
  dpv1::Delta del;
  del.add_delete_port_policies("pod-a");
  auto after = applyDelta(*next, del);
  REQUIRE(after.ok());
  REQUIRE(after->port_policies_size() == 1);
  CHECK(after->port_policies(0).port() == "pod-b");
  auto again = applyDelta(*after, del);
  REQUIRE_FALSE(again.ok());
  CHECK(again.code() == ErrorCode::kNotFound);
  CHECK_THAT(again.error(), Catch::Contains("pod-a"));
}

TEST_CASE("port policy: the fast matcher decides as dpu::policy::evaluate on random rule sets", "[model][policy]") {
  std::mt19937_64 rng(20261204);
  auto pick = [&rng](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  // Addresses drawn from a small space, so prefixes nest, overlap and repeat.
  auto address = [&](bool v6) {
    IpAddress a;
    a.family = v6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
    a.bytes = {};
    a.bytes[0] = 10;
    a.bytes[1] = static_cast<uint8_t>(pick(3));
    a.bytes[2] = static_cast<uint8_t>(pick(4));
    a.bytes[3] = static_cast<uint8_t>(pick(4) * 64 + pick(64));
    if (v6) a.bytes[15] = static_cast<uint8_t>(pick(256));
    return a;
  };
  auto prefix = [&](bool v6) {
    if (pick(10) == 0) return *IpPrefix::parse(v6 ? "::/0" : "0.0.0.0/0");
    const uint8_t lengths4[] = {8, 16, 20, 24, 26, 30, 32};
    const uint8_t lengths6[] = {8, 64, 120, 128};
    const uint8_t len = v6 ? lengths6[pick(4)] : lengths4[pick(7)];
    return *IpPrefix::parse(address(v6).str() + "/" + std::to_string(len), true);
  };
  const uint8_t protocols[] = {0, 1, 6, 17, 132};
  // Rounds 0-299: a few rules, ranges that nest and overlap. 300-339: 400
  // rules, most on a port of their own (a policy per port: the matcher's port
  // index). 340-359: 400 wide, overlapping ranges (too many group references
  // to index: the matcher scans that protocol's groups).
  for (int round = 0; round < 360; ++round) {
    const bool many = round >= 300, wide = round >= 340;
    policy::DirectionRules reference;
    ModelPolicyDirection direction;
    reference.isolated = direction.isolated = many || pick(8) != 0;
    const uint32_t rules = !reference.isolated ? 0 : many ? 400 : pick(12);
    for (uint32_t i = 0; i < rules; ++i) {
      policy::AllowRule r;
      r.protocol = many && pick(50) != 0 ? protocols[2 + pick(3)] : protocols[pick(5)];
      r.port_first = static_cast<uint16_t>(pick(many && !wide ? 150 : 100));
      r.port_last = static_cast<uint16_t>(r.port_first + (wide   ? pick(120)
                                                          : many ? (pick(10) == 0 ? pick(40) : 0)
                                                                 : pick(3) * pick(40)));
      r.policy = "ns/p" + std::to_string(pick(5));
      for (uint32_t k = 0, n = 1 + pick(3); k < n; ++k) r.peers.push_back(prefix(pick(4) == 0));
      ModelPolicyRule mr;
      mr.peers = r.peers;
      mr.protocol = r.protocol;
      mr.port_first = r.port_first;
      mr.port_last = r.port_last;
      mr.policy = r.policy;
      reference.rules.push_back(r);
      direction.rules.push_back(mr);
    }
    const PolicyMatcher matcher(direction);
    for (int probe = 0; probe < 200; ++probe) {
      const IpAddress peer = address(pick(4) == 0);
      const uint8_t proto = protocols[pick(5)];
      const uint16_t port = static_cast<uint16_t>(pick(150));
      const bool want = policy::evaluate(reference, peer, proto, port);
      const int got = matcher.match(peer, proto, port);
      INFO(policy::describe(reference) << "peer " << peer.str() << " proto " << int(proto) << " port " << port);
      REQUIRE(want == (got != PolicyMatcher::kDenied));
      if (!reference.isolated) {
        CHECK(got == PolicyMatcher::kNotIsolated);
        continue;
      }
      if (!want) continue;
      // The rule named is the first one allowing it.
      int first = -1;
      for (size_t i = 0; i < reference.rules.size() && first < 0; ++i) {
        policy::DirectionRules one{true, {}, {reference.rules[i]}};
        if (policy::evaluate(one, peer, proto, port)) first = static_cast<int>(i);
      }
      CHECK(got == first);
    }
  }
}
