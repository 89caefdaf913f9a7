// Services and EndpointSlices compiled into the dataplane's Services, rule by
// rule as kube-proxy reads them, and the agent's side: one changed service or
// slice is one entry of one Delta; a bad service is left out, named and
// counted.
#include <catch2/catch.hpp>

#include "control/service_compiler.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::TempDir;
using dpu::control::testing::readyAgent;

namespace {

ServiceInfo service(const std::string& name = "web") {
  ServiceInfo s;
  s.ns = "default";
  s.name = name;
  s.cluster_ips = {"10.96.0.10"};
  s.ports = {{"http", Protocol::kTcp, 80, PortRef{0, "web"}, 0}};
  return s;
}

EndpointInfo endpoint(const std::string& ip, const std::string& node, bool ready = true, bool serving = true,
                      bool terminating = false) {
  EndpointInfo e;
  e.addresses = {ip};
  e.node_name = node;
  e.ready = ready;
  e.serving = serving;
  e.terminating = terminating;
  return e;
}

EndpointSliceInfo slice(const std::string& name, std::vector<EndpointInfo> eps, uint16_t port = 8080,
                        const std::string& port_name = "http", const std::string& svc = "web") {
  EndpointSliceInfo s;
  s.ns = "default";
  s.name = name;
  s.service_name = svc;
  s.endpoints = std::move(eps);
  s.ports = {{port_name, Protocol::kTcp, port}};
  return s;
}

// "ip:port" of a port's backends, in the message's order.
std::vector<std::string> backends(const dpv1::ServicePort& p) {
  std::vector<std::string> out;
  for (const auto& b : p.backends()) out.push_back(b.ip() + ":" + std::to_string(b.port()));
  return out;
}

}  // namespace

TEST_CASE("only services with a virtual IP that no other proxy claims are proxied") {
  CHECK(notProxiedReason(service()).empty());
  auto headless = service();
  headless.headless = true;
  headless.cluster_ips.clear();
  CHECK_THAT(notProxiedReason(headless), Catch::Contains("headless"));
  auto external_name = service();
  external_name.type = ServiceType::kExternalName;
  external_name.cluster_ips.clear();
  CHECK_THAT(notProxiedReason(external_name), Catch::Contains("ExternalName"));
  auto other = service();
  other.labels["service.kubernetes.io/service-proxy-name"] = "other-proxy";
  CHECK_THAT(notProxiedReason(other), Catch::Contains("other-proxy"));
  for (auto t : {ServiceType::kNodePort, ServiceType::kLoadBalancer}) {
    auto s = service();
    s.type = t;
    CHECK(notProxiedReason(s).empty());
  }
}

TEST_CASE("a service port is backed by the slice ports of its name and protocol, at the slice port's number") {
  auto svc = service();
  svc.ports = {{"http", Protocol::kTcp, 80, PortRef{0, "web"}, 0}, {"dns", Protocol::kUdp, 53, PortRef{53, ""}, 0}};
  // Two slices: each endpoint's named targetPort resolved to its own number.
  auto a = slice("web-a", {endpoint("10.244.1.5", "node-a")}, 8080);
  a.ports.push_back({"dns", Protocol::kUdp, 5353});
  a.ports.push_back({"http", Protocol::kUdp, 9999});  // same name, other protocol: not this port
  auto b = slice("web-b", {endpoint("10.244.2.7", "node-b")}, 9090);  // no "dns" port: backs http only
  auto c = slice("web-c", {endpoint("10.244.3.9", "node-c")}, 8080, "metrics");  // no matching name at all
  auto d = slice("web-d", {endpoint("10.244.4.1", "node-c")}, 0);  // a port without number: skipped
  auto out = compileService(svc, {b, c, a, d}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->name() == "default/web");
  REQUIRE(out->ports_size() == 2);
  CHECK(out->ports(0).protocol() == dpv1::TCP);
  CHECK(out->ports(0).port() == 80);
  CHECK(backends(out->ports(0)) == std::vector<std::string>{"10.244.1.5:8080", "10.244.2.7:9090"});
  CHECK(out->ports(1).protocol() == dpv1::UDP);
  CHECK(backends(out->ports(1)) == std::vector<std::string>{"10.244.1.5:5353"});
}

TEST_CASE("slices of a family the service has no cluster IP of, and FQDN slices, back nothing") {
  auto v6 = slice("web-v6", {endpoint("fd00:10:244:1::5", "node-a")});
  v6.address_type = AddressType::kIPv6;
  auto fqdn = slice("web-fqdn", {endpoint("db.example.com", "node-a")});
  fqdn.address_type = AddressType::kFQDN;
  auto v4 = slice("web-v4", {endpoint("10.244.1.5", "node-a")});
  auto out = compileService(service(), {v6, fqdn, v4}, "node-a");
  REQUIRE(out.ok());
  CHECK(backends(out->ports(0)) == std::vector<std::string>{"10.244.1.5:8080"});

  auto dual = service();
  dual.cluster_ips = {"10.96.0.10", "fd00:10:96::10"};
  out = compileService(dual, {v6, fqdn, v4}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->cluster_ips_size() == 2);
  CHECK(backends(out->ports(0)) == std::vector<std::string>{"10.244.1.5:8080", "fd00:10:244:1::5:8080"});
}

TEST_CASE("endpoint conditions are carried; neither ready nor serving is left out unless published") {
  auto s = slice("web-a", {endpoint("10.244.1.1", "node-a", true, true, false),
                           endpoint("10.244.1.2", "node-a", false, true, true),     // serving, terminating
                           endpoint("10.244.1.3", "node-a", false, false, false),   // starting: left out
                           endpoint("10.244.1.4", "node-a", false, false, true)});  // gone for good: left out
  auto out = compileService(service(), {s}, "node-a");
  REQUIRE(out.ok());
  REQUIRE(backends(out->ports(0)) == std::vector<std::string>{"10.244.1.1:8080", "10.244.1.2:8080"});
  const auto& b0 = out->ports(0).backends(0);
  CHECK((b0.ready() && b0.serving() && !b0.terminating()));
  const auto& b1 = out->ports(0).backends(1);
  CHECK((!b1.ready() && b1.serving() && b1.terminating()));

  auto published = service();
  published.publish_not_ready_addresses = true;
  out = compileService(published, {s}, "node-a");
  REQUIRE(out.ok());
  REQUIRE(out->ports(0).backends_size() == 4);
  for (const auto& b : out->ports(0).backends()) CHECK(b.ready());
  CHECK_FALSE(out->ports(0).backends(2).serving());  // the endpoint's own condition stays
}

TEST_CASE("an endpoint's first address counts; one in two slices is one backend, the ready copy") {
  auto e = endpoint("10.244.1.1", "node-a", false, true, true);
  e.addresses.push_back("10.244.1.99");
  auto old_slice = slice("web-old", {e});
  auto new_slice = slice("web-new", {endpoint("10.244.1.1", "node-a")});
  auto out = compileService(service(), {old_slice, new_slice}, "node-a");
  REQUIRE(out.ok());
  REQUIRE(backends(out->ports(0)) == std::vector<std::string>{"10.244.1.1:8080"});
  CHECK(out->ports(0).backends(0).ready());
  out = compileService(service(), {new_slice, old_slice}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->ports(0).backends(0).ready());
}

TEST_CASE("local is an endpoint on this node; the traffic policies and affinity are carried") {
  auto s = slice("web-a", {endpoint("10.244.1.1", "node-a"), endpoint("10.244.2.1", "node-b"),
                           endpoint("10.244.3.1", "")});
  auto svc = service();
  svc.internal_traffic_policy = TrafficPolicy::kLocal;
  svc.external_traffic_policy = TrafficPolicy::kLocal;  // not reachable from outside: no meaning
  svc.session_affinity = SessionAffinity::kClientIP;
  svc.affinity_timeout_seconds = 300;
  auto out = compileService(svc, {s}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->ports(0).backends(0).local());
  CHECK_FALSE(out->ports(0).backends(1).local());
  CHECK_FALSE(out->ports(0).backends(2).local());
  CHECK(out->internal_local());
  CHECK_FALSE(out->external_local());
  CHECK(out->affinity_timeout_s() == 300);

  svc.type = ServiceType::kNodePort;
  svc.ports[0].node_port = 30080;
  svc.affinity_timeout_seconds = 0;  // ClientIP without a timeout: Kubernetes' default
  svc.internal_traffic_policy = TrafficPolicy::kCluster;
  out = compileService(svc, {s}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->external_local());
  CHECK_FALSE(out->internal_local());
  CHECK(out->ports(0).node_port() == 30080);
  CHECK(out->affinity_timeout_s() == 10800);

  svc.session_affinity = SessionAffinity::kNone;
  out = compileService(svc, {s}, "node-a");
  REQUIRE(out.ok());
  CHECK(out->affinity_timeout_s() == 0);
}

TEST_CASE("external and load-balancer IPs are the service's external frontends, once each") {
  auto svc = service();
  svc.type = ServiceType::kLoadBalancer;
  svc.external_ips = {"192.0.2.10"};
  svc.load_balancer_ips = {"192.0.2.10", "192.0.2.11"};
  auto out = compileService(svc, {}, "node-a");
  REQUIRE(out.ok());
  CHECK(std::vector<std::string>(out->external_ips().begin(), out->external_ips().end()) ==
        std::vector<std::string>{"192.0.2.10", "192.0.2.11"});
  CHECK(out->ports(0).backends_size() == 0);  // no endpoints: the dataplane rejects
}

TEST_CASE("what the dataplane would refuse is an error naming the reason") {
  auto svc = service();
  svc.cluster_ips = {"127.0.0.10"};
  auto out = compileService(svc, {}, "node-a");
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(out.error(), Catch::Contains("loopback"));
  svc = service();
  auto s = slice("web-a", {endpoint("224.0.0.5", "node-a")});
  out = compileService(svc, {s}, "node-a");
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(out.error(), Catch::Contains("multicast"));
}

TEST_CASE("the catalog names the services a change touches") {
  ServiceCatalog c;
  CHECK(c.upsertSlice(slice("web-a", {})) == std::set<std::string>{"default/web"});
  CHECK(c.service("default/web") == nullptr);
  CHECK(c.upsertService(service()) == std::set<std::string>{"default/web"});
  CHECK(c.slicesOf("default/web").size() == 1);
  // The slice relabelled to another service: both change.
  CHECK(c.upsertSlice(slice("web-a", {}, 8080, "http", "api")) == std::set<std::string>{"default/api", "default/web"});
  CHECK(c.slicesOf("default/web").empty());
  CHECK(c.slicesOf("default/api").size() == 1);
  CHECK(c.deleteSlice("default", "web-a") == std::set<std::string>{"default/api"});
  CHECK(c.deleteSlice("default", "web-a").empty());
  CHECK(c.deleteService("default", "web") == std::set<std::string>{"default/web"});
  CHECK(c.service("default/web") == nullptr);
}

TEST_CASE("the agent programs services one Delta entry per change, and leaves bad ones out, named") {
  TempDir dir;
  ModelState model;
  auto agent = readyAgent(dir.path(), model);
  REQUIRE(agent);
  (void)model.takePending();

  // Slices before their service: nothing yet.
  agent->endpointSliceUpserted(slice("web-a", {endpoint("10.244.1.5", "node-a")}));
  CHECK_FALSE(model.hasPending());
  agent->serviceUpserted(service());
  agent->serviceUpserted(service("api"));
  auto p = model.takePending();
  REQUIRE(p);
  REQUIRE(p->delta.upsert_services_size() == 2);
  CHECK(model.serviceCount() == 2);

  // One slice of one service changes: that service alone.
  agent->endpointSliceUpserted(slice("web-b", {endpoint("10.244.2.7", "node-b")}));
  p = model.takePending();
  REQUIRE(p);
  CHECK(p->changes == 1);
  REQUIRE(p->delta.upsert_services_size() == 1);
  CHECK(p->delta.upsert_services(0).name() == "default/web");
  CHECK(backends(p->delta.upsert_services(0).ports(0)) ==
        std::vector<std::string>{"10.244.1.5:8080", "10.244.2.7:8080"});
  CHECK(p->delta.upsert_services(0).ports(0).backends(0).local());

  // The same slice again: no change at all.
  agent->endpointSliceUpserted(slice("web-b", {endpoint("10.244.2.7", "node-b")}));
  CHECK_FALSE(model.hasPending());

  // Endpoints removed: the service stays, with no backends (the dataplane rejects).
  agent->endpointSliceDeleted("default", "web-a");
  agent->endpointSliceDeleted("default", "web-b");
  p = model.takePending();
  REQUIRE(p);
  REQUIRE(p->delta.upsert_services_size() == 1);
  CHECK(p->delta.upsert_services(0).ports(0).backends_size() == 0);

  // A bad service: left out, named with the reason; fixed: back.
  auto bad = service();
  bad.cluster_ips = {"127.0.0.10"};
  agent->serviceUpserted(bad);
  p = model.takePending();
  REQUIRE(p);
  REQUIRE(p->delta.delete_services_size() == 1);
  CHECK(p->delta.delete_services(0) == "default/web");
  REQUIRE(agent->refusedServices().count("default/web") == 1);
  CHECK_THAT(agent->refusedServices().at("default/web"), Catch::Contains("loopback"));
  agent->serviceUpserted(service());
  CHECK(agent->refusedServices().empty());
  p = model.takePending();
  REQUIRE(p);
  CHECK(p->delta.upsert_services_size() == 1);

  // Turned headless, or claimed by another proxy: out of the model, not refused.
  auto other = service();
  other.labels["service.kubernetes.io/service-proxy-name"] = "other";
  agent->serviceUpserted(other);
  p = model.takePending();
  REQUIRE(p);
  CHECK(p->delta.delete_services_size() == 1);
  CHECK(agent->refusedServices().empty());

  // Deleted: one delete; the full model holds what is left.
  agent->serviceDeleted("default", "api");
  p = model.takePending();
  REQUIRE(p);
  CHECK(p->delta.delete_services_size() == 1);
  CHECK(p->delta.delete_services(0) == "default/api");
  CHECK(model.snapshot().services_size() == 0);
  agent->serviceUpserted(service());
  CHECK(model.snapshot().services_size() == 1);
}
