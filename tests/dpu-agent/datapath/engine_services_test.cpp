// Component tests of the Engine's load balancer and connection tracking
// (services.cpp): cluster IPs balanced to local and remote backends and their
// replies translated back, byte for byte against packets built independently;
// the refusals; hairpin; the TCP lifecycle through conntrack; loose pickup;
// the UDP flush after a backend leaves; client-IP affinity; the bound of the
// table and expiry.
#include "engine_fixture.h"
#include "overlay/replies.h"
#include "temp_dir.h"

using namespace engine_test;

namespace {

constexpr const char* kVip = "10.96.0.10";
constexpr const char* kRemoteVip = "10.96.0.20";

dataplane::v1::Service* addService(dataplane::v1::LogicalModel& m, const std::string& name, const char* vip,
                                   uint32_t port, dataplane::v1::L4Protocol protocol = dataplane::v1::TCP) {
  auto* s = m.add_services();
  s->set_name(name);
  s->add_cluster_ips(vip);
  auto* p = s->add_ports();
  p->set_protocol(protocol);
  p->set_port(port);
  return s;
}

void addBackend(dataplane::v1::Service* s, const char* ip, uint32_t port, bool local, bool ready = true) {
  auto* b = s->mutable_ports(0)->add_backends();
  b->set_ip(ip);
  b->set_port(port);
  b->set_local(local);
  b->set_ready(ready);
  b->set_serving(ready);
}

dataplane::v1::LogicalModel serviceModel() {
  auto m = baseModel();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  addBackend(addService(m, "default/web", kVip, 80), "10.244.1.6", 8080, true);
  addBackend(addService(m, "default/remote", kRemoteVip, 80, dataplane::v1::UDP), "10.244.2.7", 8081, false);
  addBackend(addService(m, "default/web-udp", kVip, 80, dataplane::v1::UDP), "10.244.1.6", 8080, true);
  addService(m, "default/empty", "10.96.0.30", 80);
  return m;
}

struct Conn {
  std::string state;
  std::string original;
  std::string reply;
  std::string nat;
};
std::vector<Conn> connections(Engine& e) {
  dataplane::v1::OperatorRequest req;
  req.mutable_conntrack();
  const auto r = e.operate(req);
  std::vector<Conn> out;
  for (const auto& c : r.conntrack()) out.push_back({c.state(), c.original(), c.reply(), c.nat()});
  return out;
}

void programServices(Fixture& f) {
  const auto r = fullSync(*f.engine, serviceModel(), 1);
  INFO(r.message());
  REQUIRE(r.status() == dataplane::v1::OK);
  REQUIRE(r.problems_size() == 0);
}

}  // namespace

TEST_CASE("services: a cluster IP goes to its local backend and the reply comes back from the service",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  // The handshake, packet by packet, each checked against one built by hand.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kSyn));
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) ==
        dpu::test::toHex(tcp4(kMacB, kRouterMac, "10.244.1.5", 40000, "10.244.1.6", 8080, kSyn, 63)));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  CHECK(dpu::test::toHex(at_a[0]) == dpu::test::toHex(tcp4(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 40000, kSynAck, 63)));
  auto conns = connections(*f.engine);
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].state == "syn-received");
  CHECK(conns[0].original == "10.244.1.5:40000 -> 10.96.0.10:80");
  CHECK(conns[0].reply == "10.244.1.6:8080 -> 10.244.1.5:40000");
  CHECK(conns[0].nat == "dnat");
  // The handshake is not cached; the established connection is, one flow each way.
  CHECK(f.stat("FlowInstalled") == 0);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kAck));
  CHECK(connections(*f.engine)[0].state == "established");
  for (int i = 0; i < 3; ++i) {
    f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kAck | kPsh));
    f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kAck));
  }
  at_b = Fixture::drain(kRepB);
  at_a = Fixture::drain(kRepA);
  REQUIRE(at_b.size() == 4);
  REQUIRE(at_a.size() == 3);
  CHECK(dpu::test::toHex(at_b.back()) ==
        dpu::test::toHex(tcp4(kMacB, kRouterMac, "10.244.1.5", 40000, "10.244.1.6", 8080, kAck | kPsh, 63)));
  CHECK(dpu::test::toHex(at_a.back()) == dpu::test::toHex(tcp4(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 40000, kAck, 63)));
  CHECK(f.stat("FlowInstalled") == 2);
  CHECK(f.stat("FlowHit") >= 4);
  CHECK(f.stat("ConntrackNew") == 1);
  // dump-flows shows the translation.
  bool saw_nat = false;
  for (const auto& fl : f.flows()) saw_nat = saw_nat || fl.actions().find("set_nw_dst:10.244.1.6") != std::string::npos;
  CHECK(saw_nat);
  // FIN from each side through conntrack (punted), then the connection is in time-wait.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kFin | kAck));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kFin | kAck));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("ConntrackPunt") == 2);
  CHECK(connections(*f.engine)[0].state == "time-wait");
}

TEST_CASE("services: a remote backend is reached through the tunnel and its reply translated on our DPU",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  const Bytes udp = udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, kRemoteVip, 80);
  f.inject(kRepA, udp);
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  const Bytes inner = udp4p(kRouterMac, kRouterMac, "10.244.1.5", 5000, "10.244.2.7", 8081, 63);
  // The remote node published no port key for the backend: the router's egress key.
  const Bytes expected = geneve(inner, kUplinkMac, kNextHopMac, "192.168.100.1", "192.168.100.2", 20, 1, 0x8000,
                                innerHash(udp, env().port[kRepA]));
  CHECK(dpu::test::toHex(out[0]) == dpu::test::toHex(expected));
  // The backend's reply, decapsulated and translated back to the service address.
  f.inject(kUplink, fromRemote(udp4p(kRouterMac, kRemotePodMac, "10.244.2.7", 8081, "10.244.1.5", 5000, 63), 10, 9, 1));
  auto back = Fixture::drain(kRepA);
  REQUIRE(back.size() == 1);
  CHECK(dpu::test::toHex(back[0]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, kRemoteVip, 80, "10.244.1.5", 5000, 63)));
  const auto conns = connections(*f.engine);
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].state == "replied");
}

TEST_CASE("services: every DPU picks the same backend for a connection (Maglev)", "[engine][services]") {
  auto model = serviceModel();
  auto* svc = model.mutable_services(2);  // default/web-udp
  svc->mutable_ports(0)->clear_backends();
  for (const char* ip : {"10.244.1.6", "10.244.2.7", "10.244.2.8", "10.244.2.9"}) {
    addBackend(svc, ip, 8080, std::string(ip) == "10.244.1.6");
  }
  // One connection at a time, or 32 at once (a burst: the pick made while
  // the previous connection's miss is decided is the one used).
  auto choices = [&](bool reverse_order, bool at_once) {
    auto m = model;
    if (reverse_order) {
      auto* p = m.mutable_services(2)->mutable_ports(0);
      std::reverse(p->mutable_backends()->begin(), p->mutable_backends()->end());
    }
    Fixture f(EngineConfig{}, false);
    REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
    std::map<uint16_t, std::string> chosen;
    auto collect = [&] {
      for (const auto& p : Fixture::drain(kRepB)) chosen[overlay::load16(p.data() + 34)] = "10.244.1.6";
      for (const auto& p : Fixture::drain(kUplink)) {
        overlay::ParsedPacket pk;
        const Bytes in(p.begin() + 58, p.end());
        REQUIRE(overlay::parsePacket(in, pk) == overlay::Status::kOk);
        chosen[overlay::load16(in.data() + 34)] = IpAddress::v4(overlay::ipv4::dst(in.data() + 14)).str();
      }
    };
    std::vector<Bytes> all;
    for (uint16_t sport = 1000; sport < 1200; ++sport) {
      all.push_back(udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
      if (!at_once) {
        f.inject(kRepA, all.back());
        collect();
      }
    }
    for (size_t i = 0; at_once && i < all.size(); i += 32) {
      f.inject(kRepA, std::vector<Bytes>(all.begin() + i, all.begin() + std::min(all.size(), i + 32)));
      collect();
    }
    return chosen;
  };
  const auto a = choices(false, false), b = choices(true, false), c = choices(false, true);
  REQUIRE(a.size() == 200);
  CHECK(a == b);
  CHECK(a == c);
  std::map<std::string, int> spread;
  for (const auto& [port, ip] : a) ++spread[ip];
  CHECK(spread.size() == 4);
  for (const auto& [ip, n] : spread) {
    INFO(ip << " " << n);
    CHECK(n > 20);
  }
}

TEST_CASE("services: refused as kube-proxy refuses: no endpoints, an unknown port, an unknown address",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  const Bytes syn = tcp4(kRouterMac, kMacA, "10.244.1.5", 40001, "10.96.0.30", 80, kSyn, 64, 0);
  f.inject(kRepA, syn);
  auto rst = Fixture::drain(kRepA);
  REQUIRE(rst.size() == 1);
  overlay::ParsedPacket pk;
  REQUIRE(overlay::parsePacket(syn, pk) == overlay::Status::kOk);
  std::array<uint8_t, 512> buf{};
  overlay::PacketBuffer expected(buf.data(), buf.size(), 128, 0);
  REQUIRE(overlay::buildTcpReset(syn, pk, kRouterMac, expected) == overlay::Status::kOk);
  CHECK(dpu::test::toHex(rst[0]) == dpu::test::toHex(expected.data(), expected.size()));
  // UDP: ICMP port unreachable from the service.
  const Bytes udp = udp4p(kRouterMac, kMacA, "10.244.1.5", 5353, "10.96.0.30", 80);
  f.inject(kRepA, udp);
  auto icmp = Fixture::drain(kRepA);
  REQUIRE(icmp.size() == 1);
  REQUIRE(overlay::parsePacket(icmp[0], pk) == overlay::Status::kOk);
  CHECK(pk.l4 == overlay::L4Type::kIcmp);
  CHECK(IpAddress::v4(overlay::ipv4::src(icmp[0].data() + 14)).str() == "10.96.0.30");
  CHECK(icmp[0][pk.l4_offset] == 3);
  CHECK(icmp[0][pk.l4_offset + 1] == 3);
  // A port the service lacks, on its address: refused the same way.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40002, kVip, 443, kSyn, 64, 0));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("ServiceRejected") == 3);
  // An address of the service CIDRs that no service has: dropped.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40003, "10.96.9.9", 80, kSyn));
  CHECK(f.stat("ServiceIpUnknown") == 1);
  CHECK(Fixture::drain(kRepA).empty());
  CHECK(connections(*f.engine).empty());
}

TEST_CASE("services: a pod reaching itself through its service is masqueraded and gets its reply",
          "[engine][services]") {
  auto m = serviceModel();
  m.mutable_services(2)->mutable_ports(0)->mutable_backends(0)->set_ip("10.244.1.5");  // pod A is the backend
  Fixture f(EngineConfig{}, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 6000, kVip, 80));
  auto in = Fixture::drain(kRepA);
  REQUIRE(in.size() == 1);
  CHECK(dpu::test::toHex(in[0]) ==
        dpu::test::toHex(udp4p(kMacA, kRouterMac, "169.254.169.5", 6000, "10.244.1.5", 8080, 63)));
  // The pod answers the hairpin address; it sees the reply from the service.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 8080, "169.254.169.5", 6000));
  auto back = Fixture::drain(kRepA);
  REQUIRE(back.size() == 1);
  CHECK(dpu::test::toHex(back[0]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 6000, 63)));
  CHECK(f.stat("ServiceHairpin") == 1);
  CHECK(connections(*f.engine)[0].nat == "dnat+snat");
}

TEST_CASE("services: a mid-stream packet is picked up loose, as after a dataplane restart", "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 41000, kVip, 80, kAck | kPsh));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("ConntrackLoose") == 1);
  // It goes on as it was: cached at once, not from its next packet.
  CHECK(f.stat("FlowInstalled") == 1);
  const auto conns = connections(*f.engine);
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].state == "established");
  // A lone RST opens nothing.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 41001, kVip, 80, kRst));
  CHECK(f.stat("ServiceNotAConnection") == 1);
  // A reset of a tracked connection closes it and removes its flows.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 41000, kVip, 80, kRst | kAck));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(connections(*f.engine)[0].state == "close");
  CHECK(f.stat("ConntrackClosed") == 1);
}

TEST_CASE("services: the datagram that opens a connection is forwarded uncached, its next packet either way caches",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  // A query and its answer: the query opens the connection uncached, the
  // answer caches only its own direction.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80));
  REQUIRE(Fixture::drain(kRepB).size() == 1);
  CHECK(f.stat("ConntrackNew") == 1);
  CHECK(f.stat("FlowInstalled") == 0);
  CHECK(f.flows().empty());
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 7000));
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  CHECK(dpu::test::toHex(at_a[0]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 7000, 63)));
  CHECK(f.stat("FlowInstalled") == 1);
  // The client's next datagram caches its way; from then on both hit.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80));
  CHECK(f.stat("FlowInstalled") == 2);
  const uint64_t hits = f.stat("FlowHit");
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80));
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 7000));
  const auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 2);
  CHECK(dpu::test::toHex(at_b.back()) ==
        dpu::test::toHex(udp4p(kMacB, kRouterMac, "10.244.1.5", 7000, "10.244.1.6", 8080, 63)));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("FlowHit") == hits + 2);
  CHECK(f.stat("ConntrackNew") == 1);
  // A one-way stream is cached by its second datagram.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7002, kVip, 80));
  CHECK(f.stat("FlowInstalled") == 2);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7002, kVip, 80));
  CHECK(f.stat("FlowInstalled") == 3);
  CHECK(Fixture::drain(kRepB).size() == 2);
}

TEST_CASE("services: a UDP client whose backend leaves reaches another one at once", "[engine][services]") {
  auto m = serviceModel();
  auto* svc = m.mutable_services(2);
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.2.7", 53, false);
  Fixture f(EngineConfig{}, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  const Bytes query = udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80);
  f.inject(kRepA, {query, query});
  CHECK(Fixture::drain(kUplink).size() == 2);
  // The backend moves to pod B (this node): the old connection is flushed,
  // the same client port reaches the new backend.
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.1.6", 53, true);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dataplane::v1::OK);
  CHECK(f.stat("ConntrackFlushed") == 1);
  f.inject(kRepA, query);
  CHECK(Fixture::drain(kUplink).empty());
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) == dpu::test::toHex(udp4p(kMacB, kRouterMac, "10.244.1.5", 7000, "10.244.1.6", 53, 63)));
}

// The late answer must not be cached as a routed flow: it would outlive the
// connection and hide the next connection's reply from conntrack, and the
// client would get the backend's own address back (found by
// lab_services_policies). The flushed entry stays as a tombstone instead.
TEST_CASE("services: a backend's late reply after the flush does not shadow the client's next connection to it",
          "[engine][services]") {
  auto m = serviceModel();
  auto* svc = m.mutable_services(2);
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.2.7", 53, false);
  Fixture f(EngineConfig{}, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  const Bytes query = udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80);
  const Bytes answer = fromRemote(udp4p(kRouterMac, kRemotePodMac, "10.244.2.7", 53, "10.244.1.5", 7000, 63), 10, 9, 1);
  const Bytes translated = udp4p(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 7000, 63);
  f.inject(kRepA, query);
  REQUIRE(Fixture::drain(kUplink).size() == 1);
  f.inject(kUplink, answer);
  REQUIRE(Fixture::drain(kRepA).size() == 1);
  // The backend leaves; an answer it had in flight arrives after the flush.
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.1.6", 53, true);
  REQUIRE(fullSync(*f.engine, m, 2).status() == dataplane::v1::OK);
  REQUIRE(f.stat("ConntrackFlushed") == 1);
  auto conns = connections(*f.engine);
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].state == "flushed");
  // Translated as before, and no flow is left of it.
  const size_t flows = f.flows().size();
  f.inject(kUplink, answer);
  auto late = Fixture::drain(kRepA);
  REQUIRE(late.size() == 1);
  CHECK(dpu::test::toHex(late[0]) == dpu::test::toHex(translated));
  CHECK(f.flows().size() == flows);
  // It comes back: the client's next query, from the same port, is a new
  // connection to it, whose answer must be translated back like the first.
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.2.7", 53, false);
  REQUIRE(fullSync(*f.engine, m, 3).status() == dataplane::v1::OK);
  f.inject(kRepA, query);
  REQUIRE(Fixture::drain(kUplink).size() == 1);
  f.inject(kUplink, answer);
  auto back = Fixture::drain(kRepA);
  REQUIRE(back.size() == 1);
  CHECK(dpu::test::toHex(back[0]) == dpu::test::toHex(translated));
  conns = connections(*f.engine);
  REQUIRE(conns.size() == 1);
  CHECK(conns[0].state == "replied");
  CHECK(f.stat("ConntrackFlushed") == 1);
}

// A client picks its ports per destination, so one port may reach the same
// backend through two services; the second connection's reply tuple is the
// first's (found by lab_services_policies, where it timed out).
TEST_CASE("services: a client port the backend already has from another service is translated, as Linux's NAT does",
          "[engine][services]") {
  auto m = serviceModel();
  addBackend(addService(m, "default/web-udp2", "10.96.0.40", 80, dataplane::v1::UDP), "10.244.1.6", 8080, true);
  Fixture f(EngineConfig{}, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80));
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) == dpu::test::toHex(udp4p(kMacB, kRouterMac, "10.244.1.5", 7000, "10.244.1.6", 8080, 63)));
  // The same client port to the other service: to the same backend, from another port.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, "10.96.0.40", 80));
  at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(f.stat("ConntrackConflict") == 0);
  const uint16_t port = static_cast<uint16_t>(at_b[0][34] << 8 | at_b[0][35]);
  CHECK(port != 7000);
  CHECK(port >= 1024);
  CHECK(dpu::test::toHex(at_b[0]) == dpu::test::toHex(udp4p(kMacB, kRouterMac, "10.244.1.5", port, "10.244.1.6", 8080, 63)));
  // Each answer goes back to the client's own port, from the service it asked.
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", port));
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 7000));
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 2);
  CHECK(dpu::test::toHex(at_a[0]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, "10.96.0.40", 80, "10.244.1.5", 7000, 63)));
  CHECK(dpu::test::toHex(at_a[1]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, kVip, 80, "10.244.1.5", 7000, 63)));
  int remapped = 0;
  for (const auto& c : connections(*f.engine)) remapped += c.nat == "dnat+snat";
  CHECK(remapped == 1);
}

TEST_CASE("services: client-IP affinity keeps a client on one backend until it lapses", "[engine][services]") {
  auto m = serviceModel();
  auto* svc = m.mutable_services(2);
  svc->mutable_ports(0)->clear_backends();
  for (const char* ip : {"10.244.2.7", "10.244.2.8", "10.244.2.9"}) addBackend(svc, ip, 8080, false);
  svc->set_affinity_timeout_s(10);
  Fixture f(EngineConfig{}, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  auto backendOf = [](const Bytes& p) {
    const Bytes in(p.begin() + 58, p.end());
    return IpAddress::v4(overlay::ipv4::dst(in.data() + 14)).str();
  };
  std::set<std::string> seen;
  for (uint16_t sport = 2000; sport < 2015; ++sport) {
    f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
    for (const auto& p : Fixture::drain(kUplink)) seen.insert(backendOf(p));
    g_clock += 100;
  }
  CHECK(seen.size() == 1);
  CHECK(f.stat("ServiceAffinity") == 14);
  // Past the timeout without a new connection, connections spread again.
  g_clock += 11'000;
  seen.clear();
  for (uint16_t sport = 3000; sport < 3060; ++sport) {
    f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
    for (const auto& p : Fixture::drain(kUplink)) seen.insert(backendOf(p));
    g_clock += 11'000;
  }
  CHECK(seen.size() == 3);
}

namespace {

// A UDP connection from pod A's port `sport` to the VIP, answered by its backend (pod B).
void openAnswered(Fixture& f, uint16_t sport) {
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
  REQUIRE(Fixture::drain(kRepB).size() == 1);
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", sport));
  REQUIRE(Fixture::drain(kRepA).size() == 1);
}

// The services programmed on an engine whose connection table holds `entries`.
struct SmallTable : Fixture {
  explicit SmallTable(uint32_t entries) : Fixture(config(entries), false) { programServices(*this); }
  static EngineConfig config(uint32_t entries) {
    EngineConfig c;
    c.conntrack_entries = entries;
    return c;
  }
};

}  // namespace

TEST_CASE("services: a full connection table refuses new connections and keeps the answered ones",
          "[engine][services]") {
  SmallTable f(2);
  openAnswered(f, 100);
  openAnswered(f, 101);
  // Both answered: none gives its place up.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 102, kVip, 80));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("ConntrackFull") == 1);
  CHECK(f.stat("conntrack_refused_full") == 1);
  CHECK(f.stat("conntrack_early_dropped") == 0);
  for (uint16_t sport : {100, 101}) f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
  CHECK(Fixture::drain(kRepB).size() == 2);
  CHECK(connections(*f.engine).size() == 2);
}

TEST_CASE("services: a table full of unanswered connections takes new ones in their places (early drop)",
          "[engine][services]") {
  // A flood of datagrams nobody answers fills the table; a client's new
  // connections still go through, each in a flood entry's place, and its
  // answered connection stays.
  SmallTable f(64);
  openAnswered(f, 999);
  for (uint16_t sport = 1000; sport < 1063; ++sport) {
    f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
  }
  CHECK(Fixture::drain(kRepB).size() == 63);
  CHECK(connections(*f.engine).size() == 64);
  for (uint16_t sport = 2000; sport < 2064; ++sport) {
    f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kVip, 80));
  }
  CHECK(Fixture::drain(kRepB).size() == 64);
  CHECK(f.stat("ConntrackFull") == 0);
  CHECK(f.stat("conntrack_early_dropped") == 64);
  const auto conns = connections(*f.engine);
  CHECK(conns.size() == 64);
  CHECK(std::any_of(conns.begin(), conns.end(),
                    [](const auto& e) { return e.original == "10.244.1.5:999 -> 10.96.0.10:80"; }));
}

TEST_CASE("services: an idle connection expires after its state's timeout, counting its flow's hits",
          "[engine][services]") {
  EngineConfig c;
  c.conntrack_timeouts.udp_new = 2000;
  c.conntrack_timeouts.udp_replied = 5000;
  c.flow_idle_timeout_ms = 60'000;
  Fixture f(c, false);
  programServices(f);
  const Bytes q = udp4p(kRouterMac, kMacA, "10.244.1.5", 9000, kVip, 80);
  f.inject(kRepA, q);
  REQUIRE(connections(*f.engine).size() == 1);
  // Hits of the cached flow (not seen by conntrack) keep it alive.
  for (int i = 0; i < 5; ++i) {
    g_clock += 1500;
    f.inject(kRepA, q);
    f.engine->maintain();
  }
  CHECK(connections(*f.engine).size() == 1);
  g_clock += 2500;
  for (int i = 0; i < 60; ++i) f.engine->maintain();
  CHECK(connections(*f.engine).empty());
  CHECK(f.stat("ConntrackExpired") == 1);
}

namespace {

// An ICMP error from `from` to `to` quoting the IP datagram of `quoted` (an
// Ethernet frame), as a host or router sends it.
Bytes icmpError(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, const char* to, uint8_t type,
                uint8_t code, const Bytes& quoted, uint8_t ttl = 64) {
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl})
      .icmp(type, code)
      .payload(Bytes(quoted.begin() + 14, quoted.end()))
      .build();
}

}  // namespace

TEST_CASE("services: an ICMP error about a translated connection is translated back, the quoted packet too",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  // A's datagram to the service reaches its backend B, translated.
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, kVip, 80));
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  const Bytes as_b_got = udp4p(kMacB, kRouterMac, "10.244.1.5", 5000, "10.244.1.6", 8080, 63);
  REQUIRE(dpu::test::toHex(at_b[0]) == dpu::test::toHex(as_b_got));

  // B's port is closed: its port unreachable reaches A from the service
  // address, quoting the datagram A sent (UDP checksum as A computed it).
  f.inject(kRepB, icmpError(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 3, 3, as_b_got));
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  const Bytes as_a_sent = udp4p(kMacB, kRouterMac, "10.244.1.5", 5000, kVip, 80, 63);
  CHECK(dpu::test::toHex(at_a[0]) ==
        dpu::test::toHex(icmpError(kMacA, kRouterMac, kVip, "10.244.1.5", 3, 3, as_a_sent, 63)));
  CHECK(f.stat("IcmpErrorTranslated") == 1);

  // The other way: A refuses the service's reply; its error goes to B,
  // quoting the reply as B sent it.
  f.inject(kRepB, udp4p(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 5000));
  at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  f.inject(kRepA, icmpError(kRouterMac, kMacA, "10.244.1.5", kVip, 3, 3, at_a[0]));
  at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  const Bytes reply_as_b_sent = udp4p(kMacA, kRouterMac, "10.244.1.6", 8080, "10.244.1.5", 5000, 63);
  CHECK(dpu::test::toHex(at_b[0]) ==
        dpu::test::toHex(icmpError(kMacB, kRouterMac, "10.244.1.5", "10.244.1.6", 3, 3, reply_as_b_sent, 63)));

  // Errors are never cached: their key is the packet before translation.
  const uint64_t installed = f.stat("FlowInstalled");
  f.inject(kRepB, icmpError(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 3, 3, as_b_got));
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(f.stat("FlowInstalled") == installed);
  CHECK(f.stat("IcmpErrorTranslated") == 3);

  // An error about no tracked connection is routed as it is.
  const Bytes stray = udp4p(kMacB, kRouterMac, "10.244.1.5", 5999, "10.244.1.6", 9999, 63);
  const Bytes stray_error = icmpError(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 3, 3, stray);
  f.inject(kRepB, stray_error);
  at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  CHECK(dpu::test::toHex(at_a[0]) ==
        dpu::test::toHex(icmpError(kMacA, kRouterMac, "10.244.1.6", "10.244.1.5", 3, 3, stray, 63)));
  CHECK(f.stat("IcmpErrorTranslated") == 3);
}

TEST_CASE("services: a remote backend's ICMP error arrives through the tunnel and is translated on our DPU",
          "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5000, kRemoteVip, 80));
  REQUIRE(Fixture::drain(kUplink).size() == 1);
  const Bytes as_backend_got = udp4p(kRemotePodMac, kRouterMac, "10.244.1.5", 5000, "10.244.2.7", 8081, 62);
  f.inject(kUplink, fromRemote(icmpError(kRouterMac, kRemotePodMac, "10.244.2.7", "10.244.1.5", 3, 3, as_backend_got, 63),
                               10, 9, 1));
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  const Bytes as_a_sent = udp4p(kRemotePodMac, kRouterMac, "10.244.1.5", 5000, kRemoteVip, 80, 62);
  CHECK(dpu::test::toHex(at_a[0]) ==
        dpu::test::toHex(icmpError(kMacA, kRouterMac, kRemoteVip, "10.244.1.5", 3, 3, as_a_sent, 63)));
}

TEST_CASE("services: SCTP is balanced by its ports, its addresses translated and its CRC32c left as it is",
          "[engine][services]") {
  auto m = serviceModel();
  addBackend(addService(m, "default/sctp", "10.96.0.40", 36412, dataplane::v1::SCTP), "10.244.1.6", 36412, true);
  addBackend(addService(m, "default/sctp-moved", "10.96.0.41", 36412, dataplane::v1::SCTP), "10.244.1.6", 36413, true);
  Fixture f(EngineConfig{}, false);
  const auto r = fullSync(*f.engine, m, 1);
  REQUIRE(r.status() == dataplane::v1::OK);
  REQUIRE(r.problems_size() == 0);
  // The common header (ports, verification tag, a CRC32c the DPU never
  // recomputes) and an INIT chunk's first bytes.
  auto sctp = [](overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, const char* to,
                 uint8_t ttl) {
    const Bytes l4 = {0x13, 0x88, 0x8e, 0x3c,  // 5000 -> 36412
                      0xde, 0xad, 0xbe, 0xef, 0x12, 0x34, 0x56, 0x78,
                      0x01, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00};
    return PacketBuilder()
        .ethernet(dst_mac, src_mac)
        .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl, .protocol = overlay::ipproto::kSctp})
        .payload(l4)
        .build();
  };
  f.inject(kRepA, sctp(kRouterMac, kMacA, "10.244.1.5", "10.96.0.40", 64));
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) == dpu::test::toHex(sctp(kMacB, kRouterMac, "10.244.1.5", "10.244.1.6", 63)));
  f.inject(kRepB, [&] {
    Bytes reply = sctp(kRouterMac, kMacB, "10.244.1.6", "10.244.1.5", 64);
    std::swap(reply[34], reply[36]);  // the ports the other way
    std::swap(reply[35], reply[37]);
    return reply;
  }());
  auto at_a = Fixture::drain(kRepA);
  REQUIRE(at_a.size() == 1);
  Bytes expected = sctp(kMacA, kRouterMac, "10.96.0.40", "10.244.1.5", 63);
  std::swap(expected[34], expected[36]);
  std::swap(expected[35], expected[37]);
  CHECK(dpu::test::toHex(at_a[0]) == dpu::test::toHex(expected));
  // A target port other than the service port would need the CRC32c recomputed: refused, counted.
  f.inject(kRepA, sctp(kRouterMac, kMacA, "10.244.1.5", "10.96.0.41", 64));
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(f.stat("ServiceSctpPortChange") == 1);
}

// Offload: a translated connection's flows go to the NIC once their ports hold
// close punt rules (offloadable.h closePuntShape), so its FIN and RST still reach conntrack.

namespace {

// The handshake of 10.244.1.5:40000 → the cluster IP, established; both flows cached.
void establish(Fixture& f) {
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kSyn));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kAck));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kAck));
  Fixture::drainAll();
  REQUIRE(connections(*f.engine).at(0).state == "established");
  REQUIRE(f.stat("FlowInstalled") == 2);
}

}  // namespace

TEST_CASE("services offload: an established connection's flows go to the NIC after their ports' close punt rules",
          "[engine][services][offload]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c, false);
  programServices(f);
  establish(f);
  f.engine->maintain();  // offers the two flows
  REQUIRE(eswitch.installedCount() == 2);
  // Their rules, and the close punt rules (FIN, SYN, RST) of the two ports they arrive on.
  CHECK(eswitch.closePuntSets().size() == 2);
  CHECK(eswitch.ruleCount() == 2 + 6);
  std::string client_match;
  for (const auto& fl : f.flows()) {
    INFO(fl.match() << " " << fl.offload_status());
    CHECK(fl.in_hw());
    CHECK(fl.offload_status() == "offloaded+punt:fin,syn,rst");
    if (fl.match().find("tp_src=40000") != std::string::npos) client_match = fl.match();
  }
  REQUIRE_FALSE(client_match.empty());
  for (uint64_t id = 0; id < 8; ++id) {
    const dpu::offload::OffloadHandle h{id};
    if (eswitch.installed(h) == nullptr) continue;
    CHECK(eswitch.puntFlags(h) == 0x07);
    CHECK(eswitch.installed(h)->match.key.ip_proto == overlay::ipproto::kTcp);
  }

  // The client's FIN, as its punt rule hands it to pf0vf0's representor: it
  // reaches conntrack, is forwarded translated, and the flow stays in the NIC.
  const uint64_t punts = f.stat("ConntrackPunt");
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kFin | kAck));
  auto at_b = Fixture::drain(kRepB);
  REQUIRE(at_b.size() == 1);
  CHECK(dpu::test::toHex(at_b[0]) ==
        dpu::test::toHex(tcp4(kMacB, kRouterMac, "10.244.1.5", 40000, "10.244.1.6", 8080, kFin | kAck, 63)));
  CHECK(f.stat("ConntrackPunt") == punts + 1);
  CHECK(connections(*f.engine).at(0).state != "established");
  f.engine->maintain();
  CHECK(eswitch.installedCount() == 2);

  // Its RST closes the connection: the flow leaves the cache, and the NIC
  // loses its rule; the ports keep their punt rules for the next connection.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kRst | kAck));
  Fixture::drainAll();
  f.engine->maintain();
  std::string left;
  for (const auto& fl : f.flows()) left += fl.match() + "\n";
  INFO(left);
  CHECK(left.find(client_match) == std::string::npos);
  CHECK(eswitch.installedCount() < 2);
  CHECK(eswitch.ruleCount() == eswitch.installedCount() + 6);
  for (uint64_t id = 0; id < 8; ++id) {
    const flow::FlowSpec* spec = eswitch.installed(dpu::offload::OffloadHandle{id});
    if (spec != nullptr) CHECK(spec->match.key.l4_src != 40000);
  }
}

TEST_CASE("services offload: a punt rule the NIC fails to create leaves the flow in software, nothing in hardware",
          "[engine][services][offload]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c, false);
  programServices(f);
  establish(f);
  eswitch.failNextPuntInstall("out of steering memory");  // the first flow offered
  f.engine->maintain();
  unsigned in_hw = 0, refused = 0;
  for (const auto& fl : f.flows()) {
    INFO(fl.match() << " " << fl.offload_status());
    if (fl.in_hw()) {
      ++in_hw;
      CHECK(fl.offload_status() == "offloaded+punt:fin,syn,rst");
    } else {
      ++refused;
      CHECK(fl.offload_status() == "software: close punt rule: out of steering memory");
    }
  }
  CHECK(in_hw == 1);
  CHECK(refused == 1);
  // Only the other flow's rule and its port's punt rules are in the NIC.
  CHECK(eswitch.installedCount() == 1);
  CHECK(eswitch.closePuntSets().size() == 1);
  CHECK(eswitch.ruleCount() == 4);
  // The refused flow still works in software, its close tracked.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, kVip, 80, kFin | kAck));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kFin | kAck));
  CHECK(Fixture::drain(kRepB).size() == 1);
  CHECK(Fixture::drain(kRepA).size() == 1);
  CHECK(connections(*f.engine).at(0).state == "time-wait");
}

// A Delta that changes services only takes the engine's incremental path
// (installServiceDelta): the UDP flush must still find the changed service's
// connections, and only theirs.
TEST_CASE("services: a Delta of one service flushes that service's UDP clients and no other's", "[engine][services]") {
  Fixture f(EngineConfig{}, false);
  programServices(f);
  const Bytes to_web = udp4p(kRouterMac, kMacA, "10.244.1.5", 7000, kVip, 80);
  const Bytes to_remote = udp4p(kRouterMac, kMacA, "10.244.1.5", 7001, kRemoteVip, 80);
  f.inject(kRepA, to_web);
  REQUIRE(Fixture::drain(kRepB).size() == 1);
  // Twice: the first datagram opens the connection uncached, the second caches it.
  f.inject(kRepA, {to_remote, to_remote});
  REQUIRE(Fixture::drain(kUplink).size() == 2);
  REQUIRE(connections(*f.engine).size() == 2);
  // The cached flows of the other service's connection (matched on its
  // client port): a Delta of web-udp must leave them valid.
  auto remoteFlows = [&f] {
    std::set<std::string> out;
    for (const auto& fl : f.flows()) {
      if (fl.match().find("7001") != std::string::npos) out.insert(fl.match());
    }
    return out;
  };
  const auto remote_flows = remoteFlows();
  REQUIRE(!remote_flows.empty());
  auto flushed = [&f] {
    std::set<std::string> out;
    for (const auto& c : connections(*f.engine)) {
      if (c.state == "flushed") out.insert(c.original);
    }
    return out;
  };
  auto delta = [&f](uint64_t generation, const std::function<void(dataplane::v1::Delta&)>& fill) {
    dataplane::v1::ProgramRequest req;
    auto* d = req.mutable_delta();
    d->set_base_generation(generation - 1);
    d->set_generation(generation);
    fill(*d);
    const auto r = f.engine->program(req);
    INFO(r.message());
    REQUIRE(r.status() == dataplane::v1::OK);
    CHECK(r.generation() == generation);
    CHECK(r.problems_size() == 0);
  };

  // web-udp's backend moves to a remote pod: its client is flushed and its
  // next datagram, from the same port, goes through the tunnel.
  auto m = serviceModel();
  auto* svc = m.mutable_services(2);
  svc->mutable_ports(0)->clear_backends();
  addBackend(svc, "10.244.2.7", 53, false);
  delta(2, [&](dataplane::v1::Delta& d) { *d.add_upsert_services() = *svc; });
  CHECK(f.stat("ConntrackFlushed") == 1);
  REQUIRE(flushed().size() == 1);
  CHECK(flushed().begin()->find(":7000") != std::string::npos);
  f.inject(kRepA, to_web);
  CHECK(Fixture::drain(kRepB).empty());
  CHECK(Fixture::drain(kUplink).size() == 1);
  // The other service's client was left alone, its flows too.
  CHECK(remoteFlows() == remote_flows);
  f.inject(kRepA, to_remote);
  CHECK(Fixture::drain(kUplink).size() == 1);

  // A service deleted by a Delta: its clients go, the other's stay.
  delta(3, [](dataplane::v1::Delta& d) { d.add_delete_services("default/web-udp"); });
  CHECK(f.stat("ConntrackFlushed") == 2);
  for (const auto& c : flushed()) CHECK(c.find(":7001") == std::string::npos);
  dataplane::v1::OperatorRequest req;
  req.mutable_services();
  const auto view = f.engine->operate(req);
  for (const auto& fe : view.services()) CHECK(fe.service() != "default/web-udp");
}

// A dataplane restart with the tables on files (conntrack.persist): the new
// engine takes every connection and every client's backend over. The
// backend's reply that arrives before any packet of the client is still
// translated back (a fresh table would deliver it untranslated, and the
// client's stack would reset the connection), and a new connection of the
// client goes where its affinity said.
TEST_CASE("services: a restarted engine on the same table files takes connections and affinity over",
          "[engine][services][persist]") {
  const dpu::test::TempDir dir("dpu-engine-ct");
  REQUIRE(!dir.path.empty());
  EngineConfig c;
  c.conntrack_file = dir.file("ct");
  c.affinity_file = dir.file("aff");
  auto m = serviceModel();
  auto* svc = m.mutable_services(1);  // default/remote: UDP, backends on node2
  for (const char* ip : {"10.244.2.8", "10.244.2.9"}) addBackend(svc, ip, 8081, false);
  svc->set_affinity_timeout_s(600);
  auto backendOf = [](const Bytes& p) {
    const Bytes in(p.begin() + 58, p.end());
    return IpAddress::v4(overlay::ipv4::dst(in.data() + 14)).str();
  };
  std::string backend;
  {
    Fixture f(c, false);
    REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
    for (uint16_t sport = 5000; sport <= 5010; ++sport) {
      f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kRemoteVip, 80));
      const auto out = Fixture::drain(kUplink);
      REQUIRE(out.size() == 1);
      if (backend.empty()) backend = backendOf(out[0]);
      CHECK(backendOf(out[0]) == backend);
    }
    CHECK(f.stat("ConntrackAdopted") == 0);
    REQUIRE(connections(*f.engine).size() == 11);
  }  // the process is gone

  {
    Fixture f(c, false);
    REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
    CHECK(f.stat("ConntrackAdopted") == 11);
    CHECK(connections(*f.engine).size() == 11);
    // The backend answers first: translated back to the service's address.
    f.inject(kUplink,
             fromRemote(udp4p(kRouterMac, kRemotePodMac, backend.c_str(), 8081, "10.244.1.5", 5003, 63), 10, 9, 1));
    auto back = Fixture::drain(kRepA);
    REQUIRE(back.size() == 1);
    CHECK(dpu::test::toHex(back[0]) ==
          dpu::test::toHex(udp4p(kMacA, kRouterMac, kRemoteVip, 80, "10.244.1.5", 5003, 63)));
    // A new connection of the client: its backend, by the affinity the last process recorded.
    const uint64_t sticky = f.stat("ServiceAffinity");
    for (uint16_t sport = 5100; sport < 5110; ++sport) {
      f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", sport, kRemoteVip, 80));
      const auto out = Fixture::drain(kUplink);
      REQUIRE(out.size() == 1);
      CHECK(backendOf(out[0]) == backend);
    }
    CHECK(f.stat("ServiceAffinity") == sticky + 10);
    CHECK(f.stat("ConntrackNew") == 10);
  }

  // Restarted with other sizes for both tables: the connections and the
  // clients' backends are carried over, the backend's answer is still
  // translated back and the client's next connection still sticks.
  c.conntrack_entries = 4096;
  c.affinity_entries = 1024;
  Fixture f(c, false);
  REQUIRE(fullSync(*f.engine, m, 1).status() == dataplane::v1::OK);
  CHECK(f.stat("ConntrackAdopted") == 21);
  CHECK(connections(*f.engine).size() == 21);
  f.inject(kUplink, fromRemote(udp4p(kRouterMac, kRemotePodMac, backend.c_str(), 8081, "10.244.1.5", 5105, 63), 10, 9, 1));
  auto back = Fixture::drain(kRepA);
  REQUIRE(back.size() == 1);
  CHECK(dpu::test::toHex(back[0]) == dpu::test::toHex(udp4p(kMacA, kRouterMac, kRemoteVip, 80, "10.244.1.5", 5105, 63)));
  CHECK(f.stat("ConntrackNew") == 0);
  const uint64_t sticky = f.stat("ServiceAffinity");
  f.inject(kRepA, udp4p(kRouterMac, kMacA, "10.244.1.5", 5200, kRemoteVip, 80));
  const auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(backendOf(out[0]) == backend);
  CHECK(f.stat("ServiceAffinity") == sticky + 1);
}
