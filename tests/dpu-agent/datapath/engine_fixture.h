// The engine's component test fixture: EAL in-process (--no-huge, no PCI),
// net_ring ports, a programmed model, packet builders and the reference
// encapsulation. EAL initialises once per process, so every engine test file
// of the engine_tests binary shares this (env() is one instance).
#pragma once

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
#include <functional>
#include <map>
#include <set>
#include <span>
#include <tuple>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "fake_eswitch.h"
#include "golden.h"
#include "lane_reference.h"
#include "offload/none_backend.h"
#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/flow_key.h"
#include "overlay/geneve.h"
#include "overlay/packet_builder.h"
#include "overlay/parse.h"
#include "flow_cache.h"
#include "port_limit.h"
#include "worker_actions.h"
#include "worker.h"
#include "worker_parse.h"

namespace engine_test {

using namespace dpu;
using namespace dpu::datapath;
using overlay::PacketBuilder;
using Bytes = std::vector<uint8_t>;

// TCP flags by their short names.
inline constexpr uint8_t kSyn = overlay::tcp::kFlagSyn, kAck = overlay::tcp::kFlagAck, kFin = overlay::tcp::kFlagFin,
                         kRst = overlay::tcp::kFlagRst, kPsh = overlay::tcp::kFlagPsh, kSynAck = kSyn | kAck;

inline constexpr unsigned kPorts = 5;
enum : uint16_t { kUplink = 0, kMgmt = 1, kRepA = 2, kRepB = 3, kSpare = 4 };

// Each ring port has two queues, so that two workers can transmit (worker i
// uses tx queue i).
inline constexpr unsigned kQueues = 2;
struct Env {
  rte_mempool* pool = nullptr;
  uint16_t ethdev[kPorts] = {};  // the ring ports
  uint16_t port[kPorts] = {};    // the ids the tests bind them under (engineId)
  rte_ring* tx[kPorts][kQueues] = {};
};

// The engine port id test port `i` (ring ethdev `ethdev`) is bound under.
// Built with more ports than this DPDK has (DPU_MAX_PORTS=256 over
// RTE_MAX_ETHPORTS 32), the management port, pod B and the spare port take
// ids far beyond RTE_MAX_ETHPORTS, each in another 64-bit word of the
// engine's port bitset; the engine transmits on them through the ethdev they
// stand for (port_limit.h). The uplink and pod A keep their own ids, which the
// golden packets depend on. With the default limit every id is the ethdev's.
inline uint16_t engineId(uint16_t ethdev, unsigned i) {
  constexpr unsigned kLift[kPorts] = {0, 2, 0, 4, 7};
  unsigned id = ethdev + kLift[i] * RTE_MAX_ETHPORTS;
  while (id >= kMaxPorts) id -= RTE_MAX_ETHPORTS;
  return static_cast<uint16_t>(id);
}

inline Env& env() {
  static Env e = [] {
    Env out;
    const std::string prefix = "--file-prefix=engine_test_" + std::to_string(getpid());
    std::vector<std::string> args = {"engine_tests", "--no-huge", "--no-pci", "-m", "256", prefix,
                                     "--log-level=error", "-l", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) throw std::runtime_error("rte_eal_init failed");
    out.pool = rte_pktmbuf_pool_create("engine_test_pool", 8191, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (out.pool == nullptr) throw std::runtime_error("mempool");
    for (unsigned i = 0; i < kPorts; ++i) {
      const std::string n = "et" + std::to_string(i);
      rte_ring* rx[kQueues];
      for (unsigned q = 0; q < kQueues; ++q) {
        const std::string qn = n + "q" + std::to_string(q);
        rx[q] = rte_ring_create((qn + "rx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        out.tx[i][q] = rte_ring_create((qn + "tx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      }
      const int id = rte_eth_from_rings(("net_ring_" + n).c_str(), rx, kQueues, out.tx[i], kQueues, SOCKET_ID_ANY);
      if (id < 0) throw std::runtime_error("rte_eth_from_rings");
      out.ethdev[i] = static_cast<uint16_t>(id);
      out.port[i] = engineId(out.ethdev[i], i);
      rte_eth_conf conf{};
      if (rte_eth_dev_configure(out.ethdev[i], kQueues, kQueues, &conf) != 0) throw std::runtime_error("configure");
      for (uint16_t q = 0; q < kQueues; ++q) {
        if (rte_eth_rx_queue_setup(out.ethdev[i], q, 64, SOCKET_ID_ANY, nullptr, out.pool) != 0 ||
            rte_eth_tx_queue_setup(out.ethdev[i], q, 64, SOCKET_ID_ANY, nullptr) != 0) {
          throw std::runtime_error("ring port queue set-up");
        }
      }
      if (rte_eth_dev_start(out.ethdev[i]) != 0) throw std::runtime_error("ring port start");
    }
    return out;
  }();
  return e;
}

inline std::atomic<uint64_t> g_clock{1'000'000};
inline uint64_t testClock() { return g_clock.load(); }

// The slow-path budget's cycle counter (EngineConfig::cycles): it moves only
// when a test says what its loop cost. Standing still, nothing costs
// anything: the cycle share never binds, and the other tests see the count
// budget only.
inline std::atomic<uint64_t> g_cycles{0};
inline uint64_t testCycles() { return g_cycles.load(); }

inline overlay::MacAddress mac(const char* text) { return MacAddress::parse(text).value().bytes; }
inline uint32_t ip4(const char* text) { return IpAddress::parse(text).value().v4HostOrder(); }
inline overlay::Ipv6Address ip6(const char* text) {
  overlay::Ipv6Address a;
  auto ip = IpAddress::parse(text).value();
  std::memcpy(a.data(), ip.bytes.data(), 16);
  return a;
}

inline const auto kRouterMac = mac("0a:58:a9:fe:00:01");
inline const auto kMacA = mac("0a:58:0a:f4:01:05");
inline const auto kMacB = mac("0a:58:0a:f4:01:06");
inline const auto kMacMgmt = mac("0a:58:0a:f4:01:02");
inline const auto kUplinkMac = mac("02:00:00:00:00:01");
inline const auto kNextHopMac = mac("02:00:00:00:00:02");
inline const auto kRemotePodMac = mac("0a:58:0a:f4:02:07");

// A remote node with one pod subnet (returned for more).
inline dataplane::v1::RemoteNode* addRemoteNode(dataplane::v1::LogicalModel& m, const char* name, const char* tunnel_ip,
                                         const char* cidr, uint32_t datapath_key) {
  auto* r = m.add_remote_nodes();
  r->set_name(name);
  r->set_tunnel_ip(tunnel_ip);
  auto* rs = r->add_subnets();
  rs->set_cidr(cidr);
  rs->set_datapath_key(datapath_key);
  return r;
}

// The flow table's callbacks for tests that drive it directly: every
// existing record is still valid, and nothing needs resolving.
inline const auto kAlwaysValid = [](const FlowActions&) { return true; };
inline const auto kNoResolve = [](FlowActions&) {};

inline dataplane::v1::LogicalModel baseModel() {
  dataplane::v1::LogicalModel m;
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
  auto port = [&m](const char* name, uint32_t key, const char* rep, const char* mac_text,
                   std::vector<const char*> ips, dataplane::v1::PortKind kind = dataplane::v1::POD) {
    auto* p = m.add_ports();
    p->set_name(name);
    p->set_key(key);
    p->set_kind(kind);
    p->set_representor(rep);
    p->set_mac(mac_text);
    for (auto* ip : ips) p->add_ips(ip);
    p->set_datapath_key(10);
  };
  port("pod-a", 1, "pf0vf0", "0a:58:0a:f4:01:05", {"10.244.1.5", "fd00:10:244:1::5"});
  port("pod-b", 2, "pf0vf1", "0a:58:0a:f4:01:06", {"10.244.1.6", "fd00:10:244:1::6"});
  port("mgmt", 3, "pf0hpf", "0a:58:0a:f4:01:02", {"10.244.1.2"}, dataplane::v1::MANAGEMENT);
  auto* r = addRemoteNode(m, "node2", "192.168.100.2", "10.244.2.0/24", 20);
  auto* rs6 = r->add_subnets();
  rs6->set_cidr("fd00:10:244:2::/64");
  rs6->set_datapath_key(20);
  return m;
}

inline dataplane::v1::ProgramReply fullSync(Engine& e, const dataplane::v1::LogicalModel& m, uint64_t generation) {
  dataplane::v1::ProgramRequest req;
  req.mutable_full_sync()->set_generation(generation);
  *req.mutable_full_sync()->mutable_model() = m;
  return e.program(req);
}

struct Fixture {
  std::unique_ptr<Engine> engine;
  unsigned workers = 1;
  explicit Fixture(EngineConfig config = {}, bool program = true) : workers(config.workers) {
    Env& en = env();
    drainAll();
    config.clock_ms = testClock;
    config.cycles = testCycles;
    auto created = Engine::create(config);
    REQUIRE(created.ok());
    engine = std::move(created.value());
    REQUIRE(engine->bindPort("uplink", en.port[kUplink], PortRole::kUplink, MacAddress{kUplinkMac}).ok());
    REQUIRE(engine->bindPort("management", en.port[kMgmt], PortRole::kManagement, MacAddress{kMacMgmt}).ok());
    REQUIRE(engine->bindPort("pf0vf0", en.port[kRepA], PortRole::kRepresentor, MacAddress{kMacA}).ok());
    REQUIRE(engine->bindPort("pf0vf1", en.port[kRepB], PortRole::kRepresentor, MacAddress{kMacB}).ok());
    REQUIRE(engine->setTunnelNextHop(IpAddress::parse("192.168.100.2").value(), MacAddress{kNextHopMac}).ok());
    if (program) {
      auto r = fullSync(*engine, baseModel(), 1);
      INFO(r.message());
      REQUIRE(r.status() == dataplane::v1::OK);
    }
  }
  ~Fixture() {
    if (engine) {
      for (unsigned i = 0; i < workers; ++i) engine->quiescent(engine->worker(i));
      engine->maintain();
    }
    drainAll();
  }
  static void drainAll() {
    for (unsigned i = 0; i < kPorts; ++i) {
      for (unsigned q = 0; q < kQueues; ++q) (void)drain(i, q);
    }
  }
  static std::vector<Bytes> drain(unsigned port, unsigned queue = 0) {
    std::vector<Bytes> out;
    rte_mbuf* m[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(env().tx[port][queue], reinterpret_cast<void**>(m), 64, nullptr)) > 0) {
      for (unsigned i = 0; i < n; ++i) {
        const uint8_t* d = rte_pktmbuf_mtod(m[i], const uint8_t*);
        out.emplace_back(d, d + m[i]->data_len);
        rte_pktmbuf_free(m[i]);
      }
    }
    return out;
  }
  // `ol_flags`: what a NIC says of each packet (its checksum verdicts).
  void inject(unsigned port, const std::vector<Bytes>& packets, unsigned worker = 0, uint64_t ol_flags = 0) {
    std::vector<rte_mbuf*> mbufs;
    for (const auto& p : packets) {
      rte_mbuf* m = rte_pktmbuf_alloc(env().pool);
      REQUIRE(m != nullptr);
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(p.size())), p.data(), p.size());
      m->ol_flags |= ol_flags;
      mbufs.push_back(m);
    }
    WorkerContext& w = engine->worker(worker);
    engine->processBurst(w, env().port[port], mbufs.data(), static_cast<uint16_t>(mbufs.size()));
    engine->flush(w);
    engine->quiescent(w);
  }
  void inject(unsigned port, const Bytes& packet, unsigned worker = 0) {
    inject(port, std::vector<Bytes>{packet}, worker);
  }
  uint64_t stat(const std::string& name) {
    dataplane::v1::OperatorRequest req;
    req.mutable_stats();
    const auto reply = engine->operate(req);
    for (const auto& c : reply.counters()) {
      if (c.name() == name) return c.value();
    }
    FAIL("no counter " << name);
    return 0;
  }
  std::vector<dataplane::v1::FlowEntry> flows() {
    dataplane::v1::OperatorRequest req;
    req.mutable_dump_flows();
    auto r = engine->operate(req);
    return {r.flows().begin(), r.flows().end()};
  }
};

// Packets -------------------------------------------------------------------

inline Bytes udp4(overlay::MacAddress dst, overlay::MacAddress src, const char* from, const char* to, uint8_t ttl = 64,
           uint16_t sport = 1234, size_t payload = 18, bool df = false) {
  Bytes body(payload, 0xab);
  return PacketBuilder()
      .ethernet(dst, src)
      .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl, .frag_field = static_cast<uint16_t>(df ? 0x4000 : 0)})
      .udp(sport, 80)
      .payload(body)
      .build();
}

inline Bytes tcp6(overlay::MacAddress dst, overlay::MacAddress src, const char* from, const char* to, uint8_t hops = 64,
           size_t payload = 20) {
  Bytes body(payload, 0xcd);
  return PacketBuilder()
      .ethernet(dst, src)
      .ipv6({.src = ip6(from), .dst = ip6(to), .hop_limit = hops})
      .tcp({.src_port = 40000, .dst_port = 443})
      .payload(body)
      .build();
}

inline uint32_t innerHash(const Bytes& frame, uint16_t in_port) {
  overlay::ParsedPacket p;
  REQUIRE(overlay::parsePacket(frame, p) == overlay::Status::kOk);
  return overlay::flowHash32(overlay::extractFlowKey(frame, p, in_port));
}

// TCP (flags as in the header) and UDP packets with ports, for the services
// and policy tests.
inline Bytes tcp4(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, uint16_t sport, const char* to,
           uint16_t dport, uint8_t flags, uint8_t ttl = 64, size_t payload = 10) {
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl})
      .tcp({.src_port = sport, .dst_port = dport, .seq = 1000, .ack = flags & 0x10 ? 2000u : 0u, .flags = flags})
      .payload(Bytes(payload, 0x42))
      .build();
}

inline Bytes udp4p(overlay::MacAddress dst_mac, overlay::MacAddress src_mac, const char* from, uint16_t sport, const char* to,
            uint16_t dport, uint8_t ttl = 64) {
  return PacketBuilder()
      .ethernet(dst_mac, src_mac)
      .ipv4({.src = ip4(from), .dst = ip4(to), .ttl = ttl})
      .udp(sport, dport)
      .payload(Bytes(12, 0x24))
      .build();
}

// The reference encapsulation (overlay's GeneveEncapTemplate via encapGeneve).
inline Bytes geneve(const Bytes& inner, overlay::MacAddress src_mac, overlay::MacAddress dst_mac, const char* src_ip,
             const char* dst_ip, uint32_t vni, uint16_t ingress, uint16_t egress, uint32_t hash) {
  std::array<uint8_t, 4> data;
  overlay::GeneveOption opt;
  REQUIRE(overlay::makeOvnOption({ingress, egress}, data, opt) == overlay::Status::kOk);
  overlay::GeneveTunnel t;
  t.src_mac = src_mac;
  t.dst_mac = dst_mac;
  const auto s = IpAddress::parse(src_ip).value(), d = IpAddress::parse(dst_ip).value();
  if (!s.isV4()) t.family = overlay::UnderlayFamily::kIpv6;
  std::copy(s.bytes.begin(), s.bytes.end(), t.src_ip.begin());
  std::copy(d.bytes.begin(), d.bytes.end(), t.dst_ip.begin());
  t.vni = vni;
  t.options = std::span<const overlay::GeneveOption>(&opt, 1);
  std::vector<uint8_t> buf(512 + inner.size());
  std::memcpy(buf.data() + 256, inner.data(), inner.size());
  overlay::PacketBuffer pb(buf.data(), static_cast<uint32_t>(buf.size()), 256, static_cast<uint32_t>(inner.size()));
  REQUIRE(overlay::encapGeneve(pb, t, hash) == overlay::Status::kOk);
  return Bytes(pb.data(), pb.data() + pb.size());
}

inline Bytes fromRemote(const Bytes& inner, uint32_t vni = 10, uint16_t ingress = 9, uint16_t egress = 0x8000,
                 const char* peer = "192.168.100.2", const char* local = "192.168.100.1") {
  return geneve(inner, kNextHopMac, kUplinkMac, peer, local, vni, ingress, egress, 77);
}

// The lanes against the general routine: `scenarios` (a port and the
// packets it receives, each list injected three times: the miss, then two
// hits) through an engine with the lanes on or off (EngineConfig::lanes),
// programmed with `model`. What every port sent, every counter, and the
// kind of every action record in use.
struct LaneRun {
  std::vector<std::vector<Bytes>> sent;  // per scenario, per port (kPorts each)
  std::map<std::string, uint64_t> counters;
  std::set<int> kinds;                   // ActionKind of every record in use
};

inline LaneRun runLaneScenarios(bool lanes, const std::vector<std::pair<unsigned, std::vector<Bytes>>>& scenarios,
                                const dataplane::v1::LogicalModel& model) {
  EngineConfig c;
  c.lanes = lanes;
  Fixture f(c, false);
  const auto programmed = fullSync(*f.engine, model, 1);
  INFO(programmed.message());
  REQUIRE(programmed.status() == dataplane::v1::OK);
  REQUIRE(programmed.problems_size() == 0);
  LaneRun run;
  for (const auto& [port, packets] : scenarios) {
    for (unsigned round = 0; round < 3; ++round) f.inject(port, packets);
    std::vector<Bytes> sent;
    for (unsigned p = 0; p < kPorts; ++p) {
      for (auto& b : Fixture::drain(p)) {
        Bytes tagged{static_cast<uint8_t>(p)};
        tagged.insert(tagged.end(), b.begin(), b.end());
        sent.push_back(std::move(tagged));
      }
    }
    run.sent.push_back(std::move(sent));
  }
  dataplane::v1::OperatorRequest req;
  req.mutable_stats();
  const auto stats = f.engine->operate(req);
  for (const auto& counter : stats.counters()) run.counters[counter.name()] = counter.value();
  FlowTable& table = f.engine->worker(0).table;
  for (uint32_t i = 0; i < table.capacity(); ++i) {
    const FlowEntry& e = table.entry(i);
    if (e.actionIndex() != 0) run.kinds.insert(table.actionsOf(e).kind);
  }
  return run;
}

// The lanes on against the lanes off: every scenario sent the same frames,
// byte for byte, every counter is the same, and with the lanes off every
// record took the general routine.
inline void checkLanesAgree(const LaneRun& on, const LaneRun& off) {
  REQUIRE(on.sent.size() == off.sent.size());
  for (size_t i = 0; i < on.sent.size(); ++i) {
    INFO("scenario " << i);
    REQUIRE(on.sent[i].size() == off.sent[i].size());
    for (size_t j = 0; j < on.sent[i].size(); ++j) {
      CHECK(dpu::test::toHex(on.sent[i][j]) == dpu::test::toHex(off.sent[i][j]));
    }
  }
  CHECK(on.counters == off.counters);
  CHECK(off.kinds == std::set<int>{kActionsGeneral});
}

}  // namespace engine_test
