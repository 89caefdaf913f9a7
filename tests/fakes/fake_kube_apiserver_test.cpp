// The fake Kubernetes API server against the behaviour of the real one that
// clients (kubectl, our agent) depend on: discovery, the REST verbs at their
// real paths, decoding and field validation, strategic merge patch, RBAC with
// the real 403 Status, selectors on lists and watches, graceful pod deletion,
// namespace termination, Tables, the controllers of the lab mode, and
// dual-stack Services (fake_kube_services.h): service CIDRs, the defaulting,
// refusals and update rules of ipFamilyPolicy, ipFamilies and clusterIPs, and
// an EndpointSlice per family.
#include <catch2/catch.hpp>

#include <cpprest/http_client.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fake_kube_apiserver.h"
#include "fake_kube_schema.h"

using namespace dpu::fakes;
using nlohmann::json;
namespace http = web::http;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

struct Response {
  int code = 0;
  json body;
  std::string text;
  std::string warning;
};

class Client {
 public:
  Client(const std::string& url, std::string token = "") : client_(web::uri(url)), token_(std::move(token)) {}
  Response call(const http::method& m, const std::string& path, const std::string& body = "",
                const std::string& content_type = "application/json", const std::string& accept = "") {
    http::http_request req(m);
    req.set_request_uri(web::uri(path));
    if (!token_.empty()) req.headers().add("Authorization", "Bearer " + token_);
    if (!accept.empty()) req.headers().add("Accept", accept);
    if (!body.empty()) req.set_body(body, content_type);
    auto resp = client_.request(req).get();
    Response r;
    r.code = resp.status_code();
    r.text = resp.extract_utf8string(true).get();
    if (resp.headers().has("Warning")) r.warning = resp.headers()["Warning"];
    r.body = json::parse(r.text, nullptr, false);
    return r;
  }
  Response get(const std::string& p, const std::string& accept = "") { return call(http::methods::GET, p, "", "", accept); }
  Response post(const std::string& p, const json& b) { return call(http::methods::POST, p, b.dump()); }
  Response put(const std::string& p, const json& b) { return call(http::methods::PUT, p, b.dump()); }
  Response patch(const std::string& p, const json& b, const std::string& type) {
    return call(http::methods::PATCH, p, b.dump(), type);
  }
  Response del(const std::string& p, const json& b = nullptr) {
    return call(http::methods::DEL, p, b.is_null() ? "" : b.dump());
  }

 private:
  web::http::client::http_client client_;
  std::string token_;
};

json ns(const std::string& name) { return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}}; }

json pod(const std::string& name, const std::string& node = "", json labels = {{"app", "web"}}) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox:1.36"}}}}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

json node(const std::string& name, json labels = json::object(), json taints = json::array()) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!taints.empty()) n["spec"]["taints"] = taints;
  return n;
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text) {
    static int n = 0;
    path = fs::temp_directory_path() / ("fake_kube_test." + std::to_string(getpid()) + "." + std::to_string(n++));
    std::ofstream(path) << text;
  }
  ~TempFile() { fs::remove(path); }
};

}  // namespace

TEST_CASE("fake API server: discovery answers as kubectl expects", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  auto api = c.get("/api");
  CHECK(api.code == 200);
  CHECK(api.body["kind"] == "APIVersions");
  CHECK(api.body["versions"] == json::array({"v1"}));
  auto groups = c.get("/apis");
  CHECK(groups.body["kind"] == "APIGroupList");
  std::vector<std::string> names;
  for (const auto& g : groups.body["groups"]) names.push_back(g["name"]);
  CHECK(names == std::vector<std::string>{"discovery.k8s.io", "networking.k8s.io"});
  auto core = c.get("/api/v1");
  REQUIRE(core.body["kind"] == "APIResourceList");
  std::set<std::string> core_resources;
  for (const auto& r : core.body["resources"]) core_resources.insert(r["name"]);
  for (const char* r : {"namespaces", "nodes", "pods", "pods/status", "services", "nodes/status"})
    CHECK(core_resources.count(r) == 1);
  auto net = c.get("/apis/networking.k8s.io/v1");
  CHECK(net.body["resources"][0]["name"] == "networkpolicies");
  CHECK(net.body["resources"][0]["shortNames"] == json::array({"netpol"}));
  CHECK(c.get("/version").body["gitVersion"] == "v1.32.0");
  CHECK(c.get("/healthz").text == "ok");
  // OpenAPI v3: every kind's PATCH declares fieldValidation (kubectl then
  // leaves validation to the server).
  auto root = c.get("/openapi/v3");
  REQUIRE(root.body["paths"].contains("api/v1"));
  auto doc = c.get("/openapi/v3/api/v1");
  auto& p = doc.body["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
  CHECK(p["patch"]["x-kubernetes-group-version-kind"]["kind"] == "Pod");
  CHECK(p["parameters"][0]["name"] == "fieldValidation");
  CHECK(c.get("/apis/apps/v1").code == 404);
  CHECK(c.get("/openapi/v2").code == 404);
}

TEST_CASE("fake API server: create, get, list, update and delete at the real paths", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  // A namespaced object needs its namespace.
  auto missing = c.post("/api/v1/namespaces/team/pods", pod("web"));
  CHECK(missing.code == 404);
  CHECK(missing.body["message"] == "namespaces \"team\" not found");
  REQUIRE(c.post("/api/v1/namespaces", ns("team")).code == 201);
  auto made = c.post("/api/v1/namespaces/team/pods", pod("web"));
  REQUIRE(made.code == 201);
  CHECK(made.body["metadata"]["namespace"] == "team");
  CHECK(!made.body["metadata"]["uid"].get<std::string>().empty());
  CHECK(made.body["status"]["phase"] == "Pending");
  CHECK(made.body["spec"]["restartPolicy"] == "Always");
  auto again = c.post("/api/v1/namespaces/team/pods", pod("web"));
  CHECK(again.code == 409);
  CHECK(again.body["reason"] == "AlreadyExists");
  CHECK(again.body["message"] == "pods \"web\" already exists");
  auto got = c.get("/api/v1/namespaces/team/pods/web");
  CHECK(got.code == 200);
  CHECK(got.body["metadata"]["name"] == "web");
  CHECK(c.get("/api/v1/namespaces/other/pods/web").code == 404);
  CHECK(c.get("/api/v1/pods").body["items"].size() == 1);
  CHECK(c.get("/api/v1/namespaces/team/pods").body["items"].size() == 1);
  CHECK(c.get("/api/v1/namespaces/default/pods").body["items"].size() == 0);
  // A stale resourceVersion on update is a conflict.
  json stale = got.body;
  stale["metadata"]["labels"]["tier"] = "front";
  REQUIRE(c.put("/api/v1/namespaces/team/pods/web", stale).code == 200);
  auto conflict = c.put("/api/v1/namespaces/team/pods/web", stale);
  CHECK(conflict.code == 409);
  CHECK(conflict.body["reason"] == "Conflict");
  // Pod spec is immutable but for images.
  json now = c.get("/api/v1/namespaces/team/pods/web").body;
  now["spec"]["containers"][0]["image"] = "busybox:1.37";
  CHECK(c.put("/api/v1/namespaces/team/pods/web", now).code == 200);
  now = c.get("/api/v1/namespaces/team/pods/web").body;
  now["spec"]["hostNetwork"] = true;
  auto immutable = c.put("/api/v1/namespaces/team/pods/web", now);
  CHECK(immutable.code == 422);
  CHECK_THAT(immutable.body["message"].get<std::string>(), Catch::Contains("pod updates may not change fields"));
  // An unscheduled pod goes at once.
  auto gone = c.del("/api/v1/namespaces/team/pods/web");
  CHECK(gone.code == 200);
  CHECK(c.get("/api/v1/namespaces/team/pods/web").code == 404);
  CHECK(c.del("/api/v1/namespaces/team/pods/web").code == 404);
}

TEST_CASE("fake API server: decoding and field validation as the real server does them", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/namespaces", ns("t")).code == 201);
  json typo = pod("typo");
  typo["spec"]["hostNetwrok"] = true;
  typo["spec"]["containers"][0]["imag"] = "x";
  auto strict = c.post("/api/v1/namespaces/t/pods?fieldValidation=Strict", typo);
  CHECK(strict.code == 400);
  CHECK(strict.body["message"] ==
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field "
        "\"spec.containers[0].imag\", unknown field \"spec.hostNetwrok\"");
  // Without Strict the unknown fields are dropped, with a warning.
  auto warn = c.post("/api/v1/namespaces/t/pods", typo);
  CHECK(warn.code == 201);
  CHECK_THAT(warn.warning, Catch::Contains("unknown field \\\"spec.hostNetwrok\\\""));
  CHECK_FALSE(warn.body["spec"].contains("hostNetwrok"));
  json wrong = pod("wrong");
  wrong["spec"]["hostNetwork"] = "yes";
  auto type = c.post("/api/v1/namespaces/t/pods", wrong);
  CHECK(type.code == 400);
  CHECK_THAT(type.body["message"].get<std::string>(),
             Catch::Contains("cannot unmarshal string into Go struct field Pod.spec.hostNetwork of type bool"));
  auto bad_name = c.post("/api/v1/namespaces/t/pods", pod("Not_A_Name"));
  CHECK(bad_name.code == 422);
  CHECK(bad_name.body["reason"] == "Invalid");
  CHECK(bad_name.body["details"]["causes"][0]["field"] == "metadata.name");
  json no_image = pod("noimage");
  no_image["spec"]["containers"][0].erase("image");
  auto required = c.post("/api/v1/namespaces/t/pods", no_image);
  CHECK(required.code == 422);
  CHECK_THAT(required.body["message"].get<std::string>(), Catch::Contains("spec.containers[0].image: Required value"));
  json bad_label = pod("label");
  bad_label["metadata"]["labels"]["-x"] = "y";
  CHECK(c.post("/api/v1/namespaces/t/pods", bad_label).code == 422);
  json svc = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "web"}}},
              {"spec", {{"selector", {{"app", "web"}}}, {"ports", {{{"port", 80}}}}}}};
  auto s = c.post("/api/v1/namespaces/t/services", svc);
  REQUIRE(s.code == 201);
  CHECK(s.body["spec"]["clusterIP"] == "10.96.0.1");
  CHECK(s.body["spec"]["ports"][0]["targetPort"] == 80);
  CHECK(s.body["spec"]["ports"][0]["protocol"] == "TCP");
  json kind_mismatch = svc;
  kind_mismatch["kind"] = "Pod";
  CHECK(c.post("/api/v1/namespaces/t/services", kind_mismatch).code == 400);
}

TEST_CASE("fake API server: Services, EndpointSlices and NetworkPolicies validated and defaulted as the real server does",
          "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/namespaces", ns("t")).code == 201);
  auto cause = [](const Response& r) {
    return r.body.value("/details/causes/0/field"_json_pointer, std::string()) + ": " +
           r.body.value("/details/causes/0/message"_json_pointer, std::string());
  };
  json svc = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "web"}}},
              {"spec", {{"sessionAffinity", "ClientIP"}, {"ports", {{{"name", "a"}, {"port", 80}}}}}}};
  auto made = c.post("/api/v1/namespaces/t/services", svc);
  REQUIRE(made.code == 201);
  // DefaultClientIPServiceAffinitySeconds.
  CHECK(made.body["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] == 10800);
  struct Bad {
    const char* path;
    const char* patch;  // a JSON merge patch on the good object
    const char* field;
  };
  json policy = {{"apiVersion", "networking.k8s.io/v1"},
                 {"kind", "NetworkPolicy"},
                 {"metadata", {{"name", "p"}}},
                 {"spec", {{"podSelector", json::object()}}}};
  json slice = {{"apiVersion", "discovery.k8s.io/v1"},
                {"kind", "EndpointSlice"},
                {"metadata", {{"name", "e"}}},
                {"addressType", "IPv4"},
                {"endpoints", {{{"addresses", {"10.0.0.1"}}}}}};
  const Bad bad[] = {
      {"services", R"({"spec":{"ports":[{"name":"a","port":80},{"name":"b","port":80}]}})", "spec.ports[1]: Duplicate value"},
      {"services", R"({"spec":{"ports":[{"name":"a","port":80,"targetPort":"8080"}]}})",
       "spec.ports[0].targetPort: Invalid value"},
      {"services", R"({"spec":{"clusterIPs":["10.96.0.300"]}})", "spec.clusterIPs[0]: Invalid value"},
      {"services", R"({"spec":{"externalIPs":["nope"]}})", "spec.externalIPs[0]: Invalid value"},
      {"services", R"({"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}}})",
       "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value"},
      {"endpointslices", R"({"endpoints":[{"addresses":["fd00::1"]}]})", "endpoints[0].addresses[0]: Invalid value"},
      {"endpointslices", R"({"endpoints":[{"addresses":["127.0.0.1"]}]})",
       "endpoints[0].addresses[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range"},
      {"networkpolicies", R"({"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Equals"}]}}})",
       "spec.podSelector.matchExpressions[0].operator: Invalid value: \"Equals\""},
      {"networkpolicies", R"({"spec":{"podSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["b"]}]}}})",
       "spec.podSelector.matchExpressions[0].values: Forbidden"},
      {"networkpolicies", R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/8"]}}]}]}})",
       "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"11.0.0.0/8\": must be a strict subset of `cidr`"},
      {"networkpolicies", R"({"spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8"},"podSelector":{}}]}]}})",
       "spec.ingress[0].from[0]: Forbidden: may not specify more than 1 peer"},
      {"networkpolicies", R"({"spec":{"egress":[{"ports":[{"port":70000}]}]}})", "spec.egress[0].ports[0].port: Invalid value"},
      {"networkpolicies", R"({"spec":{"egress":[{"ports":[{"port":80,"endPort":79}]}]}})",
       "spec.egress[0].ports[0].endPort: Invalid value: 79"},
      {"networkpolicies", R"({"spec":{"egress":[{"ports":[{"port":"http","endPort":90}]}]}})",
       "spec.egress[0].ports[0].endPort: Forbidden: may not be specified when `port` is non-numeric"},
      {"networkpolicies", R"({"spec":{"egress":[{"ports":[{"protocol":"ICMP"}]}]}})",
       "spec.egress[0].ports[0].protocol: Unsupported value"},
  };
  for (const auto& b : bad) {
    std::string kind = b.path;
    json o = kind == "services" ? svc : kind == "endpointslices" ? slice : policy;
    o.merge_patch(json::parse(b.patch));
    o["metadata"]["name"] = "bad";
    std::string base = kind == "services" ? "/api/v1" : kind == "endpointslices" ? "/apis/discovery.k8s.io/v1"
                                                                                 : "/apis/networking.k8s.io/v1";
    auto r = c.post(base + "/namespaces/t/" + kind, o);
    INFO(o.dump());
    CHECK(r.code == 422);
    CHECK_THAT(cause(r), Catch::StartsWith(b.field));
  }
  // policyTypes: Ingress, and Egress only for a non-empty egress list.
  json no_egress = policy;
  no_egress["metadata"]["name"] = "empty-egress";
  no_egress["spec"]["egress"] = json::array();
  auto p1 = c.post("/apis/networking.k8s.io/v1/namespaces/t/networkpolicies", no_egress);
  REQUIRE(p1.code == 201);
  CHECK(p1.body["spec"]["policyTypes"] == json({"Ingress"}));
  json egress = policy;
  egress["metadata"]["name"] = "egress";
  egress["spec"]["egress"] = {{{"ports", {{{"port", 53}}}}}};
  auto p2 = c.post("/apis/networking.k8s.io/v1/namespaces/t/networkpolicies", egress);
  REQUIRE(p2.code == 201);
  CHECK(p2.body["spec"]["policyTypes"] == json({"Ingress", "Egress"}));
  CHECK(p2.body["spec"]["egress"][0]["ports"][0]["protocol"] == "TCP");
}

TEST_CASE("fake API server: strategic merge patch merges lists by their keys", "[fake-kube]") {
  const KubeSchema& schema = KubeSchema::builtin();
  std::string type = schema.rootType("v1", "Pod");
  REQUIRE(type == "IoK8sApiCoreV1Pod");
  json target = {{"metadata", {{"labels", {{"a", "1"}, {"b", "2"}}}, {"finalizers", {"x"}}}},
                 {"spec",
                  {{"containers",
                    {{{"name", "app"}, {"image", "app:1"}, {"env", {{{"name", "A"}, {"value", "1"}}}}},
                     {{"name", "side"}, {"image", "side:1"}}}},
                   {"tolerations", {{{"key", "k"}, {"operator", "Exists"}}}}}}};
  json patch = {{"metadata", {{"labels", {{"b", nullptr}, {"c", "3"}}}, {"finalizers", {"y"}}}},
                {"spec",
                 {{"$setElementOrder/containers", {{{"name", "side"}}, {{"name", "app"}}}},
                  {"containers",
                   {{{"name", "app"}, {"image", "app:2"}, {"env", {{{"name", "B"}, {"value", "2"}}}}},
                    {{"name", "side"}, {"$patch", "delete"}},
                    {{"name", "new"}, {"image", "new:1"}}}},
                  {"tolerations", json::array()}}}};
  REQUIRE(schema.strategicMerge(type, target, patch).ok());
  CHECK(target["metadata"]["labels"] == json({{"a", "1"}, {"c", "3"}}));
  CHECK(target["metadata"]["finalizers"] == json({"x", "y"}));  // a set
  auto& cs = target["spec"]["containers"];
  REQUIRE(cs.size() == 2);
  CHECK(cs[0]["name"] == "app");
  CHECK(cs[0]["image"] == "app:2");
  CHECK(cs[0]["env"] == json({{{"name", "A"}, {"value", "1"}}, {{"name", "B"}, {"value", "2"}}}));
  CHECK(cs[1]["name"] == "new");
  CHECK(target["spec"]["tolerations"] == json::array());  // no merge key: replaced
  json retain = {{"$retainKeys", {"name", "configMap"}}, {"name", "v"}, {"configMap", {{"name", "cm"}}}};
  json vol = {{"name", "v"}, {"emptyDir", json::object()}};
  REQUIRE(schema.strategicMerge("IoK8sApiCoreV1Volume", vol, retain).ok());
  CHECK(vol == json({{"name", "v"}, {"configMap", {{"name", "cm"}}}}));
  json no_key = {{"spec", {{"containers", {{{"image", "x"}}}}}}};
  CHECK_FALSE(schema.strategicMerge(type, target, no_key).ok());
}

TEST_CASE("fake API server: patches of every kind kubectl sends", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/nodes", node("n1", {{"role", "host"}})).code == 201);
  auto label = c.patch("/api/v1/nodes/n1", {{"metadata", {{"labels", {{"dpu-cni.io/host-node", "h1"}}}}}},
                       "application/merge-patch+json");
  REQUIRE(label.code == 200);
  CHECK(label.body["metadata"]["labels"] == json({{"dpu-cni.io/host-node", "h1"}, {"role", "host"}}));
  // The main resource never changes status; the status subresource only status.
  auto main = c.patch("/api/v1/nodes/n1", {{"status", {{"conditions", json::array()}}}}, "application/merge-patch+json");
  CHECK(main.body["status"]["conditions"].size() == 1);
  auto status = c.patch("/api/v1/nodes/n1/status",
                        {{"metadata", {{"labels", {{"x", "y"}}}}}, {"status", {{"conditions", json::array()}}}},
                        "application/merge-patch+json");
  CHECK(status.body["status"]["conditions"].size() == 0);
  CHECK_FALSE(status.body["metadata"]["labels"].contains("x"));
  // A status write is a write: a new resourceVersion, stored (it was lost once,
  // written through a reference into the object the status write replaces).
  CHECK(status.body["metadata"]["resourceVersion"] != main.body["metadata"]["resourceVersion"]);
  CHECK(c.get("/api/v1/nodes/n1").body["metadata"]["resourceVersion"] == status.body["metadata"]["resourceVersion"]);
  auto jp = c.patch("/api/v1/nodes/n1", json::array({{{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"a", "b"}}}}}),
                    "application/json-patch+json");
  CHECK(jp.code == 200);
  CHECK(jp.body["metadata"]["annotations"]["a"] == "b");
  auto ssa = c.patch("/api/v1/nodes/n1", json::object(), "application/apply-patch+yaml");
  CHECK(ssa.code == 415);
  CHECK_THAT(ssa.body["message"].get<std::string>(), Catch::Contains("client-side apply"));
  auto typo = c.call(http::methods::PATCH, "/api/v1/nodes/n1?fieldValidation=Strict",
                     R"({"spec":{"unschedulabel":true}})", "application/strategic-merge-patch+json");
  CHECK(typo.code == 400);
  CHECK_THAT(typo.body["message"].get<std::string>(), Catch::Contains("unknown field \"spec.unschedulabel\""));
  CHECK(c.patch("/api/v1/nodes/nope", json::object(), "application/merge-patch+json").code == 404);
}

TEST_CASE("fake API server: selectors filter lists and watches", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/namespaces", ns("s")).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/s/pods", pod("a", "n1", {{"app", "web"}, {"tier", "front"}})).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/s/pods", pod("b", "n2", {{"app", "web"}})).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/s/pods", pod("c", "n1", {{"app", "db"}})).code == 201);
  auto names = [&](const std::string& q) {
    std::vector<std::string> out;
    auto r = c.get("/api/v1/pods?" + q);
    if (r.code != 200) FAIL(r.text);
    for (const auto& i : r.body["items"]) out.push_back(i["metadata"]["name"]);
    return out;
  };
  CHECK(names("labelSelector=app%3Dweb") == std::vector<std::string>{"a", "b"});
  CHECK(names("labelSelector=app%20in%20(db,web),tier") == std::vector<std::string>{"a"});
  CHECK(names("labelSelector=!tier") == std::vector<std::string>{"b", "c"});
  CHECK(names("fieldSelector=spec.nodeName%3Dn1") == std::vector<std::string>{"a", "c"});
  CHECK(names("fieldSelector=metadata.name!%3Da,spec.nodeName%3Dn1") == std::vector<std::string>{"c"});
  auto unsupported = c.get("/api/v1/pods?fieldSelector=spec.image%3Dx");
  CHECK(unsupported.code == 400);
  CHECK(unsupported.body["message"] == "field label not supported: spec.image");
  // A watch with a selector: an object that stops matching is DELETED for it.
  std::string rv = c.get("/api/v1/pods").body["metadata"]["resourceVersion"];
  std::thread changer([&] {
    std::this_thread::sleep_for(200ms);
    auto a = c.get("/api/v1/namespaces/s/pods/a").body;
    a["metadata"]["labels"]["app"] = "other";
    c.put("/api/v1/namespaces/s/pods/a", a);
  });
  auto w = c.get("/api/v1/namespaces/s/pods?watch=true&timeoutSeconds=1&labelSelector=app%3Dweb&resourceVersion=" + rv);
  changer.join();
  CHECK(w.code == 200);
  CHECK_THAT(w.text, Catch::StartsWith("{\"type\":\"DELETED\""));
}

TEST_CASE("fake API server: RBAC from a ClusterRole file, 403 with the real Status", "[fake-kube]") {
  TempFile rbac(R"(apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
  - apiGroups: [""]
    resources: [pods, nodes]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [nodes/status]
    verbs: [patch]
  - apiGroups: ["networking.k8s.io"]
    resources: [networkpolicies]
    verbs: [list]
---
# a comment-only document
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects:
  - {kind: ServiceAccount, name: agent, namespace: sys}
)");
  FakeKubeApiServerOptions opt;
  opt.token = "admin-token";
  opt.tokens = {{"agent-token", {"system:serviceaccount:sys:agent", {"system:serviceaccounts"}}},
                {"other-token", {"system:serviceaccount:sys:other", {"system:serviceaccounts"}}}};
  opt.rbac_files = {rbac.path.string()};
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client admin(fake.url(), "admin-token"), agent(fake.url(), "agent-token"), other(fake.url(), "other-token");
  REQUIRE(admin.post("/api/v1/nodes", node("n1")).code == 201);
  CHECK(agent.get("/api/v1/nodes").code == 200);
  CHECK(agent.get("/api/v1/nodes/n1").code == 200);
  CHECK(agent.get("/api").code == 200);  // discovery is open to the authenticated
  auto patch = agent.patch("/api/v1/nodes/n1", {{"metadata", {{"labels", {{"a", "b"}}}}}}, "application/merge-patch+json");
  CHECK(patch.code == 403);
  CHECK(patch.body["kind"] == "Status");
  CHECK(patch.body["reason"] == "Forbidden");
  CHECK(patch.body["message"] ==
        "nodes \"n1\" is forbidden: User \"system:serviceaccount:sys:agent\" cannot patch resource \"nodes\" in API "
        "group \"\" at the cluster scope");
  CHECK(agent.patch("/api/v1/nodes/n1/status", {{"status", json::object()}}, "application/merge-patch+json").code == 200);
  auto ns_scope = agent.get("/apis/networking.k8s.io/v1/namespaces/x/networkpolicies/p");
  CHECK(ns_scope.code == 403);
  CHECK(ns_scope.body["message"] ==
        "networkpolicies.networking.k8s.io \"p\" is forbidden: User \"system:serviceaccount:sys:agent\" cannot get "
        "resource \"networkpolicies\" in API group \"networking.k8s.io\" in the namespace \"x\"");
  CHECK(other.get("/api/v1/pods").code == 403);
  CHECK(agent.call(http::methods::GET, "/api/v1/pods", "", "", "").code == 200);
  Client nobody(fake.url(), "wrong");
  CHECK(nobody.get("/api").code == 401);
  // The evidence: what was refused, which grants were used.
  auto denials = fake.rbacDenials();
  REQUIRE(denials.size() == 3);
  CHECK_THAT(denials[0], Catch::Contains("cannot patch resource \"nodes\""));
  std::set<std::string> unused;
  for (const auto& g : fake.rbacGrants())
    if (!g.used) unused.insert(g.describe());
  CHECK(unused == std::set<std::string>{"ClusterRole/reader: get pods", "ClusterRole/reader: watch nodes",
                                        "ClusterRole/reader: watch pods",
                                        "ClusterRole/reader: list networkpolicies.networking.k8s.io"});
}

// The agent's ClusterRole as manifests/ ships it: what it does not grant is 403
// even for a resource the fake does not serve (Secrets), as the real server
// authorizes before it routes; what it grants but the fake does not serve is 404.
TEST_CASE("fake API server: the manifests' ClusterRole, 403 before 404", "[fake-kube]") {
  const std::string dir = std::string(DPU_SOURCE_DIR) + "/manifests/base/agent-rbac/";
  FakeKubeApiServerOptions opt;
  opt.token = "admin-token";
  opt.tokens = {{"agent-token", {"system:serviceaccount:dpu-cni:dpu-agent", {"system:serviceaccounts"}}}};
  opt.rbac_files = {dir + "clusterrole.yaml", dir + "clusterrolebinding.yaml"};
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client admin(fake.url(), "admin-token"), agent(fake.url(), "agent-token");
  REQUIRE(admin.post("/api/v1/nodes", node("n1")).code == 201);
  CHECK(agent.get("/api/v1/nodes/n1").code == 200);
  CHECK(agent.get("/apis/discovery.k8s.io/v1/endpointslices").code == 200);
  auto secrets = agent.get("/api/v1/namespaces/dpu-cni/secrets");
  CHECK(secrets.code == 403);
  CHECK(secrets.body["message"] ==
        "secrets is forbidden: User \"system:serviceaccount:dpu-cni:dpu-agent\" cannot list resource \"secrets\" in API "
        "group \"\" in the namespace \"dpu-cni\"");
  CHECK(agent.get("/api/v1/namespaces/dpu-cni/secrets/dpu-cni-dpu-tls").code == 403);
  CHECK(agent.get("/apis/apps/v1/daemonsets").code == 403);
  CHECK(admin.get("/api/v1/namespaces/dpu-cni/secrets").code == 404);  // allowed, not served
  CHECK(agent.del("/api/v1/nodes/n1").code == 403);
  CHECK(agent.post("/api/v1/namespaces", ns("x")).code == 403);
  CHECK(agent.get("/version").code == 200);  // non-resource: discovery stays open
  auto denials = fake.rbacDenials();
  CHECK(denials.size() == 5);
}

TEST_CASE("fake API server: pods on a node and namespaces terminate before they go", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/namespaces", ns("g")).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/g/pods", pod("bound", "n1")).code == 201);
  auto d = c.del("/api/v1/namespaces/g/pods/bound");
  CHECK(d.code == 200);
  CHECK(d.body["metadata"].contains("deletionTimestamp"));
  CHECK(d.body["metadata"]["deletionGracePeriodSeconds"] == 30);
  CHECK(c.get("/api/v1/namespaces/g/pods/bound").code == 200);  // the kubelet has not confirmed yet
  // The kubelet's final delete.
  CHECK(c.del("/api/v1/namespaces/g/pods/bound", {{"gracePeriodSeconds", 0}}).code == 200);
  CHECK(c.get("/api/v1/namespaces/g/pods/bound").code == 404);
  // A namespace terminates: its content goes, new content is refused, then it goes.
  REQUIRE(c.post("/api/v1/namespaces/g/pods", pod("held", "n1")).code == 201);
  REQUIRE(c.post("/apis/networking.k8s.io/v1/namespaces/g/networkpolicies",
                 {{"apiVersion", "networking.k8s.io/v1"}, {"kind", "NetworkPolicy"}, {"metadata", {{"name", "deny"}}},
                  {"spec", {{"podSelector", json::object()}}}})
              .code == 201);
  auto nsd = c.del("/api/v1/namespaces/g");
  CHECK(nsd.code == 200);
  auto terminating = c.get("/api/v1/namespaces/g");
  CHECK(terminating.body["status"]["phase"] == "Terminating");
  CHECK(c.get("/apis/networking.k8s.io/v1/namespaces/g/networkpolicies/deny").code == 404);
  auto refused = c.post("/api/v1/namespaces/g/pods", pod("late"));
  CHECK(refused.code == 403);
  CHECK_THAT(refused.body["message"].get<std::string>(), Catch::Contains("because it is being terminated"));
  CHECK(c.del("/api/v1/namespaces/g/pods/held", {{"gracePeriodSeconds", 0}}).code == 200);
  CHECK(c.get("/api/v1/namespaces/g").code == 404);
}

TEST_CASE("fake API server: Tables with the columns kubectl prints", "[fake-kube]") {
  FakeKubeApiServer fake;
  REQUIRE(fake.start({}).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/nodes", node("n1", {{"node-role.kubernetes.io/dpu", ""}})).code == 201);
  const std::string table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
  auto t = c.get("/api/v1/nodes", table);
  REQUIRE(t.body["kind"] == "Table");
  CHECK(t.body["columnDefinitions"][0]["name"] == "Name");
  CHECK(t.body["rows"][0]["cells"][0] == "n1");
  CHECK(t.body["rows"][0]["cells"][1] == "Ready");
  CHECK(t.body["rows"][0]["cells"][2] == "dpu");
  CHECK(t.body["rows"][0]["object"]["kind"] == "PartialObjectMetadata");
  auto one = c.get("/api/v1/nodes/n1", table);
  CHECK(one.body["rows"].size() == 1);
}

TEST_CASE("fake API server: controllers schedule pods and keep EndpointSlices", "[fake-kube]") {
  FakeKubeApiServerOptions opt;
  opt.controllers = true;
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client c(fake.url());
  CHECK(c.get("/api/v1/namespaces/kube-system").code == 200);
  CHECK(c.get("/api/v1/namespaces/default/services/kubernetes").body["spec"]["clusterIP"] == "10.96.0.1");
  REQUIRE(c.post("/api/v1/nodes", node("host1", {{"kubernetes.io/hostname", "host1"}})).code == 201);
  REQUIRE(c.post("/api/v1/nodes", node("dpu1", {{"dpu-cni.io/dpu", "true"}},
                                       {{{"key", "dpu-cni.io/dpu"}, {"value", "true"}, {"effect", "NoSchedule"}}}))
              .code == 201);
  REQUIRE(c.post("/api/v1/namespaces/default/pods", pod("web")).code == 201);
  REQUIRE(eventually([&] { return c.get("/api/v1/namespaces/default/pods/web").body["spec"].value("nodeName", "") == "host1"; }));
  json picky = pod("picky");
  picky["spec"]["nodeSelector"] = {{"dpu-cni.io/dpu", "true"}};
  REQUIRE(c.post("/api/v1/namespaces/default/pods", picky).code == 201);
  REQUIRE(eventually([&] {
    auto conds = c.get("/api/v1/namespaces/default/pods/picky").body["status"].value("conditions", json::array());
    return !conds.empty() && conds[0]["reason"] == "Unschedulable";
  }));
  json tolerant = picky;
  tolerant["metadata"]["name"] = "tolerant";
  tolerant["spec"]["tolerations"] = {{{"key", "dpu-cni.io/dpu"}, {"operator", "Exists"}}};
  REQUIRE(c.post("/api/v1/namespaces/default/pods", tolerant).code == 201);
  REQUIRE(eventually([&] { return c.get("/api/v1/namespaces/default/pods/tolerant").body["spec"].value("nodeName", "") == "dpu1"; }));
  // The EndpointSlice follows the Service's selector and the pods' addresses and readiness.
  json svc = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "web"}}},
              {"spec", {{"selector", {{"app", "web"}}}, {"ports", {{{"port", 80}, {"targetPort", 8080}}}}}}};
  REQUIRE(c.post("/api/v1/namespaces/default/services", svc).code == 201);
  auto slices = [&] {
    return c.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb")
        .body["items"];
  };
  REQUIRE(eventually([&] { return slices().size() == 1; }));
  CHECK(slices()[0]["endpoints"].empty());
  CHECK(slices()[0]["ports"][0]["port"] == 8080);
  REQUIRE(c.patch("/api/v1/namespaces/default/pods/web/status",
                  {{"status", {{"podIP", "10.244.1.5"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}},
                  "application/merge-patch+json")
              .code == 200);
  REQUIRE(eventually([&] { return slices()[0]["endpoints"].size() == 1; }));
  CHECK(slices()[0]["endpoints"][0]["addresses"][0] == "10.244.1.5");
  CHECK(slices()[0]["endpoints"][0]["conditions"]["ready"] == true);
  CHECK(slices()[0]["endpoints"][0]["nodeName"] == "host1");
  REQUIRE(c.del("/api/v1/namespaces/default/services/web").code == 200);
  REQUIRE(eventually([&] { return slices().empty(); }));
}

namespace {

const char* const kDualStack = "10.96.0.0/12,fd00:10:96::/112";

json service(const std::string& name, json spec_extra = json::object()) {
  json s = {{"apiVersion", "v1"},
            {"kind", "Service"},
            {"metadata", {{"name", name}}},
            {"spec", {{"selector", {{"app", "web"}}}, {"ports", {{{"port", 80}}}}}}};
  s["spec"].merge_patch(spec_extra);
  return s;
}

// Every cause of a refusal, "field: message".
std::vector<std::string> causes(const Response& r) {
  std::vector<std::string> out;
  for (const auto& c : r.body.value("/details/causes"_json_pointer, json::array()))
    out.push_back(c.value("field", "") + ": " + c.value("message", ""));
  return out;
}

bool anyStartsWith(const std::vector<std::string>& all, const std::string& prefix) {
  for (const auto& s : all)
    if (s.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("fake API server: service CIDRs as kube-apiserver's --service-cluster-ip-range takes them", "[fake-kube]") {
  for (const char* good : {"10.96.0.0/12", "fd00:10:96::/112", kDualStack, "fd00:10:96::/112,10.96.0.0/12"}) {
    FakeKubeApiServerOptions opt;
    opt.service_cidr = good;
    FakeKubeApiServer fake;
    INFO(good);
    CHECK(fake.start(opt).ok());
  }
  struct Bad {
    const char* cidrs;
    const char* why;
  };
  const Bad bad[] = {
      {"10.96.0.0/12,10.100.0.0/16", "[0] and [1] must be of different IP families"},
      {"10.96.0.0/12,fd00:10:96::/112,10.200.0.0/16", "one CIDR, or two of different families comma-separated"},
      {"10.96.0.0/12,", "[1] is not a valid CIDR"},
      {"nope", "[0] is not a valid CIDR"},
      {"10.96.0.1/12", "has host bits set"},
      {"10.0.0.0/8", "10.0.0.0/8 is too large; for 32-bit addresses, the mask must be >= 12"},
      {"10.96.0.0/12,fd00::/64", "fd00::/64 is too large; for 128-bit addresses, the mask must be >= 108"},
  };
  for (const auto& b : bad) {
    FakeKubeApiServerOptions opt;
    opt.service_cidr = b.cidrs;
    FakeKubeApiServer fake;
    auto r = fake.start(opt);
    INFO(b.cidrs);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(std::string("service CIDRs \"") + b.cidrs + "\"") && Catch::Contains(b.why));
  }
}

TEST_CASE("fake API server: Services' ipFamilyPolicy, ipFamilies and cluster IPs defaulted as the real server does",
          "[fake-kube]") {
  FakeKubeApiServerOptions opt;
  opt.controllers = true;
  opt.service_cidr = kDualStack;
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client c(fake.url());
  auto spec = [&](const json& s) {
    auto r = c.post("/api/v1/namespaces/default/services", s);
    INFO(s.dump() << " -> " << r.text);
    REQUIRE(r.code == 201);
    CHECK(r.body["spec"].value("clusterIP", "") == r.body["spec"]["clusterIPs"][0]);
    return r.body["spec"];
  };
  // The kubernetes Service: single stack, the primary family's first address.
  auto k8s = c.get("/api/v1/namespaces/default/services/kubernetes").body["spec"];
  CHECK(k8s["clusterIPs"] == json({"10.96.0.1"}));
  CHECK(k8s["ipFamilies"] == json({"IPv4"}));
  CHECK(k8s["ipFamilyPolicy"] == "SingleStack");
  // No policy: SingleStack in the primary family.
  auto single = spec(service("single"));
  CHECK(single["ipFamilyPolicy"] == "SingleStack");
  CHECK(single["ipFamilies"] == json({"IPv4"}));
  CHECK(single["clusterIPs"] == json({"10.96.0.2"}));
  // PreferDualStack on a dual-stack server: both families, the primary first.
  auto prefer = spec(service("prefer", {{"ipFamilyPolicy", "PreferDualStack"}}));
  CHECK(prefer["ipFamilies"] == json({"IPv4", "IPv6"}));
  CHECK(prefer["clusterIPs"] == json({"10.96.0.3", "fd00:10:96::1"}));
  // RequireDualStack with IPv6 first: that order.
  auto require = spec(service("require", {{"ipFamilyPolicy", "RequireDualStack"}, {"ipFamilies", {"IPv6"}}}));
  CHECK(require["ipFamilies"] == json({"IPv6", "IPv4"}));
  CHECK(require["clusterIPs"] == json({"fd00:10:96::2", "10.96.0.4"}));
  // The family of a given cluster IP.
  auto given6 = spec(service("given6", {{"clusterIP", "fd00:10:96::100"}}));
  CHECK(given6["ipFamilies"] == json({"IPv6"}));
  CHECK(given6["clusterIPs"] == json({"fd00:10:96::100"}));
  CHECK(given6["ipFamilyPolicy"] == "SingleStack");
  auto both = spec(service("both", {{"ipFamilyPolicy", "PreferDualStack"},
                                    {"clusterIP", "10.96.0.50"},
                                    {"clusterIPs", {"10.96.0.50", "fd00:10:96::50"}}}));
  CHECK(both["ipFamilies"] == json({"IPv4", "IPv6"}));
  CHECK(both["clusterIPs"] == json({"10.96.0.50", "fd00:10:96::50"}));
  // Headless: families, no addresses; without a selector RequireDualStack.
  auto headless = spec(service("headless", {{"clusterIP", "None"}, {"ipFamilyPolicy", "PreferDualStack"}}));
  CHECK(headless["clusterIPs"] == json({"None"}));
  CHECK(headless["ipFamilies"] == json({"IPv4", "IPv6"}));
  json bare = service("bare", {{"clusterIP", "None"}});
  bare["spec"].erase("selector");
  auto selectorless = spec(bare);
  CHECK(selectorless["ipFamilyPolicy"] == "RequireDualStack");
  CHECK(selectorless["ipFamilies"] == json({"IPv4", "IPv6"}));
  CHECK(selectorless["clusterIPs"] == json({"None"}));
  // ExternalName gets none of it.
  auto external = c.post("/api/v1/namespaces/default/services",
                         json{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "ext"}}},
                              {"spec", {{"type", "ExternalName"}, {"externalName", "example.com"}}}});
  REQUIRE(external.code == 201);
  for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"})
    CHECK_FALSE(external.body["spec"].contains(f));

  // A single-stack server: PreferDualStack is one family; IPv6 primary works alike.
  for (const char* cidr : {"10.96.0.0/12", "fd00:10:96::/112"}) {
    FakeKubeApiServerOptions one;
    one.service_cidr = cidr;
    FakeKubeApiServer f1;
    REQUIRE(f1.start(one).ok());
    Client c1(f1.url());
    REQUIRE(c1.post("/api/v1/namespaces", ns("t")).code == 201);
    auto r = c1.post("/api/v1/namespaces/t/services", service("p", {{"ipFamilyPolicy", "PreferDualStack"}}));
    INFO(cidr << " " << r.text);
    REQUIRE(r.code == 201);
    bool v6 = std::string(cidr).find(':') != std::string::npos;
    CHECK(r.body["spec"]["ipFamilies"] == json({v6 ? "IPv6" : "IPv4"}));
    CHECK(r.body["spec"]["clusterIPs"] == json({v6 ? "fd00:10:96::1" : "10.96.0.1"}));
    CHECK(r.body["spec"]["ipFamilyPolicy"] == "PreferDualStack");
  }
}

TEST_CASE("fake API server: Services' cluster IP fields refused as the real server refuses them", "[fake-kube]") {
  FakeKubeApiServerOptions dual_opt, single_opt;
  dual_opt.controllers = single_opt.controllers = true;
  dual_opt.service_cidr = kDualStack;
  FakeKubeApiServer dual, single;
  REQUIRE(dual.start(dual_opt).ok());
  REQUIRE(single.start(single_opt).ok());
  struct Bad {
    bool dual_stack;  // against the dual-stack server, else the IPv4-only one
    const char* spec;  // merged into a ClusterIP Service's spec
    const char* cause;  // the first cause, "field: message" (its start)
  };
  const Bad bad[] = {
      {false, R"({"ipFamilyPolicy":"RequireDualStack"})",
       "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"},
      {false, R"({"ipFamilies":["IPv6"]})", "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"},
      {false, R"({"clusterIP":"fd00:10:96::5"})",
       "spec.clusterIPs[0]: Invalid value: [\"fd00:10:96::5\"]: IPv6 is not configured on this cluster"},
      {true, R"({"clusterIP":"10.96.0.5","clusterIPs":["10.96.0.6"]})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.6\"]: first value must match `clusterIP`"},
      {true, R"({"clusterIPs":["10.96.0.6"]})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.6\"]: must be empty when `clusterIP` is not specified"},
      {true, R"({"clusterIP":"10.200.0.5"})",
       "spec.clusterIPs: Invalid value: [\"10.200.0.5\"]: failed to allocate IP 10.200.0.5: the provided IP (10.200.0.5) "
       "is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
      {true, R"({"ipFamilyPolicy":"PreferDualStack","clusterIP":"10.96.0.7","clusterIPs":["10.96.0.7","fd00:10:97::7"]})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.7\",\"fd00:10:97::7\"]: failed to allocate IP fd00:10:97::7: the provided "
       "IP (fd00:10:97::7) is not in the valid range. The range of valid IPs is fd00:10:96::/112"},
      {true, R"({"clusterIP":"10.96.0.0"})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.0\"]: failed to allocate IP 10.96.0.0: the provided IP (10.96.0.0) "
       "is not in the valid range"},
      {true, R"({"clusterIP":"10.96.0.1"})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.1\"]: failed to allocate IP 10.96.0.1: provided IP is already allocated"},
      {true,
       R"({"ipFamilyPolicy":"PreferDualStack","ipFamilies":["IPv6","IPv4"],)"
       R"("clusterIP":"10.96.0.8","clusterIPs":["10.96.0.8","fd00:10:96::8"]})",
       "spec.clusterIPs[0]: Invalid value: \"10.96.0.8\": expected an IPv6 value as indicated by `ipFamilies[0]`"},
      {true, R"({"clusterIP":"10.96.0.9","clusterIPs":["10.96.0.9","fd00:10:96::9"]})",
       "spec.ipFamilyPolicy: Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple "
       "cluster IPs are specified"},
      {true, R"({"ipFamilyPolicy":"PreferDualStack","clusterIP":"10.96.0.9","clusterIPs":["10.96.0.9","10.96.0.10"]})",
       "spec.clusterIPs: Invalid value: [\"10.96.0.9\",\"10.96.0.10\"]: may specify no more than one IP for each IP family"},
      {true, R"({"ipFamilyPolicy":"PreferDualStack","ipFamilies":["IPv4","IPv4"]})",
       "spec.ipFamilies[1]: Duplicate value: \"IPv4\""},
      {true, R"({"ipFamilies":["IPv5"]})", "spec.ipFamilies[0]: Unsupported value: \"IPv5\""},
      {true, R"({"ipFamilyPolicy":"DualStack"})", "spec.ipFamilyPolicy: Unsupported value: \"DualStack\""},
      {true, R"({"clusterIP":"None","clusterIPs":["None","10.96.0.11"]})",
       "spec.clusterIPs: Invalid value: [\"None\",\"10.96.0.11\"]: 'None' must be the first and only value"},
      {true, R"({"type":"ExternalName","externalName":"example.com","ipFamilyPolicy":"SingleStack"})",
       "spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services"},
  };
  Client cd(dual.url()), cs(single.url());
  for (const auto& b : bad) {
    Client& c = b.dual_stack ? cd : cs;
    json s = service("bad", json::parse(b.spec));
    auto r = c.post("/api/v1/namespaces/default/services", s);
    INFO(s.dump() << " -> " << r.text);
    CHECK(r.code == 422);
    CHECK(r.body["reason"] == "Invalid");
    CHECK_THAT(causes(r).empty() ? std::string() : causes(r)[0], Catch::StartsWith(b.cause));
    CHECK(c.get("/api/v1/namespaces/default/services/bad").code == 404);
  }
  // A full range: 500, as the real allocator's "range is full".
  FakeKubeApiServerOptions tiny_opt;
  tiny_opt.service_cidr = "10.96.0.0/30";  // two usable addresses
  FakeKubeApiServer tiny;
  REQUIRE(tiny.start(tiny_opt).ok());
  Client ct(tiny.url());
  REQUIRE(ct.post("/api/v1/namespaces", ns("t")).code == 201);
  CHECK(ct.post("/api/v1/namespaces/t/services", service("a")).body["spec"]["clusterIP"] == "10.96.0.1");
  CHECK(ct.post("/api/v1/namespaces/t/services", service("b")).body["spec"]["clusterIP"] == "10.96.0.2");
  auto full = ct.post("/api/v1/namespaces/t/services", service("c"));
  CHECK(full.code == 500);
  CHECK(full.body["message"] == "Internal error occurred: failed to allocate a serviceIP: range is full");
  // Deleting a Service releases its address.
  REQUIRE(ct.del("/api/v1/namespaces/t/services/a").code == 200);
  CHECK(ct.post("/api/v1/namespaces/t/services", service("c")).body["spec"]["clusterIP"] == "10.96.0.1");
}

TEST_CASE("fake API server: a Service's update keeps its primary, and upgrades to and downgrades from dual stack",
          "[fake-kube]") {
  FakeKubeApiServerOptions opt;
  opt.controllers = true;
  opt.service_cidr = kDualStack;
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client c(fake.url());
  const std::string path = "/api/v1/namespaces/default/services/";
  const std::string merge = "application/merge-patch+json";
  REQUIRE(c.post("/api/v1/namespaces/default/services", service("web")).code == 201);
  auto web = [&] { return c.get(path + "web").body["spec"]; };
  CHECK(web()["clusterIPs"] == json({"10.96.0.2"}));
  // SingleStack -> PreferDualStack: the secondary family and an address of it.
  auto up = c.patch(path + "web", {{"spec", {{"ipFamilyPolicy", "PreferDualStack"}}}}, merge);
  INFO(up.text);
  REQUIRE(up.code == 200);
  CHECK(up.body["spec"]["clusterIP"] == "10.96.0.2");
  CHECK(up.body["spec"]["clusterIPs"] == json({"10.96.0.2", "fd00:10:96::1"}));
  CHECK(up.body["spec"]["ipFamilies"] == json({"IPv4", "IPv6"}));
  // Its IPv6 address is taken now.
  auto other = c.post("/api/v1/namespaces/default/services", service("other", {{"ipFamilies", {"IPv6"}}}));
  CHECK(other.body["spec"]["clusterIPs"] == json({"fd00:10:96::2"}));
  // The whole object written back (kubectl replace, edit): nothing changes.
  json same = c.get(path + "web").body;
  auto put = c.put(path + "web", same);
  REQUIRE(put.code == 200);
  CHECK(put.body["spec"]["clusterIPs"] == same["spec"]["clusterIPs"]);
  // Dropping the secondary address needs SingleStack.
  auto reduced = c.patch(path + "web", {{"spec", {{"clusterIPs", {"10.96.0.2"}}}}}, merge);
  CHECK(reduced.code == 422);
  CHECK(anyStartsWith(causes(reduced), "spec.ipFamilyPolicy: Invalid value: \"PreferDualStack\": must be 'SingleStack' to "
                                       "release the secondary cluster IP"));
  // The primary never changes: neither clusterIP nor the families' order.
  // (A new clusterIP alone stands for clusterIPs [it]: on a dual-stack Service
  // that reads as dropping the secondary, refused for its policy first.)
  auto moved = c.patch(path + "web", {{"spec", {{"clusterIP", "10.96.0.99"}}}}, merge);
  CHECK(moved.code == 422);
  CHECK(anyStartsWith(causes(moved), "spec.ipFamilyPolicy: Invalid value: \"PreferDualStack\": must be 'SingleStack'"));
  auto moved6 = c.patch(path + "other", {{"spec", {{"clusterIP", "fd00:10:96::99"}}}}, merge);
  CHECK(moved6.code == 422);
  CHECK(causes(moved6) ==
        std::vector<std::string>{"spec.clusterIPs[0]: Invalid value: [\"fd00:10:96::99\"]: may not change once set"});
  auto swapped = c.patch(path + "web",
                         {{"spec", {{"clusterIP", "fd00:10:96::1"}, {"clusterIPs", {"fd00:10:96::1", "10.96.0.2"}},
                                    {"ipFamilies", {"IPv6", "IPv4"}}}}},
                         merge);
  CHECK(swapped.code == 422);
  CHECK(anyStartsWith(causes(swapped), "spec.clusterIPs[0]: Invalid value"));
  CHECK(anyStartsWith(causes(swapped), "spec.ipFamilies[0]: Invalid value: [\"IPv6\",\"IPv4\"]: may not change once set"));
  auto refamily = c.patch(path + "other", {{"spec", {{"ipFamilies", {"IPv4"}}}}}, merge);
  CHECK(refamily.code == 422);
  CHECK(anyStartsWith(causes(refamily), "spec.clusterIPs[0]: Invalid value: \"fd00:10:96::2\": expected an IPv4 value"));
  CHECK(web()["clusterIPs"] == json({"10.96.0.2", "fd00:10:96::1"}));
  // PreferDualStack -> SingleStack: the secondary is released (another Service can have it).
  auto down = c.patch(path + "web", {{"spec", {{"ipFamilyPolicy", "SingleStack"}}}}, merge);
  REQUIRE(down.code == 200);
  CHECK(down.body["spec"]["clusterIPs"] == json({"10.96.0.2"}));
  CHECK(down.body["spec"]["ipFamilies"] == json({"IPv4"}));
  auto reuse = c.post("/api/v1/namespaces/default/services",
                      service("reuse", {{"clusterIP", "fd00:10:96::1"}}));
  CHECK(reuse.code == 201);
  // ClusterIP -> ExternalName drops the fields the client left; back allocates anew.
  auto ext = c.patch(path + "reuse", {{"spec", {{"type", "ExternalName"}, {"externalName", "example.com"}}}}, merge);
  REQUIRE(ext.code == 200);
  CHECK_FALSE(ext.body["spec"].contains("clusterIPs"));
  CHECK_FALSE(ext.body["spec"].contains("ipFamilyPolicy"));
  auto back = c.patch(path + "reuse", {{"spec", {{"type", "ClusterIP"}, {"externalName", nullptr}}}}, merge);
  REQUIRE(back.code == 200);
  CHECK(back.body["spec"]["clusterIPs"] == json({"10.96.0.3"}));
  // Stored through the control API without any cluster IP (no real server holds one): an update allocates,
  // as a create would; with an IPv4 address only, PreferDualStack adds the IPv6 one.
  REQUIRE(fake.apply(KubeResource::kServices, {{"metadata", {{"name", "bare"}, {"namespace", "default"}}},
                                               {"spec", {{"ports", {{{"port", 80}}}}}}})
              .ok());
  auto bare = c.patch(path + "bare", {{"metadata", {{"labels", {{"a", "b"}}}}}}, merge);
  REQUIRE(bare.code == 200);
  CHECK(bare.body["spec"]["clusterIPs"] == json({"10.96.0.4"}));
  REQUIRE(fake.apply(KubeResource::kServices,
                     {{"metadata", {{"name", "legacy"}, {"namespace", "default"}}},
                      {"spec", {{"clusterIP", "10.96.0.40"}, {"clusterIPs", {"10.96.0.40"}}, {"ports", {{{"port", 80}}}}}}})
              .ok());
  auto legacy = c.patch(path + "legacy", {{"spec", {{"ipFamilyPolicy", "PreferDualStack"}}}}, merge);
  REQUIRE(legacy.code == 200);
  CHECK(legacy.body["spec"]["clusterIPs"] == json({"10.96.0.40", "fd00:10:96::1"}));  // ::1: released by reuse
  CHECK(legacy.body["spec"]["ipFamilies"] == json({"IPv4", "IPv6"}));
}

TEST_CASE("fake API server: the EndpointSlice controller keeps a slice per family of a Service", "[fake-kube]") {
  FakeKubeApiServerOptions opt;
  opt.controllers = true;
  opt.service_cidr = kDualStack;
  FakeKubeApiServer fake;
  REQUIRE(fake.start(opt).ok());
  Client c(fake.url());
  REQUIRE(c.post("/api/v1/nodes", node("host1")).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/default/pods", pod("dual")).code == 201);
  REQUIRE(c.post("/api/v1/namespaces/default/pods", pod("v4only")).code == 201);
  json ready = {{{"type", "Ready"}, {"status", "True"}}};
  REQUIRE(c.patch("/api/v1/namespaces/default/pods/dual/status",
                  {{"status", {{"podIP", "10.244.1.5"},
                               {"podIPs", {{{"ip", "10.244.1.5"}}, {{"ip", "fd00:10:244:1::5"}}}},
                               {"conditions", ready}}}},
                  "application/merge-patch+json")
              .code == 200);
  // A status with podIP alone (the real server copies it into podIPs).
  REQUIRE(c.patch("/api/v1/namespaces/default/pods/v4only/status",
                  {{"status", {{"podIP", "10.244.1.6"}, {"conditions", ready}}}}, "application/merge-patch+json")
              .code == 200);
  REQUIRE(c.post("/api/v1/namespaces/default/services", service("web", {{"ipFamilyPolicy", "PreferDualStack"}})).code ==
          201);
  auto slices = [&] {
    std::map<std::string, std::set<std::string>> out;  // addressType -> addresses
    json items = c.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector="
                       "kubernetes.io%2Fservice-name%3Dweb")
                     .body["items"];
    for (const auto& s : items) {
      auto& a = out[s.value("addressType", "")];
      for (const auto& e : s["endpoints"])
        for (const auto& ip : e["addresses"]) a.insert(ip.get<std::string>());
    }
    return out;
  };
  using Slices = std::map<std::string, std::set<std::string>>;
  const Slices both = {{"IPv4", {"10.244.1.5", "10.244.1.6"}}, {"IPv6", {"fd00:10:244:1::5"}}};
  REQUIRE(eventually([&] { return slices() == both; }));
  // Back to SingleStack: the IPv6 slice goes.
  REQUIRE(c.patch("/api/v1/namespaces/default/services/web", {{"spec", {{"ipFamilyPolicy", "SingleStack"}}}},
                  "application/merge-patch+json")
              .code == 200);
  const Slices v4 = {{"IPv4", {"10.244.1.5", "10.244.1.6"}}};
  REQUIRE(eventually([&] { return slices() == v4; }));
  // An IPv6-only Service: an IPv6 slice only.
  REQUIRE(c.post("/api/v1/namespaces/default/services", service("six", {{"ipFamilies", {"IPv6"}}})).code == 201);
  REQUIRE(eventually([&] {
    auto items = c.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector="
                       "kubernetes.io%2Fservice-name%3Dsix")
                     .body["items"];
    return items.size() == 1 && items[0]["addressType"] == "IPv6" && items[0]["endpoints"].size() == 1 &&
           items[0]["endpoints"][0]["addresses"][0] == "fd00:10:244:1::5";
  }));
  // A Service stored without ipFamilies (the control API stores what it is given): its clusterIP's family.
  REQUIRE(fake.apply(KubeResource::kServices,
                     {{"metadata", {{"name", "legacy"}, {"namespace", "default"}}},
                      {"spec",
                       {{"clusterIP", "fd00:10:96::77"}, {"selector", {{"app", "web"}}}, {"ports", {{{"port", 80}}}}}}})
              .ok());
  REQUIRE(eventually([&] {
    auto items = c.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector="
                       "kubernetes.io%2Fservice-name%3Dlegacy")
                     .body["items"];
    return items.size() == 1 && items[0]["addressType"] == "IPv6";
  }));
}
