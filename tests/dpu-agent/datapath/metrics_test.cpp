// dpu-dataplane's Prometheus export: the operator API's answers rendered as
// Prometheus text (names, types, labels, every counter accounted for), and
// the HTTP endpoint against a stand-in operator socket served on a thread
// (status codes, the 503 when the dataplane does not answer, slow clients).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "common/ipc_proto.h"
#include "datapath/dataplane_config.h"
#include "datapath/metrics.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

using namespace dpu::datapath;
namespace v1 = dpu::dataplane::v1;

namespace {

v1::OperatorReply portsReply() {
  v1::OperatorReply r;
  auto* up = r.add_ports();
  up->set_name("uplink");
  up->set_role("uplink");
  up->set_state("up");
  up->set_backend("af_xdp");
  up->set_rx_packets(10);
  up->set_tx_packets(20);
  up->set_rx_bytes(1500);
  up->set_tx_bytes(3000);
  up->set_rx_dropped(1);
  up->set_tx_dropped(2);
  up->set_miss_budget_dropped(4);
  up->set_miss_throttled_polls(5);
  up->set_rx_missed(6);
  auto* vf = r.add_ports();
  vf->set_name("pf0vf\"1");  // a name that needs escaping
  vf->set_role("representor");
  vf->set_state("down, not polled");
  vf->set_logical_port("default/pod-a");
  return r;
}

v1::OperatorReply statsReply() {
  v1::OperatorReply r;
  r.set_generation(7);
  r.set_instance_id("abc");
  auto add = [&r](const char* name, uint64_t value, v1::CounterKind kind) {
    auto* c = r.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_kind(kind);
  };
  add("PortSecurityMac", 3, v1::COUNTER_DROP);
  add("NoRoute", 0, v1::COUNTER_DROP);
  add("FlowHit", 100, v1::COUNTER_EVENT);
  add("FlowMiss", 4, v1::COUNTER_EVENT);
  add("FlowInstalled", 4, v1::COUNTER_EVENT);
  add("FlowAged", 1, v1::COUNTER_EVENT);
  add("OffloadQueueFull", 2, v1::COUNTER_EVENT);
  add("SomethingNew", 5, v1::COUNTER_EVENT);
  add("flows_in_hw", 0, v1::COUNTER_GAUGE);
  add("flows_in_sw", 3, v1::COUNTER_GAUGE);
  add("flow_bytes", 88, v1::COUNTER_GAUGE);
  add("xdp_steered", 9, v1::COUNTER_EVENT);
  add("tunnel_peers_resolved", 2, v1::COUNTER_GAUGE);
  add("tunnel_peers_unresolved", 1, v1::COUNTER_GAUGE);
  add("neighbour_events", 12, v1::COUNTER_EVENT);
  add("neighbour_resyncs", 0, v1::COUNTER_EVENT);
  add("neighbour_probes", 3, v1::COUNTER_EVENT);
  add("FabricNotForHost", 6, v1::COUNTER_DROP);
  add("xdp_host", 8, v1::COUNTER_EVENT);
  add("north_south_host_macs", 1, v1::COUNTER_GAUGE);
  add("HostMacLearned", 2, v1::COUNTER_EVENT);
  add("HostMacAged", 1, v1::COUNTER_EVENT);
  add("north_south_neighbours", 3, v1::COUNTER_GAUGE);
  add("north_south_neighbours_incomplete", 1, v1::COUNTER_GAUGE);
  add("NeighbourLearned", 4, v1::COUNTER_EVENT);
  add("NeighbourArpRequest", 5, v1::COUNTER_EVENT);
  return r;
}

// Two services: web (a cluster IP and a node port under a Local policy,
// three backends of which one is unused and one local) and dns (no endpoint).
v1::OperatorReply servicesReply() {
  v1::OperatorReply r;
  auto frontend = [&r](const char* service, const char* kind, uint32_t port, bool local_only) {
    auto* f = r.add_services();
    f->set_service(service);
    f->set_port_name("p");
    f->set_kind(kind);
    f->set_ip("10.96.0.10");
    f->set_port(port);
    f->set_protocol("tcp");
    f->set_local_only(local_only);
    return f;
  };
  for (auto* f : {frontend("default/web", "cluster-ip", 80, false), frontend("default/web", "node-port", 30080, true)}) {
    for (auto [ip, condition, local] : {std::tuple{"10.244.1.5", "ready", false}, {"10.244.2.5", "unused", true},
                                        {"10.244.3.5", "serving-terminating", false}}) {
      auto* b = f->add_backends();
      b->set_ip(ip);
      b->set_port(8080);
      b->set_condition(condition);
      b->set_local(local);
    }
  }
  frontend("kube-system/dns", "cluster-ip", 53, false);
  return r;
}

v1::OperatorReply conntrackReply() {
  v1::OperatorReply r;
  for (auto [state, count] : {std::pair{"new", 2}, {"replied", 0}, {"established", 5}}) {
    auto* s = r.add_conntrack_states();
    s->set_state(state);
    s->set_count(count);
  }
  r.set_conntrack_entries(7);
  r.set_conntrack_capacity(1024);
  return r;
}

// "name{labels}" → value, and each family's TYPE.
struct Parsed {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
};

Parsed parse(const std::string& text) {
  Parsed p;
  std::istringstream lines(text);
  const std::regex sample(R"(^([a-z_:][a-z0-9_:]*)(\{.*\})? (\S+)$)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      auto rest = line.substr(7);
      auto sp = rest.find(' ');
      CHECK(p.types.count(rest.substr(0, sp)) == 0);  // one TYPE per family
      p.types[rest.substr(0, sp)] = rest.substr(sp + 1);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, sample));
    p.samples[m[1].str() + m[2].str()] = m[3].str();
  }
  return p;
}

// Sends `request` to 127.0.0.1:port, returns the whole answer.
std::string httpExchange(uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  if (!request.empty()) REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// A stand-in for the dataplane's operator socket: answers ports and stats.
class OperatorStandIn {
 public:
  explicit OperatorStandIn(std::string path) : path_(std::move(path)) {
    auto l = dpu::ipc::listenUnix(path_);
    REQUIRE(l.ok());
    listener_ = std::move(*l);
    thread_ = std::thread([this] {
      while (!stop_) {
        auto s = dpu::ipc::acceptUnix(listener_, dpu::ipc::after(std::chrono::milliseconds(50)));
        if (!s || !s->valid()) continue;
        v1::OperatorRequest req;
        if (!dpu::ipc::recvMessage(*s, req, dpu::ipc::after(std::chrono::seconds(1))).ok()) continue;
        ++requests;
        v1::OperatorReply reply = req.has_ports()      ? portsReply()
                                  : req.has_services() ? servicesReply()
                                  : req.has_conntrack() ? conntrackReply()
                                                        : statsReply();
        if (req.has_conntrack()) conntrack_limit = req.conntrack().limit();
        (void)dpu::ipc::sendMessage(*s, reply, dpu::ipc::after(std::chrono::seconds(1)));
      }
    });
  }
  ~OperatorStandIn() {
    stop_ = true;
    thread_.join();
    ::unlink(path_.c_str());
  }
  std::atomic<int> requests{0};
  std::atomic<uint32_t> conntrack_limit{0};

 private:
  std::string path_;
  dpu::ipc::Socket listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

MetricsConfig loopback() {
  MetricsConfig c;
  c.enabled = true;
  c.address = "127.0.0.1";
  c.port = 0;  // the kernel picks
  return c;
}

}  // namespace

TEST_CASE("metrics: every counter of the operator API becomes a typed, labelled series") {
  const std::string text = renderMetrics(portsReply(), statsReply(), {}, {});
  Parsed p = parse(text);
  CHECK(p.samples.at("dpu_dataplane_info{instance_id=\"abc\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_model_generation") == "7");
  CHECK(p.samples.at("dpu_dataplane_port_receive_packets_total{port=\"uplink\",role=\"uplink\"}") == "10");
  CHECK(p.samples.at("dpu_dataplane_port_transmit_packets_total{port=\"uplink\",role=\"uplink\"}") == "20");
  CHECK(p.samples.at("dpu_dataplane_port_receive_bytes_total{port=\"uplink\",role=\"uplink\"}") == "1500");
  CHECK(p.samples.at("dpu_dataplane_port_transmit_bytes_total{port=\"uplink\",role=\"uplink\"}") == "3000");
  CHECK(p.samples.at("dpu_dataplane_port_dropped_packets_total{port=\"uplink\",role=\"uplink\",direction=\"rx\"}") ==
        "1");
  CHECK(p.samples.at("dpu_dataplane_port_dropped_packets_total{port=\"uplink\",role=\"uplink\",direction=\"tx\"}") ==
        "2");
  CHECK(p.samples.at("dpu_dataplane_port_miss_budget_dropped_packets_total{port=\"uplink\",role=\"uplink\"}") ==
        "4");
  CHECK(p.samples.at("dpu_dataplane_port_miss_throttled_polls_total{port=\"uplink\",role=\"uplink\"}") == "5");
  CHECK(p.samples.at("dpu_dataplane_port_receive_missed_packets_total{port=\"uplink\",role=\"uplink\"}") == "6");
  CHECK(p.samples.at("dpu_dataplane_port_up{port=\"uplink\",role=\"uplink\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_port_up{port=\"pf0vf\\\"1\",role=\"representor\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_port_info{port=\"pf0vf\\\"1\",role=\"representor\",backend=\"\","
                     "logical_port=\"default/pod-a\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"PortSecurityMac\"}") == "3");
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"NoRoute\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_flow_cache_lookups_total{result=\"hit\"}") == "100");
  CHECK(p.samples.at("dpu_dataplane_flow_cache_lookups_total{result=\"miss\"}") == "4");
  CHECK(p.samples.at("dpu_dataplane_flow_setups_total") == "4");
  CHECK(p.samples.at("dpu_dataplane_flows_removed_total{cause=\"aged\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_offload_queue_dropped_total") == "2");
  CHECK(p.samples.at("dpu_dataplane_flows{where=\"hw\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_flows{where=\"sw\"}") == "3");
  CHECK(p.samples.at("dpu_dataplane_flow_cache_entry_bytes") == "88");
  CHECK(p.samples.at("dpu_dataplane_uplink_xdp_packets_total{verdict=\"steered\"}") == "9");
  CHECK(p.samples.at("dpu_dataplane_tunnel_peers{next_hop=\"resolved\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_tunnel_peers{next_hop=\"unresolved\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_underlay_netlink_events_total") == "12");
  CHECK(p.samples.at("dpu_dataplane_underlay_netlink_resyncs_total") == "0");
  CHECK(p.samples.at("dpu_dataplane_underlay_next_hop_probes_total") == "3");
  // North–south.
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"FabricNotForHost\"}") == "6");
  CHECK(p.samples.at("dpu_dataplane_uplink_xdp_host_packets_total") == "8");
  CHECK(p.samples.at("dpu_dataplane_host_macs") == "1");
  CHECK(p.samples.at("dpu_dataplane_host_mac_changes_total{change=\"learned\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_host_mac_changes_total{change=\"aged\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_north_south_neighbours{state=\"reachable\"}") == "3");
  CHECK(p.samples.at("dpu_dataplane_north_south_neighbours{state=\"incomplete\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_north_south_neighbour_changes_total{change=\"learned\"}") == "4");
  CHECK(p.samples.at("dpu_dataplane_north_south_arp_requests_total") == "5");
  // A counter no table names still reaches monitoring.
  CHECK(p.samples.at("dpu_dataplane_events_total{event=\"SomethingNew\"}") == "5");
  // Conventions: counters end in _total, gauges do not; every family is typed.
  for (const auto& [family, type] : p.types) {
    INFO(family);
    CHECK(family.rfind("dpu_dataplane_", 0) == 0);
    CHECK((type == "counter") == (family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0));
  }
  for (const auto& [series, value] : p.samples) {
    const std::string family = series.substr(0, series.find('{'));
    INFO(series);
    CHECK(p.types.count(family) == 1);
  }
}

TEST_CASE("metrics: services and connection tracking: gauges, changes, drop reasons", "[services]") {
  v1::OperatorReply ports, stats;
  auto add = [&stats](const char* name, uint64_t value, v1::CounterKind kind) {
    auto* c = stats.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_kind(kind);
  };
  // As the engine names them (counters.def and its stats answer).
  add("ConntrackFull", 3, v1::COUNTER_DROP);
  add("ServiceIpUnknown", 2, v1::COUNTER_DROP);
  add("ServiceNoLocalEndpoint", 1, v1::COUNTER_DROP);
  add("ConntrackNew", 40, v1::COUNTER_EVENT);
  add("ConntrackLoose", 4, v1::COUNTER_EVENT);
  add("ConntrackClosed", 9, v1::COUNTER_EVENT);
  add("ConntrackExpired", 20, v1::COUNTER_EVENT);
  add("ConntrackFlushed", 1, v1::COUNTER_EVENT);
  add("ConntrackPunt", 77, v1::COUNTER_EVENT);
  add("ServiceRejected", 6, v1::COUNTER_EVENT);
  add("ServiceHairpin", 2, v1::COUNTER_EVENT);
  add("ServiceAffinity", 8, v1::COUNTER_EVENT);
  add("conntrack_entries", 7, v1::COUNTER_GAUGE);
  add("conntrack_capacity", 1024, v1::COUNTER_GAUGE);
  add("conntrack_inserted", 44, v1::COUNTER_EVENT);
  add("conntrack_refused_full", 3, v1::COUNTER_EVENT);
  add("conntrack_early_dropped", 11, v1::COUNTER_EVENT);
  const std::string text = renderMetrics(ports, stats, servicesReply(), conntrackReply());
  Parsed p = parse(text);
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"ConntrackFull\"}") == "3");
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"ServiceIpUnknown\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_dropped_packets_total{reason=\"ServiceNoLocalEndpoint\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_conntrack_changes_total{change=\"new\"}") == "40");
  CHECK(p.samples.at("dpu_dataplane_conntrack_changes_total{change=\"loose\"}") == "4");
  CHECK(p.samples.at("dpu_dataplane_conntrack_changes_total{change=\"closed\"}") == "9");
  CHECK(p.samples.at("dpu_dataplane_conntrack_changes_total{change=\"expired\"}") == "20");
  CHECK(p.samples.at("dpu_dataplane_conntrack_changes_total{change=\"flushed\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_conntrack_punted_packets_total") == "77");
  CHECK(p.samples.at("dpu_dataplane_service_connections_total{outcome=\"rejected\"}") == "6");
  CHECK(p.samples.at("dpu_dataplane_service_connections_total{outcome=\"hairpin\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_service_connections_total{outcome=\"affinity\"}") == "8");
  CHECK(p.samples.at("dpu_dataplane_conntrack_entries") == "7");
  CHECK(p.samples.at("dpu_dataplane_conntrack_capacity") == "1024");
  CHECK(p.samples.at("dpu_dataplane_conntrack_inserts_total") == "44");
  CHECK(p.samples.at("dpu_dataplane_conntrack_refused_full_total") == "3");
  CHECK(p.samples.at("dpu_dataplane_conntrack_early_drops_total") == "11");
  CHECK(p.samples.at("dpu_dataplane_conntrack_connections{state=\"new\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_conntrack_connections{state=\"replied\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_conntrack_connections{state=\"established\"}") == "5");
  // Two services; three frontends; web's backends counted once for its two
  // frontends; dns has none, and web's node port (Local) has no local usable one.
  CHECK(p.samples.at("dpu_dataplane_services") == "2");
  CHECK(p.samples.at("dpu_dataplane_service_frontends{kind=\"cluster-ip\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_service_frontends{kind=\"node-port\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_service_frontends{kind=\"external-ip\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_service_backends{condition=\"ready\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_service_backends{condition=\"serving-terminating\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_service_backends{condition=\"unused\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_service_frontends_without_backends") == "2");
  // None of these fell to the generic families.
  CHECK(text.find("dpu_dataplane_events_total") == std::string::npos);
  CHECK(text.find("dpu_dataplane_gauge{") == std::string::npos);
  for (const auto& [family, type] : p.types) {
    INFO(family);
    CHECK((type == "counter") == (family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0));
  }

  // No services, an empty table: the gauges say zero rather than vanish.
  Parsed none = parse(renderMetrics(ports, stats, {}, {}));
  CHECK(none.samples.at("dpu_dataplane_services") == "0");
  CHECK(none.samples.at("dpu_dataplane_service_frontends_without_backends") == "0");
}

TEST_CASE("metrics: NetworkPolicy denials by policy, at most 50 labels, the rest summed", "[policy]") {
  v1::OperatorReply ports, stats;
  for (int i = 0; i < 60; ++i) {
    auto* d = stats.add_policy_drops();
    d->set_policy("ns/p" + std::to_string(i));
    d->set_dropped(static_cast<uint64_t>(i));
  }
  const Parsed p = parse(renderMetrics(ports, stats, servicesReply(), conntrackReply()));
  CHECK(p.samples.at("dpu_dataplane_policy_denied_total{policy=\"ns/p59\"}") == "59");
  CHECK(p.samples.at("dpu_dataplane_policy_denied_total{policy=\"ns/p10\"}") == "10");
  CHECK(p.samples.count("dpu_dataplane_policy_denied_total{policy=\"ns/p9\"}") == 0);
  CHECK(p.samples.at("dpu_dataplane_policy_denied_total{policy=\"(other)\"}") == "45");  // 0 + 1 + ... + 9
  size_t series = 0;
  for (const auto& [name, value] : p.samples) series += name.rfind("dpu_dataplane_policy_denied_total", 0) == 0;
  CHECK(series == 51);
}

TEST_CASE("metrics: the port limit, a representor that could not be opened and the mbuf budget") {
  v1::OperatorReply ports;
  auto* open = ports.add_ports();
  open->set_name("pf0vf0");
  open->set_role("representor");
  open->set_state("up");
  open->set_backend("af_xdp");
  open->set_mbufs(3104);
  auto* failed = ports.add_ports();
  failed->set_name("pf0vf31");
  failed->set_role("representor");
  failed->set_state("failed");
  failed->set_error("RTE_MAX_ETHPORTS (32) ports are in use");
  v1::OperatorReply stats;
  auto add = [&stats](const char* name, uint64_t value, v1::CounterKind kind) {
    auto* c = stats.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_kind(kind);
  };
  add("port_capacity", 31, v1::COUNTER_GAUGE);
  add("ports_unavailable", 1, v1::COUNTER_GAUGE);
  add("port_open_failures", 4, v1::COUNTER_EVENT);
  add("mbuf_pool_size", 16383, v1::COUNTER_GAUGE);
  add("mbufs_budgeted", 3136, v1::COUNTER_GAUGE);
  add("mbufs_reserved", 416, v1::COUNTER_GAUGE);
  add("mbufs_free", 12000, v1::COUNTER_GAUGE);
  Parsed p = parse(renderMetrics(ports, stats, {}, {}));
  CHECK(p.samples.at("dpu_dataplane_port_capacity") == "31");
  CHECK(p.samples.at("dpu_dataplane_ports_unavailable") == "1");
  CHECK(p.samples.at("dpu_dataplane_port_open_failures_total") == "4");
  CHECK(p.types.at("dpu_dataplane_port_open_failures_total") == "counter");
  CHECK(p.samples.at("dpu_dataplane_mbuf_pool_size") == "16383");
  CHECK(p.samples.at("dpu_dataplane_mbufs{share=\"budgeted\"}") == "3136");
  CHECK(p.samples.at("dpu_dataplane_mbufs{share=\"reserved\"}") == "416");
  CHECK(p.samples.at("dpu_dataplane_mbufs{share=\"free\"}") == "12000");
  CHECK(p.samples.at("dpu_dataplane_port_mbufs{port=\"pf0vf0\",role=\"representor\"}") == "3104");
  CHECK(p.samples.at("dpu_dataplane_port_up{port=\"pf0vf31\",role=\"representor\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_port_mbufs{port=\"pf0vf31\",role=\"representor\"}") == "0");
}

TEST_CASE("metrics: the start-up, once the dataplane forwards: the whole and each phase but the ports' steps") {
  v1::OperatorReply ports, stats;
  auto phase = [&stats](const char* name, uint64_t duration_us, bool moment = false) {
    auto* p = stats.add_startup();
    p->set_name(name);
    p->set_duration_us(duration_us);
    p->set_moment(moment);
  };
  phase("eal", 150'000);
  phase("port uplink af_xdp", 40'000);
  phase("port uplink af_xdp: queues", 30'000);
  phase("agent connected", 0, true);
  CHECK(parse(renderMetrics(ports, stats, {}, {})).samples.count("dpu_dataplane_startup_seconds") == 0);  // not forwarding yet
  phase("forwarding", 0, true);
  stats.set_startup_us(402'700);
  Parsed p = parse(renderMetrics(ports, stats, {}, {}));
  CHECK(p.samples.at("dpu_dataplane_startup_seconds") == "0.4027");
  CHECK(p.types.at("dpu_dataplane_startup_seconds") == "gauge");
  CHECK(p.samples.at("dpu_dataplane_startup_phase_seconds{phase=\"eal\"}") == "0.15");
  CHECK(p.samples.at("dpu_dataplane_startup_phase_seconds{phase=\"port uplink af_xdp\"}") == "0.04");
  CHECK(p.samples.count("dpu_dataplane_startup_phase_seconds{phase=\"port uplink af_xdp: queues\"}") == 0);
  CHECK(p.samples.count("dpu_dataplane_startup_phase_seconds{phase=\"forwarding\"}") == 0);
}

TEST_CASE("metrics: the listen address is checked when the config is read") {
  auto v4 = parseMetricsListen("169.254.0.2:9476");
  REQUIRE(v4.ok());
  CHECK(v4->address == "169.254.0.2");
  CHECK(v4->port == 9476);
  auto v6 = parseMetricsListen("[::]:9476");
  REQUIRE(v6.ok());
  CHECK(v6->address == "::");
  for (const char* bad : {"localhost:9476", "0.0.0.0", "0.0.0.0:0", "0.0.0.0:70000", ":::9476", "[::]9476", "1.2.3.4:x"}) {
    INFO(bad);
    auto r = parseMetricsListen(bad);
    CHECK_FALSE(r.ok());
    CHECK(r.code() == dpu::ErrorCode::kInvalid);
  }
  auto doc = parseDataplaneConfig("tunnel_ip: 192.168.0.1\nuplink: {devargs: net_null0}\nmetrics: {listen: nowhere}\n",
                                  "test");
  REQUIRE_FALSE(doc.ok());
  CHECK_THAT(doc.error(), Catch::Contains("metrics.listen"));
  auto good = parseDataplaneConfig("tunnel_ip: 192.168.0.1\nuplink: {devargs: net_null0}\n"
                                   "metrics: {listen: \"127.0.0.1:9476\"}\n",
                                   "test");
  INFO((good.ok() ? "" : good.error()));
  REQUIRE(good.ok());
  CHECK(good->metrics.enabled);
  CHECK(good->metrics.port == 9476);
}

TEST_CASE("metrics endpoint: GET /metrics scrapes the operator socket; other requests get clear errors") {
  const std::string sock = "/tmp/dpu-metrics-test-" + std::to_string(getpid()) + ".sock";
  OperatorStandIn op(sock);
  MetricsEndpoint endpoint(loopback(), sock);
  auto started = endpoint.start();
  INFO((started.ok() ? "" : started.error()));
  REQUIRE(started.ok());
  REQUIRE(endpoint.port() != 0);

  std::string ok = httpExchange(endpoint.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK_THAT(ok, Catch::Contains("Content-Type: text/plain; version=0.0.4"));
  CHECK_THAT(ok, Catch::Contains("dpu_dataplane_flows{where=\"sw\"} 3\n"));
  const size_t body = ok.find("\r\n\r\n") + 4;
  CHECK_THAT(ok, Catch::Contains("Content-Length: " + std::to_string(ok.size() - body) + "\r\n"));
  CHECK(op.requests == 5);  // ports, stats, services, conntrack and ipsec
  CHECK(op.conntrack_limit == 1);  // the counts per state, not the whole table
  CHECK_THAT(ok, Catch::Contains("dpu_dataplane_conntrack_connections{state=\"established\"} 5\n"));
  CHECK_THAT(ok, Catch::Contains("dpu_dataplane_services 2\n"));

  CHECK(httpExchange(endpoint.port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  CHECK(httpExchange(endpoint.port(), "GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(httpExchange(endpoint.port(), "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  CHECK(httpExchange(endpoint.port(), "nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
  CHECK(httpExchange(endpoint.port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')).rfind("HTTP/1.1 400", 0) ==
        0);
  // A client that connects and says nothing is cut off; the next one is served.
  CHECK(httpExchange(endpoint.port(), "").empty());
  CHECK(httpExchange(endpoint.port(), "GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  endpoint.stop();
}

TEST_CASE("metrics endpoint: 503 with the reason while the dataplane does not answer; a taken port fails start") {
  const std::string sock = "/tmp/dpu-metrics-test-none-" + std::to_string(getpid()) + ".sock";
  MetricsEndpoint endpoint(loopback(), sock);
  REQUIRE(endpoint.start().ok());
  std::string answer = httpExchange(endpoint.port(), "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(answer.rfind("HTTP/1.1 503", 0) == 0);
  CHECK_THAT(answer, Catch::Contains(sock));

  MetricsConfig same = loopback();
  same.port = endpoint.port();
  MetricsEndpoint second(same, sock);
  auto r = second.start();
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == dpu::ErrorCode::kConflict);
  CHECK_THAT(r.error(), Catch::Contains("127.0.0.1:" + std::to_string(endpoint.port())));
}

TEST_CASE("metrics: IPsec per SA: packets, bytes, drops by reason, sequence, age; never a key", "[ipsec]") {
  v1::OperatorReply ports, stats, ipsec;
  auto* info = ipsec.mutable_ipsec();
  info->set_encrypt(true);
  info->set_crypto_backend("openssl");
  auto* sa = info->add_sas();
  auto* st = sa->mutable_state();
  st->set_name("node2/in/21f23afc");
  st->set_direction(v1::INBOUND);
  st->set_spi(0x21f23afc);
  st->set_remote_node("node2");
  st->set_packets(10);
  st->set_bytes(14000);
  st->set_replay_drops(2);
  st->set_icv_failures(1);
  st->set_highest_sequence(12);
  sa->set_local_epoch(1);
  sa->set_remote_epoch(2);
  sa->set_age_ms(3500);
  const std::string text = renderMetrics(ports, stats, {}, {}, &ipsec);
  Parsed p = parse(text);
  const std::string l =
      "sa=\"node2/in/21f23afc\",peer=\"node2\",direction=\"in\",spi=\"0x21f23afc\",local_epoch=\"1\",remote_epoch=\"2\"";
  CHECK(p.samples.at("dpu_dataplane_ipsec_encrypt") == "1");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_packets_total{" + l + "}") == "10");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_bytes_total{" + l + "}") == "14000");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_drops_total{" + l + ",reason=\"replay\"}") == "2");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_drops_total{" + l + ",reason=\"icv\"}") == "1");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_drops_total{" + l + ",reason=\"limit\"}") == "0");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_sequence{" + l + "}") == "12");
  CHECK(p.samples.at("dpu_dataplane_ipsec_sa_age_seconds{" + l + "}") == "3.5");
  // Without an ipsec answer, no IPsec family.
  CHECK(renderMetrics(ports, stats, {}, {}).find("dpu_dataplane_ipsec") == std::string::npos);
}
