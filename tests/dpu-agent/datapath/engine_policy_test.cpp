// Component tests of NetworkPolicy in the Engine's slow path (policy.cpp):
// real packets through the engine, judged after service DNAT, egress at the
// source pod's port and ingress at the destination's; stateful replies and
// ICMP errors; drops counted per reason and per policy; a change of a port's
// rules revalidating its flows and tracked connections; what dump-flows and
// the policy answer show; a refused PortPolicy failing its port closed and
// leaving the others in force.
#include "engine_fixture.h"
#include "model/model.h"

using namespace engine_test;

namespace {

// An SCTP INIT-sized packet: common header (ports, verification tag, CRC32c
// left zero: the dataplane does not verify it) and one chunk header.
Bytes sctp4(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, uint16_t sport, const char* to,
            uint16_t dport) {
  Bytes l4 = {static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport), static_cast<uint8_t>(dport >> 8),
              static_cast<uint8_t>(dport), 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4};
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to), .protocol = uint8_t{132}})
      .payload(l4)
      .build();
}

Bytes echo4(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, const char* to, uint8_t type,
            uint16_t id) {
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to)})
      .icmpEcho(type, id, 1)
      .payload(Bytes(8, 0x11))
      .build();
}

// An ICMP error from `from` to `to` quoting the IP datagram of `quoted`.
Bytes icmpError(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, const char* to,
                const Bytes& quoted) {
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to)})
      .icmp(3, 3)
      .payload(Bytes(quoted.begin() + 14, quoted.end()))
      .build();
}

struct Rule {
  std::vector<std::string> peers;
  uint32_t protocol;
  uint32_t first;
  uint32_t last;
  std::string policy;
};

void direction(dataplane::v1::PolicyDirection* d, std::vector<std::string> policies, const std::vector<Rule>& rules) {
  d->set_isolated(true);
  for (const auto& p : policies) d->add_policies(p);
  for (const auto& r : rules) {
    auto* x = d->add_rules();
    for (const auto& p : r.peers) x->add_peers(p);
    x->set_protocol(r.protocol);
    x->set_port_first(r.first);
    x->set_port_last(r.last);
    x->set_policy(r.policy);
  }
}

dataplane::v1::PortPolicy* addPolicy(dataplane::v1::LogicalModel& m, const std::string& port) {
  auto* pp = m.add_port_policies();
  pp->set_port(port);
  pp->set_pod("x/" + port);
  return pp;
}

void program(Fixture& f, const dataplane::v1::LogicalModel& m, uint64_t generation = 1) {
  const auto r = fullSync(*f.engine, m, generation);
  INFO(r.message());
  REQUIRE(r.status() == dataplane::v1::OK);
  for (const auto& p : r.problems()) FAIL(p.name() << ": " << p.reason());
}

dataplane::v1::ProgramReply delta(Fixture& f, uint64_t base, const std::function<void(dataplane::v1::Delta&)>& fill) {
  dataplane::v1::ProgramRequest req;
  auto* d = req.mutable_delta();
  d->set_base_generation(base);
  d->set_generation(base + 1);
  fill(*d);
  auto r = f.engine->program(req);
  INFO(r.message());
  REQUIRE(r.status() == dataplane::v1::OK);
  return r;
}

dataplane::v1::OperatorReply policyAnswer(Fixture& f, const std::string& port = "") {
  dataplane::v1::OperatorRequest req;
  req.mutable_policy()->set_port(port);
  return f.engine->operate(req);
}

uint64_t policyDrops(Fixture& f, const std::string& policy) {
  const auto answer = policyAnswer(f);
  for (const auto& c : answer.policy_drops()) {
    if (c.policy() == policy) return c.dropped();
  }
  FAIL("no drop counter for " << policy);
  return 0;
}

// The `policy` text of the flows whose match names `needle`.
std::vector<std::string> flowPolicies(Fixture& f, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& fl : f.flows()) {
    if (fl.match().find(needle) != std::string::npos) out.push_back(fl.policy());
  }
  return out;
}

// The states of the connections conntrack holds.
std::vector<std::string> conntrackStates(Fixture& f) {
  dataplane::v1::OperatorRequest req;
  req.mutable_conntrack();
  const auto r = f.engine->operate(req);
  std::vector<std::string> out;
  for (const auto& c : r.conntrack()) out.push_back(c.state());
  return out;
}

}  // namespace

TEST_CASE("policy: an ingress-isolated pod drops a new TCP SYN, counted per reason and per policy",
          "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  direction(addPolicy(m, "pod-b")->mutable_ingress(), {"x/allow-web", "x/deny-all"},
            {{{"10.244.2.0/24"}, 6, 80, 80, "x/allow-web"}});
  program(f, m);
  const Bytes syn = tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 80, kSyn);
  f.inject(kRepA, syn);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyDenied") == 1);
  // Not cached: the next one is judged (and counted) again.
  f.inject(kRepA, syn);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyDenied") == 2);
  CHECK(f.stat("FlowInstalled") == 0);
  CHECK(policyDrops(f, "x/allow-web") == 2);
  CHECK(policyDrops(f, "x/deny-all") == 2);
  // A peer the rule allows, from another node, to the allowed port.
  f.inject(kUplink, fromRemote(tcp4(kRouterMac, kRemotePodMac, "10.244.2.7", 40000, "10.244.1.6", 80, kSyn, 63), 10, 9, 2));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(flowPolicies(f, "nw_src=10.244.2.7") == std::vector<std::string>{"ingress x/allow-web"});
  // The same peer to another port: denied.
  f.inject(kUplink, fromRemote(tcp4(kRouterMac, kRemotePodMac, "10.244.2.7", 40000, "10.244.1.6", 81, kSyn, 63), 10, 9, 2));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyDenied") == 3);
  // The policy answer: the port's rules as programmed, and the drops.
  const auto answer = policyAnswer(f, "pod-b");
  REQUIRE(answer.port_policies_size() == 1);
  CHECK(answer.port_policies(0).pod() == "x/pod-b");
  CHECK(answer.port_policies(0).ingress().rules(0).policy() == "x/allow-web");
  CHECK_FALSE(answer.port_policies(0).egress().isolated());
  CHECK(policyAnswer(f, "pod-a").error() == "port pod-a has no PortPolicy: it is not isolated");
  CHECK(policyAnswer(f, "pod-q").error().find("no port pod-q is in force") == 0);
}

TEST_CASE("policy: an egress-allowed connection's replies pass into its ingress-isolated client",
          "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  auto* a = addPolicy(m, "pod-a");
  direction(a->mutable_ingress(), {"x/a-in"}, {});
  direction(a->mutable_egress(), {"x/a-out"}, {{{"10.244.1.6/32"}, 6, 8080, 8080, "x/a-out"}});
  program(f, m);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kSyn));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("PolicyTracked") == 1);
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  CHECK(Fixture::drain(kRepA).size() == 1);
  for (int i = 0; i < 3; ++i) {
    f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kAck | kPsh));
    f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kAck));
  }
  CHECK(Fixture::drain(kRepB).size() == 3);
  CHECK(Fixture::drain(kRepA).size() == 3);
  CHECK(f.stat("PolicyDenied") == 0);
  // The handshake was judged and forwarded uncached; the established
  // connection's flows, both ways, pass as the connection's.
  CHECK(flowPolicies(f, "nw_src=10.244.1.5") ==
        std::vector<std::string>{"egress allowed connection, ingress allowed connection"});
  CHECK(flowPolicies(f, "nw_src=10.244.1.6") ==
        std::vector<std::string>{"egress allowed connection, ingress allowed connection"});
  // A new connection from B to A: A's ingress denies it.
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 5000, "10.244.1.5", 80, kSyn));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(policyDrops(f, "x/a-in") == 1);
  // A to another port of B: A's egress denies it.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40001, "10.244.1.6", 9090, kSyn));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(policyDrops(f, "x/a-out") == 1);
  CHECK(f.stat("PolicyDenied") == 2);
}

TEST_CASE("policy: a connection tracked for policy only lives as a translated one: established, refreshed, closed",
          "[engine][policy]") {
  // The handshake timeout is short and the flows age fast, so that the
  // connection's life depends on conntrack's state, as with real timeouts
  // a connection idle for more than a minute does.
  EngineConfig c;
  c.conntrack_timeouts.tcp_syn_sent = 2000;
  c.conntrack_timeouts.tcp_syn_received = 2000;
  c.flow_idle_timeout_ms = 1000;
  Fixture f(c, false);
  auto m = baseModel();
  auto* a = addPolicy(m, "pod-a");
  direction(a->mutable_ingress(), {"x/a-in"}, {});
  direction(a->mutable_egress(), {"x/a-out"}, {{{"10.244.1.6/32"}, 6, 8080, 8080, "x/a-out"}});
  program(f, m);
  const Bytes request = tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kAck | kPsh);
  const Bytes answer = tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kAck | kPsh);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kSyn));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  // The handshake is not cached (conntrack sees it end), as a service's.
  CHECK(f.stat("FlowInstalled") == 0);
  CHECK(conntrackStates(f) == std::vector<std::string>{"syn-received"});
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kAck));
  CHECK(conntrackStates(f) == std::vector<std::string>{"established"});
  CHECK(Fixture::drain(kRepB).size() == 2);
  CHECK(Fixture::drain(kRepA).size() == 1);
  // Traffic both ways, past the handshake timeout many times over: the hits
  // of the cached flows keep the connection.
  for (int i = 0; i < 10; ++i) {
    f.inject(kRepA, request);
    f.inject(kRepB, answer);
    g_clock += 900;
    f.engine->maintain();
  }
  CHECK(Fixture::drain(kRepB).size() == 10);
  CHECK(Fixture::drain(kRepA).size() == 10);
  // Then idle longer than the handshake timeout (a keep-alive connection):
  // the server's next answer still reaches its ingress-isolated client.
  g_clock += 5000;
  f.engine->quiescent(f.engine->worker(0));  // the idle flows age out
  for (int i = 0; i < 60; ++i) f.engine->maintain();
  f.inject(kRepB, answer);
  CHECK(Fixture::drain(kRepA).size() == 1);
  f.inject(kRepA, request);
  CHECK(Fixture::drain(kRepB).size() == 1);
  // Never judged again as a new connection.
  CHECK(f.stat("PolicyDenied") == 0);
  CHECK(f.stat("PolicyTracked") == 1);
  CHECK(conntrackStates(f) == std::vector<std::string>{"established"});
  // FIN both ways reach conntrack through the cached flows; then a reset
  // closes it and takes its flows.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kFin | kAck));
  CHECK(conntrackStates(f) == std::vector<std::string>{"fin-wait"});
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kFin | kAck));
  CHECK(conntrackStates(f) == std::vector<std::string>{"time-wait"});
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kRst));
  CHECK(conntrackStates(f) == std::vector<std::string>{"close"});
  CHECK(Fixture::drain(kRepB).size() == 2);
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("ConntrackPunt") >= 3);
}

TEST_CASE("policy offload: a tracked connection's flows go to the NIC after their ports' close punt rules",
          "[engine][policy][offload]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c, false);
  auto m = baseModel();
  auto* a = addPolicy(m, "pod-a");
  direction(a->mutable_ingress(), {"x/a-in"}, {});
  direction(a->mutable_egress(), {"x/a-out"}, {{{"10.244.1.6/32"}, 6, 8080, 8080, "x/a-out"}});
  program(f, m);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kSyn));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kAck));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kAck));
  Fixture::drainAll();
  REQUIRE(f.stat("FlowInstalled") == 2);
  f.engine->maintain();  // offers the two flows
  REQUIRE(eswitch.installedCount() == 2);
  // Their rules, and the close punt rules (FIN, SYN, RST) of the two ports they arrive on.
  CHECK(eswitch.ruleCount() == 2 + 6);
  for (const auto& fl : f.flows()) {
    INFO(fl.match());
    CHECK(fl.offload_status() == "offloaded+punt:fin,syn,rst");
  }
  // The client's RST, as its punt rule hands it over: the connection closes
  // and its flow leaves the cache and the NIC.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 8080, kRst));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(conntrackStates(f) == std::vector<std::string>{"close"});
  f.engine->maintain();
  CHECK(eswitch.installedCount() == 1);
  CHECK(eswitch.ruleCount() == 1 + 6);  // the ports keep their punt rules
}

TEST_CASE("policy: UDP and SCTP are judged by protocol and port", "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  direction(addPolicy(m, "pod-b")->mutable_ingress(), {"x/b"},
            {{{"10.244.1.5/32"}, 17, 53, 53, "x/b"}, {{"10.244.1.0/24"}, 132, 9000, 9000, "x/b"}});
  program(f, m);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.1.6", 53));
  CHECK(Fixture::drain(kRepB).size() == 1);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.1.6", 54));
  CHECK(Fixture::drain(kRepB).empty());
  f.inject(kRepA, sctp4(kRouterMac, kMacA, "10.244.1.5", 7000, "10.244.1.6", 9000));
  CHECK(Fixture::drain(kRepB).size() == 1);
  f.inject(kRepA, sctp4(kRouterMac, kMacA, "10.244.1.5", 7000, "10.244.1.6", 9001));
  CHECK(Fixture::drain(kRepB).empty());
  // TCP to the UDP port: another protocol, denied.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.1.6", 53, kSyn));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyDenied") == 3);
  // A's UDP was not tracked (its replies meet no isolated direction): B's
  // answer is a packet of its own, which A (not isolated) takes; it is
  // tracked, as its own replies would meet B's isolated ingress.
  CHECK(f.stat("PolicyTracked") == 0);
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 53, "10.244.1.5", 5000));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("PolicyTracked") == 1);
}

TEST_CASE("policy: a later IP fragment is judged by its peer alone: all ports of its protocol, else PolicyFragment",
          "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  direction(addPolicy(m, "pod-b")->mutable_ingress(), {"x/b"},
            {{{"10.244.1.5/32"}, 17, 53, 53, "x/b"}, {{"10.244.1.5/32"}, 6, 0, 65535, "x/b"}});
  program(f, m);
  auto later = [](uint8_t protocol, uint16_t id) {
    return PacketBuilder()
        .ethernet(kRouterMac, kMacA)
        .ipv4({.src = ip4("10.244.1.5"), .dst = ip4("10.244.1.6"), .id = id, .frag_field = 0x00b9,
               .protocol = protocol})
        .payload(Bytes(40, 0x33))
        .build();
  };
  // The first fragment has the ports: judged as a whole packet, allowed.
  f.inject(kRepA, PacketBuilder()
                      .ethernet(kRouterMac, kMacA)
                      .ipv4({.src = ip4("10.244.1.5"), .dst = ip4("10.244.1.6"), .id = 7, .frag_field = 0x2000})
                      .udp(5000, 53)
                      .payload(Bytes(40, 0x33))
                      .build());
  CHECK(Fixture::drain(kRepB).size() == 1);
  // A later one of UDP: only port 53 is allowed, and it has no port.
  f.inject(kRepA, later(17, 7));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyFragment") == 1);
  CHECK(f.stat("PolicyDenied") == 0);
  CHECK(policyDrops(f, "x/b") == 1);
  // A later one of TCP: every TCP port is allowed from this peer.
  f.inject(kRepA, later(6, 8));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("PolicyFragment") == 1);
}

TEST_CASE("policy: ICMP echo and an ICMP error about an allowed connection pass an isolated pod",
          "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  auto* a = addPolicy(m, "pod-a");
  direction(a->mutable_ingress(), {"x/a-in"}, {});
  direction(a->mutable_egress(), {"x/a-out"},
            {{{"0.0.0.0/0"}, 1, 0, 65535, "x/a-out"}, {{"10.244.1.6/32"}, 17, 53, 53, "x/a-out"}});
  program(f, m);
  f.inject(kRepA, echo4(kRouterMac, kMacA, "10.244.1.5", "10.244.1.6", 8, 77));
  CHECK(Fixture::drain(kRepB).size() == 1);
  f.inject(kRepB, echo4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 0, 77));
  CHECK(Fixture::drain(kRepA).size() == 1);
  // B's own echo request to A: A's ingress denies it.
  f.inject(kRepB, echo4(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 8, 78));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("PolicyDenied") == 1);
  // A's UDP to B, and B's port unreachable about it: related, it passes.
  const Bytes query = udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.1.6", 53);
  f.inject(kRepA, query);
  const auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  f.inject(kRepB, icmpError(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", at_b[0]));
  CHECK(Fixture::drain(kRepA).size() == 1);
  // An error quoting a packet of no connection of A's: a new packet, denied.
  const Bytes stray = udp4p(kMacB, kRouterMac, "10.244.1.5", 6000, "10.244.1.6", 53, 63);
  f.inject(kRepB, icmpError(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", stray));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(f.stat("PolicyDenied") == 2);
}

TEST_CASE("policy: egress is judged against the ClusterIP's backend, after DNAT", "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  auto service = [&m](const char* name, const char* vip, const char* backend, uint32_t port, bool local) {
    auto* s = m.add_services();
    s->set_name(name);
    s->add_cluster_ips(vip);
    auto* p = s->add_ports();
    p->set_protocol(dataplane::v1::TCP);
    p->set_port(80);
    auto* b = p->add_backends();
    b->set_ip(backend);
    b->set_port(port);
    b->set_local(local);
    b->set_ready(true);
    b->set_serving(true);
  };
  service("x/b", "10.96.0.10", "10.244.1.6", 8080, true);
  service("x/remote", "10.96.0.20", "10.244.2.7", 8081, false);
  direction(addPolicy(m, "pod-a")->mutable_egress(), {"x/a-out"}, {{{"10.244.1.6/32"}, 6, 8080, 8080, "x/a-out"}});
  program(f, m);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.96.0.10", 80, kSyn));
  const auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) ==
        dpu::test::toHex(tcp4(kMacB, kRouterMac, "10.244.1.5", 40000, "10.244.1.6", 8080, kSyn, 63)));
  // The other service's backend is not allowed: dropped, and its connection not kept.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40001, "10.96.0.20", 80, kSyn));
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(policyDrops(f, "x/a-out") == 1);
  dataplane::v1::OperatorRequest req;
  req.mutable_conntrack();
  const auto ct = f.engine->operate(req);
  REQUIRE(ct.conntrack_size() == 1);
  CHECK(ct.conntrack(0).original() == "10.244.1.5:40000 -> 10.96.0.10:80");
}

TEST_CASE("policy: a change denies an established connection and allows a new one at once", "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  direction(addPolicy(m, "pod-b")->mutable_ingress(), {"x/b"}, {{{"10.244.1.5/32"}, 6, 80, 80, "x/b"}});
  program(f, m);
  const Bytes data = tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 80, kAck | kPsh);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 80, kSyn));
  f.inject(kRepA, data);
  CHECK(Fixture::drain(kRepB).size() == 2);
  CHECK(f.stat("FlowHit") >= 1);
  // A flow of pod-a to the uplink, which the change must leave alone.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.2.7", 53));
  CHECK(Fixture::drain(kUplink).size() == 1);
  // B's rule goes: the established connection's next packet is dropped.
  const auto r = delta(f, 1, [&](dataplane::v1::Delta& d) {
    auto* pp = d.add_upsert_port_policies();
    *pp = m.port_policies(0);
    pp->mutable_ingress()->clear_rules();
  });
  CHECK(r.flows_removed() >= 1);
  f.inject(kRepA, data);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("PolicyDenied") == 1);
  const uint64_t invalidated = f.stat("FlowInvalidated");
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.2.7", 53));
  CHECK(Fixture::drain(kUplink).size() == 1);
  CHECK(f.stat("FlowInvalidated") == invalidated);  // pod-a's flow to the uplink was not touched
  // The rule is back (by deleting the policy: B is not isolated): the next SYN passes.
  delta(f, 2, [](dataplane::v1::Delta& d) { d.add_delete_port_policies("pod-b"); });
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40001, "10.244.1.6", 80, kSyn));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("PolicyDenied") == 1);
}

TEST_CASE("policy: a tracked connection a change denies is removed and stops", "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  auto* a = addPolicy(m, "pod-a");
  direction(a->mutable_ingress(), {"x/a-in"}, {});
  direction(a->mutable_egress(), {"x/a-out"}, {{{"10.244.1.6/32"}, 17, 53, 53, "x/a-out"}});
  program(f, m);
  const Bytes query = udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, "10.244.1.6", 53);
  const Bytes answer = udp4p(kRouterMac, kMacB, "10.244.1.6", 53, "10.244.1.5", 5000);
  f.inject(kRepA, query);
  f.inject(kRepB, answer);
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kRepA).size() == 1);
  delta(f, 1, [&](dataplane::v1::Delta& d) {
    auto* pp = d.add_upsert_port_policies();
    *pp = m.port_policies(0);
    pp->mutable_egress()->mutable_rules(0)->set_port_first(54);
    pp->mutable_egress()->mutable_rules(0)->set_port_last(54);
  });
  CHECK(f.stat("PolicyRevoked") == 1);
  // Neither way passes now: B's answer is a new packet into isolated A.
  f.inject(kRepB, answer);
  f.inject(kRepA, query);
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(policyDrops(f, "x/a-in") == 1);
  CHECK(policyDrops(f, "x/a-out") == 1);
}

TEST_CASE("policy: a refused PortPolicy is reported, its port fails closed, the others are enforced",
          "[engine][policy]") {
  Fixture f(EngineConfig{}, false);
  auto m = baseModel();
  direction(addPolicy(m, "pod-a")->mutable_ingress(), {"x/a"}, {{{"10.244.1.0/33"}, 0, 0, 65535, "x/a"}});
  direction(addPolicy(m, "pod-b")->mutable_ingress(), {"x/b"}, {});
  const auto r = fullSync(*f.engine, m, 1);
  REQUIRE(r.status() == dataplane::v1::OK);
  REQUIRE(r.problems_size() == 1);
  CHECK(r.problems(0).kind() == dataplane::v1::ObjectProblem::PORT_POLICY);
  CHECK(r.problems(0).name() == "pod-a");
  CHECK(r.problems(0).reason().find("ingress.rules[0].peers \"10.244.1.0/33\"") == 0);
  // B is isolated by its policy; A, whose policy the dataplane cannot read,
  // is isolated both ways by none (a policy unread must not leave it open).
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.244.1.6", 80, kSyn));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(policyDrops(f, dpu::model::kRefusedPortPolicyName) == 1);  // A's egress
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 40000, "10.244.1.5", 80, kSyn));
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(policyDrops(f, dpu::model::kRefusedPortPolicyName) == 2);  // A's ingress
  CHECK(f.stat("PolicyDenied") == 2);
  // A valid policy for A replaces it.
  delta(f, 1, [&](dataplane::v1::Delta& d) {
    auto* pp = d.add_upsert_port_policies();
    *pp = m.port_policies(0);
    pp->mutable_ingress()->mutable_rules(0)->clear_peers();
    pp->mutable_ingress()->mutable_rules(0)->add_peers("10.244.1.0/24");
  });
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 40001, "10.244.1.5", 80, kSyn));
  CHECK(Fixture::drain(kRepA).size() == 1);
  // The node's management port reaches the isolated pod (kubelet probes).
  f.inject(kMgmt, tcp4(kRouterMac, kMacMgmt, "10.244.1.2", 40000, "10.244.1.6", 8080, kSyn));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(flowPolicies(f, "nw_src=10.244.1.2") == std::vector<std::string>{"egress not isolated, ingress from the node"});
}
