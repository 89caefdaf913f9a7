// Component tests of the Engine's north–south path (north_south.h): EAL
// in-process (--no-huge, no PCI), net_ring ports for the uplink, the host PF
// and one pod's representor, a model with node addresses, packets built by
// PacketBuilder injected through processBurst, and what each ring port sent
// compared byte for byte. The control thread's part (northSouthUpdate, the
// tables, ageing) runs where a test calls it, on a clock the test moves.
// A binary of its own: EAL initialises once per process and the engine's
// other component tests keep their four ports.
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "engine_impl.h"
#include "fake_eswitch.h"
#include "overlay/geneve.h"
#include "overlay/packet_builder.h"
#include "golden.h"

using namespace dpu;
using namespace dpu::datapath;
using overlay::PacketBuilder;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr unsigned kPorts = 3;
enum : uint16_t { kUplink = 0, kHost = 1, kRep = 2 };

struct Env {
  rte_mempool* pool = nullptr;
  uint16_t port[kPorts] = {};
  rte_ring* tx[kPorts] = {};
};

Env& env() {
  static Env e = [] {
    Env out;
    const std::string prefix = "--file-prefix=engine_ns_test_" + std::to_string(getpid());
    std::vector<std::string> args = {"engine_ns_tests", "--no-huge", "--no-pci", "-m", "128", prefix,
                                     "--log-level=error", "-l", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) throw std::runtime_error("rte_eal_init failed");
    out.pool = rte_pktmbuf_pool_create("engine_ns_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (out.pool == nullptr) throw std::runtime_error("mempool");
    for (unsigned i = 0; i < kPorts; ++i) {
      const std::string n = "ns" + std::to_string(i);
      rte_ring* rx = rte_ring_create((n + "rx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      out.tx[i] = rte_ring_create((n + "tx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      const int id = rte_eth_from_rings(("net_ring_" + n).c_str(), &rx, 1, &out.tx[i], 1, SOCKET_ID_ANY);
      if (id < 0) throw std::runtime_error("rte_eth_from_rings");
      out.port[i] = static_cast<uint16_t>(id);
      rte_eth_conf conf{};
      if (rte_eth_dev_configure(out.port[i], 1, 1, &conf) != 0 ||
          rte_eth_rx_queue_setup(out.port[i], 0, 64, SOCKET_ID_ANY, nullptr, out.pool) != 0 ||
          rte_eth_tx_queue_setup(out.port[i], 0, 64, SOCKET_ID_ANY, nullptr) != 0 || rte_eth_dev_start(out.port[i]) != 0) {
        throw std::runtime_error("ring port set-up");
      }
    }
    return out;
  }();
  return e;
}

std::atomic<uint64_t> g_clock{5'000'000};
uint64_t testClock() { return g_clock.load(); }
// The slow-path budget's cycle counter stands still: nothing a test does
// costs cycles, so the cycle share never drops one of its misses (with the
// TSC it would, when the machine is slow).
uint64_t stillCycles() { return 0; }

overlay::MacAddress mac(const char* text) { return MacAddress::parse(text).value().bytes; }
std::string hex(const Bytes& b) { return test::toHex(b.data(), b.size()); }
uint32_t ip4(const char* text) { return IpAddress::parse(text).value().v4HostOrder(); }
overlay::Ipv6Address ip6(const char* text) {
  overlay::Ipv6Address a;
  std::memcpy(a.data(), IpAddress::parse(text).value().bytes.data(), 16);
  return a;
}

const auto kRouterMac = mac("0a:58:a9:fe:00:01");
const auto kPodMac = mac("0a:58:0a:f4:01:05");
const auto kUplinkMac = mac("02:00:00:00:00:01");
const auto kNextHopMac = mac("02:00:00:00:00:02");
const auto kHostMac = mac("02:18:00:00:00:01");
const auto kHostMac2 = mac("02:18:00:00:00:02");
const auto kGatewayMac = mac("02:18:00:00:00:fe");
const auto kGatewayMac2 = mac("02:18:00:00:01:fe");
const auto kPeerMac = mac("02:18:00:00:00:09");
const overlay::MacAddress kZeroMac{};

dataplane::v1::LogicalModel baseModel(bool gateway = true) {
  dataplane::v1::LogicalModel m;
  auto* n = m.mutable_node();
  n->set_name("node1");
  n->set_tunnel_ip("192.168.100.1");
  n->set_underlay_mtu(1500);
  n->set_pod_mtu(1400);
  n->set_router_mac("0a:58:a9:fe:00:01");
  n->add_cluster_cidrs("10.244.0.0/16");
  n->add_cluster_cidrs("fd00:10:244::/48");
  n->add_node_ips("172.18.0.1/24");
  n->add_node_ips("2001:db8:18::1/64");
  if (gateway) {
    n->add_node_gateways("172.18.0.254");
    n->add_node_gateways("2001:db8:18::fe");
  }
  auto* s = m.add_local_subnets();
  s->set_cidr("10.244.1.0/24");
  s->set_gateway_ip("10.244.1.1");
  s->set_datapath_key(10);
  auto* s6 = m.add_local_subnets();
  s6->set_cidr("fd00:10:244:1::/64");
  s6->set_gateway_ip("fd00:10:244:1::1");
  s6->set_datapath_key(10);
  auto* p = m.add_ports();
  p->set_name("pod-a");
  p->set_key(1);
  p->set_kind(dataplane::v1::POD);
  p->set_representor("pf0vf0");
  p->set_mac("0a:58:0a:f4:01:05");
  p->add_ips("10.244.1.5");
  p->add_ips("fd00:10:244:1::5");
  p->set_datapath_key(10);
  auto* r = m.add_remote_nodes();
  r->set_name("node2");
  r->set_tunnel_ip("192.168.100.2");
  auto* rs = r->add_subnets();
  rs->set_cidr("10.244.2.0/24");
  rs->set_datapath_key(20);
  auto* rs6 = r->add_subnets();
  rs6->set_cidr("fd00:10:244:2::/64");
  rs6->set_datapath_key(20);
  return m;
}

struct Fixture {
  std::unique_ptr<Engine> engine;
  explicit Fixture(EngineConfig config = {}, bool gateway = true) {
    Env& en = env();
    drainAll();
    config.clock_ms = testClock;
    config.cycles = stillCycles;
    auto created = Engine::create(config);
    REQUIRE(created.ok());
    engine = std::move(created.value());
    REQUIRE(engine->bindPort("uplink", en.port[kUplink], PortRole::kUplink, MacAddress{kUplinkMac}).ok());
    REQUIRE(engine->bindPort("host_pf", en.port[kHost], PortRole::kHostPf, MacAddress{}).ok());
    REQUIRE(engine->bindPort("pf0vf0", en.port[kRep], PortRole::kRepresentor, MacAddress{kPodMac}).ok());
    REQUIRE(engine->setTunnelNextHop(IpAddress::parse("192.168.100.2").value(), MacAddress{kNextHopMac}).ok());
    dataplane::v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(1);
    *req.mutable_full_sync()->mutable_model() = baseModel(gateway);
    auto r = engine->program(req);
    INFO(r.message());
    REQUIRE(r.status() == dataplane::v1::OK);
  }
  ~Fixture() {
    if (engine) {
      engine->quiescent(engine->worker(0));
      engine->maintain();
    }
    drainAll();
  }
  EngineImpl& impl() { return static_cast<EngineImpl&>(*engine); }
  static void drainAll() {
    for (unsigned i = 0; i < kPorts; ++i) (void)drain(i);
  }
  static std::vector<Bytes> drain(unsigned port) {
    std::vector<Bytes> out;
    rte_mbuf* m[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(env().tx[port], reinterpret_cast<void**>(m), 64, nullptr)) > 0) {
      for (unsigned i = 0; i < n; ++i) {
        const uint8_t* d = rte_pktmbuf_mtod(m[i], const uint8_t*);
        out.emplace_back(d, d + m[i]->data_len);
        rte_pktmbuf_free(m[i]);
      }
    }
    return out;
  }
  void inject(unsigned port, const Bytes& packet) {
    rte_mbuf* m = rte_pktmbuf_alloc(env().pool);
    REQUIRE(m != nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(packet.size())), packet.data(), packet.size());
    WorkerContext& w = engine->worker(0);
    engine->processBurst(w, env().port[port], &m, 1);
    engine->flush(w);
    engine->quiescent(w);
  }
  // Injected on `in`, it leaves on `out` exactly as it came, and nowhere else.
  void bridged(unsigned in, unsigned out, const Bytes& packet) {
    inject(in, packet);
    for (unsigned p = 0; p < kPorts; ++p) {
      auto sent = drain(p);
      if (p != out) {
        CHECK(sent.empty());
        continue;
      }
      REQUIRE(sent.size() == 1);
      CHECK(test::toHex(sent[0].data(), sent[0].size()) == test::toHex(packet.data(), packet.size()));
    }
  }
  // The control thread takes what the lcore learned (the eventfd's work).
  void update() { engine->northSouthUpdate(); }
  uint64_t stat(const std::string& name) {
    dataplane::v1::OperatorRequest req;
    req.mutable_stats();
    const auto reply = engine->operate(req);
    for (const auto& c : reply.counters())
      if (c.name() == name) return c.value();
    FAIL("no counter " << name);
    return 0;
  }
  dataplane::v1::NorthSouthInfo neighbours() {
    dataplane::v1::OperatorRequest req;
    req.mutable_neighbours();
    return engine->operate(req).north_south();
  }
  const dataplane::v1::NeighbourInfo* neighbour(const std::string& ip) {
    static dataplane::v1::NorthSouthInfo last;
    last = neighbours();
    for (const auto& n : last.neighbours())
      if (n.ip() == ip) return &n;
    return nullptr;
  }
  std::vector<dataplane::v1::FlowEntry> flows() {
    dataplane::v1::OperatorRequest req;
    req.mutable_dump_flows();
    auto r = engine->operate(req);
    return {r.flows().begin(), r.flows().end()};
  }
  // northSouthRoute as the slow path calls it, this test acting as the lcore.
  DropReason route(const char* dst, NorthSouthRoute& out) {
    WorkerContext& w = engine->worker(0);
    w.now_ms = testClock();
    PacketContext pc{};
    pc.mbuf = rte_pktmbuf_alloc(env().pool);
    REQUIRE(pc.mbuf != nullptr);
    const IpAddress to = IpAddress::parse(dst).value();
    const DropReason r = impl().northSouthRoute(w, impl().currentSnapshot(), pc, to.bytes.data(), !to.isV4(), out);
    rte_pktmbuf_free(pc.mbuf);
    engine->flush(w);
    engine->quiescent(w);
    return r;
  }
};

// Packets of the node network (172.18.0.0/24: the node .1, its gateway .254).
Bytes arpRequest(overlay::MacAddress src, const char* sender, const char* target,
                 overlay::MacAddress dst = overlay::eth::kBroadcast) {
  return PacketBuilder().ethernet(dst, src).arp(overlay::arp::kOpRequest, src, ip4(sender), kZeroMac, ip4(target)).build();
}
Bytes arpReply(overlay::MacAddress src, const char* sender, overlay::MacAddress to, const char* target) {
  return PacketBuilder().ethernet(to, src).arp(overlay::arp::kOpReply, src, ip4(sender), to, ip4(target)).build();
}
Bytes tcp4(overlay::MacAddress dst, overlay::MacAddress src, const char* from, const char* to, uint16_t sport = 40000) {
  Bytes body(100, 0x5a);
  return PacketBuilder()
      .ethernet(dst, src)
      .ipv4({.src = ip4(from), .dst = ip4(to)})
      .tcp({.src_port = sport, .dst_port = 80, .flags = overlay::tcp::kFlagAck})
      .payload(body)
      .build();
}
Bytes tcp6(overlay::MacAddress dst, overlay::MacAddress src, const char* from, const char* to) {
  Bytes body(60, 0x6b);
  return PacketBuilder()
      .ethernet(dst, src)
      .ipv6({.src = ip6(from), .dst = ip6(to)})
      .tcp({.src_port = 40001, .dst_port = 443, .flags = overlay::tcp::kFlagAck})
      .payload(body)
      .build();
}
// A neighbour solicitation from `from` at `src` (from ::, none: no source
// link-layer option) for `target`: to its solicited-node group, or unicast
// to `target` at `to`.
Bytes neighborSolicit(const char* from, const char* target, overlay::MacAddress src = kGatewayMac,
                      std::optional<overlay::MacAddress> to = std::nullopt) {
  const overlay::Ipv6Address t = ip6(target);
  overlay::Ipv6Address group = ip6("ff02::1:ff00:0");
  std::memcpy(group.data() + 13, t.data() + 13, 3);
  const overlay::Ipv6Address sender = ip6(from);
  const bool dad = overlay::ipv6::isUnspecified(sender.data());
  return PacketBuilder()
      .ethernet(to ? *to : overlay::eth::ipv6MulticastMac(group.data()), src)
      .ipv6({.src = sender, .dst = to ? t : group, .hop_limit = 255})
      .neighborSolicit(t, dad ? std::nullopt : std::optional<overlay::MacAddress>(src))
      .build();
}
// An advertisement of `target` at `mac` from `src`, to `dst` (an address,
// or all-nodes) at `to`.
Bytes neighborAdvert(overlay::MacAddress src, overlay::MacAddress to, const char* dst, const char* target,
                     overlay::MacAddress mac, bool solicited) {
  using overlay::icmp6::kNaFlagOverride, overlay::icmp6::kNaFlagSolicited;
  return PacketBuilder()
      .ethernet(to, src)
      .ipv6({.src = ip6(target), .dst = ip6(dst), .hop_limit = 255})
      .neighborAdvert(kNaFlagOverride | (solicited ? kNaFlagSolicited : 0u), ip6(target), mac)
      .build();
}
const auto kAllNodesMac = mac("33:33:00:00:00:01");
// Geneve from node2's DPU for pod-a, to `local` (our tunnel IP, or not).
Bytes fromNode2(const char* local) {
  const Bytes inner = PacketBuilder()
                          .ethernet(kRouterMac, mac("0a:58:0a:f4:02:07"))
                          .ipv4({.src = ip4("10.244.2.7"), .dst = ip4("10.244.1.5"), .ttl = 63})
                          .udp(1234, 80)
                          .build();
  std::array<uint8_t, 4> data;
  overlay::GeneveOption opt;
  REQUIRE(overlay::makeOvnOption({9, 0x8000}, data, opt) == overlay::Status::kOk);
  overlay::GeneveTunnel t;
  t.src_mac = kNextHopMac;
  t.dst_mac = kUplinkMac;
  const auto s = IpAddress::parse("192.168.100.2").value(), d = IpAddress::parse(local).value();
  std::copy(s.bytes.begin(), s.bytes.end(), t.src_ip.begin());
  std::copy(d.bytes.begin(), d.bytes.end(), t.dst_ip.begin());
  t.vni = 10;
  t.options = std::span<const overlay::GeneveOption>(&opt, 1);
  std::vector<uint8_t> buf(512 + inner.size());
  std::memcpy(buf.data() + 256, inner.data(), inner.size());
  overlay::PacketBuffer pb(buf.data(), static_cast<uint32_t>(buf.size()), 256, static_cast<uint32_t>(inner.size()));
  REQUIRE(overlay::encapGeneve(pb, t, 77) == overlay::Status::kOk);
  return Bytes(pb.data(), pb.data() + pb.size());
}

// The host says which MAC holds its node IP (its ARP for the gateway), as a host does first.
void hostArps(Fixture& f, overlay::MacAddress host = kHostMac) {
  f.bridged(kHost, kUplink, arpRequest(host, "172.18.0.1", "172.18.0.254"));
  f.update();
}

}  // namespace

TEST_CASE("north-south: the host's frames leave on the uplink untouched; its MAC is learned, its flows cached",
          "[engine][north-south]") {
  Fixture f;
  // A new host MAC: forwarded at once, learned, not cached yet.
  f.bridged(kHost, kUplink, tcp4(kGatewayMac, kHostMac, "172.18.0.1", "203.0.113.1"));
  CHECK(f.stat("FlowInstalled") == 0);
  f.update();
  CHECK(f.stat("HostMacLearned") == 1);
  auto ns = f.neighbours();
  CHECK(ns.host_pf() == "host_pf");
  CHECK(ns.host_pf_dpdk_port() == env().port[kHost]);
  REQUIRE(ns.host_macs_size() == 1);
  CHECK(ns.host_macs(0).mac() == "02:18:00:00:00:01");
  CHECK(ns.node_ips_size() == 2);
  CHECK(ns.node_gateways(0) == "172.18.0.254");
  // Its ARP says the node IP is at that MAC; ARP is forwarded every time, never cached.
  hostArps(f);
  hostArps(f);
  ns = f.neighbours();
  REQUIRE(ns.host_macs(0).node_ips_size() == 1);
  CHECK(ns.host_macs(0).node_ips(0) == "172.18.0.1");
  CHECK(f.stat("FlowInstalled") == 0);
  // Known now: the next frame installs a flow of one Output, and the one after hits it.
  const Bytes out = tcp4(kGatewayMac, kHostMac, "172.18.0.1", "203.0.113.1", 40002);
  f.bridged(kHost, kUplink, out);
  CHECK(f.stat("FlowInstalled") == 1);
  const uint64_t hits = f.stat("FlowHit");
  f.bridged(kHost, kUplink, out);
  CHECK(f.stat("FlowHit") == hits + 1);
  // IPv6 and broadcast from the host are the host's to send too.
  f.bridged(kHost, kUplink, tcp6(kGatewayMac, kHostMac, "2001:db8:18::1", "2001:db8:99::1"));
  f.bridged(kHost, kUplink,
            PacketBuilder()
                .ethernet(overlay::eth::kBroadcast, kHostMac)
                .ipv4({.src = ip4("172.18.0.1"), .dst = ip4("255.255.255.255")})
                .udp(68, 67)
                .build());
  bool seen = false;
  for (const auto& fl : f.flows()) {
    if (fl.match().find("tp_src=40002") == std::string::npos) continue;
    seen = true;
    CHECK(fl.actions() == "output:" + std::to_string(env().port[kUplink]));
    CHECK(fl.packets() == 2);
  }
  CHECK(seen);
}

TEST_CASE("north-south: the uplink's frames for the host reach it untouched, the rest is dropped",
          "[engine][north-south]") {
  Fixture f;
  const Bytes to_host = tcp4(kHostMac, kGatewayMac, "203.0.113.1", "172.18.0.1");
  // Before the host's MAC is known, unicast for it is nobody's here.
  f.inject(kUplink, to_host);
  CHECK(Fixture::drain(kHost).empty());
  CHECK(f.stat("FabricNotForHost") == 1);
  // ARP for the node IP reaches the host whatever it knows (broadcast), and so does its answer the other way.
  f.bridged(kUplink, kHost, arpRequest(kGatewayMac, "172.18.0.254", "172.18.0.1"));
  f.bridged(kHost, kUplink, arpReply(kHostMac, "172.18.0.1", kGatewayMac, "172.18.0.254"));
  const uint64_t installed = f.stat("FlowInstalled");  // the drop above was cached
  f.update();
  // The host's MAC is known: its unicast is bridged (the cached drop retired), cached, then hit.
  f.bridged(kUplink, kHost, to_host);
  CHECK(f.stat("FlowInstalled") == installed + 1);
  const uint64_t hits = f.stat("FlowHit");
  f.bridged(kUplink, kHost, to_host);
  CHECK(f.stat("FlowHit") == hits + 1);
  f.bridged(kUplink, kHost, tcp6(kHostMac, kGatewayMac, "2001:db8:99::1", "2001:db8:18::1"));
  // A neighbour solicitation for the node's IPv6 address, to its solicited-node group.
  f.bridged(kUplink, kHost, neighborSolicit("2001:db8:18::fe", "2001:db8:18::1"));
  // A DHCP server's broadcast answer to the host's MAC (a client that has no
  // address yet asks for broadcast): the host's, read every time (its flow
  // key does not hold the client's MAC that decided).
  const auto offer = [](const overlay::MacAddress& client) {
    return PacketBuilder()
        .ethernet(overlay::eth::kBroadcast, kGatewayMac)
        .ipv4({.src = ip4("172.18.0.254"), .dst = ip4("255.255.255.255")})
        .udp(67, 68)
        .dhcpReply(client, ip4("172.18.0.1"))
        .build();
  };
  const uint64_t installed_offer = f.stat("FlowInstalled");
  f.bridged(kUplink, kHost, offer(kHostMac));
  f.bridged(kUplink, kHost, offer(kHostMac));
  CHECK(f.stat("FlowInstalled") == installed_offer);

  // What is not the host's: dropped, counted.
  const uint64_t dropped = f.stat("FabricNotForHost");
  for (const Bytes& other : {offer(kPeerMac), arpRequest(kGatewayMac, "172.18.0.254", "172.18.0.77"),
                             tcp4(kPeerMac, kGatewayMac, "203.0.113.1", "172.18.0.9"),
                             neighborSolicit("2001:db8:18::fe", "2001:db8:18::77"),
                             PacketBuilder()
                                 .ethernet(overlay::eth::kBroadcast, kGatewayMac)
                                 .ipv4({.src = ip4("172.18.0.254"), .dst = ip4("255.255.255.255")})
                                 .udp(67, 68)
                                 .build()}) {
    f.inject(kUplink, other);
    for (unsigned p = 0; p < kPorts; ++p) CHECK(Fixture::drain(p).empty());
  }
  CHECK(f.stat("FabricNotForHost") == dropped + 5);
  // Another client's answer, dropped, left no cached drop for the host's: the
  // same server, addresses and ports, only the chaddr differs.
  f.bridged(kUplink, kHost, offer(kHostMac));

  // Between a tunnelled packet and the next of the host's: the host's still hits its flow.
  f.inject(kUplink, fromNode2("192.168.100.1"));
  CHECK(Fixture::drain(kRep).size() == 1);
  const uint64_t installed_now = f.stat("FlowInstalled"), hits_now = f.stat("FlowHit");
  f.bridged(kUplink, kHost, to_host);
  CHECK(f.stat("FlowInstalled") == installed_now);
  CHECK(f.stat("FlowHit") == hits_now + 1);

  // Our own tunnel traffic still goes to the pods: Geneve for our tunnel IP is
  // decapsulated; Geneve for another address is the fabric's, and not the host's.
  f.inject(kUplink, fromNode2("192.168.100.1"));
  CHECK(Fixture::drain(kRep).size() == 1);
  CHECK(Fixture::drain(kHost).empty());
  f.inject(kUplink, fromNode2("192.168.100.50"));
  CHECK(Fixture::drain(kRep).empty());
  CHECK(f.stat("FabricNotForHost") == dropped + 6);
  CHECK(f.stat("WrongTunnelDestination") == 0);
}

TEST_CASE("north-south: what the host may not claim, and a full host MAC table, are refused",
          "[engine][north-south]") {
  EngineConfig c;
  c.max_host_macs = 2;
  Fixture f(c);
  for (const auto& src : {kRouterMac, kPodMac, kUplinkMac, mac("01:00:5e:00:00:01")}) {
    f.inject(kHost, tcp4(kGatewayMac, src, "172.18.0.1", "203.0.113.1"));
    CHECK(Fixture::drain(kUplink).empty());
  }
  CHECK(f.stat("HostMacRefused") == 4);
  f.bridged(kHost, kUplink, arpRequest(kHostMac, "172.18.0.1", "172.18.0.254"));
  f.bridged(kHost, kUplink, arpRequest(kHostMac2, "172.18.0.1", "172.18.0.254"));
  f.update();
  CHECK(f.neighbours().host_macs_size() == 2);
  f.inject(kHost, arpRequest(mac("02:18:00:00:00:03"), "172.18.0.1", "172.18.0.254"));
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(f.stat("HostMacTableFull") == 1);
  f.update();
  CHECK(f.neighbours().host_macs_size() == 2);
  // The node IP moved to the second MAC (its ARP came last).
  auto ns = f.neighbours();
  for (const auto& h : ns.host_macs()) {
    CHECK(h.node_ips_size() == (h.mac() == "02:18:00:00:00:02" ? 1 : 0));
  }
}

TEST_CASE("north-south: neighbours are learned from ARP to a node IP, only updated by other ARP",
          "[engine][north-south]") {
  Fixture f;
  hostArps(f);
  f.bridged(kUplink, kHost, arpRequest(kGatewayMac, "172.18.0.254", "172.18.0.1"));
  // Not learned: ARP between others (not bridged), from off the node network,
  // for our own node IP, from the host's own MAC.
  f.inject(kUplink, arpRequest(kPeerMac, "172.18.0.9", "172.18.0.50"));
  f.bridged(kUplink, kHost, arpRequest(kPeerMac, "10.9.9.9", "172.18.0.1"));
  f.bridged(kUplink, kHost, arpRequest(kPeerMac, "172.18.0.1", "172.18.0.1"));
  f.update();
  auto ns = f.neighbours();
  REQUIRE(ns.neighbours_size() == 1);
  CHECK(ns.neighbours(0).ip() == "172.18.0.254");
  CHECK(ns.neighbours(0).mac() == "02:18:00:00:00:fe");
  CHECK(ns.neighbours(0).state() == "reachable");
  CHECK(ns.neighbours(0).learned_from() == "ARP request to a node IP");
  CHECK(f.stat("NeighbourLearned") == 1);
  // A known neighbour's gratuitous ARP (to nobody here) moves it.
  f.inject(kUplink, arpRequest(kGatewayMac2, "172.18.0.254", "172.18.0.254"));
  f.update();
  REQUIRE(f.neighbour("172.18.0.254") != nullptr);
  CHECK(f.neighbour("172.18.0.254")->mac() == "02:18:00:00:01:fe");
  CHECK(f.neighbour("172.18.0.254")->learned_from() == "ARP from the fabric");
  CHECK(f.stat("NeighbourLearned") == 2);
}

TEST_CASE("north-south: an unknown next hop is asked for from the node IP; the answer is learned, used, and "
          "retires what used the old one",
          "[engine][north-south]") {
  EngineConfig c;
  c.neighbour_stale_ms = 30000;
  Fixture f(c);
  NorthSouthRoute r;
  // Without the host's MAC for the node IP (a dataplane just started, the
  // host quiet) no request can be sent: the host is asked for it with an ARP
  // probe, once a second however many packets wait.
  CHECK(f.route("203.0.113.1", r) == DropReason::kNeighbourUnresolved);
  CHECK(f.route("203.0.113.1", r) == DropReason::kNeighbourUnresolved);
  CHECK(Fixture::drain(kUplink).empty());
  auto asked = Fixture::drain(kHost);
  REQUIRE(asked.size() == 1);
  const Bytes probe_host = PacketBuilder()
                               .ethernet(overlay::eth::kBroadcast, kRouterMac)
                               .arp(overlay::arp::kOpRequest, kRouterMac, 0, kZeroMac, ip4("172.18.0.1"))
                               .build();
  CHECK(test::toHex(asked[0].data(), asked[0].size()) == test::toHex(probe_host.data(), probe_host.size()));
  CHECK(f.stat("HostArpProbe") == 1);
  // The host's answer (to the probe's sender) says which MAC holds the node IP.
  f.bridged(kHost, kUplink, arpReply(kHostMac, "172.18.0.1", kRouterMac, "0.0.0.0"));
  f.update();
  // Off the node network: through the gateway, asked for with a broadcast request from the node IP and the host's MAC.
  CHECK(f.route("203.0.113.1", r) == DropReason::kNeighbourUnresolved);
  auto sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  const Bytes request = arpRequest(kHostMac, "172.18.0.1", "172.18.0.254");
  CHECK(test::toHex(sent[0].data(), sent[0].size()) == test::toHex(request.data(), request.size()));
  // Asked again at once, by a flood of new connections: not sent twice in a
  // second, and the control thread is not flooded with the news either.
  int unresolved = 0;
  for (int i = 0; i < 2000; ++i) unresolved += f.route("203.0.113.2", r) == DropReason::kNeighbourUnresolved;
  CHECK(unresolved == 2000);
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(f.stat("NeighbourArpLimited") == 2000);
  CHECK(f.stat("NeighbourArpRequest") == 1);
  CHECK(f.stat("NorthSouthNewsLost") == 0);
  f.update();
  REQUIRE(f.neighbour("172.18.0.254") != nullptr);
  CHECK(f.neighbour("172.18.0.254")->state() == "incomplete");
  CHECK(f.neighbour("172.18.0.254")->requests() == 1);

  // The reply comes to the host's MAC: the host gets it, the dataplane learns from it.
  f.bridged(kUplink, kHost, arpReply(kGatewayMac, "172.18.0.254", kHostMac, "172.18.0.1"));
  f.update();
  REQUIRE(f.route("203.0.113.1", r) == DropReason::kOk);
  CHECK(r.next_hop.str() == "172.18.0.254");
  CHECK(r.node_ip.str() == "172.18.0.1");
  CHECK(r.host_mac == kHostMac);
  CHECK(r.next_hop_mac == kGatewayMac);
  CHECK(r.out_port == env().port[kUplink]);
  CHECK(f.neighbour("172.18.0.254")->learned_from() == "ARP reply to the host");
  // On the node network: the destination itself is the next hop.
  CHECK(f.route("172.18.0.9", r) == DropReason::kNeighbourUnresolved);
  sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  const Bytes on_link = arpRequest(kHostMac, "172.18.0.1", "172.18.0.9");
  CHECK(test::toHex(sent[0].data(), sent[0].size()) == test::toHex(on_link.data(), on_link.size()));

  // A flow built from the route records its dep: the gateway's new MAC retires it.
  REQUIRE(f.route("203.0.113.1", r) == DropReason::kOk);
  const uint32_t flow_stamp = f.impl().currentSnapshot().stamp;
  CHECK(f.impl().currentSnapshot().depsValid(flow_stamp, r.dep, r.dep, kDepNode));
  f.bridged(kUplink, kHost, arpReply(kGatewayMac2, "172.18.0.254", kHostMac, "172.18.0.1"));
  f.update();
  CHECK_FALSE(f.impl().currentSnapshot().depsValid(flow_stamp, r.dep, r.dep, kDepNode));
  REQUIRE(f.route("203.0.113.1", r) == DropReason::kOk);
  CHECK(r.next_hop_mac == kGatewayMac2);

  // Not confirmed for the stale time: still used, and probed with a unicast request.
  g_clock += 31000;
  REQUIRE(f.route("203.0.113.1", r) == DropReason::kOk);
  sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  const Bytes probe = arpRequest(kHostMac, "172.18.0.1", "172.18.0.254", kGatewayMac2);
  CHECK(test::toHex(sent[0].data(), sent[0].size()) == test::toHex(probe.data(), probe.size()));
  f.update();
  CHECK(f.neighbour("172.18.0.254")->state() == "stale");
}

TEST_CASE("north-south: without a gateway only the node network is reachable", "[engine][north-south]") {
  Fixture f({}, false);
  hostArps(f);
  NorthSouthRoute r;
  CHECK(f.route("203.0.113.1", r) == DropReason::kNoRoute);
  CHECK(f.route("172.18.0.9", r) == DropReason::kNeighbourUnresolved);
}

TEST_CASE("north-south: IPv6 next hops are solicited from the node IP; neighbour discovery teaches them, and the "
          "host's MAC for the node IP",
          "[engine][north-south]") {
  EngineConfig c;
  c.neighbour_stale_ms = 30000;
  Fixture f(c);
  NorthSouthRoute r;
  // The host's MAC for the node's IPv6 address is not known: the host is
  // asked with a solicitation from :: (duplicate address detection's form,
  // which claims no address), once a second however many packets wait.
  CHECK(f.route("2001:db8:99::1", r) == DropReason::kNeighbourUnresolved);
  CHECK(f.route("2001:db8:99::1", r) == DropReason::kNeighbourUnresolved);
  CHECK(Fixture::drain(kUplink).empty());
  auto asked = Fixture::drain(kHost);
  REQUIRE(asked.size() == 1);
  CHECK(hex(asked[0]) == hex(neighborSolicit("::", "2001:db8:18::1", kRouterMac)));
  CHECK(f.stat("HostNdProbe") == 1);
  // Its answer goes to all-nodes with its MAC: bridged, and the node IP's MAC learned.
  const Bytes claim = neighborAdvert(kHostMac, kAllNodesMac, "ff02::1", "2001:db8:18::1", kHostMac, false);
  f.bridged(kHost, kUplink, claim);
  f.update();
  auto ns = f.neighbours();
  REQUIRE(ns.host_macs_size() == 1);
  REQUIRE(ns.host_macs(0).node_ips_size() == 1);
  CHECK(ns.host_macs(0).node_ips(0) == "2001:db8:18::1");

  // Off the node network: through the IPv6 gateway, solicited from the node IP and the host's MAC.
  CHECK(f.route("2001:db8:99::1", r) == DropReason::kNeighbourUnresolved);
  auto sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  CHECK(hex(sent[0]) == hex(neighborSolicit("2001:db8:18::1", "2001:db8:18::fe", kHostMac)));
  CHECK(f.stat("NeighbourSolicitation") == 1);
  CHECK(f.stat("NeighbourArpRequest") == 0);
  f.update();
  REQUIRE(f.neighbour("2001:db8:18::fe") != nullptr);
  CHECK(f.neighbour("2001:db8:18::fe")->state() == "incomplete");

  // The gateway's answer comes to the host's MAC and node IP: the host gets
  // it, the dataplane learns from it. Neighbour discovery is never cached:
  // the same answer again is bridged and read again.
  const Bytes answer = neighborAdvert(kGatewayMac, kHostMac, "2001:db8:18::1", "2001:db8:18::fe", kGatewayMac, true);
  const uint64_t installed = f.stat("FlowInstalled");
  f.bridged(kUplink, kHost, answer);
  f.bridged(kUplink, kHost, answer);
  f.bridged(kHost, kUplink, claim);
  CHECK(f.stat("FlowInstalled") == installed);
  f.update();
  REQUIRE(f.route("2001:db8:99::1", r) == DropReason::kOk);
  CHECK(r.next_hop.str() == "2001:db8:18::fe");
  CHECK(r.node_ip.str() == "2001:db8:18::1");
  CHECK(r.host_mac == kHostMac);
  CHECK(r.next_hop_mac == kGatewayMac);
  CHECK(r.out_port == env().port[kUplink]);
  CHECK(f.neighbour("2001:db8:18::fe")->learned_from() == "neighbour advertisement to a node IP");
  CHECK(f.stat("NeighbourLearned") == 1);

  // A flow built from the route records its dep: an unsolicited advertisement
  // of a new MAC (to all-nodes, not the host's) moves the gateway and retires it.
  const uint32_t flow_stamp = f.impl().currentSnapshot().stamp;
  CHECK(f.impl().currentSnapshot().depsValid(flow_stamp, r.dep, r.dep, kDepNode));
  const uint64_t not_host = f.stat("FabricNotForHost");
  f.inject(kUplink, neighborAdvert(kGatewayMac2, kAllNodesMac, "ff02::1", "2001:db8:18::fe", kGatewayMac2, false));
  for (unsigned p = 0; p < kPorts; ++p) CHECK(Fixture::drain(p).empty());
  CHECK(f.stat("FabricNotForHost") == not_host + 1);
  f.update();
  CHECK_FALSE(f.impl().currentSnapshot().depsValid(flow_stamp, r.dep, r.dep, kDepNode));
  REQUIRE(f.route("2001:db8:99::1", r) == DropReason::kOk);
  CHECK(r.next_hop_mac == kGatewayMac2);
  CHECK(f.neighbour("2001:db8:18::fe")->learned_from() == "neighbour discovery from the fabric");
  // An unsolicited advertisement of an address nobody asked for teaches nothing.
  f.inject(kUplink, neighborAdvert(kPeerMac, kAllNodesMac, "ff02::1", "2001:db8:18::7", kPeerMac, false));
  f.update();
  CHECK(f.neighbour("2001:db8:18::7") == nullptr);

  // A neighbour soliciting the node IP names its MAC (and the host gets the solicitation).
  f.bridged(kUplink, kHost, neighborSolicit("2001:db8:18::9", "2001:db8:18::1", kPeerMac));
  f.update();
  REQUIRE(f.neighbour("2001:db8:18::9") != nullptr);
  CHECK(f.neighbour("2001:db8:18::9")->mac() == "02:18:00:00:00:09");
  CHECK(f.neighbour("2001:db8:18::9")->learned_from() == "neighbour solicitation for a node IP");
  REQUIRE(f.route("2001:db8:18::9", r) == DropReason::kOk);
  CHECK(r.next_hop.str() == "2001:db8:18::9");

  // Not confirmed for the stale time: still used, and probed with a unicast solicitation.
  g_clock += 31000;
  REQUIRE(f.route("2001:db8:99::1", r) == DropReason::kOk);
  sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  CHECK(hex(sent[0]) == hex(neighborSolicit("2001:db8:18::1", "2001:db8:18::fe", kHostMac, kGatewayMac2)));
  f.update();
  CHECK(f.neighbour("2001:db8:18::fe")->state() == "stale");
  CHECK(f.neighbour("2001:db8:18::fe")->requests() == 2);
}

TEST_CASE("north-south: the neighbour table is bounded, the least recently confirmed evicted",
          "[engine][north-south]") {
  EngineConfig c;
  c.max_neighbours = 2;
  Fixture f(c);
  hostArps(f);
  for (const char* ip : {"172.18.0.7", "172.18.0.8", "172.18.0.9"}) {
    f.bridged(kUplink, kHost, arpRequest(kPeerMac, ip, "172.18.0.1"));
    f.update();
    g_clock += 10;
  }
  auto ns = f.neighbours();
  REQUIRE(ns.neighbours_size() == 2);
  CHECK(ns.neighbours(0).ip() == "172.18.0.8");
  CHECK(ns.neighbours(1).ip() == "172.18.0.9");
  CHECK(f.stat("NeighbourEvicted") == 1);
}

TEST_CASE("north-south: an idle host MAC is forgotten; one whose cached flow is in use stays",
          "[engine][north-south]") {
  EngineConfig c;
  c.host_mac_ageing_ms = 5000;
  Fixture f(c);
  hostArps(f, kHostMac);
  hostArps(f, kHostMac2);
  const Bytes busy = tcp4(kGatewayMac, kHostMac2, "172.18.0.1", "203.0.113.1");
  f.bridged(kHost, kUplink, busy);  // cached: from now on it never reaches the slow path
  g_clock += 6000;
  f.bridged(kHost, kUplink, busy);
  f.update();
  auto ns = f.neighbours();
  REQUIRE(ns.host_macs_size() == 1);
  CHECK(ns.host_macs(0).mac() == "02:18:00:00:00:02");
  CHECK(f.stat("HostMacAged") == 1);
  // Unicast for the forgotten MAC is nobody's again.
  const uint64_t dropped = f.stat("FabricNotForHost");
  f.inject(kUplink, tcp4(kHostMac, kGatewayMac, "203.0.113.1", "172.18.0.1"));
  CHECK(Fixture::drain(kHost).empty());
  CHECK(f.stat("FabricNotForHost") == dropped + 1);
}

TEST_CASE("north-south: what the uplink's XDP program must steer follows the host MACs and node IPs",
          "[engine][north-south]") {
  Fixture f;
  const HostSteering before = f.engine->hostSteering();
  CHECK(before.host_macs.empty());
  REQUIRE(before.node_ips.size() == 2);
  CHECK(before.node_ips[0].str() == "172.18.0.1");
  CHECK(before.node_ips[1].str() == "2001:db8:18::1");
  CHECK(f.engine->hostSteering().version == before.version);
  hostArps(f);
  const HostSteering after = f.engine->hostSteering();
  CHECK(after.version != before.version);
  REQUIRE(after.host_macs.size() == 1);
  CHECK(after.host_macs[0].bytes == kHostMac);
  // Learning woke the control thread through the eventfd.
  CHECK(f.engine->northSouthEventFd() >= 0);
}

TEST_CASE("north-south: bridged flows offload as one Output rule each way", "[engine][north-south]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c);
  hostArps(f);
  f.bridged(kHost, kUplink, tcp4(kGatewayMac, kHostMac, "172.18.0.1", "203.0.113.1"));
  f.bridged(kUplink, kHost, tcp4(kHostMac, kGatewayMac, "203.0.113.1", "172.18.0.1"));
  f.engine->maintain();
  const auto flows = f.flows();
  REQUIRE(flows.size() == 2);
  for (const auto& fl : flows) {
    INFO(fl.match() << " " << fl.offload_status());
    CHECK(fl.in_hw());
  }
  REQUIRE(eswitch.installedCount() == 2);
  for (uint64_t id = 0; id < 8; ++id) {
    const flow::FlowSpec* spec = eswitch.installed(dpu::offload::OffloadHandle{id});
    if (spec == nullptr) continue;
    REQUIRE(spec->actions.size() == 1);
    CHECK(spec->actions[0].type == flow::ActionType::kOutput);
  }
}

// Node ports and egress SNAT: the services on the north–south path ----------

namespace {

// The IP header of either family, as the addresses' text says.
PacketBuilder& ipTo(PacketBuilder& b, const char* from, const char* to, uint8_t ttl) {
  const IpAddress src = IpAddress::parse(from).value();
  if (src.isV4()) return b.ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl});
  return b.ipv6({.src = ip6(from), .dst = ip6(to), .hop_limit = ttl});
}
Bytes tcpTo(overlay::MacAddress dst, overlay::MacAddress src, const char* from, uint16_t sport, const char* to,
            uint16_t dport, uint8_t flags, uint8_t ttl = 64) {
  PacketBuilder b;
  b.ethernet(dst, src);
  return ipTo(b, from, to, ttl)
      .tcp({.src_port = sport, .dst_port = dport, .seq = 7, .ack = (flags & overlay::tcp::kFlagAck) ? 9u : 0u,
            .flags = flags})
      .payload(Bytes(30, 0x33))
      .build();
}
Bytes udpTo(overlay::MacAddress dst, overlay::MacAddress src, const char* from, uint16_t sport, const char* to,
            uint16_t dport, uint8_t ttl = 64) {
  PacketBuilder b;
  b.ethernet(dst, src);
  return ipTo(b, from, to, ttl).udp(sport, dport).payload(Bytes(24, 0x44)).build();
}
// An echo request (or reply) of either family, identifier `id`, sequence 1.
Bytes echoTo(overlay::MacAddress dst, overlay::MacAddress src, const char* from, const char* to, bool request,
             uint16_t id, uint8_t ttl) {
  PacketBuilder b;
  b.ethernet(dst, src);
  ipTo(b, from, to, ttl);
  if (IpAddress::parse(from).value().isV4()) {
    return b.icmpEcho(request ? overlay::icmp::kTypeEchoRequest : overlay::icmp::kTypeEchoReply, id, 1).build();
  }
  return b.icmpv6Echo(request ? overlay::icmp6::kTypeEchoRequest : overlay::icmp6::kTypeEchoReply, id, 1).build();
}

// Geneve from node2's DPU carrying `inner` (its router MAC to ours).
Bytes geneveFromNode2(const Bytes& inner) {
  std::array<uint8_t, 4> data;
  overlay::GeneveOption opt;
  REQUIRE(overlay::makeOvnOption({9, 0x8000}, data, opt) == overlay::Status::kOk);
  overlay::GeneveTunnel t;
  t.src_mac = kNextHopMac;
  t.dst_mac = kUplinkMac;
  const auto s = IpAddress::parse("192.168.100.2").value(), d = IpAddress::parse("192.168.100.1").value();
  std::copy(s.bytes.begin(), s.bytes.end(), t.src_ip.begin());
  std::copy(d.bytes.begin(), d.bytes.end(), t.dst_ip.begin());
  t.vni = 10;
  t.options = std::span<const overlay::GeneveOption>(&opt, 1);
  std::vector<uint8_t> buf(512 + inner.size());
  std::memcpy(buf.data() + 256, inner.data(), inner.size());
  overlay::PacketBuffer pb(buf.data(), static_cast<uint32_t>(buf.size()), 256, static_cast<uint32_t>(inner.size()));
  REQUIRE(overlay::encapGeneve(pb, t, 77) == overlay::Status::kOk);
  return Bytes(pb.data(), pb.data() + pb.size());
}

// The inner frame of a Geneve packet the DPU sent.
Bytes innerOf(const Bytes& outer) {
  Bytes copy = outer;
  overlay::PacketBuffer pb(copy.data(), static_cast<uint32_t>(copy.size()), 0, static_cast<uint32_t>(copy.size()));
  overlay::GeneveHeaders gh;
  overlay::GeneveDecapConfig cfg;
  REQUIRE(overlay::decapGeneve(pb, cfg, gh) == overlay::Status::kOk);
  return Bytes(pb.data(), pb.data() + pb.size());
}

// A node port for pod-a (local) and one for a pod on node2 (remote), both
// dual-stack: a cluster IP and a backend of each family.
dataplane::v1::LogicalModel nodePortModel(bool local_policy) {
  auto m = baseModel();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  m.mutable_node()->add_service_cidrs("fd00:96::/112");
  auto add = [&](const char* name, const char* vip, const char* vip6, uint32_t node_port, const char* backend,
                 const char* backend6, bool local) {
    auto* s = m.add_services();
    s->set_name(name);
    s->add_cluster_ips(vip);
    s->add_cluster_ips(vip6);
    s->set_external_local(local_policy);
    auto* p = s->add_ports();
    p->set_protocol(dataplane::v1::TCP);
    p->set_port(80);
    p->set_node_port(node_port);
    for (const char* ip : {backend, backend6}) {
      auto* b = p->add_backends();
      b->set_ip(ip);
      b->set_port(8080);
      b->set_local(local);
      b->set_ready(true);
      b->set_serving(true);
    }
  };
  add("default/here", "10.96.0.10", "fd00:96::10", 30080, "10.244.1.5", "fd00:10:244:1::5", true);
  add("default/there", "10.96.0.20", "fd00:96::20", 30081, "10.244.2.7", "fd00:10:244:2::7", false);
  return m;
}

void program(Fixture& f, const dataplane::v1::LogicalModel& m, uint64_t generation) {
  dataplane::v1::ProgramRequest req;
  req.mutable_full_sync()->set_generation(generation);
  *req.mutable_full_sync()->mutable_model() = m;
  const auto r = f.engine->program(req);
  INFO(r.message());
  REQUIRE(r.status() == dataplane::v1::OK);
  REQUIRE(r.problems_size() == 0);
}

// The host's MAC for its node IPs and the gateways', as the dataplane learns them.
void resolveGateway(Fixture& f) {
  hostArps(f);
  f.bridged(kUplink, kHost, arpReply(kGatewayMac, "172.18.0.254", kHostMac, "172.18.0.1"));
  f.bridged(kHost, kUplink, neighborSolicit("2001:db8:18::1", "2001:db8:18::fe", kHostMac));
  f.bridged(kUplink, kHost,
            neighborAdvert(kGatewayMac, kHostMac, "2001:db8:18::1", "2001:db8:18::fe", kGatewayMac, true));
  f.update();
}

constexpr uint8_t kSyn = overlay::tcp::kFlagSyn, kAck = overlay::tcp::kFlagAck;
constexpr uint8_t kSynAck = kSyn | kAck;


}  // namespace

TEST_CASE("node port: a client on the fabric reaches a local backend, masqueraded, and its reply leaves to the fabric",
          "[engine][north-south][services]") {
  Fixture f;
  program(f, nodePortModel(false), 2);
  resolveGateway(f);
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30080, kSyn));
  auto at_pod = Fixture::drain(kRep);
  REQUIRE(at_pod.size() == 1);
  CHECK(Fixture::drain(kHost).empty());
  // The Cluster policy: from this node's pod gateway address, so any backend's reply comes back here.
  CHECK(hex(at_pod[0]) == hex(tcpTo(kPodMac, kRouterMac, "10.244.1.1", 40000, "10.244.1.5", 8080, kSyn, 63)));
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 8080, "10.244.1.1", 40000, kSynAck));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(hex(out[0]) == hex(tcpTo(kGatewayMac, kHostMac, "172.18.0.1", 30080, "203.0.113.7", 40000, kSynAck, 63)));
  // Established, both directions cached with their translation.
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30080, kAck));
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30080, kAck));
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 8080, "10.244.1.1", 40000, kAck));
  at_pod = Fixture::drain(kRep);
  REQUIRE(at_pod.size() == 2);
  CHECK(hex(at_pod[1]) == hex(tcpTo(kPodMac, kRouterMac, "10.244.1.1", 40000, "10.244.1.5", 8080, kAck, 63)));
  REQUIRE(Fixture::drain(kUplink).size() == 1);
  CHECK(f.stat("FlowInstalled") >= 2);
  // The host's own traffic to its node IP is still the host's.
  f.bridged(kUplink, kHost, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40001, "172.18.0.1", 22, kSyn));
}

TEST_CASE("node port: NetworkPolicy judges a new connection at its local backend's ingress, by the client's address",
          "[engine][north-south][services][policy]") {
  auto m = nodePortModel(false);
  auto* pp = m.add_port_policies();
  pp->set_port("pod-a");
  auto* in = pp->mutable_ingress();
  in->set_isolated(true);
  in->add_policies("x/from-partners");
  auto* r = in->add_rules();
  r->add_peers("198.51.100.0/24");
  r->set_protocol(6);
  r->set_port_first(8080);
  r->set_port_last(8080);
  r->set_policy("x/from-partners");
  Fixture f;
  program(f, m, 2);
  resolveGateway(f);
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30080, kSyn));
  CHECK(Fixture::drain(kRep).empty());
  CHECK(Fixture::drain(kHost).empty());
  CHECK(f.stat("PolicyDenied") == 1);
  // Judged before the masquerade: the allowed client's connection reaches the pod from the gateway address.
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "198.51.100.9", 40000, "172.18.0.1", 30080, kSyn));
  auto at_pod = Fixture::drain(kRep);
  REQUIRE(at_pod.size() == 1);
  CHECK(hex(at_pod[0]) == hex(tcpTo(kPodMac, kRouterMac, "10.244.1.1", 40000, "10.244.1.5", 8080, kSyn, 63)));
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 8080, "10.244.1.1", 40000, kSynAck));
  CHECK(Fixture::drain(kUplink).size() == 1);
  dataplane::v1::OperatorRequest req;
  req.mutable_conntrack();
  CHECK(f.engine->operate(req).conntrack_size() == 1);  // the denied client's connection was not kept
}

TEST_CASE("node port: the Local policy keeps the client's address and uses this node's backends only",
          "[engine][north-south][services]") {
  Fixture f;
  program(f, nodePortModel(true), 2);
  resolveGateway(f);
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30080, kSyn));
  auto at_pod = Fixture::drain(kRep);
  REQUIRE(at_pod.size() == 1);
  CHECK(hex(at_pod[0]) == hex(tcpTo(kPodMac, kRouterMac, "203.0.113.7", 40000, "10.244.1.5", 8080, kSyn, 63)));
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 8080, "203.0.113.7", 40000, kSynAck));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(hex(out[0]) == hex(tcpTo(kGatewayMac, kHostMac, "172.18.0.1", 30080, "203.0.113.7", 40000, kSynAck, 63)));
  // The other service's only backend is on node2: dropped here, as kube-proxy does.
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40002, "172.18.0.1", 30081, kSyn));
  CHECK(Fixture::drain(kUplink).empty());
  CHECK(Fixture::drain(kHost).empty());
  CHECK(f.stat("ServiceNoLocalEndpoint") == 1);
}

TEST_CASE("node port: a backend on another node is reached through the tunnel and answers through this node",
          "[engine][north-south][services]") {
  Fixture f;
  program(f, nodePortModel(false), 2);
  resolveGateway(f);
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "203.0.113.7", 40000, "172.18.0.1", 30081, kSyn));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(hex(innerOf(out[0])) ==
        hex(tcpTo(kRouterMac, kRouterMac, "10.244.1.1", 40000, "10.244.2.7", 8080, kSyn, 63)));
  // The backend answers our pod gateway address; its node sends that here.
  f.inject(kUplink,
           geneveFromNode2(tcpTo(kRouterMac, mac("0a:58:0a:f4:02:07"), "10.244.2.7", 8080, "10.244.1.1", 40000,
                                 kSynAck, 63)));
  out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(hex(out[0]) == hex(tcpTo(kGatewayMac, kHostMac, "172.18.0.1", 30081, "203.0.113.7", 40000, kSynAck, 62)));
}

TEST_CASE("egress SNAT: a pod's connection leaves from the node IP on a port of its own and its replies come back",
          "[engine][north-south][services]") {
  struct Family {
    const char* pod;
    const char* node;
    const char* server;
    size_t sport;  // where the UDP source port is, and the echo identifier 4 bytes on
    std::vector<const char*> link_scoped;  // off the cluster, but never forwarded off the link
  };
  for (const Family& fam :
       {Family{"10.244.1.5", "172.18.0.1", "198.51.100.53", 14 + 20, {"169.254.1.1", "127.0.0.1", "224.0.0.9"}},
        Family{"fd00:10:244:1::5", "2001:db8:18::1", "2001:db8:99::53", 14 + 40, {"fe80::1", "::1", "ff0e::9"}}}) {
    INFO(fam.pod);
    Fixture f;
    resolveGateway(f);
    const size_t at = fam.sport;
    f.inject(kRep, udpTo(kRouterMac, kPodMac, fam.pod, 5353, fam.server, 53));
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].size() > at + 2);
    const uint16_t port = static_cast<uint16_t>(out[0][at] << 8 | out[0][at + 1]);
    CHECK(port >= kSnatPorts.first);
    CHECK(port <= kSnatPorts.second);
    CHECK(hex(out[0]) == hex(udpTo(kGatewayMac, kHostMac, fam.node, port, fam.server, 53, 63)));
    CHECK(f.stat("SnatNew") == 1);
    // The reply, to the node IP and that port: the pod's, not the host's.
    f.inject(kUplink, udpTo(kHostMac, kGatewayMac, fam.server, 53, fam.node, port));
    auto back = Fixture::drain(kRep);
    REQUIRE(back.size() == 1);
    CHECK(Fixture::drain(kHost).empty());
    CHECK(hex(back[0]) == hex(udpTo(kPodMac, kRouterMac, fam.server, 53, fam.pod, 5353, 63)));
    // The opening datagram went uncached, the reply cached its way; the pod's
    // next datagram caches its own, and from then on both hit.
    const uint64_t hits = f.stat("FlowHit");
    for (int i = 0; i < 2; ++i) {
      f.inject(kRep, udpTo(kRouterMac, kPodMac, fam.pod, 5353, fam.server, 53));
      f.inject(kUplink, udpTo(kHostMac, kGatewayMac, fam.server, 53, fam.node, port));
    }
    CHECK(Fixture::drain(kUplink).size() == 2);
    CHECK(Fixture::drain(kRep).size() == 2);
    CHECK(f.stat("FlowHit") == hits + 3);
    // Another pod connection to the same server gets another port.
    f.inject(kRep, udpTo(kRouterMac, kPodMac, fam.pod, 5354, fam.server, 53));
    out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    CHECK(static_cast<uint16_t>(out[0][at] << 8 | out[0][at + 1]) != port);
    // A ping leaves the same way, its identifier translated (ICMPv6's
    // checksum covers the addresses too), and its reply comes back.
    f.inject(kRep, echoTo(kRouterMac, kPodMac, fam.pod, fam.server, true, 77, 64));
    out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    const uint16_t id = static_cast<uint16_t>(out[0][at + 4] << 8 | out[0][at + 5]);
    CHECK(id >= kSnatPorts.first);
    CHECK(hex(out[0]) == hex(echoTo(kGatewayMac, kHostMac, fam.node, fam.server, true, id, 63)));
    f.inject(kUplink, echoTo(kHostMac, kGatewayMac, fam.server, fam.node, false, id, 64));
    back = Fixture::drain(kRep);
    REQUIRE(back.size() == 1);
    CHECK(hex(back[0]) == hex(echoTo(kPodMac, kRouterMac, fam.server, fam.pod, false, 77, 63)));
    // An echo reply to an identifier no connection holds is not the host's either.
    f.inject(kUplink, echoTo(kHostMac, kGatewayMac, fam.server, fam.node, false, 64999, 64));
    CHECK(Fixture::drain(kHost).empty());
    CHECK(f.stat("SnatNoConnection") == 1);
    // A link-local, loopback or multicast destination is not routed off the link, translated or not.
    const uint64_t snat = f.stat("SnatNew"), no_route = f.stat("NoRoute");
    for (const char* scoped : fam.link_scoped) {
      INFO(scoped);
      f.inject(kRep, udpTo(kRouterMac, kPodMac, fam.pod, 5353, scoped, 53));
      CHECK(Fixture::drain(kUplink).empty());
      CHECK(Fixture::drain(kHost).empty());
    }
    CHECK(f.stat("SnatNew") == snat);
    CHECK(f.stat("NoRoute") == no_route + 3);
  }
}

TEST_CASE("egress SNAT: without a node network route a pod's packet off the cluster is dropped as before",
          "[engine][north-south][services]") {
  Fixture f;
  // The gateway's MAC is not known yet: asked for, the packet dropped (not cached).
  hostArps(f);
  f.inject(kRep, udpTo(kRouterMac, kPodMac, "10.244.1.5", 5353, "198.51.100.53", 53));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);  // the ARP request for the gateway
  CHECK(hex(out[0]) == hex(arpRequest(kHostMac, "172.18.0.1", "172.18.0.254")));
  CHECK(f.stat("NeighbourUnresolved") == 1);
  CHECK(f.stat("SnatNew") == 0);
}

TEST_CASE("egress SNAT: after a restart the pod's next packet takes its old port again; replies before it are kept "
          "from the host",
          "[engine][north-south][services]") {
  uint16_t port = 0;
  {
    Fixture before;
    resolveGateway(before);
    before.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 41000, "198.51.100.80", 443, kSyn));
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    port = static_cast<uint16_t>(out[0][34] << 8 | out[0][35]);
  }
  // A new process: no connection. The server's segment arrives first: not
  // the host's (its stack would reset the connection), dropped and counted.
  Fixture after;
  resolveGateway(after);
  after.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "198.51.100.80", 443, "172.18.0.1", port, kAck));
  CHECK(Fixture::drain(kHost).empty());
  CHECK(Fixture::drain(kRep).empty());
  CHECK(after.stat("SnatNoConnection") == 1);
  // The pod's next segment, mid-stream: picked up loose, on the same port.
  after.inject(kRep, tcpTo(kRouterMac, kPodMac, "10.244.1.5", 41000, "198.51.100.80", 443, kAck));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  CHECK(hex(out[0]) == hex(tcpTo(kGatewayMac, kHostMac, "172.18.0.1", port, "198.51.100.80", 443, kAck, 63)));
  CHECK(after.stat("ConntrackLoose") == 1);
  after.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "198.51.100.80", 443, "172.18.0.1", port, kAck));
  auto back = Fixture::drain(kRep);
  REQUIRE(back.size() == 1);
  CHECK(hex(back[0]) == hex(tcpTo(kPodMac, kRouterMac, "198.51.100.80", 443, "10.244.1.5", 41000, kAck, 63)));
}

TEST_CASE("node port over IPv6: a client on the fabric reaches the node's IPv6 address, under either policy",
          "[engine][north-south][services]") {
  for (const bool local : {false, true}) {
    INFO((local ? "Local" : "Cluster"));
    Fixture f;
    program(f, nodePortModel(local), 2);
    resolveGateway(f);
    f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::7", 40000, "2001:db8:18::1", 30080, kSyn));
    auto at_pod = Fixture::drain(kRep);
    REQUIRE(at_pod.size() == 1);
    CHECK(Fixture::drain(kHost).empty());
    // Cluster: from this node's IPv6 pod gateway address; Local: from the client itself.
    const char* client = local ? "2001:db8:99::7" : "fd00:10:244:1::1";
    CHECK(hex(at_pod[0]) == hex(tcpTo(kPodMac, kRouterMac, client, 40000, "fd00:10:244:1::5", 8080, kSyn, 63)));
    f.inject(kRep, tcpTo(kRouterMac, kPodMac, "fd00:10:244:1::5", 8080, client, 40000, kSynAck));
    auto out = Fixture::drain(kUplink);
    REQUIRE(out.size() == 1);
    CHECK(hex(out[0]) ==
          hex(tcpTo(kGatewayMac, kHostMac, "2001:db8:18::1", 30080, "2001:db8:99::7", 40000, kSynAck, 63)));
    // Established: both directions cached with their translation.
    f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::7", 40000, "2001:db8:18::1", 30080, kAck));
    f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::7", 40000, "2001:db8:18::1", 30080, kAck));
    at_pod = Fixture::drain(kRep);
    REQUIRE(at_pod.size() == 2);
    CHECK(hex(at_pod[1]) == hex(tcpTo(kPodMac, kRouterMac, client, 40000, "fd00:10:244:1::5", 8080, kAck, 63)));
    // The backend on node2: through the tunnel under Cluster, dropped under Local.
    f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::7", 40001, "2001:db8:18::1", 30081, kSyn));
    out = Fixture::drain(kUplink);
    if (local) {
      CHECK(out.empty());
      CHECK(f.stat("ServiceNoLocalEndpoint") == 1);
    } else {
      REQUIRE(out.size() == 1);
      CHECK(hex(innerOf(out[0])) ==
            hex(tcpTo(kRouterMac, kRouterMac, "fd00:10:244:1::1", 40001, "fd00:10:244:2::7", 8080, kSyn, 63)));
      f.inject(kUplink, geneveFromNode2(tcpTo(kRouterMac, mac("0a:58:0a:f4:02:07"), "fd00:10:244:2::7", 8080,
                                              "fd00:10:244:1::1", 40001, kSynAck, 63)));
      out = Fixture::drain(kUplink);
      REQUIRE(out.size() == 1);
      CHECK(hex(out[0]) ==
            hex(tcpTo(kGatewayMac, kHostMac, "2001:db8:18::1", 30081, "2001:db8:99::7", 40001, kSynAck, 62)));
    }
    // The host's own traffic to its IPv6 node IP is still the host's.
    f.bridged(kUplink, kHost, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::7", 40002, "2001:db8:18::1", 22, kSyn));
  }
}

TEST_CASE("egress SNAT over IPv6: an established connection's two flows run in the NIC with their IPv6 rewrites",
          "[engine][north-south][services][offload]") {
  using dpu::offload::testing::EswitchProfile;
  using dpu::offload::testing::FakeEswitch;
  FakeEswitch eswitch(EswitchProfile::mlx5Like());
  EngineConfig c;
  c.offload = &eswitch;
  Fixture f(c);
  resolveGateway(f);
  const size_t installed_before = eswitch.installedCount();  // the bridged ND and ARP are never cached
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "fd00:10:244:1::5", 41000, "2001:db8:99::80", 443, kSyn));
  auto out = Fixture::drain(kUplink);
  REQUIRE(out.size() == 1);
  const uint16_t port = static_cast<uint16_t>(out[0][54] << 8 | out[0][55]);
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::80", 443, "2001:db8:18::1", port, kSynAck));
  f.inject(kRep, tcpTo(kRouterMac, kPodMac, "fd00:10:244:1::5", 41000, "2001:db8:99::80", 443, kAck));
  f.inject(kUplink, tcpTo(kHostMac, kGatewayMac, "2001:db8:99::80", 443, "2001:db8:18::1", port, kAck));
  REQUIRE(Fixture::drain(kRep).size() == 2);
  REQUIRE(Fixture::drain(kUplink).size() == 1);
  f.engine->maintain();
  REQUIRE(eswitch.installedCount() == installed_before + 2);
  int rewrites = 0;
  for (const auto& fl : f.flows()) {
    INFO(fl.match() << " " << fl.offload_status());
    CHECK(fl.in_hw());
    CHECK(fl.offload_status() == "offloaded+punt:fin,syn,rst");
  }
  const IpAddress node = IpAddress::parse("2001:db8:18::1").value();
  const IpAddress pod = IpAddress::parse("fd00:10:244:1::5").value();
  for (uint64_t id = 0; id < 16; ++id) {
    const flow::FlowSpec* spec = eswitch.installed(dpu::offload::OffloadHandle{id});
    if (spec == nullptr || spec->match.key.ethertype != overlay::eth::kTypeIpv6) continue;
    for (const auto& a : spec->actions) {
      // Out: the source becomes the node's IPv6 address; back: the destination the pod's.
      if (a.type == flow::ActionType::kSetIpv6Src) {
        ++rewrites;
        CHECK(std::equal(a.ipv6.begin(), a.ipv6.end(), node.bytes.begin()));
      }
      if (a.type == flow::ActionType::kSetIpv6Dst) {
        ++rewrites;
        CHECK(std::equal(a.ipv6.begin(), a.ipv6.end(), pod.bytes.begin()));
      }
    }
  }
  CHECK(rewrites == 2);
}

TEST_CASE("north-south: an IPv6 link-local gateway is solicited from the node's IPv6 address and used",
          "[engine][north-south]") {
  Fixture f;
  auto m = baseModel();
  m.mutable_node()->set_node_gateways(1, "fe80::1");
  program(f, m, 2);
  f.bridged(kHost, kUplink, neighborAdvert(kHostMac, kAllNodesMac, "ff02::1", "2001:db8:18::1", kHostMac, false));
  f.update();
  NorthSouthRoute r;
  CHECK(f.route("2001:db8:99::1", r) == DropReason::kNeighbourUnresolved);
  auto sent = Fixture::drain(kUplink);
  REQUIRE(sent.size() == 1);
  CHECK(hex(sent[0]) == hex(neighborSolicit("2001:db8:18::1", "fe80::1", kHostMac)));
  // The router answers the node IP from its link-local address.
  f.bridged(kUplink, kHost, neighborAdvert(kGatewayMac, kHostMac, "2001:db8:18::1", "fe80::1", kGatewayMac, true));
  f.update();
  REQUIRE(f.route("2001:db8:99::1", r) == DropReason::kOk);
  CHECK(r.next_hop.str() == "fe80::1");
  CHECK(r.node_ip.str() == "2001:db8:18::1");
  CHECK(r.next_hop_mac == kGatewayMac);
  // Another link-local neighbour soliciting the node IP is on the link too.
  f.bridged(kUplink, kHost, neighborSolicit("fe80::9", "2001:db8:18::1", kPeerMac));
  f.update();
  REQUIRE(f.neighbour("fe80::9") != nullptr);
  CHECK(f.neighbour("fe80::9")->mac() == "02:18:00:00:00:09");
}
