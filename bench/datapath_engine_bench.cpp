// The Engine's per-packet cost, in-process: processBurst + flush on bursts of
// 32 packets from net_null ports (the null PMD frees what it transmits), for
// local forwarding (VF→VF), Geneve encap (VF→uplink) and decap (uplink→VF)
// with 1, 1,000 and 100,000 flows at 64 B, and the slow path's flow setups
// per second (every packet a new flow). Next to them, in the same run, the
// I/O floor: the same bursts handed straight to tx_burst, as testpmd's io
// mode does. Packets are copied into fresh mbufs untimed before each burst;
// only the engine (and the tx_burst it calls) is timed, with the TSC.
// Services (pod -> ClusterIP, a remote backend: DNAT + Geneve encap): 1,000
// and 100,000 established connections (TCP ACKs; UDP), the plain encap case
// measured in turns with them; new connections per second (a SYN, or a UDP datagram,
// per connection, each packet read once); the memory per established
// connection against its 512-byte target.
// "miss flood": an established flow's rate while another port floods new
// flows, by slow-path budget (EngineConfig::miss_budget, miss_cycle_share),
// in-process as above and with I/O: the lcore loop's own iteration (poll.h)
// over net_ring ports.
//
//   datapath_engine_bench [--packets N] [--only <case name substring>]... [--rounds R] [--alone]
// A substring that ends in '$' must end the name: "Geneve decap uplink->VF,
// 1000 flows$" is that case alone, not its 64 B, 1400 B and ESP relatives.
// --alone: the service cases without the plain encap turns beside them (as
// bench/datapath_callgrind.sh runs them: it counts every engine's work).
// --connections N --tables E: the new connections cases with N connections
// (120,000 by default, at most 600,000) in tables of E entries (262,144), e.g.
// 600000 and 1048576 as bench/datapath.sh's dataplane runs them.
// (bench/README: the end-to-end comparison with testpmd and OVS-DPDK is
// the dataplane's bench; this one isolates the engine.)
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "conntrack/conntrack.h"
#include "datapath/engine.h"
#include "datapath/poll.h"
#include "offload/offload.h"
#include "offload/rte_flow_backend.h"
#include "overlay/aead.h"
#include "overlay/bytes.h"
#include "overlay/esp.h"
#include "overlay/geneve.h"
#include "overlay/packet_builder.h"

using namespace dpu;
using namespace dpu::datapath;
using Bytes = std::vector<uint8_t>;

namespace {

overlay::MacAddress mac(const char* t) { return MacAddress::parse(t).value().bytes; }
uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return a << 24 | b << 16 | c << 8 | d; }

const auto kRouterMac = mac("0a:58:a9:fe:00:01");
const auto kMacA = mac("0a:58:0a:f4:01:05");
const auto kMacB = mac("0a:58:0a:f4:01:06");
const auto kUplinkMac = mac("02:00:00:00:00:01");
const auto kPeerMac = mac("02:00:00:00:00:02");

dataplane::v1::LogicalModel model() {
  dataplane::v1::LogicalModel m;
  auto* n = m.mutable_node();
  n->set_name("node1");
  n->set_tunnel_ip("192.168.100.1");
  n->set_underlay_mtu(1500);
  n->set_pod_mtu(1442);
  n->set_router_mac("0a:58:a9:fe:00:01");
  auto* s = m.add_local_subnets();
  s->set_cidr("10.244.1.0/24");
  s->set_gateway_ip("10.244.1.1");
  s->set_datapath_key(10);
  auto port = [&m](const char* name, uint32_t key, const char* rep, const char* mac_text, const char* ip) {
    auto* p = m.add_ports();
    p->set_name(name);
    p->set_key(key);
    p->set_kind(dataplane::v1::POD);
    p->set_representor(rep);
    p->set_mac(mac_text);
    p->add_ips(ip);
    p->set_datapath_key(10);
  };
  port("pod-a", 1, "pf0vf0", "0a:58:0a:f4:01:05", "10.244.1.5");
  port("pod-b", 2, "pf0vf1", "0a:58:0a:f4:01:06", "10.244.1.6");
  auto* r = m.add_remote_nodes();
  r->set_name("node2");
  r->set_tunnel_ip("192.168.100.2");
  auto* rs = r->add_subnets();
  rs->set_cidr("10.244.2.0/24");
  rs->set_datapath_key(20);
  return m;
}

// The inbound SA from node 2 (what node 2 encrypts with: espFromNode2()).
constexpr uint32_t kSpiIn = 0x12f23afc;
const std::string kKeyIn(16, '\x5c');
const std::array<uint8_t, 4> kSaltIn = {0x24, 0x61, 0xa7, 0xcf};

// The same with IPsec on (NodeSettings.ipsec): an outbound SA to node 2
// (AES-128-GCM, ESN), so the encap flows carry the Esp action, and the
// inbound SA from it, so its Geneve must come as ESP.
dataplane::v1::LogicalModel ipsecModel() {
  dataplane::v1::LogicalModel m = model();
  m.mutable_node()->set_ipsec(true);
  m.mutable_node()->set_pod_mtu(1408);
  auto* sa = m.add_ipsec_sas();
  sa->set_name("node2/out/21f23afc");
  sa->set_remote_node("node2");
  sa->set_peer_tunnel_ip("192.168.100.2");
  sa->set_direction(dataplane::v1::OUTBOUND);
  sa->set_spi(0x21f23afc);
  sa->set_local_epoch(1);
  sa->set_remote_epoch(1);
  sa->set_algorithm(dataplane::v1::AES_128_GCM);
  sa->set_key(std::string(16, '\x4b'));
  sa->set_salt(std::string("\x13\x50\x96\xbe", 4));
  sa->set_esn(true);
  sa->set_initial_sequence(1);
  sa->set_sequence_limit(~uint64_t{0} - 1);
  auto* in = m.add_ipsec_sas();
  *in = *sa;
  in->set_name("node2/in/12f23afc");
  in->set_direction(dataplane::v1::INBOUND);
  in->set_spi(kSpiIn);
  in->set_key(kKeyIn);
  in->set_salt(std::string(kSaltIn.begin(), kSaltIn.end()));
  in->set_sequence_limit(0);
  return m;
}

// Node 2's side of the inbound SA: it encrypts the Geneve frames it sends us.
overlay::EspOutboundSa espFromNode2() {
  overlay::EspSaConfig c;
  c.spi = kSpiIn;
  c.key.assign(kKeyIn.begin(), kKeyIn.end());
  c.salt = kSaltIn;
  c.esn = true;
  auto sa = overlay::EspOutboundSa::create(c);
  if (!sa) {
    std::fprintf(stderr, "%s\n", sa.error().c_str());
    std::exit(1);
  }
  return std::move(sa).value();
}

// The same with a ClusterIP service whose one backend is on node 2, TCP and
// UDP on ports 80 to 89 (ten ports: one client address has too few source
// ports for 100,000 connections to one, or for --connections 600000).
dataplane::v1::LogicalModel serviceModel() {
  auto m = model();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  auto* svc = m.add_services();
  svc->set_name("default/remote");
  svc->add_cluster_ips("10.96.0.20");
  for (auto proto : {dataplane::v1::TCP, dataplane::v1::UDP}) {
    for (uint32_t port = 80; port < 90; ++port) {
      auto* p = svc->add_ports();
      p->set_protocol(proto);
      p->set_port(port);
      p->set_name((proto == dataplane::v1::TCP ? "tcp-" : "udp-") + std::to_string(port));
      auto* b = p->add_backends();
      b->set_ip("10.244.2.7");
      b->set_port(8000 + port);  // one target port per service port: else two connections from one client
                                 // port would translate to one tuple (ConntrackConflict)
      b->set_local(false);
      b->set_ready(true);
      b->set_serving(true);
    }
  }
  return m;
}

// The service model with pod A isolated both ways by 1,000 NetworkPolicies
// (docs/policy.md), as a default-deny namespace with many allow policies
// compiles: each allows egress to a few /32 peers on one of ten TCP and UDP
// ports (8080-8089) and ingress from the cluster on TCP 80; the last two of
// ports 8080 and 8081 also allow the backend's node subnet, so the service's
// connections pass.
dataplane::v1::LogicalModel policyModel() {
  auto m = serviceModel();
  auto* pp = m.add_port_policies();
  pp->set_port("pod-a");
  pp->set_pod("bench/a");
  auto* in = pp->mutable_ingress();
  auto* out = pp->mutable_egress();
  in->set_isolated(true);
  out->set_isolated(true);
  char name[32];
  for (unsigned i = 0; i < 1000; ++i) {
    std::snprintf(name, sizeof name, "bench/p%04u", i);
    in->add_policies(name);
    out->add_policies(name);
    for (auto proto : {6u, 17u}) {
      auto* r = out->add_rules();
      for (unsigned k = 0; k < 3; ++k) r->add_peers("10.250." + std::to_string(i / 64) + "." + std::to_string(i % 64 * 4 + k) + "/32");
      if (i >= 990 && i % 10 < 2) r->add_peers("10.244.2.0/24");  // the backend's target ports 8080, 8081
      r->set_protocol(proto);
      r->set_port_first(8080 + i % 10);
      r->set_port_last(8080 + i % 10);
      r->set_policy(name);
    }
    auto* r = in->add_rules();
    r->add_peers("10.244.0.0/16");
    r->set_protocol(6);
    r->set_port_first(80);
    r->set_port_last(80);
    r->set_policy(name);
  }
  return m;
}

// 64 B on the wire: 60 bytes of frame + the 4-byte FCS the NIC adds.
Bytes udp64(overlay::MacAddress src, uint32_t from, uint32_t to, uint16_t sport, uint16_t dport) {
  Bytes body(18, 0x5a);
  return overlay::PacketBuilder()
      .ethernet(kRouterMac, src)
      .ipv4({.src = from, .dst = to, .ttl = 64})
      .udp(sport, dport)
      .payload(body)
      .build();
}

// A 64 B TCP segment (6 bytes of payload) with these flags.
Bytes tcp64(overlay::MacAddress src, uint32_t from, uint32_t to, uint16_t sport, uint16_t dport, uint8_t flags) {
  Bytes body(6, 0x5a);
  return overlay::PacketBuilder()
      .ethernet(kRouterMac, src)
      .ipv4({.src = from, .dst = to, .ttl = 64})
      .tcp({.src_port = sport, .dst_port = dport, .seq = 1000, .ack = 2000, .flags = flags})
      .payload(body)
      .build();
}

Bytes tunnelled(const Bytes& inner) {
  std::array<uint8_t, 4> data;
  overlay::GeneveOption opt;
  (void)overlay::makeOvnOption({9, 0x8000}, data, opt);
  overlay::GeneveTunnel t;
  t.src_mac = kPeerMac;
  t.dst_mac = kUplinkMac;
  t.src_ip = {192, 168, 100, 2};
  t.dst_ip = {192, 168, 100, 1};
  t.vni = 10;
  t.options = std::span<const overlay::GeneveOption>(&opt, 1);
  Bytes buf(256 + inner.size());
  std::memcpy(buf.data() + 128, inner.data(), inner.size());
  overlay::PacketBuffer pb(buf.data(), static_cast<uint32_t>(buf.size()), 128, static_cast<uint32_t>(inner.size()));
  (void)overlay::encapGeneve(pb, t, 1);
  return Bytes(pb.data(), pb.data() + pb.size());
}

// Per-burst TSC samples. The median burst is the figure: this machine is
// shared, and a burst during which the lcore was preempted is an outlier the
// median ignores (the mean is printed too, for honesty).
struct Result {
  double cycles_per_packet = 0;  // median burst / 32
  double mean_cycles_per_packet = 0;
  double mpps = 0;               // at the TSC rate, from the median
};

rte_mempool* g_pool = nullptr;

// An eswitch that takes every flow: only to size the offload bookkeeping.
class AcceptAll final : public offload::OffloadBackend {
 public:
  offload::Capabilities capabilities() const override { return {.backend = "accept-all"}; }
  dpu::Result<void> validate(const flow::FlowSpec&) override { return {}; }
  dpu::Result<offload::OffloadHandle> install(const flow::FlowSpec&) override { return offload::OffloadHandle{++n_}; }
  dpu::Result<void> remove(offload::OffloadHandle) override { return {}; }
  dpu::Result<offload::HwCounters> query(offload::OffloadHandle) override { return offload::HwCounters{}; }

 private:
  uint64_t n_ = 0;
};

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `packets` packets of the set (round robin over it) through `step`,
// which is timed per burst; `fill` (untimed) may change each packet in its
// mbuf after the copy.
template <class Step, class Fill>
Result run(const std::vector<Bytes>& set, uint64_t packets, Step&& step, Fill&& fill) {
  rte_mbuf* burst[32];
  uint64_t cycles = 0, done = 0;
  std::vector<uint32_t> samples;
  samples.reserve(packets / 32 + 1);
  size_t next = 0;
  while (done < packets) {
    if (rte_pktmbuf_alloc_bulk(g_pool, burst, 32) != 0) {
      std::fprintf(stderr, "mempool exhausted\n");
      std::exit(1);
    }
    for (unsigned i = 0; i < 32; ++i) {
      const Bytes& p = set[next];
      next = next + 1 == set.size() ? 0 : next + 1;
      std::memcpy(rte_pktmbuf_append(burst[i], static_cast<uint16_t>(p.size())), p.data(), p.size());
      fill(burst[i]);
    }
    const uint64_t t0 = rte_rdtsc_precise();
    step(burst);
    const uint64_t dt = rte_rdtsc_precise() - t0;
    cycles += dt;
    samples.push_back(static_cast<uint32_t>(std::min<uint64_t>(dt, UINT32_MAX)));
    done += 32;
  }
  Result r;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  r.cycles_per_packet = samples[samples.size() / 2] / 32.0;
  r.mean_cycles_per_packet = static_cast<double>(cycles) / static_cast<double>(done);
  r.mpps = static_cast<double>(rte_get_tsc_hz()) / r.cycles_per_packet / 1e6;
  return r;
}

template <class Step>
Result run(const std::vector<Bytes>& set, uint64_t packets, Step&& step) {
  return run(set, packets, step, [](rte_mbuf*) {});
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t packets = 4'000'000;
  unsigned rounds = 5;  // of the miss flood and new connections cases, whose median is printed
  std::vector<std::string> only;  // run only the cases whose name contains one of these
  bool alone = false;             // the service cases without their plain encap turns
  uint32_t new_connections = 120000;  // the new connections cases' distinct connections
  uint32_t new_tables = 262144;       // and their conntrack and flow cache entries
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--alone") alone = true;
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--packets") packets = std::stoull(argv[i + 1]);
    if (std::string(argv[i]) == "--rounds") rounds = static_cast<unsigned>(std::stoul(argv[i + 1]));
    if (std::string(argv[i]) == "--only") only.push_back(argv[i + 1]);
    if (std::string(argv[i]) == "--connections") new_connections = static_cast<uint32_t>(std::stoul(argv[i + 1]));
    if (std::string(argv[i]) == "--tables") new_tables = static_cast<uint32_t>(std::stoul(argv[i + 1]));
  }
  if (new_connections == 0 || new_connections > 600000 || new_tables < new_connections) {
    std::fprintf(stderr, "--connections: between 1 and 600000, and at most --tables (%u)\n", new_tables);
    return 2;
  }
  auto wanted = [&only](const std::string& name) {
    return only.empty() || std::any_of(only.begin(), only.end(),
                                       [&name](const std::string& o) {
                                         if (!o.empty() && o.back() == '$') {
                                           const std::string tail = o.substr(0, o.size() - 1);
                                           return name.size() >= tail.size() &&
                                                  name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
                                         }
                                         return name.find(o) != std::string::npos;
                                       });
  };
  const std::string prefix = "--file-prefix=engine_bench_" + std::to_string(getpid());
  std::vector<std::string> args = {"datapath_engine_bench", "--no-huge", "--no-pci", "-m", "512", prefix,
                                   "--log-level=error", "-l", "0", "--vdev=net_null0", "--vdev=net_null1",
                                   "--vdev=net_null2"};
  std::vector<char*> eal_argv;
  for (auto& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed\n");
    return 1;
  }
  g_pool = rte_pktmbuf_pool_create("bench_pool", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (g_pool == nullptr) return 1;
  uint16_t ports[3];
  for (uint16_t i = 0; i < 3; ++i) {
    if (rte_eth_dev_get_port_by_name(("net_null" + std::to_string(i)).c_str(), &ports[i]) != 0) return 1;
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(ports[i], 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(ports[i], 0, 512, SOCKET_ID_ANY, nullptr, g_pool) != 0 ||
        rte_eth_tx_queue_setup(ports[i], 0, 512, SOCKET_ID_ANY, nullptr) != 0 || rte_eth_dev_start(ports[i]) != 0) {
      std::fprintf(stderr, "null port set-up failed\n");
      return 1;
    }
  }
  const uint16_t uplink = ports[0], rep_a = ports[1], rep_b = ports[2];

  // A full sync of `m`, which must be taken whole.
  auto programModel = [](Engine& engine, const dataplane::v1::LogicalModel& m, uint64_t generation) {
    dataplane::v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(generation);
    *req.mutable_full_sync()->mutable_model() = m;
    const auto reply = engine.program(req);
    if (reply.status() != dataplane::v1::OK || reply.problems_size() > 0) {
      std::fprintf(stderr, "the model was refused: %s\n", reply.DebugString().c_str());
      std::exit(1);
    }
  };
  // An engine on the uplink, pod A's and pod B's ports (`on`, by default the null ones).
  auto make = [&](uint32_t entries, offload::OffloadBackend* backend,
                  uint32_t miss_budget = EngineConfig::kDefaultMissBudget,
                  uint32_t miss_cycle_share = EngineConfig::kDefaultMissCycleShare,
                  std::array<uint16_t, 3> on = {}, uint32_t conntrack_entries = EngineConfig{}.conntrack_entries) {
    if (on == std::array<uint16_t, 3>{}) on = {uplink, rep_a, rep_b};
    EngineConfig c;
    c.flow_cache_entries = entries;
    c.miss_budget = miss_budget;
    c.miss_cycle_share = miss_cycle_share;
    c.flow_idle_timeout_ms = 600'000;
    c.offload = backend;
    c.conntrack_entries = conntrack_entries;
    auto e = Engine::create(c);
    if (!e) {
      std::fprintf(stderr, "%s\n", e.error().c_str());
      std::exit(1);
    }
    auto engine = std::move(e.value());
    (void)engine->bindPort("uplink", on[0], PortRole::kUplink, MacAddress{kUplinkMac});
    (void)engine->bindPort("pf0vf0", on[1], PortRole::kRepresentor, MacAddress{kMacA});
    (void)engine->bindPort("pf0vf1", on[2], PortRole::kRepresentor, MacAddress{kMacB});
    (void)engine->setTunnelNextHop(IpAddress::parse("192.168.100.2").value(), MacAddress{kPeerMac});
    programModel(*engine, model(), 1);
    return engine;
  };

  // An engine counter (dpuctl stats), by name.
  auto counter = [](Engine& e, const char* name) {
    dataplane::v1::OperatorRequest req;
    req.mutable_stats();
    const auto stats = e.operate(req);
    for (const auto& c : stats.counters())
      if (c.name() == name) return c.value();
    return uint64_t{0};
  };
  // Packets a port has transmitted (the null PMD counts what it frees).
  auto txPackets = [](uint16_t port) {
    rte_eth_stats st{};
    (void)rte_eth_stats_get(port, &st);
    return st.opackets;
  };

  auto flowSet = [](size_t n, auto build) {
    std::vector<Bytes> set;
    for (size_t i = 0; i < n; ++i) {
      set.push_back(build(static_cast<uint16_t>(1024 + i % 50000), static_cast<uint16_t>(80 + i / 50000)));
    }
    return set;
  };
  auto local = [](uint16_t sp, uint16_t dp) { return udp64(kMacA, ip4(10, 244, 1, 5), ip4(10, 244, 1, 6), sp, dp); };
  auto encap = [](uint16_t sp, uint16_t dp) { return udp64(kMacA, ip4(10, 244, 1, 5), ip4(10, 244, 2, 7), sp, dp); };
  auto decap = [](uint16_t sp, uint16_t dp) {
    return tunnelled(udp64(kRouterMac, ip4(10, 244, 2, 7), ip4(10, 244, 1, 5), sp, dp));
  };

  std::printf("datapath engine, one lcore, bursts of 32, 64 B frames; TSC %.2f GHz; %llu packets per case\n",
              static_cast<double>(rte_get_tsc_hz()) / 1e9, static_cast<unsigned long long>(packets));
  std::printf("%-38s %8s %14s %12s\n", "case", "Mpps", "cycles/packet", "(mean)");

  if (wanted("io floor")) {
    auto set = flowSet(1000, local);
    auto r = run(set, packets, [&](rte_mbuf** b) {
      uint16_t sent = rte_eth_tx_burst(rep_b, 0, b, 32);
      for (uint16_t i = sent; i < 32; ++i) rte_pktmbuf_free(b[i]);
    });
    std::printf("%-38s %8.2f %14.1f %12.1f\n", "io floor (tx_burst only)", r.mpps, r.cycles_per_packet,
                r.mean_cycles_per_packet);
  }
  struct Case {
    const char* name;
    uint16_t rx;
    std::function<Bytes(uint16_t, uint16_t)> build;
  };
  const Case cases[] = {{"local VF->VF", rep_a, local}, {"Geneve encap VF->uplink", rep_a, encap},
                        {"Geneve decap uplink->VF", uplink, decap}};
  for (const auto& c : cases) {
    for (size_t flows : {size_t{1}, size_t{1000}, size_t{100000}}) {
      char name[64];
      std::snprintf(name, sizeof name, "%s, %zu flows", c.name, flows);
      if (!wanted(name)) continue;
      // Sized as bench/datapath.sh sizes the dataplane's: twice the flows, at least 4,096.
      auto engine = make(static_cast<uint32_t>(std::max<size_t>(4096, 2 * flows)), nullptr);
      WorkerContext& w = engine->worker(0);
      auto set = flowSet(flows, c.build);
      auto step = [&](rte_mbuf** b) {
        engine->processBurst(w, c.rx, b, 32);
        engine->flush(w);
        engine->quiescent(w);
      };
      (void)run(set, std::max<uint64_t>(set.size(), 32 * 64), step);  // install every flow first
      auto r = run(set, packets, step);
      std::printf("%-38s %8.2f %14.1f %12.1f\n", name, r.mpps, r.cycles_per_packet, r.mean_cycles_per_packet);
    }
  }

  // IPsec: the encap case with the Esp action (ESP transport mode around the
  // Geneve packet, AES-128-GCM with the default crypto backend) beside the
  // same case without it, 1,000 flows, 64 B and 1400 B frames (with the FCS):
  // Mpps, and Gbit/s of the frames the pod sent.
  auto podFrame = [](size_t frame, uint32_t src, uint32_t dst, overlay::MacAddress from, uint16_t sp, uint16_t dp) {
    Bytes body(frame - 4 - 42, 0x5a);
    return overlay::PacketBuilder()
        .ethernet(kRouterMac, from)
        .ipv4({.src = src, .dst = dst, .ttl = 64})
        .udp(sp, dp)
        .payload(body)
        .build();
  };
  for (size_t frame : {size_t{64}, size_t{1400}}) {
    for (bool esp : {false, true}) {
      char name[80];
      std::snprintf(name, sizeof name, "%s VF->uplink, 1000 flows, %zu B", esp ? "Geneve+ESP encap" : "Geneve encap",
                    frame);
      if (!wanted(name)) continue;
      auto engine = make(4096, nullptr);
      if (esp) programModel(*engine, ipsecModel(), 2);
      WorkerContext& w = engine->worker(0);
      auto set = flowSet(1000, [&](uint16_t sp, uint16_t dp) {
        return podFrame(frame, ip4(10, 244, 1, 5), ip4(10, 244, 2, 7), kMacA, sp, dp);
      });
      auto step = [&](rte_mbuf** b) {
        engine->processBurst(w, rep_a, b, 32);
        engine->flush(w);
        engine->quiescent(w);
      };
      (void)run(set, 32 * 64, step);
      auto r = run(set, packets, step);
      std::printf("%-38s %8.2f %14.1f %12.1f  %.2f Gbit/s\n", name, r.mpps, r.cycles_per_packet,
                  r.mean_cycles_per_packet, r.mpps * static_cast<double>(frame) * 8 / 1000);
      if (esp && counter(*engine, "IpsecNoSa") + counter(*engine, "IpsecSequenceLimit") != 0) {
        std::fprintf(stderr, "the ESP case dropped packets: no SA or sequence limit\n");
        return 1;
      }
    }
  }
  // The AES-GCM alone, timed the same way (median burst of 32 packets): the
  // ceiling the ESP cases are held against, at the bytes ESP encrypts for a
  // 64 B and a 1400 B frame (the Geneve UDP packet, padded, with the trailer)
  // and at 1400 B, one buffer per packet of a burst as in the cases above.
  // On a shared machine it is the fair ceiling: dpdk-test-crypto-perf counts
  // wall-clock time, in which the other load's time is included.
  // "open only" is the other way's ceiling: each burst is sealed untimed, then
  // opened (tag checked, decrypted in place) under the clock.
  struct AeadCase {
    bool open;
    uint32_t bytes;
  };
  for (const AeadCase c : {AeadCase{false, 88}, AeadCase{false, 1400}, AeadCase{false, 1424}, AeadCase{true, 88},
                           AeadCase{true, 1400}, AeadCase{true, 1424}}) {
    const bool open = c.open;
    const uint32_t bytes = c.bytes;
    char name[80];
    std::snprintf(name, sizeof name, "AES-128-GCM %s only, %u B", open ? "open" : "seal", bytes);
    if (!wanted(name)) continue;
    const std::vector<uint8_t> key(16, 0x4b);
    auto aead = overlay::createAeadContext(overlay::defaultAeadBackend(), overlay::AeadAlgorithm::kAes128Gcm, key);
    if (!aead) {
      std::fprintf(stderr, "%s\n", aead.error().c_str());
      return 1;
    }
    std::vector<std::vector<uint8_t>> bufs(32, std::vector<uint8_t>(bytes + overlay::kAeadTagSize, 0x5a));
    std::vector<uint32_t> samples;
    uint64_t seq = 0;
    const uint8_t aad[12] = {0x21, 0xf2, 0x3a, 0xfc};
    for (uint64_t done = 0; done < packets + 32 * 64; done += 32) {
      const uint64_t first = seq;
      auto nonceOf = [](uint64_t n) {
        overlay::AeadNonce nonce{0x13, 0x50, 0x96, 0xbe};
        overlay::store64(nonce.data() + 4, n);
        return nonce;
      };
      if (open) {
        for (auto& b : bufs) (void)(*aead)->seal(nonceOf(++seq), {aad, 12}, {b.data(), bytes}, b.data() + bytes);
      }
      const uint64_t t0 = rte_rdtsc_precise();
      uint64_t n = first;
      for (auto& b : bufs) {
        if (!open) {
          (void)(*aead)->seal(nonceOf(++seq), {aad, 12}, {b.data(), bytes}, b.data() + bytes);
        } else if ((*aead)->open(nonceOf(++n), {aad, 12}, {b.data(), bytes}, b.data() + bytes) !=
                   overlay::Status::kOk) {
          std::fprintf(stderr, "open only: a tag did not verify\n");
          return 1;
        }
      }
      const uint64_t dt = rte_rdtsc_precise() - t0;
      if (done >= 32 * 64) samples.push_back(static_cast<uint32_t>(std::min<uint64_t>(dt, UINT32_MAX)));
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    const double cpp = samples[samples.size() / 2] / 32.0;
    const double mops = static_cast<double>(rte_get_tsc_hz()) / cpp / 1e6;
    std::printf("%-38s %8.2f %14.1f %12s  %.2f Gbit/s\n", name, mops, cpp, "-", mops * bytes * 8 / 1000);
  }

  // The other way: Geneve from node 2, ESP-protected under the inbound SA
  // (each packet encrypted with its own sequence number, untimed, as node 2
  // would send it), authenticated, anti-replayed, decrypted and decapped to
  // pod A; beside the same Geneve decap without ESP. Gbit/s of the frames
  // delivered to the pod.
  for (size_t frame : {size_t{64}, size_t{1400}}) {
    for (bool esp : {false, true}) {
      char name[80];
      std::snprintf(name, sizeof name, "%s uplink->VF, 1000 flows, %zu B",
                    esp ? "ESP+Geneve decap" : "Geneve decap", frame);
      if (!wanted(name)) continue;
      auto engine = make(4096, nullptr);
      if (esp) programModel(*engine, ipsecModel(), 2);
      WorkerContext& w = engine->worker(0);
      auto set = flowSet(1000, [&](uint16_t sp, uint16_t dp) {
        return tunnelled(podFrame(frame, ip4(10, 244, 2, 7), ip4(10, 244, 1, 5), kRouterMac, sp, dp));
      });
      overlay::EspOutboundSa node2 = espFromNode2();
      auto encrypt = [&](rte_mbuf* m) {
        if (!esp) return;
        constexpr uint32_t kEth = overlay::eth::kHeaderLen;
        uint8_t eth[kEth];  // the IP header moves over it
        std::memcpy(eth, rte_pktmbuf_mtod(m, const uint8_t*), kEth);
        overlay::PacketBuffer buf(static_cast<uint8_t*>(m->buf_addr), m->buf_len, m->data_off + kEth,
                                  m->data_len - kEth);
        if (node2.encrypt(buf) != overlay::Status::kOk) {
          std::fprintf(stderr, "node 2's ESP failed\n");
          std::exit(1);
        }
        std::memcpy(static_cast<uint8_t*>(m->buf_addr) + buf.headroom() - kEth, eth, kEth);
        m->data_off = static_cast<uint16_t>(buf.headroom() - kEth);
        m->data_len = static_cast<uint16_t>(buf.size() + kEth);
        m->pkt_len = m->data_len;
      };
      auto step = [&](rte_mbuf** b) {
        engine->processBurst(w, uplink, b, 32);
        engine->flush(w);
        engine->quiescent(w);
      };
      const uint64_t delivered = txPackets(rep_a);
      (void)run(set, 32 * 64, step, encrypt);
      auto r = run(set, packets, step, encrypt);
      std::printf("%-38s %8.2f %14.1f %12.1f  %.2f Gbit/s\n", name, r.mpps, r.cycles_per_packet,
                  r.mean_cycles_per_packet, r.mpps * static_cast<double>(frame) * 8 / 1000);
      // Every packet must have reached pod A (no replay, ICV or SA drop).
      if (txPackets(rep_a) - delivered != 32 * 64 + packets / 32 * 32 + (packets % 32 != 0 ? 32 : 0)) {
        std::fprintf(stderr, "the %s case did not deliver every packet:", esp ? "ESP decap" : "decap");
        dataplane::v1::OperatorRequest req;
        req.mutable_stats();
        const auto stats = engine->operate(req);
        for (const auto& c : stats.counters()) {
          if (c.value() != 0) std::fprintf(stderr, " %s=%llu", c.name().c_str(), static_cast<unsigned long long>(c.value()));
        }
        std::fprintf(stderr, "\n");
        return 1;
      }
    }
  }

  // Services: pod A -> 10.96.0.20:80/81 (serviceModel()), its one backend on node
  // 2: the service stage's DNAT fused into the cached flow, then the Geneve
  // encap of the plain encap case. Connection i: source port 1024 + i mod
  // 50,000 to service port 80 + i div 50,000. Each connection is opened by
  // its first packet: UDP's is a new connection, forwarded uncached and
  // cached by its second; a TCP ACK with no connection is picked up loose
  // as established (as after a dataplane restart) and cached at once, so
  // the warm-up (every connection twice) leaves every connection
  // established and cached without replaying handshakes (which conntrack
  // forwards uncached: the new-connection case below measures them).
  const uint32_t kPodA = ip4(10, 244, 1, 5), kVip = ip4(10, 96, 0, 20);
  auto tcpAck = [&](uint16_t sp, uint16_t dp) { return tcp64(kMacA, kPodA, kVip, sp, dp, 0x10); };
  auto tcpSyn = [&](uint16_t sp, uint16_t dp) { return tcp64(kMacA, kPodA, kVip, sp, dp, 0x02); };
  auto udpVip = [&](uint16_t sp, uint16_t dp) { return udp64(kMacA, kPodA, kVip, sp, dp); };
  // "... 1,000 policies": the same connections from pod A isolated by
  // 1,000 NetworkPolicies (policyModel): judged once when opened, after
  // which their flows are the plain cases' (the same Mpps is expected).
  const Case service_cases[] = {{"service TCP ACK", rep_a, tcpAck},
                                {"service UDP", rep_a, udpVip},
                                {"service TCP ACK, 1,000 policies", rep_a, tcpAck},
                                {"service UDP, 1,000 policies", rep_a, udpVip}};
  for (const auto& c : service_cases) {
    const bool policies = std::string(c.name).find("policies") != std::string::npos;
    for (size_t conns : {size_t{1000}, size_t{100000}}) {
      char name[64];
      std::snprintf(name, sizeof name, "%s, %zu conns", c.name, conns);
      if (!wanted(name)) continue;
      // Two flows per connection (one each way) once replies come: sized
      // as the plain cases are, twice the flows. Beside it the plain encap
      // case on as many flows, in turns: `rounds` rounds of each, the
      // median of each and of the rounds' differences.
      const auto entries = static_cast<uint32_t>(std::max<size_t>(4096, 4 * conns));
      auto engine = make(entries, nullptr);
      programModel(*engine, policies ? policyModel() : serviceModel(), 2);
      auto plain = make(entries, nullptr);
      auto set = flowSet(conns, c.build), plain_set = flowSet(conns, encap);
      auto stepOf = [&](Engine& e) {
        return [&e, &c](rte_mbuf** b) {
          WorkerContext& w = e.worker(0);
          e.processBurst(w, c.rx, b, 32);
          e.flush(w);
          e.quiescent(w);
        };
      };
      // Open and cache every connection (a datagram's by its second
      // packet), and every plain flow.
      (void)run(set, std::max<uint64_t>(2 * set.size(), 32 * 64), stepOf(*engine));
      if (!alone) (void)run(plain_set, std::max<uint64_t>(plain_set.size(), 32 * 64), stepOf(*plain));
      const uint64_t opened = counter(*engine, "ConntrackNew");  // loose pickups included
      const uint64_t cached = counter(*engine, "FlowInstalled");
      std::vector<double> svc_cycles, svc_means, plain_cycles, extra, forwarded;
      for (unsigned round = 0; round < rounds; ++round) {
        const uint64_t tx0 = txPackets(uplink), sent = (packets + 31) / 32 * 32;
        const auto r = run(set, packets, stepOf(*engine));
        forwarded.push_back(static_cast<double>(txPackets(uplink) - tx0) / static_cast<double>(sent));
        svc_cycles.push_back(r.cycles_per_packet);
        svc_means.push_back(r.mean_cycles_per_packet);
        if (alone) continue;
        const auto p = run(plain_set, packets, stepOf(*plain));
        plain_cycles.push_back(p.cycles_per_packet);
        extra.push_back(r.cycles_per_packet - p.cycles_per_packet);
      }
      const double cyc = medianOf(svc_cycles);
      std::printf("%-38s %8.2f %14.1f %12.1f", name, static_cast<double>(rte_get_tsc_hz()) / cyc / 1e6, cyc,
                  medianOf(svc_means));
      if (!alone) std::printf("  plain encap %.1f (%+.1f; median of %u)", medianOf(plain_cycles), medianOf(extra), rounds);
      std::printf("  [%llu connections, %llu flows cached, %.1f%% to the uplink]\n",
                  static_cast<unsigned long long>(opened), static_cast<unsigned long long>(cached),
                  100 * medianOf(forwarded));
    }
  }
  // Every packet a new connection, each read once: 120,000 distinct
  // five-tuples (source ports 1024..61023 to service ports 80 and 81; more
  // ports for --connections), in a conntrack table that holds them all
  // (262,144 entries, the default) and a 262,144-entry flow cache. A SYN or
  // a datagram is balanced, tracked and forwarded uncached (its connection's
  // next packet caches). A fresh engine per round; the median of `rounds`
  // rounds.
  // "... 1,000 policies": the same with pod A isolated by 1,000 policies
  // (policyModel: egress judged against the backend after DNAT), and its
  // rate as a share of the plain case's, measured just before it.
  const Case new_cases[] = {{"new connections: TCP SYN", rep_a, tcpSyn},
                            {"new connections: UDP", rep_a, udpVip},
                            {"new connections, 1,000 policies: TCP SYN", rep_a, tcpSyn},
                            {"new connections, 1,000 policies: UDP", rep_a, udpVip}};
  if (std::any_of(std::begin(new_cases), std::end(new_cases), [&](const Case& c) { return wanted(c.name); })) {
    std::map<std::string, double> plain_rate;
    for (const auto& c : new_cases) {
      if (!wanted(c.name)) continue;
      const bool policies = std::string(c.name).find("policies") != std::string::npos;
      std::vector<Bytes> set;
      for (uint32_t i = 0; i < new_connections; ++i) {
        set.push_back(c.build(static_cast<uint16_t>(1024 + i % 60000), static_cast<uint16_t>(80 + i / 60000)));
      }
      std::vector<double> cycles, means, forwarded, opened;
      for (unsigned round = 0; round < rounds; ++round) {
        auto engine = make(new_tables, nullptr, EngineConfig::kDefaultMissBudget, EngineConfig::kDefaultMissCycleShare,
                           {}, new_tables);
        programModel(*engine, policies ? policyModel() : serviceModel(), 2);
        WorkerContext& w = engine->worker(0);
        const uint64_t tx0 = txPackets(uplink);
        auto r = run(set, set.size(), [&](rte_mbuf** b) {
          engine->processBurst(w, c.rx, b, 32);
          engine->flush(w);
          engine->quiescent(w);
        });
        cycles.push_back(r.cycles_per_packet);
        means.push_back(r.mean_cycles_per_packet);
        forwarded.push_back(static_cast<double>(txPackets(uplink) - tx0) / static_cast<double>(set.size()));
        opened.push_back(static_cast<double>(counter(*engine, "ConntrackNew")));
      }
      const double cyc = medianOf(cycles);
      std::printf("%-38s %8.3f M conn/s (%.0f cycles per connection incl. encap + tx; mean %.0f; median of %u)"
                  "  [%.0f connections, %.1f%% to the uplink]\n",
                  c.name, static_cast<double>(rte_get_tsc_hz()) / cyc / 1e6, cyc, medianOf(means), rounds,
                  medianOf(opened), 100 * medianOf(forwarded));
      const std::string proto = std::string(c.name).substr(std::string(c.name).find(": "));
      if (!policies) {
        plain_rate[proto] = cyc;
      } else if (plain_rate.count(proto)) {
        std::printf("%-38s %8.1f %% of the rate without policies\n", "  with 1,000 policies / without",
                    100.0 * plain_rate[proto] / cyc);
      }
    }
  }
  if (wanted("policy change")) {
    // A change of one port's PortPolicy (one of its 1,000 rules' ports) as a
    // Delta, on an engine holding 100,000 cached connections of that pod:
    // validation, the snapshot (the port's rules recompiled), the re-judging
    // of the connections and the flows it retires. The median of 21.
    auto engine = make(262144, nullptr);
    auto m = policyModel();
    programModel(*engine, m, 2);
    WorkerContext& w = engine->worker(0);
    auto set = flowSet(100000, udpVip);
    (void)run(set, set.size(), [&](rte_mbuf** b) {
      engine->processBurst(w, rep_a, b, 32);
      engine->flush(w);
      engine->quiescent(w);
    });
    std::vector<double> us;
    uint64_t generation = 2;
    uint32_t removed = 0;
    for (unsigned i = 0; i < 21; ++i) {
      dataplane::v1::ProgramRequest req;
      auto* d = req.mutable_delta();
      d->set_base_generation(generation);
      d->set_generation(generation + 1);
      auto* pp = d->add_upsert_port_policies();
      *pp = m.port_policies(0);
      pp->mutable_egress()->mutable_rules(0)->set_port_last(8080 + (i % 2 == 0 ? 10 : 0));
      const uint64_t t0 = rte_get_tsc_cycles();
      const auto reply = engine->program(req);
      us.push_back(static_cast<double>(rte_get_tsc_cycles() - t0) * 1e6 / static_cast<double>(rte_get_tsc_hz()));
      if (reply.status() != dataplane::v1::OK) {
        std::fprintf(stderr, "policy change refused: %s\n", reply.message().c_str());
        return 1;
      }
      removed = reply.flows_removed();
      ++generation;
      engine->quiescent(w);
      engine->maintain();
    }
    std::printf("%-38s %8.2f ms per Delta (median of 21; 1,000 policies, 100,000 connections tracked, %u flows retired)\n",
                "policy change: one port's PortPolicy", medianOf(us) / 1000, removed);
  }
  if (wanted("slow path")) {
    // Slow path: every packet a new flow (400,000 distinct five-tuples through
    // a 262,144-entry cache, so setups continue with evictions).
    auto engine = make(262144, nullptr);
    WorkerContext& w = engine->worker(0);
    std::vector<Bytes> set;
    for (uint32_t i = 0; i < 400000; ++i) {
      set.push_back(encap(static_cast<uint16_t>(1024 + i % 60000), static_cast<uint16_t>(1 + i / 60000)));
    }
    auto r = run(set, set.size(), [&](rte_mbuf** b) {
      engine->processBurst(w, rep_a, b, 32);
      engine->flush(w);
      engine->quiescent(w);
    });
    std::printf("%-38s %8.3f M flows/s (%.0f cycles per setup incl. encap + tx; mean %.0f)\n",
                "slow path: new flow per packet", r.mpps, r.cycles_per_packet, r.mean_cycles_per_packet);
  }
  if (wanted("miss flood, in-process") || wanted("miss flood, with I/O")) {
    // Pod A's one established flow (A→B) next to pod B flooding new flows
    // (to a remote node: encap; 400,000 distinct 5-tuples through the default
    // 65,536-entry cache), one worker. Each poll iteration asks the engine
    // how many packets to take from each port (Engine::rxBurstSize), as the
    // lcore loop does: B's packets beyond that are left where they wait.
    // Figures are per round: A's packets per second of lcore time, B's flow
    // setups per second, over all the round's iterations (not the median
    // iteration: under the cycle share most iterations take nothing of B, a
    // few take one), the median of `rounds` rounds. Per configuration
    // (flow_cache.miss_budget, miss_cycle_share): A alone, A with B flooding,
    // and B flooding alone (no established traffic: its setup rate).
    std::vector<Bytes> flood;
    for (uint32_t i = 0; i < 400000; ++i) {
      flood.push_back(udp64(kMacB, ip4(10, 244, 1, 6), ip4(10, 244, 2, 7), static_cast<uint16_t>(1024 + i % 60000),
                            static_cast<uint16_t>(1 + i / 60000)));
    }
    const Bytes established = udp64(kMacA, ip4(10, 244, 1, 5), ip4(10, 244, 1, 6), 5000, 80);
    const uint64_t iterations = std::max<uint64_t>(packets / 64, 1000);
    auto copyInto = [](rte_mbuf* m, const Bytes& p) {
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(p.size())), p.data(), p.size());
    };
    auto allocOrDie = [](rte_mbuf** b, unsigned n) {
      if (n > 0 && rte_pktmbuf_alloc_bulk(g_pool, b, n) != 0) {
        std::fprintf(stderr, "mempool exhausted\n");
        std::exit(1);
      }
    };
    // What one block of iterations did: its lcore time, A's packets sent,
    // B's flows set up and packets dropped over the budget.
    struct Tally {
      uint64_t cycles = 0, a_sent = 0, setups = 0, drops = 0, iterations = 0, preempted = 0;
      Tally& operator+=(const Tally& o) {
        cycles += o.cycles;
        a_sent += o.a_sent;
        setups += o.setups;
        drops += o.drops;
        iterations += o.iterations;
        preempted += o.preempted;
        return *this;
      }
      double seconds() const { return static_cast<double>(cycles) / static_cast<double>(rte_get_tsc_hz()); }
      double aMpps() const { return static_cast<double>(a_sent) / seconds() / 1e6; }
      double setupsPerSecond() const { return static_cast<double>(setups) / seconds(); }
      double dropsPerSecond() const { return static_cast<double>(drops) / seconds(); }
    };
    // The block's lcore time: every iteration's, except that one over ten
    // times the median (no iteration here needs that: 32 slow-path runs take
    // about as long as ten iterations of hits) is this shared machine
    // preempting the lcore, and counts as the median iteration.
    auto tally = [&](Engine& e, const std::vector<uint64_t>& samples, uint64_t a_sent, uint64_t setups0,
                     uint64_t drops0) {
      std::vector<uint64_t> sorted = samples;
      std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
      const uint64_t med = sorted[sorted.size() / 2];
      Tally t;
      for (uint64_t dt : samples) {
        const bool preempted = dt > 10 * med;
        t.cycles += preempted ? med : dt;
        t.preempted += preempted;
      }
      t.a_sent = a_sent;
      t.setups = counter(e, "FlowInstalled") - setups0;
      t.drops = counter(e, "MissBudget") - drops0;
      t.iterations = samples.size();
      return t;
    };

    // In-process: processBurst on mbufs filled untimed (no receive or
    // transmit cost beyond the null PMD's tx_burst, which frees). Each port
    // has 32 filled mbufs waiting; what a port takes is refilled untimed, so
    // the untimed work is the same whether B is taken from or not.
    auto inProcess = [&](Engine& e, bool a_on, bool b_on, size_t& next, uint64_t iterations) {
      WorkerContext& w = e.worker(0);
      rte_mbuf* a[32];
      rte_mbuf* b[32];
      const unsigned a_have = a_on ? 32 : 0, b_have = b_on ? 32 : 0;
      allocOrDie(a, a_have);
      allocOrDie(b, b_have);
      for (unsigned i = 0; i < a_have; ++i) copyInto(a[i], established);
      for (unsigned i = 0; i < b_have; ++i) copyInto(b[i], flood[(next + i) % flood.size()]);
      uint64_t a_sent = 0;
      std::vector<uint64_t> samples;
      samples.reserve(iterations);
      const uint64_t setups0 = counter(e, "FlowInstalled"), drops0 = counter(e, "MissBudget");
      for (uint64_t it = 0; it < iterations; ++it) {
        const uint64_t t0 = rte_rdtsc_precise();
        const uint16_t na = std::min<uint16_t>(e.rxBurstSize(w, rep_a), static_cast<uint16_t>(a_have));
        if (na > 0) e.processBurst(w, rep_a, a, na);
        const uint16_t nb = std::min<uint16_t>(e.rxBurstSize(w, rep_b), static_cast<uint16_t>(b_have));
        if (nb > 0) e.processBurst(w, rep_b, b, nb);
        e.flush(w);
        e.quiescent(w);
        samples.push_back(rte_rdtsc_precise() - t0);
        // The taken ones refilled, B's next flows after those still waiting.
        allocOrDie(a, na);
        for (unsigned i = 0; i < na; ++i) copyInto(a[i], established);
        if (nb > 0) {
          // b[i] holds flow next + i.
          std::memmove(b, b + nb, (b_have - nb) * sizeof b[0]);
          next = (next + nb) % flood.size();
          allocOrDie(b + b_have - nb, nb);
          for (unsigned i = b_have - nb; i < b_have; ++i) copyInto(b[i], flood[(next + i) % flood.size()]);
        }
        a_sent += na;
      }
      if (a_have > 0) rte_pktmbuf_free_bulk(a, a_have);
      if (b_have > 0) rte_pktmbuf_free_bulk(b, b_have);
      return tally(e, samples, a_sent, setups0, drops0);
    };

    // With I/O: the lcore loop's own iteration (pollOnce: rx_burst of what
    // the engine asks, processBurst, flush with tx_burst, quiescent) over
    // net_ring ports, plus what a NIC's PMD does on the lcore around it:
    // free the transmitted mbufs (tx completion) and take fresh ones for the
    // receive descriptors of what was received. Untimed, the wire: it writes
    // packets into those mbufs and keeps each sending port's receive ring
    // (1,023 packets) full, A and B both offering more than the lcore takes.
    auto ring = [](const std::string& name) {
      rte_ring* r = rte_ring_create(name.c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (r == nullptr) std::exit(1);
      return r;
    };
    struct RingPort {
      uint16_t id;
      rte_ring* rx;
      rte_ring* tx;
    };
    auto ringPort = [&](const std::string& name) {
      RingPort p{0, ring(name + "_rx"), ring(name + "_tx")};
      const int id = rte_eth_from_rings(name.c_str(), &p.rx, 1, &p.tx, 1, SOCKET_ID_ANY);
      rte_eth_conf conf{};
      if (id < 0 || rte_eth_dev_configure(static_cast<uint16_t>(id), 1, 1, &conf) != 0 ||
          rte_eth_rx_queue_setup(static_cast<uint16_t>(id), 0, 1024, SOCKET_ID_ANY, nullptr, g_pool) != 0 ||
          rte_eth_tx_queue_setup(static_cast<uint16_t>(id), 0, 1024, SOCKET_ID_ANY, nullptr) != 0 ||
          rte_eth_dev_start(static_cast<uint16_t>(id)) != 0) {
        std::fprintf(stderr, "ring port set-up failed\n");
        std::exit(1);
      }
      p.id = static_cast<uint16_t>(id);
      return p;
    };
    const RingPort io_uplink = ringPort("bench_uplink"), io_a = ringPort("bench_pod_a"), io_b = ringPort("bench_pod_b");
    const std::vector<RxQueue> io_queues{{io_uplink.id, 0}, {io_a.id, 0}, {io_b.id, 0}};
    auto empty = [](rte_ring* r) {
      void* m[64];
      unsigned n, total = 0;
      while ((n = rte_ring_dequeue_burst(r, m, 64, nullptr)) > 0) {
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(m), n);
        total += n;
      }
      return total;
    };
    auto withIo = [&](Engine& e, bool a_on, bool b_on, size_t& next, uint64_t iterations) {
      WorkerContext& w = e.worker(0);
      for (const RingPort* p : {&io_uplink, &io_a, &io_b}) {
        (void)empty(p->rx);
        (void)empty(p->tx);
      }
      std::vector<rte_mbuf*> stash(2048);
      unsigned stashed = 0;
      // The wire: fills `r` to capacity from the stash (topped up if short).
      auto top = [&](rte_ring* r, auto&& packet) {
        const unsigned want = rte_ring_free_count(r);
        if (want > stashed) {
          allocOrDie(stash.data() + stashed, want - stashed);
          stashed = want;
        }
        rte_mbuf** m = stash.data() + stashed - want;
        for (unsigned i = 0; i < want; ++i) copyInto(m[i], packet());
        if (rte_ring_enqueue_bulk(r, reinterpret_cast<void**>(m), want, nullptr) != want) std::exit(1);
        stashed -= want;
      };
      auto wire = [&] {
        if (a_on) top(io_a.rx, [&]() -> const Bytes& { return established; });
        if (b_on) {
          top(io_b.rx, [&]() -> const Bytes& {
            const Bytes& p = flood[next];
            next = next + 1 == flood.size() ? 0 : next + 1;
            return p;
          });
        }
        if (stashed > 0) rte_pktmbuf_free_bulk(stash.data(), stashed);
        stashed = 0;
      };
      wire();
      uint64_t a_sent = 0;
      std::vector<uint64_t> samples;
      samples.reserve(iterations);
      const uint64_t setups0 = counter(e, "FlowInstalled"), drops0 = counter(e, "MissBudget");
      void* done[64];
      for (uint64_t it = 0; it < iterations; ++it) {
        const uint64_t t0 = rte_rdtsc_precise();
        const unsigned received = pollOnce(e, w, io_queues);
        for (const RingPort* p : {&io_uplink, &io_a, &io_b}) {
          unsigned n;
          while ((n = rte_ring_dequeue_burst(p->tx, done, 64, nullptr)) > 0) {
            rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(done), n);
            if (p == &io_b) a_sent += n;  // B's port transmits A's flow only
          }
        }
        allocOrDie(stash.data(), received);
        stashed = received;
        samples.push_back(rte_rdtsc_precise() - t0);
        wire();
      }
      return tally(e, samples, a_sent, setups0, drops0);
    };

    struct Config {
      uint32_t budget;
      uint32_t share;
      const char* note;
    };
    // Per round, the three cases in turns of kBlock iterations each, so
    // that all three see the same moments of this shared machine.
    constexpr uint64_t kBlock = 500;
    auto table = [&](const char* title, std::initializer_list<Config> configs, std::array<uint16_t, 3> on,
                     auto&& measure) {
      std::printf("%s\n  (median of %u rounds of %llu iterations per case, the cases in turns of %llu; A in Mpps of\n"
                  "   lcore time, B in flow setups/s; ratio: the median of the rounds' A flooded / A alone;\n"
                  "   preempted: iterations over 10x their turn's median, counted as the median)\n",
                  title, rounds, static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(kBlock));
      std::printf("  %-8s %-6s %-14s %8s %9s %6s %11s %10s %11s %10s\n", "budget", "share", "", "A alone", "A flooded",
                  "ratio", "B setups/s", "B drops/s", "B alone", "preempted");
      for (const Config& c : configs) {
        auto engine = make(EngineConfig{}.flow_cache_entries, nullptr, c.budget, c.share, on);
        size_t next = 0;
        (void)measure(*engine, true, false, next, kBlock);  // A's flow installed, caches warm
        std::vector<double> alone, flooded, ratio, setups, drops, setups_alone, preempted;
        for (unsigned r = 0; r < rounds; ++r) {
          Tally a, f, b;
          for (uint64_t done = 0; done < iterations; done += kBlock) {
            a += measure(*engine, true, false, next, kBlock);
            f += measure(*engine, true, true, next, kBlock);
            b += measure(*engine, false, true, next, kBlock);
          }
          alone.push_back(a.aMpps());
          flooded.push_back(f.aMpps());
          ratio.push_back(f.aMpps() / a.aMpps());
          setups.push_back(f.setupsPerSecond());
          drops.push_back(f.dropsPerSecond());
          setups_alone.push_back(b.setupsPerSecond());
          preempted.push_back(static_cast<double>(a.preempted + f.preempted + b.preempted) /
                              static_cast<double>(a.iterations + f.iterations + b.iterations));
        }
        char budget[16];
        if (c.budget == EngineConfig::kMaxMissBudget) std::snprintf(budget, sizeof budget, "none");
        else std::snprintf(budget, sizeof budget, "%u", c.budget);
        std::printf("  %-8s %-6s %-14s %8.2f %9.2f %5.0f%% %11.0f %10.0f %11.0f %9.2f%%\n", budget,
                    (std::to_string(c.share) + "%").c_str(), c.note, medianOf(alone), medianOf(flooded),
                    100.0 * medianOf(ratio), medianOf(setups), medianOf(drops), medianOf(setups_alone),
                    100.0 * medianOf(preempted));
      }
    };
    if (wanted("miss flood, in-process")) table("miss flood, in-process: processBurst on filled mbufs, no I/O",
          {{EngineConfig::kDefaultMissBudget, EngineConfig::kDefaultMissCycleShare, "(default)"},
           {EngineConfig::kDefaultMissBudget, 100, "(count only)"},
           {1, 100, "(count only)"},
           {EngineConfig::kMaxMissBudget, 100, "(no budget)"}},
          {uplink, rep_a, rep_b}, inProcess);
    if (wanted("miss flood, with I/O"))
      table("miss flood, with I/O: the lcore loop's iteration (pollOnce) over net_ring ports, mbufs refilled and freed",
          {{EngineConfig::kDefaultMissBudget, EngineConfig::kDefaultMissCycleShare, "(default)"},
           {EngineConfig::kDefaultMissBudget, 20, ""},
           {EngineConfig::kDefaultMissBudget, 5, ""},
           {EngineConfig::kDefaultMissBudget, 100, "(count only)"}},
          {io_uplink.id, io_a.id, io_b.id}, withIo);
  }
  {
    auto engine = make(1024, nullptr);
    AcceptAll eswitch;
    auto with_offload = make(1024, &eswitch);
    std::printf("bytes per cached flow: %zu (software only), %zu (with offload bookkeeping); IPv4 keys only: %zu, %zu\n",
                engine->bytesPerFlow(), with_offload->bytesPerFlow(), engine->bytesPerCompactFlow(),
                with_offload->bytesPerCompactFlow());
    // An established connection: its conntrack entry, its two flows (one
    // each way) with the engine's offload slot each, and the rte_flow
    // backend's record of each flow in the eswitch (the PMD's memory aside).
    // Reserved: what the tables hold per entry and slot of capacity, room
    // for IPv6 included. IPv4: what a table of IPv4 connections only
    // touches (the IPv6 parts are zero pages never written then).
    const size_t hw = offload::RteFlowBackend::kBookkeepingBytesPerFlow;
    auto line = [hw](const char* what, size_t entry, size_t flow) {
      const size_t total = entry + 2 * (flow + hw);
      std::printf("bytes per established connection, %s: %zu = conntrack entry %zu + 2 x (flow %zu + rte_flow record %zu)\n",
                  what, total, entry, flow, hw);
      std::printf("verdict: %s  memory per established connection (%s) <= 512 bytes: %zu bytes\n",
                  total <= 512 ? "met    " : "NOT MET", what, total);
    };
    line("IPv4", conntrack::Table::bytesPerIpv4Entry(), with_offload->bytesPerCompactFlow());
    line("reserved (IPv6 too)", conntrack::Table::bytesPerEntry(), with_offload->bytesPerFlow());
  }
  rte_eal_cleanup();
  return 0;
}
