// The logical model's rules (dpu-agent/model): what refuses a request whole,
// what refuses one object and leaves the rest in force, how conflicts between
// objects are settled (established objects keep their claims, then the lowest
// name; never the order of the request), and the Delta arithmetic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <set>

#include "model/model.h"

using namespace dpu;
using namespace dpu::model;
using dpv1::ObjectProblem;

namespace {

dpv1::LogicalPort* addPort(dpv1::LogicalModel& m, const std::string& name, uint32_t key, const std::string& rep,
                           const std::string& mac, std::vector<std::string> ips,
                           dpv1::PortKind kind = dpv1::POD) {
  auto* p = m.add_ports();
  p->set_name(name);
  p->set_key(key);
  p->set_kind(kind);
  p->set_representor(rep);
  p->set_mac(mac);
  for (const auto& ip : ips) p->add_ips(ip);
  p->set_datapath_key(10);
  return p;
}

dpv1::RemoteNode* addRemote(dpv1::LogicalModel& m, const std::string& name, const std::string& tip,
                            const std::string& cidr, uint32_t key) {
  auto* r = m.add_remote_nodes();
  r->set_name(name);
  r->set_tunnel_ip(tip);
  auto* s = r->add_subnets();
  s->set_cidr(cidr);
  s->set_datapath_key(key);
  return r;
}

dpv1::LogicalModel baseModel() {
  dpv1::LogicalModel m;
  auto* n = m.mutable_node();
  n->set_name("node1");
  n->set_tunnel_ip("192.168.100.1");
  n->set_underlay_mtu(1500);
  n->set_pod_mtu(1400);
  n->set_router_mac("0a:58:a9:fe:00:01");
  n->add_cluster_cidrs("10.244.0.0/16");
  auto* s4 = m.add_local_subnets();
  s4->set_cidr("10.244.1.0/24");
  s4->set_gateway_ip("10.244.1.1");
  s4->set_datapath_key(10);
  auto* s6 = m.add_local_subnets();
  s6->set_cidr("fd00:10:244:1::/64");
  s6->set_gateway_ip("fd00:10:244:1::1");
  s6->set_datapath_key(10);
  addPort(m, "pod-a", 1, "pf0vf0", "0a:58:0a:f4:01:05", {"10.244.1.5", "fd00:10:244:1::5"});
  addPort(m, "pod-b", 2, "pf0vf1", "0a:58:0a:f4:01:06", {"10.244.1.6"});
  addPort(m, "mgmt", 3, "pf0hpf", "0a:58:0a:f4:01:02", {"10.244.1.2"}, dpv1::MANAGEMENT);
  auto* r = addRemote(m, "node2", "192.168.100.2", "10.244.2.0/24", 20);
  auto* k = r->add_ports();
  k->set_ip("10.244.2.7");
  k->set_key(4);
  return m;
}

std::vector<std::string> names(const Model& m) {
  std::vector<std::string> out;
  for (const auto& s : m.local_subnets) out.push_back("subnet:" + s.cidr);
  for (const auto& p : m.ports) out.push_back("port:" + p.name);
  for (const auto& r : m.remote_nodes) out.push_back("remote:" + r.name);
  return out;
}

// "port pod-a: reason" for each problem.
std::vector<std::string> problems(const Verdict& v) {
  std::vector<std::string> out;
  for (const auto& p : v.problems) {
    CHECK(p.state() == ObjectProblem::REFUSED);
    out.push_back(kindName(p.kind()) + " " + p.name() + ": " + p.reason());
  }
  return out;
}

Verdict check(const dpv1::LogicalModel& m, const Model* previous = nullptr) {
  auto v = validate(m, previous);
  INFO((v.ok() ? std::string() : v.error()));
  REQUIRE(v.ok());
  return std::move(*v);
}

}  // namespace

TEST_CASE("model: a valid model is in force whole, sorted by name, with nothing refused", "[model]") {
  Verdict v = check(baseModel());
  CHECK(v.problems.empty());
  CHECK(names(v.model) == std::vector<std::string>{"subnet:10.244.1.0/24", "subnet:fd00:10:244:1::/64", "port:mgmt",
                                                   "port:pod-a", "port:pod-b", "remote:node2"});
  CHECK(v.model.programmed);
  CHECK(v.model.router_mac.str() == "0a:58:a9:fe:00:01");
  REQUIRE(v.model.remote_nodes[0].port_keys.size() == 1);
  CHECK(v.model.remote_nodes[0].port_keys[0].ip.str() == "10.244.2.7");
  CHECK(v.model.remote_nodes[0].port_keys[0].key == 4);
}

TEST_CASE("model: unusable node settings and objects without an identity refuse the request whole", "[model]") {
  struct Case {
    const char* what;
    std::function<void(dpv1::LogicalModel&)> mutate;
  };
  const std::vector<Case> cases = {
      {"node.router_mac", [](auto& m) { m.mutable_node()->set_router_mac("zz"); }},
      {"node.router_mac 01:00:5e:00:00:01 must be a unicast",
       [](auto& m) { m.mutable_node()->set_router_mac("01:00:5e:00:00:01"); }},
      {"node.tunnel_ip is empty", [](auto& m) { m.mutable_node()->set_tunnel_ip(""); }},
      {"node.tunnel_ip \"x\"", [](auto& m) { m.mutable_node()->set_tunnel_ip("x"); }},
      {"node.pod_mtu 100", [](auto& m) { m.mutable_node()->set_pod_mtu(100); }},
      {"node.underlay_mtu 70000", [](auto& m) { m.mutable_node()->set_underlay_mtu(70000); }},
      {"node.cluster_cidrs", [](auto& m) { m.mutable_node()->add_cluster_cidrs("10.0.0.1/8"); }},
      {"node.service_cidrs", [](auto& m) { m.mutable_node()->add_service_cidrs("nope"); }},
      {"duplicate port name", [](auto& m) { m.mutable_ports(1)->set_name("pod-a"); }},
      {"a port has an empty name", [](auto& m) { m.mutable_ports(1)->set_name(""); }},
      {"duplicate cidr", [](auto& m) { *m.add_local_subnets() = m.local_subnets(0); }},
      {"duplicate remote node name", [](auto& m) { *m.add_remote_nodes() = m.remote_nodes(0); }},
      {"a remote node has an empty name", [](auto& m) { m.mutable_remote_nodes(0)->set_name(""); }},
  };
  for (const auto& c : cases) {
    auto m = baseModel();
    c.mutate(m);
    auto v = validate(m, nullptr);
    INFO(c.what);
    REQUIRE_FALSE(v.ok());
    CHECK(v.code() == ErrorCode::kInvalid);
    CHECK_THAT(v.error(), Catch::Contains(c.what));
  }
  // No node settings at all: nothing could forward.
  dpv1::LogicalModel empty;
  CHECK_FALSE(validate(empty, nullptr).ok());
}

TEST_CASE("model: a bad object is refused with the reason, everything else stays in force", "[model]") {
  struct Case {
    const char* object;  // "port pod-b", ...
    const char* reason;
    std::function<void(dpv1::LogicalModel&)> mutate;
  };
  const std::vector<Case> cases = {
      {"port pod-b", "key 40000 must be 1..32767", [](auto& m) { m.mutable_ports(1)->set_key(40000); }},
      {"port pod-b", "key 0 must be", [](auto& m) { m.mutable_ports(1)->set_key(0); }},
      {"port pod-b", "kind must be POD or MANAGEMENT",
       [](auto& m) { m.mutable_ports(1)->set_kind(dpv1::PORT_KIND_UNSPECIFIED); }},
      {"port pod-b", "representor is empty", [](auto& m) { m.mutable_ports(1)->set_representor(""); }},
      {"port pod-b", "mac \"zz\"", [](auto& m) { m.mutable_ports(1)->set_mac("zz"); }},
      {"port pod-b", "is the router MAC", [](auto& m) { m.mutable_ports(1)->set_mac("0a:58:a9:fe:00:01"); }},
      {"port pod-b", "is zero", [](auto& m) { m.mutable_ports(1)->set_mac("00:00:00:00:00:00"); }},
      {"port pod-b", "is the broadcast address", [](auto& m) { m.mutable_ports(1)->set_mac("ff:ff:ff:ff:ff:ff"); }},
      {"port pod-b", "is a multicast address", [](auto& m) { m.mutable_ports(1)->set_mac("01:00:5e:00:00:01"); }},
      {"port pod-b", "datapath_key 99 names no local subnet",
       [](auto& m) { m.mutable_ports(1)->set_datapath_key(99); }},
      {"port pod-b", "no ips", [](auto& m) { m.mutable_ports(1)->clear_ips(); }},
      {"port pod-b", "ip \"10.244.1.6/24\"", [](auto& m) { m.mutable_ports(1)->set_ips(0, "10.244.1.6/24"); }},
      {"port pod-b", "is not inside its logical switch's subnet 10.244.1.0/24",
       [](auto& m) { m.mutable_ports(1)->set_ips(0, "10.9.9.9"); }},
      {"port pod-b", "is the gateway address", [](auto& m) { m.mutable_ports(1)->set_ips(0, "10.244.1.1"); }},
      {"port pod-b", "is the subnet address", [](auto& m) { m.mutable_ports(1)->set_ips(0, "10.244.1.0"); }},
      {"port pod-b", "ip 10.244.1.6 is listed twice", [](auto& m) { m.mutable_ports(1)->add_ips("10.244.1.6"); }},
      {"port pod-b", "key 1 is not unique: port pod-a holds it", [](auto& m) { m.mutable_ports(1)->set_key(1); }},
      {"port pod-b", "representor pf0vf0 is bound to port pod-a",
       [](auto& m) { m.mutable_ports(1)->set_representor("pf0vf0"); }},
      {"port pod-b", "mac 0a:58:0a:f4:01:05 is used by port pod-a",
       [](auto& m) { m.mutable_ports(1)->set_mac("0a:58:0a:f4:01:05"); }},
      {"port pod-b", "ip 10.244.1.5 is used by another port, pod-a",
       [](auto& m) { m.mutable_ports(1)->set_ips(0, "10.244.1.5"); }},
      {"port pod-b", "is the management port already",
       [](auto& m) { m.mutable_ports(1)->set_kind(dpv1::MANAGEMENT); }},
      {"local subnet fd00:10:244:1::/64", "gateway_ip is required",
       [](auto& m) { m.mutable_local_subnets(1)->clear_gateway_ip(); }},
      {"local subnet fd00:10:244:1::/64", "is outside the subnet",
       [](auto& m) { m.mutable_local_subnets(1)->set_gateway_ip("fd00:9::1"); }},
      {"local subnet fd00:10:244:1::/64", "must be 1..16777215",
       [](auto& m) { m.mutable_local_subnets(1)->set_datapath_key(1 << 24); }},
      {"remote node node2", "tunnel_ip \"bad\"", [](auto& m) { m.mutable_remote_nodes(0)->set_tunnel_ip("bad"); }},
      {"remote node node2", "is our own tunnel IP",
       [](auto& m) { m.mutable_remote_nodes(0)->set_tunnel_ip("192.168.100.1"); }},
      {"remote node node2", "is not of the same IP family as ours",
       [](auto& m) { m.mutable_remote_nodes(0)->set_tunnel_ip("2001:db8::2"); }},
      {"remote node node2", "overlaps local subnet 10.244.1.0/24",
       [](auto& m) {
         m.mutable_remote_nodes(0)->mutable_subnets(0)->set_cidr("10.244.1.0/25");
         m.mutable_remote_nodes(0)->clear_ports();
       }},
      {"remote node node2", "must be 1..16777215",
       [](auto& m) { m.mutable_remote_nodes(0)->mutable_subnets(0)->set_datapath_key(0); }},
      {"remote node node2", "port key for 10.244.3.7: the address is in none of its subnets",
       [](auto& m) { m.mutable_remote_nodes(0)->mutable_ports(0)->set_ip("10.244.3.7"); }},
      {"remote node node2", "40000 must be 1..32767",
       [](auto& m) { m.mutable_remote_nodes(0)->mutable_ports(0)->set_key(40000); }},
      {"remote node node2", "is listed twice",
       [](auto& m) { *m.mutable_remote_nodes(0)->add_ports() = m.remote_nodes(0).ports(0); }},
      {"remote node node2", "overlaps its own subnet", [](auto& m) {
         auto* s = m.mutable_remote_nodes(0)->add_subnets();
         s->set_cidr("10.244.2.128/25");
         s->set_datapath_key(21);
       }},
  };
  const auto all = names(check(baseModel()).model);
  for (const auto& c : cases) {
    auto m = baseModel();
    c.mutate(m);
    // pod-a's second address is in the IPv6 subnet: it goes with it (the
    // next test says why); then only the subnet is listed here.
    if (std::string(c.object).rfind("local subnet", 0) == 0) m.mutable_ports(0)->mutable_ips()->RemoveLast();
    Verdict v = check(m);
    INFO(c.object << ": " << c.reason);
    REQUIRE(v.problems.size() == 1);
    const std::string got = problems(v)[0];
    INFO(got);
    CHECK_THAT(got, Catch::StartsWith(std::string(c.object) + ": "));
    CHECK_THAT(got, Catch::Contains(c.reason));
    // Everything but the refused object is in force.
    auto expected = all;
    std::string refused = c.object;
    refused = refused.rfind("port ", 0) == 0           ? "port:" + refused.substr(5)
              : refused.rfind("remote node ", 0) == 0  ? "remote:" + refused.substr(12)
                                                       : "subnet:" + refused.substr(13);
    expected.erase(std::remove(expected.begin(), expected.end(), refused), expected.end());
    CHECK(names(v.model) == expected);
  }
}

TEST_CASE("model: a port on a refused local subnet is refused too, naming the subnet and why", "[model]") {
  auto m = baseModel();
  m.mutable_local_subnets(0)->set_gateway_ip("10.9.9.1");  // the IPv4 subnet
  Verdict v = check(m);
  const auto p = problems(v);
  REQUIRE(p.size() == 4);
  CHECK_THAT(p[0], Catch::StartsWith("port mgmt: ip 10.244.1.2 is not inside its logical switch's subnet (the switch "
                                     "has no IPv4 subnet)"));
  CHECK_THAT(p[3], Catch::StartsWith("local subnet 10.244.1.0/24: gateway_ip 10.9.9.1 is outside"));
  // With both subnets of the switch refused, the reason is the subnet's.
  m.mutable_local_subnets(1)->set_datapath_key(0);
  v = check(m);
  CHECK_THAT(problems(v)[0], Catch::Contains("port mgmt: its local subnet 10.244.1.0/24 (datapath_key 10) is refused: "
                                             "gateway_ip 10.9.9.1"));
  CHECK(names(v.model) == std::vector<std::string>{"remote:node2"});
}

TEST_CASE("model: among newcomers the lowest name wins a claim, whatever the order of the request", "[model]") {
  auto m = baseModel();
  addPort(m, "pod-0", 7, "pf0vf7", "0a:58:0a:f4:01:06", {"10.244.1.70"});  // pod-b's MAC
  addRemote(m, "node0", "192.168.100.2", "10.244.9.0/24", 90);               // node2's tunnel IP
  std::mt19937 rng(7);
  std::optional<std::vector<std::string>> first;
  for (int round = 0; round < 10; ++round) {
    std::shuffle(m.mutable_ports()->begin(), m.mutable_ports()->end(), rng);
    std::shuffle(m.mutable_remote_nodes()->begin(), m.mutable_remote_nodes()->end(), rng);
    std::shuffle(m.mutable_local_subnets()->begin(), m.mutable_local_subnets()->end(), rng);
    Verdict v = check(m);
    auto p = problems(v);
    REQUIRE(p.size() == 2);
    CHECK_THAT(p[0], Catch::StartsWith("port pod-b: mac 0a:58:0a:f4:01:06 is used by port pod-0"));
    CHECK_THAT(p[1], Catch::StartsWith("remote node node2: tunnel_ip 192.168.100.2 is used by remote node node0"));
    if (!first) first = names(v.model);
    CHECK(names(v.model) == *first);
  }
}

TEST_CASE("model: an established object keeps its claim; the newcomer or the changed object is refused", "[model]") {
  Verdict before = check(baseModel());
  // A newcomer named before the holder asks for pod-b's MAC: pod-b keeps it.
  auto m = baseModel();
  addPort(m, "pod-0", 7, "pf0vf7", "0a:58:0a:f4:01:06", {"10.244.1.70"});
  Verdict v = check(m, &before.model);
  REQUIRE(problems(v).size() == 1);
  CHECK_THAT(problems(v)[0], Catch::StartsWith("port pod-0: mac 0a:58:0a:f4:01:06 is used by port pod-b"));
  // Without the history the lowest name would have won.
  CHECK_THAT(problems(check(m))[0], Catch::StartsWith("port pod-b:"));

  // An established port that changes to take another's address is the one
  // refused, even though its name comes first.
  m = baseModel();
  m.mutable_ports(0)->set_ips(0, "10.244.1.6");  // pod-a asks for pod-b's address
  v = check(m, &before.model);
  REQUIRE(problems(v).size() == 1);
  CHECK_THAT(problems(v)[0], Catch::StartsWith("port pod-a: ip 10.244.1.6 is used by another port, pod-b"));

  // The holder goes: the next request grants the refused object its claim,
  // and the winner keeps it from then on.
  m = baseModel();
  addPort(m, "pod-0", 7, "pf0vf7", "0a:58:0a:f4:01:06", {"10.244.1.70"});
  v = check(m, &before.model);
  m.mutable_ports()->erase(std::find_if(m.mutable_ports()->begin(), m.mutable_ports()->end(),
                                        [](const auto& p) { return p.name() == "pod-b"; }));
  Verdict after = check(m, &v.model);
  CHECK(after.problems.empty());
  auto back = m;
  addPort(back, "pod-b", 2, "pf0vf1", "0a:58:0a:f4:01:06", {"10.244.1.6"});
  CHECK_THAT(problems(check(back, &after.model))[0], Catch::StartsWith("port pod-b: mac 0a:58:0a:f4:01:06 is used by "
                                                                       "port pod-0"));

  // A remote node claiming a subnet an established remote node holds.
  m = baseModel();
  addRemote(m, "node1a", "192.168.100.9", "10.244.2.0/25", 30);
  v = check(m, &before.model);
  REQUIRE(problems(v).size() == 1);
  CHECK_THAT(problems(v)[0], Catch::StartsWith("remote node node1a: subnet 10.244.2.0/25 overlaps remote node node2 "
                                               "subnet 10.244.2.0/24"));
}

TEST_CASE("model: objects refused for what they hold are the same for every order of arrival", "[model]") {
  // Ports that all want one MAC, arriving one per request in every order:
  // the first to arrive keeps it, the others are refused.
  std::vector<std::string> order = {"pod-x", "pod-y", "pod-z"};
  do {
    auto m = baseModel();
    std::optional<Verdict> last;
    for (size_t i = 0; i < order.size(); ++i) {
      addPort(m, order[i], 10 + static_cast<uint32_t>(i), "pf0vf" + std::to_string(10 + i), "0a:58:0a:f4:01:99",
              {"10.244.1." + std::to_string(100 + i)});
      last = check(m, last ? &last->model : nullptr);
    }
    std::set<std::string> refused;
    for (const auto& p : last->problems) refused.insert(p.name());
    std::set<std::string> expected(order.begin() + 1, order.end());
    CHECK(refused == expected);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("model: Delta arithmetic upserts and deletes by name; deleting the unknown needs a FullSync", "[model]") {
  auto base = baseModel();
  dpv1::Delta d;
  d.add_delete_ports("pod-b");
  auto* up = d.add_upsert_ports();
  *up = base.ports(0);
  up->set_key(9);
  d.add_delete_remote_nodes("node2");
  auto* s = d.add_upsert_local_subnets();
  *s = base.local_subnets(0);
  s->set_gateway_ip("10.244.1.254");
  d.mutable_node()->set_pod_mtu(1300);
  d.mutable_node()->set_tunnel_ip("192.168.100.1");
  auto next = applyDelta(base, d);
  REQUIRE(next.ok());
  CHECK(next->ports_size() == 2);
  CHECK(next->ports(0).key() == 9);
  CHECK(next->remote_nodes_size() == 0);
  CHECK(next->local_subnets(0).gateway_ip() == "10.244.1.254");
  CHECK(next->node().pod_mtu() == 1300);
  CHECK(next->node().router_mac().empty());  // the node settings are replaced whole

  dpv1::Delta bad;
  bad.add_delete_ports("nope");
  auto r = applyDelta(base, bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == ErrorCode::kNotFound);
  CHECK_THAT(r.error(), Catch::Contains("send a FullSync"));
}

TEST_CASE("model: a port MAC is refused when zero, multicast, broadcast or the router's", "[model]") {
  const MacAddress router = *MacAddress::parse("0a:58:a9:fe:00:01");
  CHECK(portMacProblem(*MacAddress::parse("0a:58:0a:f4:01:05"), router).empty());
  CHECK_THAT(portMacProblem(*MacAddress::parse("00:00:00:00:00:00"), router), Catch::Contains("is zero"));
  CHECK_THAT(portMacProblem(*MacAddress::parse("ff:ff:ff:ff:ff:ff"), router), Catch::Contains("broadcast"));
  CHECK_THAT(portMacProblem(*MacAddress::parse("33:33:00:00:00:01"), router), Catch::Contains("multicast"));
  CHECK_THAT(portMacProblem(router, router), Catch::Contains("router MAC"));
}

namespace {

// An IPsec SA with node2 (tunnel 192.168.100.2) that passes.
dpv1::IpsecSa* addSa(dpv1::LogicalModel& m, const std::string& name, dpv1::IpsecDirection dir, uint32_t spi) {
  auto* a = m.add_ipsec_sas();
  a->set_name(name);
  a->set_remote_node("node2");
  a->set_peer_tunnel_ip("192.168.100.2");
  a->set_direction(dir);
  a->set_spi(spi);
  a->set_local_epoch(1);
  a->set_remote_epoch(1);
  a->set_algorithm(dpv1::AES_128_GCM);
  a->set_key(std::string(16, '\x5c'));
  a->set_salt(std::string("\x01\x02\x03\x04", 4));
  a->set_esn(true);
  a->set_initial_sequence(1);
  if (dir == dpv1::OUTBOUND) a->set_sequence_limit(1000);
  return a;
}

std::vector<std::string> saNames(const Model& m) {
  std::vector<std::string> out;
  for (const auto& s : m.ipsec_sas) out.push_back(s.name);
  return out;
}

}  // namespace

TEST_CASE("model: IPsec SAs in force with their fields; a bad one is refused alone, never quoting its key",
          "[model][ipsec]") {
  auto base = baseModel();
  addSa(base, "node2/in/00000100", dpv1::INBOUND, 0x100);
  addSa(base, "node2/out/12345678", dpv1::OUTBOUND, 0x12345678);
  Verdict ok = check(base);
  CHECK(ok.problems.empty());
  REQUIRE(saNames(ok.model) == std::vector<std::string>{"node2/in/00000100", "node2/out/12345678"});
  const ModelIpsecSa& in = ok.model.ipsec_sas[0];
  CHECK(in.peer_tunnel_ip.str() == "192.168.100.2");
  CHECK(in.replay_window == kDefaultReplayWindow);
  CHECK(in.key == std::string(16, '\x5c'));
  CHECK(in.salt == std::array<uint8_t, 4>{1, 2, 3, 4});
  CHECK(ok.model.ipsec_sas[1].sequence_limit == 1000);

  struct Case {
    std::function<void(dpv1::IpsecSa&)> mutate;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {[](auto& a) { a.set_spi(255); }, "spi 255 is reserved (RFC 4303 §2.1: 0..255)"},
      {[](auto& a) { a.set_spi(0); }, "spi 0 is reserved"},
      {[](auto& a) { a.set_key(std::string(32, '\x5c')); }, "key is 32 bytes; AES_128_GCM takes 16"},
      {[](auto& a) { a.set_algorithm(dpv1::AES_256_GCM); }, "key is 16 bytes; AES_256_GCM takes 32"},
      {[](auto& a) { a.set_algorithm(dpv1::IPSEC_ALGORITHM_UNSPECIFIED); }, "algorithm must be"},
      {[](auto& a) { a.set_salt("abc"); }, "salt is 3 bytes"},
      {[](auto& a) { a.set_direction(dpv1::IPSEC_DIRECTION_UNSPECIFIED); }, "direction must be INBOUND or OUTBOUND"},
      {[](auto& a) { a.set_remote_node("node9"); }, "remote node node9 is not in force"},
      {[](auto& a) { a.set_remote_node(""); }, "remote_node is empty"},
      {[](auto& a) { a.set_peer_tunnel_ip("192.168.100.9"); },
       "peer_tunnel_ip 192.168.100.9 is not remote node node2's tunnel_ip 192.168.100.2"},
      {[](auto& a) { a.set_peer_tunnel_ip("x"); }, "peer_tunnel_ip \"x\""},
      {[](auto& a) { a.set_initial_sequence(0); }, "initial_sequence 0 must be 1.."},
      {[](auto& a) { a.set_sequence_limit(5); }, "sequence_limit is for outbound SAs"},
      {[](auto& a) { a.set_replay_window(100); }, "replay_window 100 must be 0"},
      {[](auto& a) { a.set_esn(false); a.set_initial_sequence(uint64_t{1} << 32); }, "without esn"},
  };
  for (const auto& c : cases) {
    auto m = base;
    c.mutate(*m.mutable_ipsec_sas(0));
    Verdict v = check(m);
    INFO(c.reason);
    REQUIRE(v.problems.size() == 1);
    CHECK(v.problems[0].kind() == ObjectProblem::IPSEC_SA);
    CHECK(v.problems[0].name() == "node2/in/00000100");
    CHECK_THAT(v.problems[0].reason(), Catch::Contains(c.reason));
    CHECK(v.problems[0].reason().find(std::string(16, '\x5c')) == std::string::npos);
    CHECK(v.problems[0].reason().find("5c5c5c") == std::string::npos);
    // The rest stays in force.
    CHECK(saNames(v.model) == std::vector<std::string>{"node2/out/12345678"});
    CHECK(v.model.remote_nodes.size() == 1);
  }
  auto m = base;
  m.mutable_ipsec_sas(1)->set_sequence_limit(0);
  CHECK_THAT(problems(check(m))[0], Catch::Contains("sequence_limit 0 must be initial_sequence (1)") &&
                                        Catch::Contains("rotate its keys"));
  // An SA of a refused remote node is refused too, saying why the node is.
  m = base;
  m.mutable_remote_nodes(0)->set_tunnel_ip("192.168.100.1");
  auto p = problems(check(m));
  REQUIRE(p.size() == 3);
  CHECK_THAT(p[1], Catch::StartsWith("ipsec sa node2/in/00000100: remote node node2 is not in force (refused: "
                                     "tunnel_ip 192.168.100.1 is our own tunnel IP)"));
}

TEST_CASE("model: plaintext_accepted is kept on an inbound SA and refused on an outbound one", "[model][ipsec]") {
  auto base = baseModel();
  addSa(base, "node2/in/00000100", dpv1::INBOUND, 0x100)->set_plaintext_accepted(true);
  addSa(base, "node2/out/12345678", dpv1::OUTBOUND, 0x12345678);
  Verdict ok = check(base);
  CHECK(ok.problems.empty());
  REQUIRE(ok.model.ipsec_sas.size() == 2);
  CHECK(ok.model.ipsec_sas[0].plaintext_accepted);
  CHECK_FALSE(ok.model.ipsec_sas[1].plaintext_accepted);
  base.mutable_ipsec_sas(1)->set_plaintext_accepted(true);
  Verdict bad = check(base);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0].kind() == ObjectProblem::IPSEC_SA);
  CHECK(bad.problems[0].name() == "node2/out/12345678");
  CHECK_THAT(bad.problems[0].reason(), Catch::Contains("plaintext_accepted is for inbound SAs"));
  CHECK(bad.model.ipsec_sas.size() == 1);
}

TEST_CASE("model: IPsec SA claims: one inbound per (peer, SPI), one outbound per remote node; incumbents keep them",
          "[model][ipsec]") {
  auto m = baseModel();
  addSa(m, "node2/in/b", dpv1::INBOUND, 0x1000);
  addSa(m, "node2/in/a", dpv1::INBOUND, 0x1000);
  addSa(m, "node2/out/b", dpv1::OUTBOUND, 0x2000);
  addSa(m, "node2/out/a", dpv1::OUTBOUND, 0x3000);
  addSa(m, "node2/in/c", dpv1::INBOUND, 0x2000);  // the same SPI as an outbound SA: another table
  Verdict v = check(m);
  CHECK(saNames(v.model) == std::vector<std::string>{"node2/in/a", "node2/in/c", "node2/out/a"});
  auto p = problems(v);
  REQUIRE(p.size() == 2);
  CHECK_THAT(p[0], Catch::Contains("node2/in/b: inbound spi 4096 from 192.168.100.2 is IPsec SA node2/in/a's"));
  CHECK_THAT(p[1], Catch::Contains("node2/out/b: remote node node2 has the outbound IPsec SA node2/out/a"));

  // In force, "b" keeps its SPI when "a" arrives later, even with a lower name.
  auto first = baseModel();
  addSa(first, "node2/in/b", dpv1::INBOUND, 0x1000);
  Verdict before = check(first);
  auto later = first;
  addSa(later, "node2/in/a", dpv1::INBOUND, 0x1000);
  Verdict after = check(later, &before.model);
  CHECK(saNames(after.model) == std::vector<std::string>{"node2/in/b"});
  REQUIRE(problems(after).size() == 1);
  CHECK_THAT(problems(after)[0], Catch::StartsWith("ipsec sa node2/in/a:"));

  // Two remote nodes may hold the same SPI: inbound SAs are looked up by (peer, SPI).
  auto two = baseModel();
  addRemote(two, "node3", "192.168.100.3", "10.244.3.0/24", 30);
  addSa(two, "node2/in/x", dpv1::INBOUND, 0x1000);
  auto* other = addSa(two, "node3/in/x", dpv1::INBOUND, 0x1000);
  other->set_remote_node("node3");
  other->set_peer_tunnel_ip("192.168.100.3");
  CHECK(check(two).problems.empty());

  // Names identify SAs: empty or repeated refuses the request whole.
  auto dup = baseModel();
  addSa(dup, "same", dpv1::INBOUND, 0x1000);
  addSa(dup, "same", dpv1::INBOUND, 0x1001);
  CHECK_THAT(validate(dup, nullptr).error(), Catch::Contains("duplicate IPsec SA name"));
  dup.mutable_ipsec_sas(0)->set_name("");
  CHECK_THAT(validate(dup, nullptr).error(), Catch::Contains("an IPsec SA has an empty name"));
}

TEST_CASE("model: Deltas upsert and delete IPsec SAs by name", "[model][ipsec]") {
  auto base = baseModel();
  addSa(base, "node2/in/1", dpv1::INBOUND, 0x1000);
  addSa(base, "node2/out/1", dpv1::OUTBOUND, 0x2000);
  dpv1::Delta d;
  // An outbound switch: the old one out and the new one in, in one Delta.
  d.add_delete_ipsec_sas("node2/out/1");
  auto* next = d.add_upsert_ipsec_sas();
  *next = base.ipsec_sas(1);
  next->set_name("node2/out/2");
  next->set_spi(0x3000);
  auto* raised = d.add_upsert_ipsec_sas();
  *raised = base.ipsec_sas(0);
  raised->set_initial_sequence(50);
  auto applied = applyDelta(base, d);
  REQUIRE(applied);
  REQUIRE(applied->ipsec_sas_size() == 2);
  CHECK(applied->ipsec_sas(0).initial_sequence() == 50);
  CHECK(applied->ipsec_sas(1).name() == "node2/out/2");
  CHECK(check(*applied).problems.empty());
  dpv1::Delta gone;
  gone.add_delete_ipsec_sas("node2/out/9");
  auto r = applyDelta(base, gone);
  CHECK(r.code() == ErrorCode::kNotFound);
  CHECK_THAT(r.error(), Catch::Contains("IPsec SA node2/out/9"));
}

TEST_CASE("model: the node's north–south addresses are in force as given", "[model][north-south]") {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->add_node_ips("172.18.0.1/24");
  m.mutable_node()->add_node_ips("2001:db8:18::1/64");
  m.mutable_node()->add_node_gateways("172.18.0.254");
  m.mutable_node()->add_node_gateways("2001:db8:18::fe");
  Verdict v = check(m);
  REQUIRE(v.model.node_ips.size() == 2);
  CHECK(v.model.node_ips[0].str() == "172.18.0.1/24");
  CHECK(v.model.node_ips[1].str() == "2001:db8:18::1/64");
  REQUIRE(v.model.node_gateways.size() == 2);
  CHECK(v.model.node_gateways[0].str() == "172.18.0.254");
  // A /32 (or /31) node IP has no network or broadcast address to refuse.
  auto host = parseNodeAddresses({"172.18.0.7/32", "172.18.1.0/31"}, {}, *IpAddress::parse("192.168.100.1"), {}, {},
                                 "ips", "gws");
  CHECK(host.ok());
  // An IPv6 gateway may be link-local (what router advertisements give), reached from an IPv6 node IP.
  auto link_local = parseNodeAddresses({"172.18.0.1/24", "2001:db8:18::1/64"}, {"fe80::1"},
                                       *IpAddress::parse("192.168.100.1"), {}, {}, "ips", "gws");
  REQUIRE(link_local.ok());
  CHECK(link_local->gateways.at(0).str() == "fe80::1");
}

TEST_CASE("model: bad node addresses refuse the request whole, naming the field", "[model][north-south]") {
  struct Case {
    std::vector<std::string> ips, gateways;
    const char* error;
  };
  const std::vector<Case> cases = {
      {{"172.18.0.1"}, {}, "node.node_ips \"172.18.0.1\": "},
      {{"172.18.0.0/24"}, {}, "is the network address of 172.18.0.0/24"},
      {{"172.18.0.255/24"}, {}, "is the broadcast address of 172.18.0.0/24"},
      {{"172.18.0.1/0"}, {}, "prefix length must be 1..32"},
      {{"224.0.0.5/24"}, {}, "is not a unicast address"},
      {{"127.0.0.2/8"}, {}, "is not a unicast address"},
      {{"169.254.3.1/16"}, {}, "is link-local"},
      {{"fe80::1/64"}, {}, "is link-local"},
      {{"192.168.100.1/24"}, {}, "is the tunnel IP"},
      {{"10.244.7.1/24"}, {}, "is inside the cluster CIDR 10.244.0.0/16"},
      {{"10.96.0.10/24"}, {}, "is inside the service CIDR 10.96.0.0/12"},
      {{"172.18.0.1/24", "172.18.0.1/16"}, {}, "is listed twice"},
      {{"172.18.0.1/24", "172.18.0.2/24", "172.18.0.3/24", "172.18.0.4/24", "172.18.0.5/24", "172.18.0.6/24",
        "172.18.0.7/24", "172.18.0.8/24", "172.18.0.9/24"},
       {},
       "lists 9 addresses; at most 8"},
      {{"172.18.0.1/24"}, {"172.19.0.1"}, "is in none of the node IPs' prefixes"},
      {{"172.18.0.1/24"}, {"172.18.0.1"}, "is a node IP"},
      {{"172.18.0.1/24"}, {"2001:db8::1"}, "no node IP of its family"},
      {{"172.18.0.1/24"}, {"fe80::1"}, "no node IP of its family"},
      {{"172.18.0.1/24"}, {"169.254.0.1"}, "is in none of the node IPs' prefixes"},
      {{"172.18.0.1/24"}, {"172.18.0.254", "172.18.0.253"}, "is the IPv4 gateway already"},
      {{"172.18.0.1/24"}, {"172.18.0.254/24"}, "node.node_gateways \"172.18.0.254/24\": "},
  };
  for (const auto& c : cases) {
    INFO(c.error);
    dpv1::LogicalModel m = baseModel();
    m.mutable_node()->add_service_cidrs("10.96.0.0/12");
    for (const auto& ip : c.ips) m.mutable_node()->add_node_ips(ip);
    for (const auto& gw : c.gateways) m.mutable_node()->add_node_gateways(gw);
    auto v = validate(m, nullptr);
    REQUIRE_FALSE(v.ok());
    CHECK(v.code() == ErrorCode::kInvalid);
    CHECK_THAT(v.error(), Catch::Matchers::Contains(c.error));
    CHECK_FALSE(validateNodeSettings(m.node()).ok());
  }
}

TEST_CASE("model: NAT traversal needs an IPv4 tunnel IP", "[model]") {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  CHECK(check(m).model.ipsec_nat_t);
  m.mutable_node()->set_tunnel_ip("2001:db8:100::1");
  auto v = validate(m, nullptr);
  REQUIRE_FALSE(v.ok());
  CHECK(v.code() == ErrorCode::kInvalid);
  CHECK_THAT(v.error(), Catch::Matchers::Contains("node.ipsec_nat_traversal"));
  CHECK_THAT(v.error(), Catch::Matchers::Contains("IPv6 tunnel_ip 2001:db8:100::1"));
  CHECK_FALSE(validateNodeSettings(m.node()).ok());
}

TEST_CASE("model: a remote node's NAT address is in force with NAT traversal; refused without it or when bad",
          "[model][natt]") {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  m.mutable_remote_nodes(0)->set_nat_address("198.51.100.7");
  {
    Verdict v = check(m);
    REQUIRE(v.model.remote_nodes.size() == 1);
    REQUIRE(v.model.remote_nodes[0].nat_address);
    CHECK(v.model.remote_nodes[0].nat_address->str() == "198.51.100.7");
    CHECK(v.model.remote_nodes[0].reach().str() == "198.51.100.7");
    CHECK(v.model.remote_nodes[0].tunnel_ip.str() == "192.168.100.2");
    CHECK(v.problems.empty());
  }
  struct Case {
    const char* reason;
    std::function<void(dpv1::LogicalModel&)> mutate;
  };
  const std::vector<Case> cases = {
      {"nat_address \"198.51.100\"", [](auto& x) { x.mutable_remote_nodes(0)->set_nat_address("198.51.100"); }},
      {"nat_address 2001:db8::7: NAT traversal (ESP in UDP 4500) is for IPv4 underlays",
       [](auto& x) { x.mutable_remote_nodes(0)->set_nat_address("2001:db8::7"); }},
      {"nat_address 192.168.100.1 is our own tunnel IP",
       [](auto& x) { x.mutable_remote_nodes(0)->set_nat_address("192.168.100.1"); }},
      {"this node does not send ESP in UDP 4500, which is all that crosses a NAT: set node.ipsec_nat_traversal",
       [](auto& x) { x.mutable_node()->set_ipsec_nat_traversal(false); }},
  };
  for (const auto& c : cases) {
    dpv1::LogicalModel bad = m;
    c.mutate(bad);
    Verdict v = check(bad);
    INFO(c.reason);
    CHECK(v.model.remote_nodes.empty());
    REQUIRE(problems(v).size() == 1);
    CHECK_THAT(problems(v)[0], Catch::Matchers::StartsWith("remote node node2: "));
    CHECK_THAT(problems(v)[0], Catch::Matchers::Contains(c.reason));
  }
}

TEST_CASE("model: one remote node per NAT address, and none at another's tunnel IP", "[model][natt]") {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec_nat_traversal(true);
  m.mutable_node()->set_ipsec(true);
  m.mutable_remote_nodes(0)->set_nat_address("198.51.100.7");
  addRemote(m, "node3", "192.168.100.3", "10.244.3.0/24", 30)->set_nat_address("198.51.100.7");
  addRemote(m, "node4", "192.168.100.4", "10.244.4.0/24", 40)->set_nat_address("192.168.100.2");
  addRemote(m, "node5", "198.51.100.7", "10.244.5.0/24", 50);
  Verdict v = check(m);
  REQUIRE(v.model.remote_nodes.size() == 1);
  CHECK(v.model.remote_nodes[0].name == "node2");
  const auto p = problems(v);
  REQUIRE(p.size() == 3);
  CHECK_THAT(p[0], Catch::Matchers::Contains("node3: nat_address 198.51.100.7 is used by remote node node2"));
  CHECK_THAT(p[1], Catch::Matchers::Contains("node4: nat_address 192.168.100.2 is used by remote node node2"));
  CHECK_THAT(p[2], Catch::Matchers::Contains("node5: tunnel_ip 198.51.100.7 is used by remote node node2"));
}

TEST_CASE("model: NAT keepalives need NAT traversal and at most an hour", "[model][natt]") {
  dpv1::LogicalModel m = baseModel();
  m.mutable_node()->set_ipsec(true);
  m.mutable_node()->set_ipsec_nat_traversal(true);
  m.mutable_node()->set_ipsec_nat_keepalive_seconds(20);
  CHECK(check(m).model.ipsec_nat_keepalive_s == 20);
  m.mutable_node()->set_ipsec_nat_keepalive_seconds(3601);
  auto v = validate(m, nullptr);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.error(), Catch::Matchers::Contains("node.ipsec_nat_keepalive_seconds 3601 must be 0 (none) or 1..3600"));
  m.mutable_node()->set_ipsec_nat_keepalive_seconds(20);
  m.mutable_node()->set_ipsec_nat_traversal(false);
  v = validate(m, nullptr);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.error(), Catch::Matchers::Contains("node.ipsec_nat_keepalive_seconds is 20 without ipsec_nat_traversal"));
  CHECK_FALSE(validateNodeSettings(m.node()).ok());
}

// Services ------------------------------------------------------------------

namespace {

dpv1::Service* addService(dpv1::LogicalModel& m, const std::string& name, const std::string& cluster_ip,
                          uint32_t port, dpv1::L4Protocol protocol = dpv1::TCP) {
  auto* s = m.add_services();
  s->set_name(name);
  if (!cluster_ip.empty()) s->add_cluster_ips(cluster_ip);
  auto* p = s->add_ports();
  p->set_protocol(protocol);
  p->set_port(port);
  return s;
}

dpv1::ServiceBackend* addBackend(dpv1::ServicePort* p, const std::string& ip, uint32_t port) {
  auto* b = p->add_backends();
  b->set_ip(ip);
  b->set_port(port);
  b->set_ready(true);
  b->set_serving(true);
  return b;
}

}  // namespace

TEST_CASE("model: a service is in force with its backends sorted, so every DPU builds the same table", "[model]") {
  auto m = baseModel();
  auto* s = addService(m, "default/web", "10.96.0.10", 80);
  addBackend(s->mutable_ports(0), "10.244.2.7", 8080);
  addBackend(s->mutable_ports(0), "10.244.1.5", 8080)->set_local(true);
  s->add_external_ips("203.0.113.7");
  s->mutable_ports(0)->set_node_port(30080);
  s->set_affinity_timeout_s(10800);
  Verdict v = check(m);
  CHECK(v.problems.empty());
  REQUIRE(v.model.services.size() == 1);
  const ModelService& svc = v.model.services[0];
  CHECK(svc.name == "default/web");
  REQUIRE(svc.ports.size() == 1);
  CHECK(svc.ports[0].protocol == 6);
  CHECK(svc.ports[0].node_port == 30080);
  REQUIRE(svc.ports[0].backends.size() == 2);
  CHECK(svc.ports[0].backends[0].ip.str() == "10.244.1.5");
  CHECK(svc.ports[0].backends[0].local);
  CHECK(svc.affinity_timeout_s == 10800);
}

TEST_CASE("model: a bad service is refused with the field named; the rest stays in force", "[model]") {
  struct Case {
    const char* reason;
    std::function<void(dpv1::Service&)> mutate;
  };
  const std::vector<Case> cases = {
      {"port 0 must be 1..65535", [](auto& s) { s.mutable_ports(0)->set_port(0); }},
      {"TCP 80 is listed twice",
       [](auto& s) {
         s.mutable_ports(0)->set_name("a");
         auto* p = s.add_ports();
         p->set_name("b");
         p->set_protocol(dpv1::TCP);
         p->set_port(80);
       }},
      {"protocol 99 is not TCP, UDP or SCTP",
       [](auto& s) { s.mutable_ports(0)->set_protocol(static_cast<dpv1::L4Protocol>(99)); }},
      {"backend 224.0.0.5 is a multicast address", [](auto& s) { addBackend(s.mutable_ports(0), "224.0.0.5", 80); }},
      {"backend 0.0.0.0 is the unspecified address", [](auto& s) { addBackend(s.mutable_ports(0), "0.0.0.0", 80); }},
      {"backend \"10.0.0.1/32\"", [](auto& s) { addBackend(s.mutable_ports(0), "10.0.0.1/32", 80); }},
      {"backend 10.244.2.7 port 0 must be 1..65535", [](auto& s) { addBackend(s.mutable_ports(0), "10.244.2.7", 0); }},
      {"10.244.2.7:80 is listed twice",
       [](auto& s) {
         addBackend(s.mutable_ports(0), "10.244.2.7", 80);
         addBackend(s.mutable_ports(0), "10.244.2.7", 80);
       }},
      {"cluster_ips has two IPv4 addresses", [](auto& s) { s.add_cluster_ips("10.96.0.11"); }},
      {"cluster_ips 127.0.0.1 is a loopback address",
       [](auto& s) {
         s.clear_cluster_ips();
         s.add_cluster_ips("127.0.0.1");
       }},
      {"no ports", [](auto& s) { s.clear_ports(); }},
      {"a service with several ports names each",
       [](auto& s) {
         auto* p = s.add_ports();
         p->set_protocol(dpv1::UDP);
         p->set_port(53);
       }},
      {"affinity_timeout_s 90000 must be at most 86400", [](auto& s) { s.set_affinity_timeout_s(90000); }},
      {"nothing to balance",
       [](auto& s) { s.clear_cluster_ips(); }},
  };
  for (const auto& c : cases) {
    INFO(c.reason);
    auto m = baseModel();
    c.mutate(*addService(m, "default/bad", "10.96.0.10", 80));
    addService(m, "default/good", "10.96.0.20", 80);
    Verdict v = check(m);
    REQUIRE(v.problems.size() == 1);
    CHECK(v.problems[0].kind() == ObjectProblem::SERVICE);
    CHECK(v.problems[0].name() == "default/bad");
    CHECK_THAT(v.problems[0].reason(), Catch::Contains(c.reason));
    REQUIRE(v.model.services.size() == 1);
    CHECK(v.model.services[0].name == "default/good");
  }
}

TEST_CASE("model: two services cannot answer the same address and port; the one in force keeps it", "[model]") {
  auto m = baseModel();
  addService(m, "default/b", "10.96.0.10", 80);
  Verdict first = check(m);
  REQUIRE(first.problems.empty());
  // A newcomer named lower still loses to the service in force.
  addService(m, "default/a", "10.96.0.10", 80);
  Verdict second = check(m, &first.model);
  REQUIRE(second.problems.size() == 1);
  CHECK(second.problems[0].name() == "default/a");
  CHECK_THAT(second.problems[0].reason(), Catch::Contains("10.96.0.10 TCP 80 is served by service default/b"));
  // The same port over UDP, or another port, is another frontend.
  auto other = baseModel();
  addService(other, "default/b", "10.96.0.10", 80);
  addService(other, "default/udp", "10.96.0.10", 80, dpv1::UDP);
  CHECK(check(other).problems.empty());
  // Node ports are claimed per protocol across services.
  auto np = baseModel();
  addService(np, "default/x", "10.96.0.30", 80)->mutable_ports(0)->set_node_port(30000);
  addService(np, "default/y", "10.96.0.31", 80)->mutable_ports(0)->set_node_port(30000);
  Verdict v = check(np);
  REQUIRE(v.problems.size() == 1);
  CHECK(v.problems[0].name() == "default/y");
  CHECK_THAT(v.problems[0].reason(), Catch::Contains("node port TCP 30000"));
}

TEST_CASE("model: deltas upsert and delete services", "[model]") {
  auto m = baseModel();
  addService(m, "default/web", "10.96.0.10", 80);
  dpv1::Delta d;
  d.add_delete_services("default/web");
  auto* s = d.add_upsert_services();
  s->set_name("default/dns");
  s->add_cluster_ips("10.96.0.53");
  auto* p = s->add_ports();
  p->set_protocol(dpv1::UDP);
  p->set_port(53);
  auto out = applyDelta(m, d);
  REQUIRE(out.ok());
  REQUIRE(out->services_size() == 1);
  CHECK(out->services(0).name() == "default/dns");
  dpv1::Delta missing;
  missing.add_delete_services("default/none");
  auto bad = applyDelta(m, missing);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == ErrorCode::kNotFound);
}
