// Decoding of Kubernetes objects, list pages and watch events into the
// ClusterSource structs: the fields the agent reads, the defaults Kubernetes
// documents, and malformed objects refused with their name and the reason.
#include <catch2/catch.hpp>

#include <sstream>

#include <nlohmann/json.hpp>

#include "control/kube_objects.h"

using namespace dpu::control;

namespace {

const char* kNode = R"({"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a","resourceVersion":"42",
  "labels":{"kubernetes.io/hostname":"node-a"},"annotations":{"dpu-cni.io/tunnel-ip":"100.64.0.1",
  "dpu-cni.io/ipsec-public-key":"AAAA","dpu-cni.io/ipsec-epoch":"7","dpu-cni.io/ipsec-mode":"on","dpu-cni.io/port-keys":"{\"10.244.1.5\":3,\"fd00:10:244:1::5\":3}",
  "other":{"x":1}},"managedFields":[{"manager":"kubelet"}]},
  "spec":{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24","fd00:10:244:1::/64"]},
  "status":{"addresses":[{"type":"InternalIP","address":"192.168.1.1"}]}})";

const char* kPod = R"({"metadata":{"name":"web-1","namespace":"default","uid":"u-1","resourceVersion":"7",
  "labels":{"app":"web","tier":"front"}},"spec":{"nodeName":"node-a","hostNetwork":false,
  "containers":[{"name":"c","ports":[{"containerPort":80}]}]},
  "status":{"phase":"Running","podIP":"10.244.1.5","podIPs":[{"ip":"10.244.1.5"},{"ip":"fd00:10:244:1::5"}]}})";

const char* kService = R"({"metadata":{"name":"web","namespace":"default"},"spec":{"type":"NodePort",
  "clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],"sessionAffinity":"ClientIP",
  "ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":8080,"nodePort":30080},
           {"name":"dns","protocol":"UDP","port":53,"targetPort":"dns"},{"name":"https","port":443}]}})";

const char* kSlice = R"({"metadata":{"name":"web-abc","namespace":"default",
  "labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4",
  "endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":true,"serving":true,"terminating":false},
                "nodeName":"node-a","targetRef":{"kind":"Pod","name":"web-1"}},
               {"addresses":["10.244.2.7"],"conditions":{"ready":false,"terminating":true}},
               {"addresses":["10.244.3.9"]}],
  "ports":[{"name":"http","protocol":"TCP","port":8080},{"name":"any"}]})";

const char* kPolicy = R"({"metadata":{"name":"deny","namespace":"prod"},"spec":{"podSelector":{},
  "policyTypes":["Ingress"],"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8"}}],"ports":[{"port":80,"x":1.5}]}]}})";

}  // namespace

TEST_CASE("kube objects: a Node gives its name, pod CIDRs, tunnel IP, key and labels", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kNode, kNode);
  REQUIRE(r.ok());
  const auto& n = std::get<NodeInfo>(r->info);
  CHECK(n.name == "node-a");
  CHECK(r->resource_version == "42");
  CHECK(n.tunnel_ip == "100.64.0.1");
  CHECK(n.ipsec_public_key == "AAAA");
  CHECK(n.ipsec_epoch == 7);
  CHECK(n.ipsec_mode == "on");
  CHECK(n.pod_cidrs == std::vector<std::string>{"10.244.1.0/24", "fd00:10:244:1::/64"});
  CHECK(n.labels.at("kubernetes.io/hostname") == "node-a");
  CHECK(n.port_keys == std::map<std::string, uint32_t>{{"10.244.1.5", 3}, {"fd00:10:244:1::5", 3}});
}

TEST_CASE("kube objects: a Node without podCIDRs falls back to podCIDR", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kNode, R"({"metadata":{"name":"n"},"spec":{"podCIDR":"10.1.0.0/16"}})");
  REQUIRE(r.ok());
  CHECK(std::get<NodeInfo>(r->info).pod_cidrs == std::vector<std::string>{"10.1.0.0/16"});
  CHECK(std::get<NodeInfo>(r->info).tunnel_ip.empty());
}

TEST_CASE("kube objects: a Pod gives node, IPs, labels and uid", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kPod, kPod);
  REQUIRE(r.ok());
  const auto& p = std::get<PodInfo>(r->info);
  CHECK(p.ns == "default");
  CHECK(p.name == "web-1");
  CHECK(p.uid == "u-1");
  CHECK(p.node_name == "node-a");
  CHECK(p.ips == std::vector<std::string>{"10.244.1.5", "fd00:10:244:1::5"});
  CHECK(p.labels.size() == 2);
  CHECK_FALSE(p.host_network);
  auto single = parseKubeObject(ObjectKind::kPod,
                                R"({"metadata":{"name":"a","namespace":"b"},"status":{"podIP":"10.0.0.1"}})");
  REQUIRE(single.ok());
  CHECK(std::get<PodInfo>(single->info).ips == std::vector<std::string>{"10.0.0.1"});
}

TEST_CASE("kube objects: a Service gives type, IPs and ports with defaults", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kService, kService);
  REQUIRE(r.ok());
  const auto& s = std::get<ServiceInfo>(r->info);
  CHECK(s.type == ServiceType::kNodePort);
  CHECK(s.cluster_ips == std::vector<std::string>{"10.96.0.10"});
  CHECK(s.session_affinity == SessionAffinity::kClientIP);
  CHECK(s.affinity_timeout_seconds == 10800);
  REQUIRE(s.ports.size() == 3);
  CHECK(s.ports[0] == ServicePort{"http", Protocol::kTcp, 80, PortRef{8080, ""}, 30080});
  CHECK(s.ports[1] == ServicePort{"dns", Protocol::kUdp, 53, PortRef{0, "dns"}, 0});
  CHECK(s.ports[2] == ServicePort{"https", Protocol::kTcp, 443, PortRef{443, ""}, 0});  // protocol and targetPort default
  auto headless = parseKubeObject(ObjectKind::kService,
                                  R"({"metadata":{"name":"h","namespace":"d"},"spec":{"clusterIP":"None"}})");
  REQUIRE(headless.ok());
  CHECK(std::get<ServiceInfo>(headless->info).type == ServiceType::kClusterIP);
  CHECK(std::get<ServiceInfo>(headless->info).headless);
  CHECK(std::get<ServiceInfo>(headless->info).cluster_ips.empty());
}

TEST_CASE("kube objects: an EndpointSlice gives endpoints with the documented condition defaults", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kEndpointSlice, kSlice);
  REQUIRE(r.ok());
  const auto& s = std::get<EndpointSliceInfo>(r->info);
  CHECK(s.service_name == "web");
  CHECK(s.address_type == AddressType::kIPv4);
  REQUIRE(s.endpoints.size() == 3);
  CHECK(s.endpoints[0] == EndpointInfo{{"10.244.1.5"}, true, true, false, "node-a", {"Pod", "", "web-1"}});
  // serving unset: true, as discovery/v1 says of a nil condition (and kube-proxy reads it).
  CHECK(s.endpoints[1] == EndpointInfo{{"10.244.2.7"}, false, true, true, "", {}});
  // No conditions at all: ready (unknown is treated as ready), serving, not terminating.
  CHECK(s.endpoints[2] == EndpointInfo{{"10.244.3.9"}, true, true, false, "", {}});
  REQUIRE(s.ports.size() == 2);
  CHECK(s.ports[0] == EndpointSliceInfo::Port{"http", Protocol::kTcp, 8080});
  CHECK(s.ports[1] == EndpointSliceInfo::Port{"any", Protocol::kTcp, 0});
}

TEST_CASE("kube objects: a NetworkPolicy is decoded into its model", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kNetworkPolicy, kPolicy);
  REQUIRE(r.ok());
  const auto& p = std::get<NetworkPolicyInfo>(r->info);
  CHECK(p.ns == "prod");
  CHECK(p.name == "deny");
  CHECK(p.pod_selector == LabelSelector{});
  CHECK(p.policy_ingress);
  CHECK_FALSE(p.policy_egress);
  REQUIRE(p.ingress.size() == 1);
  CHECK(p.ingress[0].peers == std::vector<NetworkPolicyPeer>{{std::nullopt, std::nullopt, IpBlock{"10.0.0.0/8", {}}}});
  // An unknown field inside a port ("x", a newer API's) is ignored, as a client must.
  CHECK(p.ingress[0].ports == std::vector<NetworkPolicyPort>{{Protocol::kTcp, PortRef{80, ""}, 0}});
}

TEST_CASE("kube objects: a Namespace gives its labels", "[kube]") {
  auto r = parseKubeObject(ObjectKind::kNamespace, R"({"kind":"Namespace","apiVersion":"v1","metadata":{
    "name":"prod","labels":{"kubernetes.io/metadata.name":"prod","env":"prod"}},"status":{"phase":"Active"}})");
  REQUIRE(r.ok());
  CHECK(r->ns.empty());
  const auto& n = std::get<NamespaceInfo>(r->info);
  CHECK(n.name == "prod");
  CHECK(n.labels.at("env") == "prod");
  CHECK(r->describe() == "Namespace prod");
}

TEST_CASE("kube objects: malformed objects are refused with the object's name and the reason", "[kube]") {
  struct Case {
    ObjectKind kind;
    const char* json;
    const char* reason;
  };
  const Case cases[] = {
      {ObjectKind::kPod, R"({"metadata":{"namespace":"d"}})", "metadata.name is missing"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p"}})", "metadata.namespace is missing"},
      {ObjectKind::kPod, R"({"metadata":{"name":7,"namespace":"d"}})", "metadata.name: expected a string"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p","namespace":"d"},"status":{"podIPs":[{"ip":"10.0.0.300"}]}})",
       "'10.0.0.300' is not an IP address"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p","namespace":"d","labels":{"a":1}}})",
       "metadata.labels[a]: expected a string"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p","namespace":"d"},"spec":{"hostNetwork":"yes"}})",
       "spec.hostNetwork: expected a boolean"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p","namespace":"d"},"spec":[]})", "spec: expected an object"},
      {ObjectKind::kNode, R"({"metadata":{"name":"n","annotations":{"dpu-cni.io/tunnel-ip":"banana"}}})",
       "tunnel-ip: 'banana' is not an IP address"},
      {ObjectKind::kNode, R"({"metadata":{"name":"n","annotations":{"dpu-cni.io/port-keys":"{\"10.0.0.1\":0}"}}})",
       "port-keys]: the key of 10.0.0.1 must be a number 1..32767"},
      {ObjectKind::kNode, R"({"metadata":{"name":"n","annotations":{"dpu-cni.io/port-keys":{"10.0.0.1":1}}}})",
       "dpu-cni.io/port-keys]: expected a string"},
      {ObjectKind::kNode, R"({"metadata":{"name":"n"},"spec":{"podCIDRs":["10.244.1.1/24"]}})",
       "'10.244.1.1/24' is not a CIDR"},
      {ObjectKind::kNode, R"({"metadata":{"name":"n"},"spec":{"podCIDRs":"10.244.1.0/24"}})",
       "spec.podCIDRs: expected an array"},
      {ObjectKind::kService, R"({"metadata":{"name":"s","namespace":"d"},"spec":{"ports":[{"port":70000}]}})",
       "spec.ports[0].port: must be between 1 and 65535, not 70000"},
      {ObjectKind::kService, R"({"metadata":{"name":"s","namespace":"d"},"spec":{"ports":[{"port":80,"protocol":"ICMP"}]}})",
       "spec.ports[0].protocol: must be TCP, UDP or SCTP, not \"ICMP\""},
      {ObjectKind::kService, R"({"metadata":{"name":"s","namespace":"d"},"spec":{"type":"Magic"}})",
       "spec.type: must be ClusterIP"},
      {ObjectKind::kService, R"({"metadata":{"name":"s","namespace":"d"},"spec":{"ports":[{"name":"x"}]}})",
       "spec.ports[0].port: is required"},
      {ObjectKind::kService, R"({"metadata":{"name":"s","namespace":"d"},"spec":7})", "spec must be an object"},
      {ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d"},"addressType":"IPv6",
        "endpoints":[{"addresses":["10.0.0.1"]}]})", "is not of addressType IPv6"},
      {ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d"},"addressType":"IPv4",
        "endpoints":[{"addresses":[]}]})", "endpoints[0].addresses: must hold 1 to 100 addresses, not 0"},
      {ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d"},"addressType":7})",
       "addressType: expected a string, got a number"},
      {ObjectKind::kEndpointSlice, R"({"metadata":{"name":"e","namespace":"d"},"addressType":"IPv4",
        "endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":"yes"}}]})",
       "endpoints[0].conditions.ready: expected a boolean, got a string"},
      {ObjectKind::kNetworkPolicy, R"({"metadata":{"name":"n","namespace":"d"},"spec":{"ingress":{}}})",
       "spec.ingress: must be a list of objects"},
      {ObjectKind::kNamespace, R"({"metadata":{"labels":{"a":"b"}}})", "metadata.name is missing"},
      {ObjectKind::kPod, R"({"metadata":{"name":"p","namespace":"d"},"spec":{"containers":{}}})",
       "spec.containers: expected an array"},
  };
  for (const auto& c : cases) {
    INFO(c.json);
    auto r = parseKubeObject(c.kind, c.json);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(c.reason));
    CHECK_THAT(r.error(), Catch::Contains("malformed"));
  }
  // The message names the object.
  auto r = parseKubeObject(ObjectKind::kPod, R"({"metadata":{"name":"web-9","namespace":"shop"},"status":{"podIP":"x"}})");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("Pod shop/web-9"));
}

TEST_CASE("kube objects: bad JSON is an error, never a crash", "[kube]") {
  for (const char* text : {"", "{", "[]", "42", R"({"metadata":)", R"({"metadata":{"name":"a"})",
                           "{\"metadata\":{\"name\":\"\xff\"}}"}) {
    INFO(text);
    CHECK_FALSE(parseKubeObject(ObjectKind::kNode, text).ok());
  }
  std::string deep(200, '[');
  CHECK_FALSE(parseKubeObject(ObjectKind::kNode, "{\"a\":" + deep).ok());
}

TEST_CASE("kube lists: items stream out, malformed ones marked, continue and resourceVersion read", "[kube]") {
  std::string page = std::string(R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"100",)") +
                     R"("continue":"abc=="},"items":[)" + kPod + "," +
                     R"({"metadata":{"name":"bad","namespace":"default"},"status":{"podIP":"nope"}},)" + kPod + "]}";
  std::vector<KubeObject> got;
  std::istringstream in(page);
  auto r = parseKubeList(ObjectKind::kPod, in, [&](KubeObject&& o) { got.push_back(std::move(o)); });
  REQUIRE(r.ok());
  CHECK(r->resource_version == "100");
  CHECK(r->continue_token == "abc==");
  CHECK(r->items == 3);
  REQUIRE(got.size() == 3);
  CHECK(got[0].ok());
  CHECK_FALSE(got[1].ok());
  CHECK(got[1].describe() == "Pod default/bad");
  CHECK(got[2].ok());

  auto status = parseKubeList(ObjectKind::kPod, std::string_view(R"({"kind":"Status","code":410,"message":"gone"})"),
                              [](KubeObject&&) {});
  REQUIRE_FALSE(status.ok());
  CHECK_THAT(status.error(), Catch::Contains("410"));
  CHECK_FALSE(parseKubeList(ObjectKind::kPod, std::string_view(R"({"items":{}})"), [](KubeObject&&) {}).ok());
  CHECK_FALSE(parseKubeList(ObjectKind::kPod, std::string_view(R"({"items":[{"metadata":)"), [](KubeObject&&) {}).ok());
}

TEST_CASE("kube watch events: types, bookmarks, 410 errors and bad lines", "[kube]") {
  auto node = parseKubeWatchEvent(ObjectKind::kNode, std::string(R"({"type":"MODIFIED","object":)") + kNode + "}");
  REQUIRE(node.ok());
  CHECK(std::get<NodeInfo>(node->object.info).port_keys.size() == 2);
  auto added = parseKubeWatchEvent(ObjectKind::kPod, std::string(R"({"type":"ADDED","object":)") + kPod + "}");
  REQUIRE(added.ok());
  CHECK(added->type == KubeWatchEvent::Type::kAdded);
  CHECK(added->object.ok());
  CHECK(added->object.resource_version == "7");

  auto bookmark = parseKubeWatchEvent(
      ObjectKind::kPod, R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12345"}}})");
  REQUIRE(bookmark.ok());
  CHECK(bookmark->type == KubeWatchEvent::Type::kBookmark);
  CHECK(bookmark->object.resource_version == "12345");

  auto gone = parseKubeWatchEvent(
      ObjectKind::kPod,
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})");
  REQUIRE(gone.ok());
  CHECK(gone->type == KubeWatchEvent::Type::kError);
  CHECK(gone->status.code == 410);
  CHECK(gone->status.reason == "Expired");

  // The object of a DELETED event only needs its name.
  auto deleted = parseKubeWatchEvent(
      ObjectKind::kPod, R"({"type":"DELETED","object":{"metadata":{"name":"p","namespace":"d"},"status":{"podIP":"x"}}})");
  REQUIRE(deleted.ok());
  CHECK(deleted->object.ok());

  auto malformed = parseKubeWatchEvent(
      ObjectKind::kPod, R"({"type":"MODIFIED","object":{"metadata":{"name":"p","namespace":"d"},"status":{"podIP":"x"}}})");
  REQUIRE(malformed.ok());
  CHECK_FALSE(malformed->object.ok());

  CHECK_FALSE(parseKubeWatchEvent(ObjectKind::kPod, R"({"type":"EXPLODED","object":{}})").ok());
  CHECK_FALSE(parseKubeWatchEvent(ObjectKind::kPod, R"({"type":"ADDED"})").ok());
  CHECK_FALSE(parseKubeWatchEvent(ObjectKind::kPod, R"({"type":"MODIFIED","object":{"kind":")").ok());
}

TEST_CASE("kube fingerprints: change with what the agent reads, not with the rest", "[kube]") {
  auto a = parseKubeObject(ObjectKind::kPod, kPod);
  std::string other = kPod;
  other.replace(other.find("Running"), 7, "Pending");  // status.phase is not read
  auto b = parseKubeObject(ObjectKind::kPod, other);
  std::string moved = kPod;
  for (size_t at; (at = moved.find("10.244.1.5")) != std::string::npos;) moved.replace(at, 10, "10.244.1.6");
  auto c = parseKubeObject(ObjectKind::kPod, moved);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(kubeFingerprint(*a) == kubeFingerprint(*b));
  CHECK(kubeFingerprint(*a) != kubeFingerprint(*c));
}

TEST_CASE("kube status bodies are read for error messages", "[kube]") {
  auto st = parseKubeStatus(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"x\" is forbidden","reason":"Forbidden","code":403})");
  CHECK(st.code == 403);
  CHECK(st.reason == "Forbidden");
  CHECK(parseKubeStatus("not json").code == 0);
}

TEST_CASE("kube objects: the IPsec epoch annotation is a decimal number 1..2^32-1, or the Node is malformed", "[kube]") {
  auto node = [](const std::string& epoch) {
    return R"({"metadata":{"name":"n","annotations":{"dpu-cni.io/ipsec-epoch":)" + epoch + R"(}},"spec":{}})";
  };
  auto ok = parseKubeObject(ObjectKind::kNode, node("\"4294967295\""));
  REQUIRE(ok.ok());
  CHECK(std::get<NodeInfo>(ok->info).ipsec_epoch == 4294967295u);
  for (const std::string bad : {"\"0\"", "\"-1\"", "\"4294967296\"", "\"7a\"", "\"07\"", "\"\"", "7"}) {
    auto r = parseKubeObject(ObjectKind::kNode, node(bad));
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("metadata.annotations[dpu-cni.io/ipsec-epoch]"));
  }
  // A Node without it has epoch 0: no key published.
  auto none = parseKubeObject(ObjectKind::kNode, R"({"metadata":{"name":"n"},"spec":{}})");
  REQUIRE(none.ok());
  CHECK(std::get<NodeInfo>(none->info).ipsec_epoch == 0);
}
