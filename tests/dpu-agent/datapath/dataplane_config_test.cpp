// The dpu-dataplane configuration: a good file parses into what the process
// needs; each kind of mistake fails naming the field to fix.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "datapath/dataplane_config.h"

using namespace dpu::datapath;

namespace {

std::string failure(const std::string& text) {
  auto c = parseDataplaneConfig(text, "test.yaml");
  REQUIRE_FALSE(c.ok());
  return c.error();
}

}  // namespace

TEST_CASE("dataplane config: a lab configuration in YAML", "[dataplane]") {
  auto c = parseDataplaneConfig(R"(
eal: {memory_mb: 128, file_prefix: node1}
workers: 2
uplink: {iface: uplink0}
management: {devargs: "net_ring_mgmt"}
representors: {mode: hotplug, backends: [af_packet]}
tunnel_ip: 192.168.100.1
flow_cache: {entries: 4096, idle_timeout_ms: 500, miss_budget: 64, miss_cycle_share: 25}
offload: rte_flow
sockets: {programming: /tmp/p.sock, operator: /tmp/o.sock}
idle_sleep_us: 50
log: {level: debug}
)", "lab.yaml");
  REQUIRE(c.ok());
  CHECK(c->eal.memory_mb == 128);
  CHECK(c->eal.file_prefix == "node1");
  CHECK(c->eal.no_huge);
  CHECK(c->workers == 2);
  CHECK(c->uplink.kind == PortKind::kAfXdp);
  CHECK(c->uplink.iface == "uplink0");
  CHECK(c->uplink.fallback);
  CHECK(c->management.configured);
  CHECK(c->management.kind == PortKind::kDevargs);
  CHECK(c->representors.mode == RepresentorMode::kHotplug);
  CHECK(c->representors.backends == std::vector<PortKind>{PortKind::kAfPacket});
  CHECK(c->tunnel_ip == "192.168.100.1");
  CHECK(c->flow_cache_entries == 4096);
  CHECK(c->flow_idle_timeout_ms == 500);
  CHECK(c->miss_budget == 64);
  CHECK(c->miss_cycle_share == 25);
  CHECK(c->offload == "rte_flow");
  CHECK(c->sockets.programming == "/tmp/p.sock");
  CHECK(c->idle_sleep_us == 50);
  CHECK(c->log_level == "debug");
  // Every port is opened after EAL: it may wait as a warm standby.
  CHECK(standbyProblem(*c) == "");
}

TEST_CASE("dataplane config: a BlueField configuration in JSON", "[dataplane]") {
  auto c = parseDataplaneConfig(R"({
    "eal": {"no_huge": false, "no_pci": false, "memory_mb": 2048,
            "allow": ["0000:03:00.0,representor=pf0vf[0-127],dv_flow_en=1"]},
    "uplink": {"ethdev": "0000:03:00.0"},
    "representors": {"mode": "preprobed"},
    "tunnel_ip": "fd00::1"
  })", "bf.json");
  REQUIRE(c.ok());
  CHECK(c->uplink.kind == PortKind::kPreprobed);
  CHECK(c->uplink.ethdev_name == "0000:03:00.0");
  CHECK(c->representors.mode == RepresentorMode::kPreprobed);
  CHECK(c->representors.preprobed_suffix == "_representor_vf");
  CHECK(c->eal.allow.size() == 1);
  CHECK_FALSE(c->management.configured);
  CHECK(c->miss_budget == kDefaultMissBudget);
  CHECK(c->miss_cycle_share == kDefaultMissCycleShare);
  // EAL probes the PF and its representors at start: a standby would touch
  // the active dataplane's ports, and is refused naming the key.
  CHECK_THAT(standbyProblem(*c), Catch::Contains("eal.allow") && Catch::Contains("--standby"));
  c->eal.allow.clear();
  CHECK_THAT(standbyProblem(*c), Catch::Contains("uplink.kind preprobed"));
}

TEST_CASE("dataplane config: the miss budget is refused at 0 and above its limit, naming the key", "[dataplane]") {
  const std::string base = "uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\n";
  CHECK_THAT(failure(base + "flow_cache: {miss_budget: 0}\n"),
             Catch::Contains("config.flow_cache.miss_budget: must be between 1 and 1048576, not 0"));
  CHECK_THAT(failure(base + "flow_cache: {miss_budget: 1048577}\n"),
             Catch::Contains("config.flow_cache.miss_budget: must be between 1 and 1048576, not 1048577"));
  CHECK_THAT(failure(base + "flow_cache: {miss_budget: many}\n"), Catch::Contains("config.flow_cache.miss_budget"));
  auto edge = parseDataplaneConfig(base + "flow_cache: {miss_budget: 1048576}\n", "test.yaml");
  REQUIRE(edge.ok());
  CHECK(edge->miss_budget == kMaxMissBudget);
}

TEST_CASE("dataplane config: the miss cycle share is a percent from 1 to 100, and says so", "[dataplane]") {
  const std::string base = "uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\n";
  const std::string meaning = "percent of a worker's cycles new flows may use while it forwards established traffic";
  CHECK_THAT(failure(base + "flow_cache: {miss_cycle_share: 0}\n"),
             Catch::Contains("config.flow_cache.miss_cycle_share: must be between 1 and 100, not 0") &&
                 Catch::Contains(meaning));
  CHECK_THAT(failure(base + "flow_cache: {miss_cycle_share: 101}\n"),
             Catch::Contains("config.flow_cache.miss_cycle_share: must be between 1 and 100, not 101") &&
                 Catch::Contains(meaning));
  CHECK_THAT(failure(base + "flow_cache: {miss_cycle_share: 0.1}\n"),
             Catch::Contains("config.flow_cache.miss_cycle_share: must be an integer"));
  CHECK_THAT(failure(base + "flow_cache: {miss_cycle_share: \"10%\"}\n"),
             Catch::Contains("config.flow_cache.miss_cycle_share: must be an integer"));
  for (uint32_t edge : {1u, 100u}) {
    auto c = parseDataplaneConfig(base + "flow_cache: {miss_cycle_share: " + std::to_string(edge) + "}\n", "t.yaml");
    REQUIRE(c.ok());
    CHECK(c->miss_cycle_share == edge);
  }
}

TEST_CASE("dataplane config: mistakes name the field", "[dataplane]") {
  CHECK_THAT(failure("tunnel_ip: 1.2.3.4\n"), Catch::Contains("config.uplink"));
  CHECK_THAT(failure("uplink: {iface: u0}\n"), Catch::Contains("config.tunnel_ip"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3\n"), Catch::Contains("config.tunnel_ip"));
  CHECK_THAT(failure("uplink: {iface: u0, kind: dpdk}\ntunnel_ip: 1.2.3.4\n"), Catch::Contains("config.uplink.kind"));
  CHECK_THAT(failure("uplink: {iface: a/b}\ntunnel_ip: 1.2.3.4\n"), Catch::Contains("config.uplink.iface"));
  CHECK_THAT(failure("uplink: {iface: u0, colour: red}\ntunnel_ip: 1.2.3.4\n"),
             Catch::Contains("config.uplink.colour: unknown field"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nworkers: 0\n"), Catch::Contains("config.workers"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\noffload: doca\n"), Catch::Contains("config.offload"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nrepresentors: {mode: template, devargs: net_ring0}\n"),
             Catch::Contains("config.representors.devargs"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nrepresentors: {mode: template}\n"),
             Catch::Contains("config.representors.devargs"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nrepresentors: {mode: template, ports: [{name: a}]}\n"),
             Catch::Contains("config.representors.ports[0].devargs"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nrepresentors: {backends: [pcap]}\n"),
             Catch::Contains("config.representors.backends"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nsockets: {programming: rel.sock}\n"),
             Catch::Contains("config.sockets.programming"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\neal: {allow: [\"0000:03:00.0\"]}\n"),
             Catch::Contains("config.eal.allow"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nmbuf_pool_size: 2047\nmbuf_cache_size: 512\n"),
             Catch::Contains("config.mbuf_cache_size"));
  CHECK_THAT(failure("uplink: {iface: u0}\ntunnel_ip: 1.2.3.4\nxdp_program: /nonexistent.o\n"),
             Catch::Contains("config.xdp_program"));
  CHECK_THAT(failure("- a\n- b\n"), Catch::Contains("must be an object"));
}

TEST_CASE("dataplane config: fixed representor devargs for benchmarks", "[dataplane]") {
  auto c = parseDataplaneConfig(R"(
uplink: {devargs: net_null0}
tunnel_ip: 192.168.100.1
representors: {mode: template, ports: [{name: pf0vf1, devargs: "net_pcap_a,rx_pcap=/t/in.pcap,infinite_rx=1"},
                                      {name: pf0vf2, devargs: net_null_b}]}
)", "bench.yaml");
  REQUIRE(c.ok());
  REQUIRE(c->representors.devargs_by_name.size() == 2);
  CHECK(c->representors.devargs_by_name[1].first == "pf0vf2");
  CHECK(c->representors.devargs_by_name[1].second == "net_null_b");
}

TEST_CASE("dataplane config: the shipped examples parse", "[dataplane]") {
  for (const char* name : {"dataplane_lab.yaml", "dataplane_bluefield.yaml"}) {
    INFO(name);
    auto c = loadDataplaneConfig(std::string(DPU_SOURCE_DIR) + "/dpu-agent/datapath/" + name);
    REQUIRE(c.ok());
    CHECK_FALSE(c->tunnel_ip.empty());
    // The conntrack comment states the memory per entry: it must stay true.
    std::ifstream file(std::string(DPU_SOURCE_DIR) + "/dpu-agent/datapath/" + name);
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    CHECK_THAT(text, Catch::Contains(std::to_string(dpu::conntrack::Table::bytesPerEntry()) + " bytes"));
    CHECK_THAT(text, Catch::Contains("max_entries: " + std::to_string(c->conntrack.max_entries)));
  }
}

TEST_CASE("dataplane config: devargs for the port kinds", "[dataplane]") {
  CHECK(afXdpDevargs("uplink", "eth1", "/x.o") ==
        "net_af_xdp_uplink,iface=eth1,start_queue=0,queue_count=1,xdp_prog=/x.o");
  CHECK(afXdpDevargs("pf0vf1", "pf0vf1", "") == "net_af_xdp_pf0vf1,iface=pf0vf1,start_queue=0,queue_count=1");
  CHECK(afPacketDevargs("pf0vf1", "pf0vf1") == "net_af_packet_pf0vf1,iface=pf0vf1,qpairs=1,qdisc_bypass=1");
  CHECK(afPacketDevargs("uplink", "uplink0", 2) == "net_af_packet_uplink,iface=uplink0,qpairs=2,qdisc_bypass=1");
  CHECK(expandTemplate("net_pcap_{name},rx_pcap=/t/{name}.pcap", "r1") == "net_pcap_r1,rx_pcap=/t/r1.pcap");
}

TEST_CASE("dataplane config: the host PF port and the north-south limits", "[dataplane][north-south]") {
  auto c = parseDataplaneConfig(R"(
uplink: {iface: uplink0}
host_pf: {kind: af_packet, iface: pf0hpf}
north_south: {max_host_macs: 4, host_mac_ageing_s: 60, max_neighbours: 100, neighbour_stale_s: 30}
tunnel_ip: 192.168.100.1
)", "ns.yaml");
  REQUIRE(c.ok());
  CHECK(c->host_pf.configured);
  CHECK(c->host_pf.kind == PortKind::kAfPacket);
  CHECK(c->host_pf.iface == "pf0hpf");
  CHECK(c->north_south.max_host_macs == 4);
  CHECK(c->north_south.host_mac_ageing_s == 60);
  CHECK(c->north_south.max_neighbours == 100);
  CHECK(c->north_south.neighbour_stale_s == 30);
  // Absent: no host PF, the defaults.
  auto plain = parseDataplaneConfig("uplink: {iface: uplink0}\ntunnel_ip: 192.168.100.1\n", "plain.yaml");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->host_pf.configured);
  CHECK(plain->north_south.max_host_macs == 16);
  CHECK(plain->north_south.host_mac_ageing_s == 300);
  // A preprobed mlx5 representor, as on a BlueField.
  auto bf = parseDataplaneConfig(
      "uplink: {kind: preprobed, ethdev: \"0000:03:00.0\"}\n"
      "host_pf: {kind: preprobed, ethdev: \"0000:03:00.0_representor_vf4294967295\"}\ntunnel_ip: 192.168.100.1\n",
      "bf.yaml");
  REQUIRE(bf.ok());
  CHECK(bf->host_pf.ethdev_name == "0000:03:00.0_representor_vf4294967295");

  struct Case {
    std::string text;
    std::string error;
  };
  const std::string head = "tunnel_ip: 192.168.100.1\nuplink: {iface: uplink0}\n";
  const std::vector<Case> cases = {
      {head + "host_pf: {iface: uplink0}\n", "config.host_pf: is the same port as uplink"},
      {head + "management: {devargs: net_ring_m}\nhost_pf: {devargs: net_ring_m}\n",
       "config.host_pf: is the same port as management"},
      {head + "host_pf: {kind: tap, iface: pf0hpf}\n", "config.host_pf.kind: unknown port kind \"tap\""},
      {head + "host_pf: {iface: \"pf0/hpf\"}\n", "config.host_pf.iface"},
      {head + "north_south: {max_host_macs: 0}\n", "config.north_south.max_host_macs: must be between 1 and 256"},
      {head + "north_south: {max_host_macs: 300}\n", "config.north_south.max_host_macs: must be between 1 and 256"},
      {head + "north_south: {max_neighbours: 70000}\n", "config.north_south.max_neighbours"},
      {head + "north_south: {host_mac_ageing_s: 0}\n", "config.north_south.host_mac_ageing_s"},
      {head + "north_south: {arp: true}\n", "config.north_south.arp: unknown field"},
  };
  for (const auto& k : cases) {
    INFO(k.text);
    CHECK_THAT(failure(k.text), Catch::Contains(k.error));
  }
}

TEST_CASE("dataplane config: the conntrack table, the affinity table and the timeouts per state", "[dataplane][services]") {
  auto c = parseDataplaneConfig(R"(
uplink: {iface: uplink0}
tunnel_ip: 192.168.100.1
conntrack:
  max_entries: 1000
  affinity_entries: 200
  persist: false
  timeouts: {tcp_syn_sent_s: 11, tcp_syn_received_s: 12, tcp_established_s: 3600, tcp_fin_wait_s: 13,
             tcp_close_wait_s: 14, tcp_time_wait_s: 15, tcp_close_s: 16, udp_s: 17, udp_stream_s: 18, icmp_s: 19}
)", "ct.yaml");
  REQUIRE(c.ok());
  CHECK(c->conntrack.max_entries == 1000);
  CHECK(c->conntrack.affinity_entries == 200);
  CHECK_FALSE(c->conntrack.persist);
  const auto& t = c->conntrack.timeouts;
  CHECK(t.tcp_syn_sent == 11000);
  CHECK(t.tcp_syn_received == 12000);
  CHECK(t.tcp_established == 3600000);
  CHECK(t.tcp_fin_wait == 13000);
  CHECK(t.tcp_close_wait == 14000);
  CHECK(t.tcp_time_wait == 15000);
  CHECK(t.tcp_close == 16000);
  CHECK(t.udp_new == 17000);
  CHECK(t.udp_replied == 18000);
  CHECK(t.icmp == 19000);
  // Each timeout drives its own state (and SCTP shares UDP's).
  CHECK(t.forState(dpu::conntrack::State::kEstablished, dpu::conntrack::kProtoTcp) == 3600000);
  CHECK(t.forState(dpu::conntrack::State::kReplied, dpu::conntrack::kProtoSctp) == 18000);

  // Absent, or a partial timeouts map: the engine's defaults for the rest.
  auto plain = parseDataplaneConfig(
      "uplink: {iface: uplink0}\ntunnel_ip: 192.168.100.1\nconntrack: {timeouts: {udp_s: 60}}\n", "plain.yaml");
  REQUIRE(plain.ok());
  const dpu::conntrack::Timeouts defaults;
  CHECK(plain->conntrack.max_entries == kDefaultConntrackEntries);
  CHECK(plain->conntrack.affinity_entries == kDefaultAffinityEntries);
  CHECK(plain->conntrack.persist);  // restarts keep connections unless told otherwise
  CHECK(plain->conntrack.timeouts.udp_new == 60000);
  CHECK(plain->conntrack.timeouts.udp_replied == defaults.udp_replied);
  CHECK(plain->conntrack.timeouts.tcp_established == defaults.tcp_established);
  CHECK(plain->conntrack.timeouts.tcp_close == defaults.tcp_close);
}

TEST_CASE("dataplane config: each conntrack mistake names the field and its range", "[dataplane][services]") {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string head = "tunnel_ip: 192.168.100.1\nuplink: {iface: uplink0}\n";
  const std::vector<Case> cases = {
      {"conntrack: {max_entries: 0}", "config.conntrack.max_entries: must be between 1 and 67108864, not 0"},
      {"conntrack: {max_entries: 67108865}", "config.conntrack.max_entries: must be between 1 and 67108864"},
      {"conntrack: {max_entries: -5}", "config.conntrack.max_entries: must be an integer between 1 and 67108864"},
      {"conntrack: {max_entries: big}", "config.conntrack.max_entries: must be an integer"},
      {"conntrack: {affinity_entries: 0}", "config.conntrack.affinity_entries: must be between 1 and 16777216, not 0"},
      {"conntrack: {affinity_entries: 16777217}", "config.conntrack.affinity_entries: must be between 1 and 16777216"},
      {"conntrack: {timeouts: {tcp_syn_sent_s: 9}}",
       "config.conntrack.timeouts.tcp_syn_sent_s: must be between 10 and 86400, not 9"},
      {"conntrack: {timeouts: {tcp_syn_received_s: 86401}}",
       "config.conntrack.timeouts.tcp_syn_received_s: must be between 10 and 86400, not 86401"},
      {"conntrack: {timeouts: {tcp_established_s: 5}}",
       "config.conntrack.timeouts.tcp_established_s: must be between 10 and 2592000, not 5"},
      {"conntrack: {timeouts: {tcp_established_s: 2592001}}",
       "config.conntrack.timeouts.tcp_established_s: must be between 10 and 2592000"},
      {"conntrack: {timeouts: {tcp_fin_wait_s: 0}}", "config.conntrack.timeouts.tcp_fin_wait_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {tcp_close_wait_s: 0}}",
       "config.conntrack.timeouts.tcp_close_wait_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {tcp_time_wait_s: 100000}}",
       "config.conntrack.timeouts.tcp_time_wait_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {tcp_close_s: 1}}", "config.conntrack.timeouts.tcp_close_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {udp_s: 1}}", "config.conntrack.timeouts.udp_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {udp_stream_s: 86401}}", "config.conntrack.timeouts.udp_stream_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {icmp_s: 2}}", "config.conntrack.timeouts.icmp_s: must be between 10 and 86400"},
      {"conntrack: {timeouts: {udp_s: \"30s\"}}", "config.conntrack.timeouts.udp_s: must be an integer between 10 and 86400"},
      {"conntrack: {timeouts: {sctp_s: 30}}", "config.conntrack.timeouts.sctp_s: unknown field"},
      {"conntrack: {entries: 30}", "config.conntrack.entries: unknown field"},
      {"conntrack: 1000", "config.conntrack"},
  };
  for (const auto& k : cases) {
    INFO(k.text);
    CHECK_THAT(failure(head + k.text + "\n"), Catch::Contains(k.error));
  }
}
