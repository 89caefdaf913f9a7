// The Engine's per-packet cost, in-process: processBurst + flush on bursts of
// 32 packets from net_null ports (the null PMD frees what it transmits), for
// local forwarding (VF→VF), Geneve encap (VF→uplink) and decap (uplink→VF)
// with 1, 1,000 and 100,000 flows at 64 B, and the slow path's flow setups
// per second (every packet a new flow), and an established flow's rate
// while another port floods new flows, with the miss budget and without
// (EngineConfig::miss_budget; "miss flood"). Next to them, in the same run, the
// I/O floor: the same bursts handed straight to tx_burst, as testpmd's io
// mode does. Packets are copied into fresh mbufs untimed before each burst;
// only the engine (and the tx_burst it calls) is timed, with the TSC.
//
//   datapath_engine_bench [--packets N] [--only <case name substring>] [--rounds R]
// (bench/README: the end-to-end comparison with testpmd and OVS-DPDK is
// the dataplane's bench; this one isolates the engine.)
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "datapath/engine.h"
#include "offload/offload.h"
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

// Runs `packets` packets of the set (round robin over it) through `step`,
// which is timed per burst.
template <class Step>
Result run(const std::vector<Bytes>& set, uint64_t packets, Step&& step) {
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

}  // namespace

int main(int argc, char** argv) {
  uint64_t packets = 4'000'000;
  unsigned rounds = 5;  // of the miss flood case, whose median is printed
  std::string only;  // run only the cases whose name contains this
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--packets") packets = std::stoull(argv[i + 1]);
    if (std::string(argv[i]) == "--rounds") rounds = static_cast<unsigned>(std::stoul(argv[i + 1]));
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
  }
  auto wanted = [&only](const std::string& name) { return only.empty() || name.find(only) != std::string::npos; };
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

  auto make = [&](uint32_t entries, offload::OffloadBackend* backend,
                  uint32_t miss_budget = EngineConfig::kDefaultMissBudget) {
    EngineConfig c;
    c.flow_cache_entries = entries;
    c.miss_budget = miss_budget;
    c.flow_idle_timeout_ms = 600'000;
    c.offload = backend;
    auto e = Engine::create(c);
    if (!e) {
      std::fprintf(stderr, "%s\n", e.error().c_str());
      std::exit(1);
    }
    auto engine = std::move(e.value());
    (void)engine->bindPort("uplink", uplink, PortRole::kUplink, MacAddress{kUplinkMac});
    (void)engine->bindPort("pf0vf0", rep_a, PortRole::kRepresentor, MacAddress{kMacA});
    (void)engine->bindPort("pf0vf1", rep_b, PortRole::kRepresentor, MacAddress{kMacB});
    (void)engine->setTunnelNextHop(IpAddress::parse("192.168.100.2").value(), MacAddress{kPeerMac});
    dataplane::v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(1);
    *req.mutable_full_sync()->mutable_model() = model();
    if (engine->program(req).status() != dataplane::v1::OK) std::exit(1);
    return engine;
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
  if (wanted("miss flood")) {
    // Pod A's one established flow (A→B, its burst of 32 every poll
    // iteration) alone, then with pod B flooding: a burst of 32 new flows
    // (to a remote node: encap) every iteration, 400,000 distinct 5-tuples
    // through the default 65,536-entry cache. One poll iteration = A's burst, B's
    // burst, flush, quiescent, as the lcore loop runs them; the whole
    // iteration is timed (the lcore is what the two share), the mbufs are
    // filled untimed. The figure: A's packets per second of lcore time at the
    // median iteration, the median of `rounds` rounds, for the default budget, a small one and
    // none (the largest allowed: every miss runs the slow path).
    std::vector<Bytes> flood;
    for (uint32_t i = 0; i < 400000; ++i) {
      flood.push_back(udp64(kMacB, ip4(10, 244, 1, 6), ip4(10, 244, 2, 7), static_cast<uint16_t>(1024 + i % 60000),
                            static_cast<uint16_t>(1 + i / 60000)));
    }
    const Bytes established = udp64(kMacA, ip4(10, 244, 1, 5), ip4(10, 244, 1, 6), 5000, 80);
    const uint64_t iterations = std::max<uint64_t>(packets / 64, 1000);
    auto fill = [&](rte_mbuf** b, const Bytes* fixed, size_t& next) {
      if (rte_pktmbuf_alloc_bulk(g_pool, b, 32) != 0) {
        std::fprintf(stderr, "mempool exhausted\n");
        std::exit(1);
      }
      for (unsigned i = 0; i < 32; ++i) {
        const Bytes& p = fixed != nullptr ? *fixed : flood[next];
        if (fixed == nullptr) next = next + 1 == flood.size() ? 0 : next + 1;
        std::memcpy(rte_pktmbuf_append(b[i], static_cast<uint16_t>(p.size())), p.data(), p.size());
      }
    };
    // A's packets per second over `iterations` poll iterations, B flooding or not.
    auto measure = [&](Engine& engine, bool flooded, size_t& next) {
      WorkerContext& w = engine.worker(0);
      rte_mbuf* a[32];
      rte_mbuf* b[32];
      std::vector<uint64_t> cycles;
      cycles.reserve(iterations);
      for (uint64_t it = 0; it < iterations; ++it) {
        fill(a, &established, next);
        if (flooded) fill(b, nullptr, next);
        const uint64_t t0 = rte_rdtsc_precise();
        engine.processBurst(w, rep_a, a, 32);
        if (flooded) engine.processBurst(w, rep_b, b, 32);
        engine.flush(w);
        engine.quiescent(w);
        cycles.push_back(rte_rdtsc_precise() - t0);
      }
      // The median iteration, as run() takes the median burst: an iteration
      // during which this shared machine preempted the lcore is an outlier.
      std::nth_element(cycles.begin(), cycles.begin() + cycles.size() / 2, cycles.end());
      return 32.0 * static_cast<double>(rte_get_tsc_hz()) / static_cast<double>(cycles[cycles.size() / 2]);
    };
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("miss flood: A's established flow, Mpps of lcore time (median of %u rounds of %llu iterations)\n",
                rounds, static_cast<unsigned long long>(iterations));
    std::printf("  %-28s %8s %8s %7s %14s\n", "budget", "alone", "flooded", "ratio", "B misses run");
    for (uint32_t budget : {EngineConfig::kDefaultMissBudget, uint32_t{4}, uint32_t{1}, EngineConfig::kMaxMissBudget}) {
      auto engine = make(EngineConfig{}.flow_cache_entries, nullptr, budget);
      size_t next = 0;
      (void)measure(*engine, false, next);  // A's flow installed, caches warm
      std::vector<double> alone, flooded;
      for (unsigned r = 0; r < rounds; ++r) {
        alone.push_back(measure(*engine, false, next) / 1e6);
        flooded.push_back(measure(*engine, true, next) / 1e6);
      }
      dataplane::v1::OperatorRequest req;
      req.mutable_stats();
      const auto stats = engine->operate(req);
      uint64_t installed = 0, dropped = 0;
      for (const auto& c : stats.counters()) {
        if (c.name() == "FlowMiss") installed = c.value();
        if (c.name() == "MissBudget") dropped = c.value();
      }
      char label[64];
      if (budget == EngineConfig::kMaxMissBudget) {
        std::snprintf(label, sizeof label, "%u (no budget)", budget);
      } else {
        std::snprintf(label, sizeof label, "%u%s", budget, budget == EngineConfig::kDefaultMissBudget ? " (default)" : "");
      }
      const double a = median(alone), f = median(flooded);
      std::printf("  %-28s %8.2f %8.2f %6.0f%% %13.0f%%\n", label, a, f, 100.0 * f / a,
                  100.0 * static_cast<double>(installed) / static_cast<double>(installed + dropped));
    }
  }
  {
    auto engine = make(1024, nullptr);
    AcceptAll eswitch;
    auto with_offload = make(1024, &eswitch);
    std::printf("bytes per cached flow: %zu (software only), %zu (with offload bookkeeping)\n",
                engine->bytesPerFlow(), with_offload->bytesPerFlow());
  }
  rte_eal_cleanup();
  return 0;
}
