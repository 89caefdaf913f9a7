// dpuctl services / conntrack and the Prometheus services series on the
// answers of a real Engine (EAL in-process, net_ring ports), not canned ones:
// a connection through a cluster IP must be counted on its frontend's row, be
// listed with its service and state, and show in the metrics by state. The
// formats' details are dataplane_dpuctl's and dataplane_metrics' tests; this
// proves they read what the engine actually answers.
#include "datapath/metrics.h"
#include "dpuctl_format.h"
#include "engine_fixture.h"

using namespace engine_test;

namespace {

// default/web: 10.96.0.10:80 to pod B's 8080; default/empty: no endpoint.
dataplane::v1::LogicalModel model() {
  auto m = baseModel();
  m.mutable_node()->add_service_cidrs("10.96.0.0/16");
  auto* web = m.add_services();
  web->set_name("default/web");
  web->add_cluster_ips("10.96.0.10");
  auto* p = web->add_ports();
  p->set_name("http");
  p->set_protocol(dataplane::v1::TCP);
  p->set_port(80);
  auto* b = p->add_backends();
  b->set_ip("10.244.1.6");
  b->set_port(8080);
  b->set_local(true);
  b->set_ready(true);
  b->set_serving(true);
  auto* empty = m.add_services();
  empty->set_name("default/empty");
  empty->add_cluster_ips("10.96.0.30");
  auto* q = empty->add_ports();
  q->set_protocol(dataplane::v1::TCP);
  q->set_port(80);
  return m;
}

dataplane::v1::OperatorReply ask(Engine& e, void (*fill)(dataplane::v1::OperatorRequest&)) {
  dataplane::v1::OperatorRequest req;
  fill(req);
  auto r = e.operate(req);
  REQUIRE(r.error().empty());
  return r;
}

// The rows of a table whose first cell is `first`.
std::vector<std::string> rowsStarting(const std::string& text, const std::string& first) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.rfind(first + " ", 0) == 0) out.push_back(line);
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("operator views: a connection through a cluster IP in dpuctl services, conntrack and the metrics",
          "[dpuctl][services]") {
  EngineConfig config;
  config.conntrack_entries = 1000;
  Fixture f(config, false);
  const auto programmed = fullSync(*f.engine, model(), 1);
  INFO(programmed.message());
  REQUIRE(programmed.status() == dataplane::v1::OK);

  auto services = [](dataplane::v1::OperatorRequest& r) { r.mutable_services(); };
  auto conntrack = [](dataplane::v1::OperatorRequest& r) { r.mutable_conntrack(); };
  auto stats = [](dataplane::v1::OperatorRequest& r) { r.mutable_stats(); };

  // Before any traffic: the frontend with its backend, no connection.
  std::string before = dpu::dpuctl::formatServices(ask(*f.engine, services), ask(*f.engine, conntrack));
  INFO(before);
  auto web = rowsStarting(before, "default/web");
  REQUIRE(web.size() == 2);  // the frontend and its backend
  CHECK_THAT(web[0], Catch::Matches(R"(default/web +http +cluster-ip +10\.96\.0\.10:80 +tcp +cluster +- +1/1 +\d+ +0)"));
  CHECK_THAT(web[1], Catch::Matches(R"(default/web +http +10\.244\.1\.6:8080 +ready +local +100\.0% +100\.0%)"));
  CHECK_THAT(rowsStarting(before, "default/empty").at(0), Catch::Matches(R"(default/empty .* 0/0 +\d+ +0)"));

  // Pod A opens a connection to the cluster IP; pod B (the backend) answers.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.96.0.10", 80, kSyn));
  f.inject(kRepB, tcp4(kRouterMac, kMacB, "10.244.1.6", 8080, "10.244.1.5", 40000, kSynAck));
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40000, "10.96.0.10", 80, kAck));
  Fixture::drain(kRepA);
  Fixture::drain(kRepB);

  const auto ct = ask(*f.engine, conntrack);
  const std::string after = dpu::dpuctl::formatServices(ask(*f.engine, services), ct);
  INFO(after);
  CHECK_THAT(rowsStarting(after, "default/web").at(0), Catch::EndsWith(" 1"));  // CONNECTIONS
  const std::string table = dpu::dpuctl::formatConntrack(ct);
  INFO(table);
  const auto tcp = rowsStarting(table, "tcp");
  REQUIRE(tcp.size() == 1);
  CHECK_THAT(tcp[0], Catch::Matches(R"(tcp +10\.244\.1\.5:40000 -> 10\.96\.0\.10:80 +10\.244\.1\.6:8080 -> )"
                                    R"(10\.244\.1\.5:40000 +established +dnat +default/web +\S+ +\S+)"));
  CHECK_THAT(table, Catch::Contains("tracked 1 of at most 1000 (0.1%, conntrack.max_entries)\n"));
  CHECK_THAT(table, Catch::EndsWith("by state: established 1\n"));

  // A connection to the service without endpoints is refused, and counted so.
  f.inject(kRepA, tcp4(kRouterMac, kMacA, "10.244.1.5", 40001, "10.96.0.30", 80, kSyn));
  Fixture::drain(kRepA);

  const std::string text = dpu::datapath::renderMetrics({}, ask(*f.engine, stats), ask(*f.engine, services), ct);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_conntrack_connections{state=\"established\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_conntrack_connections{state=\"syn-sent\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_conntrack_entries 1\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_conntrack_capacity 1000\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_conntrack_changes_total{change=\"new\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_service_connections_total{outcome=\"rejected\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_services 2\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_service_frontends{kind=\"cluster-ip\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_service_backends{condition=\"ready\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("\ndpu_dataplane_service_frontends_without_backends 1\n"));
  // Every services and conntrack counter the engine has went to a named family.
  CHECK_THAT(text, !Catch::Contains("dpu_dataplane_events_total{event=\"Conntrack"));
  CHECK_THAT(text, !Catch::Contains("dpu_dataplane_events_total{event=\"Service"));
  CHECK_THAT(text, !Catch::Contains("dpu_dataplane_gauge{name=\"conntrack"));
}
