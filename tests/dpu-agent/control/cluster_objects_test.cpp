// The cluster's objects through both sources: every real-shaped object (as
// the API server returns it, or as the Kubernetes API reference shows it) is
// decoded by the Kubernetes source's decoder and, turned into a cluster-file
// entry the way the file's keys mirror the object's fields, by the file
// source; both must give the same struct, with the API's defaults. Every bad
// object is refused by both, the message naming the field. Plus what only
// one of them does: the file refuses unknown keys and implies namespaces;
// the decode stream takes YAML documents and Lists.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "control/cluster_objects.h"
#include "control/file_source.h"
#include "control/kube_objects.h"

using namespace dpu::control;
using nlohmann::json;

namespace {

// The kind a cluster file lists under a section.
const char* sectionOf(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kNode: return "nodes";
    case ObjectKind::kPod: return "pods";
    case ObjectKind::kService: return "services";
    case ObjectKind::kEndpointSlice: return "endpointSlices";
    case ObjectKind::kNetworkPolicy: return "networkPolicies";
    case ObjectKind::kNamespace: return "namespaces";
  }
  return "";
}

// The cluster-file entry of a Kubernetes object: metadata's namespace, name
// and labels, then the spec's and the status's fields side by side.
json fileEntry(ObjectKind kind, const json& o) {
  json e = json::object();
  const json meta = o.value("metadata", json::object());
  if (meta.contains("namespace")) e["namespace"] = meta["namespace"];
  if (meta.contains("name")) e["name"] = meta["name"];
  json labels = meta.value("labels", json::object());
  const json spec = o.value("spec", json::object());
  const json status = o.value("status", json::object());
  switch (kind) {
    case ObjectKind::kNamespace:
      if (!labels.empty()) e["labels"] = labels;
      break;
    case ObjectKind::kPod:
      if (meta.contains("uid")) e["uid"] = meta["uid"];
      if (!labels.empty()) e["labels"] = labels;
      if (spec.contains("nodeName")) e["nodeName"] = spec["nodeName"];
      if (spec.contains("hostNetwork")) e["hostNetwork"] = spec["hostNetwork"];
      if (spec.contains("containers")) {
        e["containers"] = json::array();
        for (const auto& c : spec["containers"]) {
          json kept = json::object();
          for (const char* k : {"name", "image", "ports"})
            if (c.contains(k)) kept[k] = c[k];
          e["containers"].push_back(kept);
        }
      }
      if (status.contains("podIPs")) {
        e["ips"] = json::array();
        for (const auto& ip : status["podIPs"]) e["ips"].push_back(ip["ip"]);
      }
      break;
    case ObjectKind::kService:
      if (!labels.empty()) e["labels"] = labels;
      for (const auto& [k, v] : spec.items()) e[k] = v;
      if (status.contains("loadBalancer")) e["loadBalancer"] = status["loadBalancer"];
      break;
    case ObjectKind::kEndpointSlice:
      if (!labels.empty()) e["labels"] = labels;
      for (const char* k : {"addressType", "endpoints", "ports"})
        if (o.contains(k)) e[k] = o[k];
      break;
    case ObjectKind::kNetworkPolicy:
      for (const auto& [k, v] : spec.items()) e[k] = v;
      break;
    case ObjectKind::kNode: break;
  }
  return e;
}

// The object as the file source gives it (after its own checks).
dpu::Result<KubeObject> viaFile(ObjectKind kind, const json& o) {
  json file = {{sectionOf(kind), json::array({fileEntry(kind, o)})}};
  auto snap = parseClusterFile(file.dump(), "c.json");
  if (!snap) return std::move(snap).takeError();
  KubeObject out;
  out.kind = kind;
  auto pick = [&](const auto& map) -> bool {
    if (map.size() != 1) return false;
    out.info = map.begin()->second;
    return true;
  };
  bool one = false;
  switch (kind) {
    case ObjectKind::kPod: one = pick(snap->pods); break;
    case ObjectKind::kService: one = pick(snap->services); break;
    case ObjectKind::kEndpointSlice: one = pick(snap->slices); break;
    case ObjectKind::kNetworkPolicy: one = pick(snap->policies); break;
    case ObjectKind::kNamespace: one = pick(snap->namespaces); break;
    case ObjectKind::kNode: one = pick(snap->nodes); break;
  }
  if (!one) return dpu::Error{"the file gave not exactly one object"};
  return out;
}

template <class Info>
std::pair<Info, Info> bothWays(ObjectKind kind, const char* text) {
  json o = json::parse(text);
  auto k = parseKubeObject(kind, text);
  INFO("kubernetes: " << (k.ok() ? "ok" : k.error()));
  REQUIRE(k.ok());
  auto f = viaFile(kind, o);
  INFO("file: " << (f.ok() ? "ok" : f.error()));
  REQUIRE(f.ok());
  const Info& a = std::get<Info>(k->info);
  const Info& b = std::get<Info>(f->info);
  // The same struct from both sources.
  CHECK(toJson(a).dump() == toJson(b).dump());
  CHECK(a == b);
  return {a, b};
}

// The `kubernetes` Service of every cluster, as the API server returns it.
const char* kKubernetesService = R"({"kind":"Service","apiVersion":"v1","metadata":{"name":"kubernetes",
  "namespace":"default","uid":"5c0e6f2a-4f1e-4d1a-9a4e-0f0c5b8e0a11","resourceVersion":"197",
  "creationTimestamp":"2026-01-01T00:00:00Z","labels":{"component":"apiserver","provider":"kubernetes"},
  "managedFields":[{"manager":"kube-apiserver","operation":"Update","apiVersion":"v1"}]},
  "spec":{"ports":[{"name":"https","protocol":"TCP","port":443,"targetPort":6443}],"clusterIP":"10.96.0.1",
  "clusterIPs":["10.96.0.1"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],
  "ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}})";

// A dual-stack LoadBalancer with every field the agent reads set.
const char* kLoadBalancer = R"({"kind":"Service","apiVersion":"v1","metadata":{"name":"web-lb","namespace":"shop",
  "labels":{"app":"web"}},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":"http",
  "nodePort":31380},{"name":"https","protocol":"TCP","port":443,"targetPort":8443,"nodePort":31390,
  "appProtocol":"https"},{"name":"quic","protocol":"UDP","port":443,"targetPort":8443,"nodePort":31391}],
  "selector":{"app":"web"},"clusterIP":"10.96.12.7","clusterIPs":["10.96.12.7","fd00:10:96::c7"],
  "type":"LoadBalancer","externalIPs":["198.51.100.10"],"sessionAffinity":"ClientIP",
  "sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}},"externalTrafficPolicy":"Local",
  "healthCheckNodePort":32012,"ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"PreferDualStack",
  "allocateLoadBalancerNodePorts":true,"internalTrafficPolicy":"Local","publishNotReadyAddresses":true},
  "status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.7","ipMode":"VIP"},{"hostname":"lb.example.com"}]}}})";

// The Service of the API reference's first example, as written (no defaults).
const char* kMinimalService = R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"my-service",
  "namespace":"default"},"spec":{"selector":{"app.kubernetes.io/name":"MyApp"},
  "ports":[{"protocol":"TCP","port":80,"targetPort":9376}]}})";

const char* kHeadless = R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"shop",
  "labels":{"service.kubernetes.io/service-proxy-name":"other-proxy"}},
  "spec":{"clusterIP":"None","clusterIPs":["None"],"selector":{"app":"db"},"sessionAffinity":"ClientIP"}})";

const char* kSlice = R"({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{
  "name":"web-lb-7xq2k","generateName":"web-lb-","namespace":"shop","labels":{
  "endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io","kubernetes.io/service-name":"web-lb"},
  "ownerReferences":[{"apiVersion":"v1","kind":"Service","name":"web-lb","uid":"u","controller":true}]},
  "addressType":"IPv4","endpoints":[
   {"addresses":["10.244.1.5"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node-a",
    "targetRef":{"kind":"Pod","namespace":"shop","name":"web-1","uid":"0a4e"},"zone":"z1"},
   {"addresses":["10.244.2.7"],"conditions":{"ready":false,"serving":true,"terminating":true},"nodeName":"node-b",
    "targetRef":{"kind":"Pod","namespace":"shop","name":"web-2","uid":"0a4f"}},
   {"addresses":["10.244.2.8"],"conditions":{"ready":false}},
   {"addresses":["192.168.7.20"],"conditions":{}}],
  "ports":[{"name":"http","protocol":"TCP","port":8080},{"name":"https","protocol":"TCP","port":8443,
  "appProtocol":"https"}]})";

const char* kNamespace = R"({"kind":"Namespace","apiVersion":"v1","metadata":{"name":"shop",
  "uid":"6a1b","resourceVersion":"12","labels":{"kubernetes.io/metadata.name":"shop","team":"a"}},
  "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})";

const char* kPod = R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"shop","uid":"u-1",
  "labels":{"app":"web"}},"spec":{"nodeName":"node-a","containers":[
  {"name":"app","image":"registry.example/web:1.0","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},
   {"name":"dns","containerPort":53,"protocol":"UDP"},{"containerPort":9090}]},
  {"name":"sidecar","image":"registry.example/side:1.0","ports":[{"name":"metrics","containerPort":9100,
   "protocol":"SCTP"}]}]},"status":{"phase":"Running","podIP":"10.244.1.5","podIPs":[{"ip":"10.244.1.5"}]}})";

// The API reference's NetworkPolicy example, with an endPort range.
const char* kPolicy = R"({"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{
  "name":"test-network-policy","namespace":"default"},"spec":{"podSelector":{"matchLabels":{"role":"db"}},
  "policyTypes":["Ingress","Egress"],"ingress":[{"from":[{"ipBlock":{"cidr":"172.17.0.0/16",
  "except":["172.17.1.0/24"]}},{"namespaceSelector":{"matchLabels":{"project":"myproject"}}},
  {"podSelector":{"matchLabels":{"role":"frontend"}}}],"ports":[{"protocol":"TCP","port":6379}]}],
  "egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/24"}}],"ports":[{"protocol":"TCP","port":32000,"endPort":32768}]}]}})";

}  // namespace

TEST_CASE("cluster objects: the kubernetes Service, as the API server returns it", "[cluster]") {
  auto [s, f] = bothWays<ServiceInfo>(ObjectKind::kService, kKubernetesService);
  CHECK(s.ns == "default");
  CHECK(s.name == "kubernetes");
  CHECK(s.labels.at("provider") == "kubernetes");
  CHECK(s.type == ServiceType::kClusterIP);
  CHECK_FALSE(s.headless);
  CHECK(s.cluster_ips == std::vector<std::string>{"10.96.0.1"});
  REQUIRE(s.ports.size() == 1);
  CHECK(s.ports[0] == ServicePort{"https", Protocol::kTcp, 443, PortRef{6443, ""}, 0});
  CHECK(s.session_affinity == SessionAffinity::kNone);
  CHECK(s.affinity_timeout_seconds == 0);
  CHECK(s.internal_traffic_policy == TrafficPolicy::kCluster);
  CHECK(s.external_traffic_policy == TrafficPolicy::kCluster);
  CHECK(s.load_balancer_ips.empty());
  CHECK_FALSE(s.proxiedElsewhere());
  CHECK(s.ip_family_policy == "SingleStack");
  CHECK(s.ip_families == std::vector<std::string>{"IPv4"});
}

TEST_CASE("cluster objects: a LoadBalancer with every field", "[cluster]") {
  auto [s, f] = bothWays<ServiceInfo>(ObjectKind::kService, kLoadBalancer);
  CHECK(s.type == ServiceType::kLoadBalancer);
  CHECK(s.cluster_ips == std::vector<std::string>{"10.96.12.7", "fd00:10:96::c7"});
  REQUIRE(s.ports.size() == 3);
  CHECK(s.ports[0] == ServicePort{"http", Protocol::kTcp, 80, PortRef{0, "http"}, 31380});
  CHECK(s.ports[1] == ServicePort{"https", Protocol::kTcp, 443, PortRef{8443, ""}, 31390});
  // The same port number over another protocol is another port.
  CHECK(s.ports[2] == ServicePort{"quic", Protocol::kUdp, 443, PortRef{8443, ""}, 31391});
  CHECK(s.external_ips == std::vector<std::string>{"198.51.100.10"});
  // A hostname-only ingress entry has no address to serve.
  CHECK(s.load_balancer_ips == std::vector<std::string>{"203.0.113.7"});
  CHECK(s.session_affinity == SessionAffinity::kClientIP);
  CHECK(s.affinity_timeout_seconds == 600);
  CHECK(s.external_traffic_policy == TrafficPolicy::kLocal);
  CHECK(s.internal_traffic_policy == TrafficPolicy::kLocal);
  CHECK(s.publish_not_ready_addresses);
  CHECK(s.ip_family_policy == "PreferDualStack");
  CHECK(s.ip_families == std::vector<std::string>{"IPv4", "IPv6"});
}

TEST_CASE("cluster objects: a Service as written gets the API's defaults", "[cluster]") {
  auto [s, f] = bothWays<ServiceInfo>(ObjectKind::kService, kMinimalService);
  CHECK(s.type == ServiceType::kClusterIP);
  CHECK(s.cluster_ips.empty());  // not allocated yet
  CHECK(s.ip_family_policy == "SingleStack");
  CHECK(s.ip_families.empty());  // the API server's first family, when it allocates
  REQUIRE(s.ports.size() == 1);
  CHECK(s.ports[0] == ServicePort{"", Protocol::kTcp, 80, PortRef{9376, ""}, 0});
  CHECK(s.session_affinity == SessionAffinity::kNone);
  CHECK(s.internal_traffic_policy == TrafficPolicy::kCluster);
  // targetPort defaults to the port; protocol to TCP.
  auto p = bothWays<ServiceInfo>(ObjectKind::kService, R"({"metadata":{"name":"a","namespace":"d"},
    "spec":{"clusterIP":"10.96.0.5","ports":[{"port":8080}]}})");
  CHECK(p.first.ports[0] == ServicePort{"", Protocol::kTcp, 8080, PortRef{8080, ""}, 0});
  // ClientIP without a config: Kubernetes' 10800 seconds.
  auto affinity = bothWays<ServiceInfo>(ObjectKind::kService, R"({"metadata":{"name":"a","namespace":"d"},
    "spec":{"clusterIP":"10.96.0.5","sessionAffinity":"ClientIP","ports":[{"port":80}]}})");
  CHECK(affinity.first.affinity_timeout_seconds == kDefaultAffinityTimeoutSeconds);
  // The families follow the cluster IPs where the object names none; an IPv6 one may come first.
  auto v6_first = bothWays<ServiceInfo>(ObjectKind::kService, R"({"metadata":{"name":"a","namespace":"d"},
    "spec":{"clusterIPs":["fd00:10:96::5","10.96.0.5"],"ipFamilyPolicy":"RequireDualStack","ports":[{"port":80}]}})");
  CHECK(v6_first.first.ip_families == std::vector<std::string>{"IPv6", "IPv4"});
  CHECK(v6_first.first.ip_family_policy == "RequireDualStack");
  // One family asked for, none allocated yet: the other is the allocator's to add.
  auto asked = bothWays<ServiceInfo>(ObjectKind::kService, R"({"metadata":{"name":"a","namespace":"d"},
    "spec":{"ipFamilies":["IPv6"],"ipFamilyPolicy":"PreferDualStack","ports":[{"port":80}]}})");
  CHECK(asked.first.ip_families == std::vector<std::string>{"IPv6"});
  // No policy with two cluster IPs: RequireDualStack, as the API server defaults it.
  auto two = bothWays<ServiceInfo>(ObjectKind::kService, R"({"metadata":{"name":"a","namespace":"d"},
    "spec":{"clusterIPs":["10.96.0.5","fd00:10:96::5"],"ports":[{"port":80}]}})");
  CHECK(two.first.ip_family_policy == "RequireDualStack");
}

TEST_CASE("cluster objects: a headless Service of another proxy", "[cluster]") {
  auto [s, f] = bothWays<ServiceInfo>(ObjectKind::kService, kHeadless);
  CHECK(s.headless);
  CHECK(s.cluster_ips.empty());
  CHECK(s.ports.empty());  // a headless service may have none
  CHECK(s.proxiedElsewhere());
  CHECK(s.affinity_timeout_seconds == kDefaultAffinityTimeoutSeconds);
}

TEST_CASE("cluster objects: an EndpointSlice with the API's condition defaults", "[cluster]") {
  auto [s, f] = bothWays<EndpointSliceInfo>(ObjectKind::kEndpointSlice, kSlice);
  CHECK(s.service_name == "web-lb");
  CHECK(s.address_type == AddressType::kIPv4);
  REQUIRE(s.endpoints.size() == 4);
  CHECK(s.endpoints[0] == EndpointInfo{{"10.244.1.5"}, true, true, false, "node-a", {"Pod", "shop", "web-1"}});
  CHECK(s.endpoints[1] == EndpointInfo{{"10.244.2.7"}, false, true, true, "node-b", {"Pod", "shop", "web-2"}});
  // Absent conditions: ready and serving are true, terminating false
  // (discovery/v1 EndpointConditions, and kube-proxy reads them so).
  CHECK(s.endpoints[2] == EndpointInfo{{"10.244.2.8"}, false, true, false, "", {}});
  CHECK(s.endpoints[3] == EndpointInfo{{"192.168.7.20"}, true, true, false, "", {}});
  REQUIRE(s.ports.size() == 2);
  CHECK(s.ports[0] == EndpointSliceInfo::Port{"http", Protocol::kTcp, 8080});
  CHECK(s.ports[1] == EndpointSliceInfo::Port{"https", Protocol::kTcp, 8443});
  // IPv6 addresses are normalized; a port without a number means all ports.
  auto v6 = bothWays<EndpointSliceInfo>(ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d",
    "labels":{"kubernetes.io/service-name":"s"}},"addressType":"IPv6",
    "endpoints":[{"addresses":["FD00:10:244:1::5"]}],"ports":[{"name":"all"}]})");
  CHECK(v6.first.endpoints[0].addresses == std::vector<std::string>{"fd00:10:244:1::5"});
  CHECK(v6.first.ports[0] == EndpointSliceInfo::Port{"all", Protocol::kTcp, 0});
  // FQDN slices name hosts, not addresses (the agent programs none of them).
  auto fqdn = bothWays<EndpointSliceInfo>(ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d",
    "labels":{"kubernetes.io/service-name":"s"}},"addressType":"FQDN",
    "endpoints":[{"addresses":["db.example.com"]}],"ports":[{"name":"pg","port":5432}]})");
  CHECK(fqdn.first.address_type == AddressType::kFQDN);
  CHECK(fqdn.first.endpoints[0].addresses == std::vector<std::string>{"db.example.com"});
}

TEST_CASE("cluster objects: a Namespace and its labels", "[cluster]") {
  auto [n, f] = bothWays<NamespaceInfo>(ObjectKind::kNamespace, kNamespace);
  CHECK(n.name == "shop");
  CHECK(n.labels == std::map<std::string, std::string>{{kNamespaceNameLabel, "shop"}, {"team", "a"}});
  // Without the name label (an API server before 1.21; a file entry): added.
  auto [bare, bf] =
      bothWays<NamespaceInfo>(ObjectKind::kNamespace, R"({"metadata":{"name":"old","labels":{"x":"y"}}})");
  CHECK(bare.labels == std::map<std::string, std::string>{{kNamespaceNameLabel, "old"}, {"x", "y"}});
}

TEST_CASE("cluster objects: a Pod's labels and every container's ports", "[cluster]") {
  auto [p, f] = bothWays<PodInfo>(ObjectKind::kPod, kPod);
  CHECK(p.labels == std::map<std::string, std::string>{{"app", "web"}});
  CHECK(p.ports == std::vector<ContainerPort>{{"http", 8080, Protocol::kTcp},
                                              {"dns", 53, Protocol::kUdp},
                                              {"", 9090, Protocol::kTcp},
                                              {"metrics", 9100, Protocol::kSctp}});
  CHECK(p.ips == std::vector<std::string>{"10.244.1.5"});
}

TEST_CASE("cluster objects: the API reference's NetworkPolicy", "[cluster]") {
  auto [p, f] = bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy, kPolicy);
  CHECK(p.ns == "default");
  CHECK(p.pod_selector.match_labels == std::map<std::string, std::string>{{"role", "db"}});
  CHECK(p.policy_ingress);
  CHECK(p.policy_egress);
  REQUIRE(p.ingress.size() == 1);
  const auto& from = p.ingress[0].peers;
  REQUIRE(from.size() == 3);
  CHECK(from[0].ip_block == IpBlock{"172.17.0.0/16", {"172.17.1.0/24"}});
  CHECK_FALSE(from[0].pod_selector.has_value());
  CHECK(from[1].namespace_selector->match_labels.at("project") == "myproject");
  // A namespaceSelector alone: no podSelector, which is not an empty one.
  CHECK_FALSE(from[1].pod_selector.has_value());
  CHECK(from[2].pod_selector->match_labels.at("role") == "frontend");
  CHECK_FALSE(from[2].namespace_selector.has_value());
  CHECK(p.ingress[0].ports == std::vector<NetworkPolicyPort>{{Protocol::kTcp, PortRef{6379, ""}, 0}});
  REQUIRE(p.egress.size() == 1);
  CHECK(p.egress[0].peers[0].ip_block == IpBlock{"10.0.0.0/24", {}});
  CHECK(p.egress[0].ports == std::vector<NetworkPolicyPort>{{Protocol::kTcp, PortRef{32000, ""}, 32768}});
}

TEST_CASE("cluster objects: NetworkPolicy defaulting and the rest of the spec", "[cluster]") {
  // policyTypes absent: Ingress only while there are no egress rules...
  auto deny = bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy,
                                          R"({"metadata":{"name":"default-deny","namespace":"x"},
                                              "spec":{"podSelector":{}}})")
                  .first;
  CHECK(deny.policy_ingress);
  CHECK_FALSE(deny.policy_egress);
  CHECK(deny.pod_selector == LabelSelector{});
  CHECK(deny.ingress.empty());
  // ... an empty egress list is no egress rule ...
  CHECK_FALSE(bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy,
                                          R"({"metadata":{"name":"a","namespace":"x"},"spec":{"egress":[]}})")
                  .first.policy_egress);
  // ... and Egress too once there is one, as the API server's defaulting does.
  auto egress = bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy, R"({"metadata":{"name":"a","namespace":"x"},
    "spec":{"podSelector":{"matchExpressions":[{"key":"tier","operator":"NotIn","values":["db","cache"]},
      {"key":"canary","operator":"DoesNotExist"}]},
     "egress":[{"to":[{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name",
       "operator":"In","values":["y"]}]},"podSelector":{"matchLabels":{"pod":"b"}}}],
       "ports":[{"port":"dns"},{"protocol":"UDP"},{"protocol":"SCTP","port":80}]},{}]}})")
                    .first;
  CHECK(egress.policy_ingress);
  CHECK(egress.policy_egress);
  REQUIRE(egress.pod_selector.match_expressions.size() == 2);
  CHECK(egress.pod_selector.match_expressions[0] ==
        SelectorRequirement{"tier", SelectorOperator::kNotIn, {"db", "cache"}});
  CHECK(egress.pod_selector.match_expressions[1] == SelectorRequirement{"canary", SelectorOperator::kDoesNotExist, {}});
  REQUIRE(egress.egress.size() == 2);
  const auto& peer = egress.egress[0].peers.at(0);
  CHECK(peer.pod_selector.has_value());  // both: those pods of those namespaces
  CHECK(peer.namespace_selector.has_value());
  CHECK(egress.egress[0].ports == std::vector<NetworkPolicyPort>{{Protocol::kTcp, PortRef{0, "dns"}, 0},
                                                                 {Protocol::kUdp, PortRef{}, 0},
                                                                 {Protocol::kSctp, PortRef{80, ""}, 0}});
  // An empty rule: every peer, every port.
  CHECK(egress.egress[1] == NetworkPolicyRule{});
  // policyTypes given: exactly those.
  auto only_egress = bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy,
                                                 R"({"metadata":{"name":"a","namespace":"x"},
                                                     "spec":{"policyTypes":["Egress"],"ingress":[{}]}})")
                         .first;
  CHECK_FALSE(only_egress.policy_ingress);
  CHECK(only_egress.policy_egress);
  // ipBlock CIDRs may have host bits set (the API accepts them): normalized.
  auto block = bothWays<NetworkPolicyInfo>(ObjectKind::kNetworkPolicy, R"({"metadata":{"name":"a","namespace":"x"},
    "spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"10.1.2.3/8","except":["10.9.9.9/16"]}}]}]}})");
  CHECK(block.first.ingress.at(0).peers.at(0).ip_block == IpBlock{"10.0.0.0/8", {"10.9.0.0/16"}});
}

TEST_CASE("cluster objects: label selectors match as the API says", "[cluster]") {
  LabelSelector all;
  CHECK(all.matches({}));
  CHECK(all.matches({{"a", "b"}}));
  LabelSelector sel;
  sel.match_labels = {{"app", "web"}};
  sel.match_expressions = {{"tier", SelectorOperator::kIn, {"front", "edge"}},
                           {"env", SelectorOperator::kNotIn, {"prod"}},
                           {"team", SelectorOperator::kExists, {}},
                           {"canary", SelectorOperator::kDoesNotExist, {}}};
  CHECK(sel.matches({{"app", "web"}, {"tier", "front"}, {"team", "a"}}));  // env absent: NotIn holds
  CHECK(sel.matches({{"app", "web"}, {"tier", "edge"}, {"env", "dev"}, {"team", ""}}));
  CHECK_FALSE(sel.matches({{"app", "web"}, {"tier", "front"}, {"env", "prod"}, {"team", "a"}}));
  CHECK_FALSE(sel.matches({{"app", "web"}, {"tier", "back"}, {"team", "a"}}));
  CHECK_FALSE(sel.matches({{"app", "web"}, {"team", "a"}}));  // In needs the label
  CHECK_FALSE(sel.matches({{"app", "web"}, {"tier", "front"}}));
  CHECK_FALSE(sel.matches({{"app", "web"}, {"tier", "front"}, {"team", "a"}, {"canary", "1"}}));
  CHECK_FALSE(sel.matches({{"app", "api"}, {"tier", "front"}, {"team", "a"}}));
}

namespace {

struct Refusal {
  ObjectKind kind;
  const char* json;
  const char* expect;       // in both messages
  const char* file_expect = nullptr;  // in the file's instead, when the two read the field differently
};

// One object of each kind that passes, to build the refusals from.
json base(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kService: return json::parse(kLoadBalancer);
    case ObjectKind::kEndpointSlice: return json::parse(kSlice);
    case ObjectKind::kNetworkPolicy: return json::parse(kPolicy);
    case ObjectKind::kPod: return json::parse(kPod);
    default: return json::parse(kNamespace);
  }
}

}  // namespace

TEST_CASE("cluster objects: bad objects are refused by both sources, the field named", "[cluster]") {
  using K = ObjectKind;
  // Each case: a JSON merge patch on a good object of the kind.
  const Refusal cases[] = {
      // Services.
      {K::kService, R"({"spec":{"type":"Magic"}})", "type: must be ClusterIP, NodePort, LoadBalancer or ExternalName"},
      {K::kService, R"({"spec":{"clusterIP":"10.96.0.300","clusterIPs":["10.96.0.300"]}})",
       "clusterIPs[0]: '10.96.0.300' is not an IP address"},
      {K::kService, R"({"spec":{"clusterIPs":["10.96.12.7","10.96.12.8"]}})", "at most one address per family"},
      {K::kService, R"({"spec":{"clusterIPs":["10.96.1.1"]}})", "clusterIPs: the first entry must be clusterIP"},
      {K::kService, R"({"spec":{"type":"ClusterIP","clusterIP":"None","clusterIPs":["None","10.96.1.1"]}})",
       "\"None\" (headless) must be the only entry"},
      {K::kService, R"({"spec":{"clusterIP":"None","clusterIPs":["None"]}})",
       "\"None\" (headless) is not allowed for type LoadBalancer"},
      {K::kService, R"({"spec":{"ports":[{"name":"http","port":0}]}})", "ports[0].port: must be between 1 and 65535, not 0"},
      {K::kService, R"({"spec":{"ports":[{"name":"http","port":70000}]}})", "ports[0].port: must be between 1 and 65535"},
      {K::kService, R"({"spec":{"ports":[{"name":"http","port":80,"targetPort":0}]}})",
       "ports[0].targetPort: must be a port number between 1 and 65535 or a port name, not 0"},
      {K::kService, R"({"spec":{"ports":[{"name":"http","port":80,"targetPort":"8080"}]}})",
       "\"8080\" is not a port name: must contain at least one letter (a port number is written without quotes)"},
      {K::kService, R"({"spec":{"ports":[{"name":"http","port":80,"nodePort":70000}]}})",
       "ports[0].nodePort: must be between 1 and 65535"},
      {K::kService, R"({"spec":{"type":"ClusterIP","ports":[{"name":"http","port":80,"nodePort":30080}]}})",
       "nodePort: is only for type NodePort or LoadBalancer"},
      {K::kService, R"({"spec":{"ports":[{"name":"a","port":80},{"name":"b","port":80,"protocol":"TCP"}]}})",
       "ports[1]: port 80/TCP is listed twice (also ports[0])"},
      {K::kService, R"({"spec":{"ports":[{"name":"a","port":80},{"name":"a","port":81}]}})",
       "ports[1].name: \"a\" is used twice"},
      {K::kService, R"({"spec":{"ports":[{"name":"a","port":80},{"port":81}]}})",
       "ports[1].name: is required when a service has more than one port"},
      {K::kService, R"({"spec":{"ports":[{"name":"a","port":80,"protocol":"ICMP"}]}})",
       "ports[0].protocol: must be TCP, UDP or SCTP, not \"ICMP\""},
      {K::kService, R"({"spec":{"ports":[]}})", "ports: is required"},
      {K::kService, R"({"spec":{"externalIPs":["198.51.100.300"]}})", "externalIPs[0]: '198.51.100.300' is not an IP"},
      {K::kService, R"({"spec":{"externalIPs":["224.0.0.5"]}})", "'224.0.0.5' is a multicast address"},
      {K::kService, R"({"status":{"loadBalancer":{"ingress":[{"ip":"0.0.0.0"}]}}})",
       "ingress[0].ip: '0.0.0.0' is the unspecified address"},
      {K::kService, R"({"spec":{"sessionAffinity":"Cookie"}})", "sessionAffinity: must be None or ClientIP"},
      {K::kService, R"({"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}}})",
       "timeoutSeconds: must be between 1 and 86400, not 0"},
      {K::kService, R"({"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":86401}}}})",
       "timeoutSeconds: must be between 1 and 86400"},
      {K::kService, R"({"spec":{"sessionAffinity":"None"}})", "sessionAffinityConfig: is only for sessionAffinity ClientIP"},
      {K::kService, R"({"spec":{"externalTrafficPolicy":"Global"}})", "externalTrafficPolicy: must be Cluster or Local"},
      {K::kService, R"({"spec":{"internalTrafficPolicy":"Nearby"}})", "internalTrafficPolicy: must be Cluster or Local"},
      {K::kService, R"({"spec":{"publishNotReadyAddresses":"yes"}})", "publishNotReadyAddresses: must be true or false"},
      {K::kService, R"({"spec":{"ports":"80"}})", "ports: must be a list of objects"},
      {K::kService, R"({"spec":{"ipFamilyPolicy":"DualStack"}})",
       "ipFamilyPolicy: must be SingleStack, PreferDualStack or RequireDualStack, not \"DualStack\""},
      {K::kService, R"({"spec":{"ipFamilies":["IPv5","IPv6"]}})", "ipFamilies[0]: must be IPv4 or IPv6, not \"IPv5\""},
      {K::kService, R"({"spec":{"ipFamilies":["IPv4","IPv4"]}})", "ipFamilies[1]: IPv4 is listed twice"},
      {K::kService, R"({"spec":{"ipFamilyPolicy":"SingleStack"}})", "ipFamilies: SingleStack takes one family, not 2"},
      {K::kService, R"({"spec":{"ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}})",
       "clusterIPs: SingleStack takes one cluster IP, not 2"},
      {K::kService, R"({"spec":{"ipFamilies":["IPv6","IPv4"]}})",
       "ipFamilies[0]: is IPv6 but clusterIPs[0] 10.96.12.7 is IPv4"},
      // EndpointSlices.
      {K::kEndpointSlice, R"({"addressType":"IPv5"})", "addressType: must be IPv4, IPv6 or FQDN"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["10.0.0.300"]}]})",
       "endpoints[0].addresses[0]: '10.0.0.300' is not an IP address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["fd00::1"]}]})", "'fd00::1' is not of addressType IPv4"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["224.0.0.1"]}]})", "'224.0.0.1' is a multicast address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["127.0.0.1"]}]})", "'127.0.0.1' is a loopback address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["169.254.3.4"]}]})", "'169.254.3.4' is a link-local address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["0.0.0.0"]}]})", "'0.0.0.0' is the unspecified address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["255.255.255.255"]}]})", "is the broadcast address"},
      {K::kEndpointSlice, R"({"addressType":"IPv6","endpoints":[{"addresses":["ff02::1"]}]})",
       "'ff02::1' is a multicast address"},
      {K::kEndpointSlice, R"({"addressType":"IPv6","endpoints":[{"addresses":["fe80::1"]}]})", "is a link-local address"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":[]}]})", "endpoints[0].addresses: must hold 1 to 100 addresses"},
      {K::kEndpointSlice, R"({"endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":"yes"}}]})",
       "endpoints[0].conditions.ready: expected a boolean, got a string",
       "endpoints[0].conditions.ready: must be true or false, not \"yes\""},
      {K::kEndpointSlice, R"({"ports":[{"name":"http","port":0}]})", "ports[0].port: must be between 1 and 65535, not 0"},
      {K::kEndpointSlice, R"({"ports":[{"name":"http","port":80,"protocol":"IGMP"}]})",
       "ports[0].protocol: must be TCP, UDP or SCTP"},
      {K::kEndpointSlice, R"({"ports":[{"name":"x","port":80},{"name":"x","port":81}]})",
       "ports[1].name: \"x\" is used twice"},
      // Pods' container ports.
      {K::kPod, R"({"spec":{"containers":[{"name":"c","ports":[{"containerPort":0}]}]}})",
       "containerPort: 0 is not a port", "containers[0].ports[0].containerPort: must be between 1 and 65535, not 0"},
      {K::kPod, R"({"spec":{"containers":[{"name":"c","ports":[{"containerPort":80,"protocol":"ICMP"}]}]}})",
       "protocol: must be TCP, UDP or SCTP, not \"ICMP\""},
      {K::kPod, R"({"spec":{"containers":[{"name":"c","ports":[{"containerPort":80,"name":"HTTP_PORT"}]}]}})",
       "name \"HTTP_PORT\" is not a port name"},
      // NetworkPolicies.
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"172.17.0.0/33"}}]}]}})",
       "ingress[0].from[0].ipBlock.cidr: '172.17.0.0/33' is not a CIDR"},
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"172.17.0.0/16","except":["10.0.0.0/24"]}}]}]}})",
       "ipBlock.except[0]: '10.0.0.0/24' is not a strict subset of cidr 172.17.0.0/16"},
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"172.17.0.0/16","except":["172.17.0.0/16"]}}]}]}})",
       "is not a strict subset"},
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"172.17.0.0/16","except":["172.17.1.0/33"]}}]}]}})",
       "except[0]: '172.17.1.0/33' is not a CIDR"},
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8"},"podSelector":{}}]}]}})",
       "ingress[0].from[0]: ipBlock may not be combined with podSelector or namespaceSelector"},
      {K::kNetworkPolicy, R"({"spec":{"ingress":[{"from":[{}]}]}})",
       "from[0]: must give podSelector, namespaceSelector or ipBlock"},
      {K::kNetworkPolicy, R"({"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Equals","values":["b"]}]}}})",
       "podSelector.matchExpressions[0].operator: must be In, NotIn, Exists or DoesNotExist, not \"Equals\""},
      {K::kNetworkPolicy, R"({"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["b"]}]}}})",
       "matchExpressions[0].values: must be empty for operator Exists"},
      {K::kNetworkPolicy,
       R"({"spec":{"ingress":[{"from":[{"namespaceSelector":{"matchExpressions":[{"key":"a","operator":"DoesNotExist","values":["b"]}]}}]}]}})",
       "values: must be empty for operator DoesNotExist"},
      {K::kNetworkPolicy, R"({"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}})",
       "values: must hold at least one value for operator In"},
      {K::kNetworkPolicy, R"({"spec":{"podSelector":{"matchExpressions":[{"key":"","operator":"Exists"}]}}})",
       "matchExpressions[0].key: must not be empty"},
      {K::kNetworkPolicy, R"({"spec":{"podSelector":{"matchLabels":{"a":1}}}})", "matchLabels.a: must be a string"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":0}]}]}})",
       "egress[0].ports[0].port: must be a port number between 1 and 65535 or a port name, not 0"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":65536}]}]}})", "ports[0].port: must be a port number"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":80,"protocol":"ICMP"}]}]}})",
       "ports[0].protocol: must be TCP, UDP or SCTP"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":32000,"endPort":31000}]}]}})",
       "ports[0].endPort: 31000 is below port 32000"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":"http","endPort":31000}]}]}})",
       "endPort: cannot follow a named port (\"http\")"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"endPort":31000}]}]}})", "endPort: needs port"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":80,"endPort":70000}]}]}})",
       "endPort: must be between 1 and 65535"},
      {K::kNetworkPolicy, R"({"spec":{"egress":[{"ports":[{"port":"no_such_name!"}]}]}})", "is not a port name"},
      {K::kNetworkPolicy, R"({"spec":{"policyTypes":["Ingress","Sideways"]}})",
       "policyTypes[1]: must be Ingress or Egress, not \"Sideways\""},
  };
  for (const auto& c : cases) {
    json o = base(c.kind);
    o.merge_patch(json::parse(c.json));
    INFO(kubeKindName(c.kind) << " with " << c.json);
    auto k = parseKubeObject(c.kind, o.dump());
    REQUIRE_FALSE(k.ok());
    CHECK_THAT(k.error(), Catch::Contains(c.expect));
    // The message names the object, so the log line finds it.
    CHECK_THAT(k.error(), Catch::Contains(std::string("malformed ") + kubeKindName(c.kind) + " " +
                                          o["metadata"]["namespace"].get<std::string>() + "/"));
    auto f = viaFile(c.kind, o);
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error(), Catch::Contains(c.file_expect ? c.file_expect : c.expect));
    CHECK_THAT(f.error(), Catch::StartsWith("c.json."));
  }
}

TEST_CASE("cluster objects: the file refuses unknown fields where the API ignores newer ones", "[cluster]") {
  struct Case {
    ObjectKind kind;
    const char* patch;
    const char* field;
  };
  const Case cases[] = {
      {ObjectKind::kService, R"({"spec":{"ports":[{"name":"http","port":80,"prot":"TCP"}]}})", "ports[0].prot"},
      {ObjectKind::kService, R"({"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSecs":5}}}})",
       "clientIP.timeoutSecs"},
      {ObjectKind::kEndpointSlice, R"({"endpoints":[{"addresses":["10.0.0.1"],"condition":{"ready":true}}]})",
       "endpoints[0].condition"},
      {ObjectKind::kNetworkPolicy, R"({"spec":{"podSelector":{"matchLabel":{"a":"b"}}}})", "podSelector.matchLabel"},
      {ObjectKind::kNetworkPolicy, R"({"spec":{"ingress":[{"form":[]}]}})", "ingress[0].form"},
      {ObjectKind::kPod, R"({"spec":{"containers":[{"name":"c","ports":[{"containerPort":80,"proto":"TCP"}]}]}})",
       "ports[0].proto"},
  };
  for (const auto& c : cases) {
    json o = base(c.kind);
    o.merge_patch(json::parse(c.patch));
    INFO(c.patch);
    CHECK(parseKubeObject(c.kind, o.dump()).ok());
    auto f = viaFile(c.kind, o);
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error(), Catch::Contains(std::string(c.field) + ": unknown field"));
  }
}

TEST_CASE("cluster objects: the file implies every namespace its objects name", "[cluster]") {
  auto snap = parseClusterFile(R"(
namespaces:
  - {name: shop, labels: {team: a}}
pods:
  - {namespace: shop, name: a}
  - {namespace: tools, name: b}
services:
  - {name: s, clusterIP: 10.96.0.9, ports: [{port: 80}]}
networkPolicies:
  - {namespace: netpol-x, name: deny, podSelector: {}}
)",
                               "c.yaml");
  REQUIRE(snap.ok());
  CHECK(snap->namespaces.size() == 4);
  CHECK(snap->namespaces.at("shop").labels ==
        std::map<std::string, std::string>{{"team", "a"}, {kNamespaceNameLabel, "shop"}});
  for (const char* ns : {"tools", "default", "netpol-x"})
    CHECK(snap->namespaces.at(ns).labels == std::map<std::string, std::string>{{kNamespaceNameLabel, ns}});
  auto twice = parseClusterFile("namespaces: [{name: a}, {name: a}]", "c.yaml");
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.error(), Catch::Contains("namespace a is listed twice"));
  auto no_service = parseClusterFile("endpointSlices: [{name: e, endpoints: []}]", "c.yaml");
  REQUIRE_FALSE(no_service.ok());
  CHECK_THAT(no_service.error(), Catch::Contains("endpointSlices[0].service: is required"));
  // The EndpointSlice controller's label names the service as well.
  auto labelled = parseClusterFile("endpointSlices: [{name: e, labels: {kubernetes.io/service-name: web}}]", "c.yaml");
  REQUIRE(labelled.ok());
  CHECK(labelled->slices.at("default/e").service_name == "web");
}

TEST_CASE("cluster objects: a YAML stream decodes with the Kubernetes decoder, object by object", "[cluster]") {
  std::string stream = std::string(R"(# kubectl apply -f style
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {team: a}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: x}
spec:
  clusterIP: 10.96.0.20
  ports: [{name: http, port: 80, targetPort: http}, {name: dns, port: 53, protocol: UDP}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: x}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: x}
spec:
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [11.0.0.0/8]}}]}]
---
---
apiVersion: v1
kind: List
items:
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-1, namespace: x, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    endpoints: [{addresses: [10.244.1.5]}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: a, namespace: x, labels: {pod: a}}
    spec: {containers: [{name: c, ports: [{name: http, containerPort: 80}]}]}
)");
  auto docs = decodeKubeDocuments(stream, "f.yaml");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 6);
  const auto& d = *docs;
  CHECK(d[0].object.ok());
  CHECK(d[0].object.kind == ObjectKind::kNamespace);
  CHECK(std::get<NamespaceInfo>(d[0].object.info).labels.at("team") == "a");
  REQUIRE(d[1].object.ok());
  const auto& svc = std::get<ServiceInfo>(d[1].object.info);
  CHECK(svc.ports.at(1) == ServicePort{"dns", Protocol::kUdp, 53, PortRef{53, ""}, 0});
  CHECK(svc.ports.at(0).target_port == PortRef{0, "http"});
  // Another kind: refused with what the agent reads.
  CHECK_FALSE(d[2].object.ok());
  CHECK(d[2].kind == "Deployment");
  CHECK(d[2].object.name == "web");
  CHECK_THAT(d[2].object.error, Catch::Contains("not an object the agent reads"));
  CHECK(d[2].where == "f.yaml document 3");
  // A bad object: refused alone, with the field.
  CHECK_FALSE(d[3].object.ok());
  CHECK(d[3].object.describe() == "NetworkPolicy x/bad");
  CHECK_THAT(d[3].object.error, Catch::Contains("spec.ingress[0].from[0].ipBlock.except[0]"));
  // The List's items, one by one.
  CHECK(d[4].where == "f.yaml document 5 items[0]");
  REQUIRE(d[4].object.ok());
  CHECK(std::get<EndpointSliceInfo>(d[4].object.info).service_name == "web");
  REQUIRE(d[5].object.ok());
  CHECK(std::get<PodInfo>(d[5].object.info).ports == std::vector<ContainerPort>{{"http", 80, Protocol::kTcp}});
  // The same objects as JSON, one after another.
  auto json_docs = decodeKubeDocuments(std::string(kPolicy) + "\n" + kNamespace + kSlice, "f.json");
  REQUIRE(json_docs.ok());
  REQUIRE(json_docs->size() == 3);
  for (const auto& doc : *json_docs) CHECK(doc.object.ok());
  CHECK(toJson((*json_docs)[0].object)["kind"] == "NetworkPolicy");
  // No namespace: "default", as kubectl applies it (a Namespace has none).
  auto no_ns = decodeKubeDocuments("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"
                                   "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: y}\n",
                                   "f.yaml");
  REQUIRE(no_ns.ok());
  REQUIRE(no_ns->size() == 2);
  REQUIRE((*no_ns)[0].object.ok());
  CHECK((*no_ns)[0].object.describe() == "Service default/web");
  CHECK(std::get<ServiceInfo>((*no_ns)[0].object.info).ns == "default");
  REQUIRE((*no_ns)[1].object.ok());
  CHECK((*no_ns)[1].object.ns.empty());
  // Not YAML or JSON at all: an error for the text.
  CHECK_FALSE(decodeKubeDocuments("a: [1, 2", "f.yaml").ok());
  CHECK_FALSE(decodeKubeDocuments("{\"a\": ", "f.json").ok());
  auto scalar = decodeKubeDocuments("just text", "f.yaml");
  REQUIRE(scalar.ok());
  REQUIRE(scalar->size() == 1);
  CHECK_THAT((*scalar)[0].object.error, Catch::Contains("expected a Kubernetes object"));
}
