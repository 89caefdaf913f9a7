// The attach API without sockets: body formats, limits, status codes, and the
// operator endpoints (/healthz, /readyz, /metrics).
#include <catch2/catch.hpp>

#include <google/protobuf/util/json_util.h>


#include "control/api_router.h"
#include "control_test_util.h"

using namespace dpu::control;
using dpu::control::testing::readyAgent;
using dpu::control::testing::TempDir;

namespace {

struct RouterFixture {
  TempDir dir;
  ModelState model;
  std::unique_ptr<Agent> agent;
  std::string not_ready;
  std::unique_ptr<ApiRouter> router;
  RouterFixture() {
    agent = readyAgent(dir.path(), model);
    REQUIRE(agent);
    ApiRouter::Hooks hooks;
    hooks.not_ready_reason = [this] { return not_ready; };
    hooks.metrics_text = [] { return std::string("# HELP x y\n# TYPE x gauge\nx 1\n"); };
    router = std::make_unique<ApiRouter>(*agent, hooks);
  }
  ApiAnswer call(const std::string& method, const std::string& path, const std::string& body = "",
                 const std::string& type = "", const std::string& accept = "") {
    return router->handle(ApiRequest{method, path, type, accept, body});
  }
};

const char* kAttachJson =
    R"({"kind":"POD","pod":{"namespace":"default","name":"web-1"},"sandboxId":"s1","ifname":"eth0","pfIndex":0,"vfIndex":3})";

attv1::ApiError errorOf(const ApiAnswer& a) {
  attv1::ApiError e;
  if (a.content_type == kJsonType) {
    REQUIRE(google::protobuf::util::JsonStringToMessage(a.body, &e).ok());
  } else {
    REQUIRE(e.ParseFromString(a.body));
  }
  return e;
}

}  // namespace

TEST_CASE("attach with a JSON body answers JSON; with protobuf answers protobuf") {
  RouterFixture f;
  auto a = f.call("POST", "/v1/attachments", kAttachJson, "application/json; charset=utf-8");
  REQUIRE(a.status == 200);
  CHECK(a.content_type == kJsonType);
  attv1::AttachResponse resp;
  REQUIRE(google::protobuf::util::JsonStringToMessage(a.body, &resp).ok());
  CHECK(resp.attachment().representor() == "pf0vf3");

  attv1::AttachRequest req;
  req.set_kind(attv1::POD);
  req.mutable_pod()->set_namespace_("default");
  req.mutable_pod()->set_name("web-2");
  req.set_sandbox_id("s2");
  req.set_ifname("eth0");
  req.set_vf_index(4);
  auto p = f.call("POST", "/v1/attachments", req.SerializeAsString(), kProtobufType);
  REQUIRE(p.status == 200);
  CHECK(p.content_type == kProtobufType);
  attv1::AttachResponse presp;
  REQUIRE(presp.ParseFromString(p.body));
  CHECK(presp.attachment().vf_index() == 4);
  CHECK(presp.boot_id() == f.agent->bootId());

  // No Content-Type: protobuf (what host-shim sends); Accept can ask for JSON.
  auto l = f.call("GET", "/v1/attachments", "", "", "application/json");
  CHECK(l.status == 200);
  CHECK(l.content_type == kJsonType);
  CHECK_THAT(l.body, Catch::Contains("web-2"));
  auto lp = f.call("GET", "/v1/attachments");
  attv1::AttachmentList list;
  REQUIRE(list.ParseFromString(lp.body));
  CHECK(list.attachments_size() == 2);
  CHECK(list.attachments(0).dataplane_state() == "pending");

  // One attachment, as CHECK reads it: its dataplane state and the boot id.
  auto g = f.call("GET", "/v1/attachments/" + presp.attachment().id(), "", "", "application/json");
  REQUIRE(g.status == 200);
  attv1::AttachResponse one;
  REQUIRE(google::protobuf::util::JsonStringToMessage(g.body, &one).ok());
  CHECK(one.attachment().vf_index() == 4);
  CHECK(one.attachment().dataplane_state() == "pending");
  CHECK(one.boot_id() == f.agent->bootId());
  auto missing = f.call("GET", "/v1/attachments/att-gone", "", "", "application/json");
  CHECK(missing.status == 404);
  CHECK_THAT(missing.body, Catch::Contains("no attachment att-gone"));
}

TEST_CASE("malformed, wrongly typed, oversized and unknown bodies get a 4xx with the reason") {
  RouterFixture f;
  struct Case {
    std::string body, type;
    uint16_t status;
    std::string text;
  };
  std::vector<Case> cases = {
      {"{\"kind\":", "application/json", 400, "not a valid dpu.attach.v1.AttachRequest in JSON"},
      {R"({"kind":"POD","vfIndex":"three"})", "application/json", 400, "vf_index"},
      {R"({"kind":"POD","vfIndex":-1})", "application/json", 400, "vf_index"},
      {R"({"kind":"SIDECAR"})", "application/json", 400, "SIDECAR"},
      {R"({"kind":"POD","colour":"red"})", "application/json", 400, "colour"},
      {R"([1,2,3])", "application/json", 400, "not a valid"},
      {"\xff\xff\xff\xff\xff", kProtobufType, 400, "not a valid dpu.attach.v1.AttachRequest protobuf"},
      {std::string(70000, 'a'), "application/json", 413, "larger than the limit of 65536"},
      {"kind=POD", "application/x-www-form-urlencoded", 415, "send application/x-protobuf or application/json"},
      {"{}", "application/json", 400, "kind must be POD or MANAGEMENT"},
  };
  for (const auto& c : cases) {
    INFO(c.body.substr(0, 80));
    auto a = f.call("POST", "/v1/attachments", c.body, c.type);
    CHECK(a.status == c.status);
    auto e = errorOf(a);
    CHECK(e.http_status() == c.status);
    CHECK_THAT(e.message(), Catch::Contains(c.text));
  }
  CHECK(f.agent->attachmentCount() == 0);
}

TEST_CASE("409 names the holder; detach by id and by body") {
  RouterFixture f;
  REQUIRE(f.call("POST", "/v1/attachments", kAttachJson, kJsonType).status == 200);
  std::string other = R"({"kind":"POD","pod":{"namespace":"default","name":"web-9"},"sandboxId":"s9","ifname":"eth0","vfIndex":3})";
  auto c = f.call("POST", "/v1/attachments", other, kJsonType);
  CHECK(c.status == 409);
  auto e = errorOf(c);
  std::string holder = e.holder();
  CHECK_FALSE(holder.empty());

  auto d = f.call("DELETE", "/v1/attachments/" + holder, "", "", kJsonType);
  CHECK(d.status == 200);
  CHECK_THAT(d.body, Catch::Contains("\"found\":true"));
  auto again = f.call("DELETE", "/v1/attachments/" + holder, "", "", kJsonType);
  CHECK(again.status == 200);
  CHECK_THAT(again.body, Catch::Contains("\"found\":false"));
  auto byVf = f.call("POST", "/v1/attachments:detach", R"({"byVf":true,"pfIndex":0,"vfIndex":3})", kJsonType);
  CHECK(byVf.status == 200);
  auto bad = f.call("POST", "/v1/attachments:detach", R"({})", kJsonType);
  CHECK(bad.status == 400);
}

TEST_CASE("unknown paths and methods") {
  RouterFixture f;
  CHECK(f.call("GET", "/v2/attachments").status == 404);
  CHECK(f.call("PUT", "/v1/attachments").status == 405);
  CHECK(f.call("PUT", "/v1/attachments/x").status == 405);
  CHECK(f.call("GET", "/v1/attachments/x").status == 404);  // read one: unknown
  CHECK(f.call("POST", "/healthz").status == 405);
}

TEST_CASE("health, readiness with the reason, and metrics in Prometheus text") {
  RouterFixture f;
  CHECK(f.call("GET", "/healthz").body == "ok\n");
  CHECK(f.call("GET", "/readyz").status == 200);
  f.not_ready = "not connected to the dataplane";
  auto r = f.call("GET", "/readyz");
  CHECK(r.status == 503);
  CHECK(r.body == "not ready: not connected to the dataplane\n");
  auto h = f.call("GET", "/v1/health", "", "", kJsonType);
  attv1::Health health;
  REQUIRE(google::protobuf::util::JsonStringToMessage(h.body, &health).ok());
  CHECK_FALSE(health.ready());
  CHECK(health.reason() == "not connected to the dataplane");
  CHECK(health.boot_id() == f.agent->bootId());
  CHECK(health.node_name() == "node-a");

  auto m = f.call("GET", "/metrics");
  CHECK(m.status == 200);
  CHECK(m.content_type.rfind("text/plain; version=0.0.4", 0) == 0);
  CHECK_THAT(m.body, Catch::StartsWith("# HELP x y\n"));
  CHECK_THAT(m.body, Catch::Contains("# TYPE dpu_agent_api_request_duration_seconds histogram\n"));
  CHECK_THAT(m.body, Catch::Contains("dpu_agent_api_request_duration_seconds_bucket{le=\"+Inf\"} "));
  CHECK_THAT(m.body, Catch::Contains("dpu_agent_api_requests_total{code=\"503\"} 1\n"));
}
