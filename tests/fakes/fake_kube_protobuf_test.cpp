// The fake API server's decoder of Kubernetes protobuf bodies: objects built
// here byte by byte in the wire format client-go's generated marshalling
// writes (every non-pointer field, zero or not; pointer fields only when set)
// decode to the JSON kubectl would have sent, and every malformed or unknown
// input is refused whole, naming what is wrong. kubectl itself is the peer in
// fake_kube_kubectl_test.sh.
#include <catch2/catch.hpp>

#include <string>

#include "fake_kube_protobuf.h"

using namespace dpu::fakes;
using nlohmann::json;

namespace {

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string len(uint32_t field, const std::string& bytes) { return varint((field << 3) | 2) + varint(bytes.size()) + bytes; }
std::string num(uint32_t field, int64_t v) { return varint(field << 3) + varint(static_cast<uint64_t>(v)); }
std::string entry(const std::string& k, const std::string& v) { return len(1, k) + len(2, v); }

std::string envelope(const std::string& api_version, const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + len(1, len(1, api_version) + len(2, kind)) + len(2, raw) + len(3, "") + len(4, "");
}

// ObjectMeta as Go writes it for a new object: every string, empty or not, and a zero Time.
std::string meta(const std::string& name, const std::string& ns) {
  return len(1, name) + len(2, "") + len(3, ns) + len(4, "") + len(5, "") + len(6, "") + num(7, 0) + len(8, "") +
         len(11, entry("app", "web")) + len(11, entry("tier", ""));
}

}  // namespace

TEST_CASE("kube protobuf: a Service as kubectl create service sends it", "[fake-kube]") {
  std::string port80 = len(1, "80-8080") + len(2, "TCP") + num(3, 80) + len(4, num(1, 0) + num(2, 8080) + len(3, "")) +
                       num(5, 0);
  std::string port443 = len(1, "https") + len(2, "TCP") + len(6, "") + num(3, 443) +
                        len(4, num(1, 1) + num(2, 0) + len(3, "web-tls")) + num(5, 30443);
  std::string spec = len(1, port80) + len(1, port443) + len(2, entry("app", "web")) + len(3, "") + len(4, "NodePort") +
                     len(7, "") + num(12, 0) + num(13, 0) + num(20, 0);
  std::string raw = len(1, meta("web", "team-a")) + len(2, spec) + len(3, len(1, ""));
  auto obj = decodeKubeProtobuf(envelope("v1", "Service", raw));
  REQUIRE(obj.ok());
  CHECK((*obj)["apiVersion"] == "v1");
  CHECK((*obj)["kind"] == "Service");
  CHECK((*obj)["metadata"] == json{{"name", "web"}, {"namespace", "team-a"}, {"labels", {{"app", "web"}, {"tier", ""}}}});
  const json& s = (*obj)["spec"];
  CHECK(s["ports"][0] == json{{"name", "80-8080"}, {"protocol", "TCP"}, {"port", 80}, {"targetPort", 8080}});
  // A named target port stays a string; appProtocol was sent (a pointer field), so it is kept even empty.
  CHECK(s["ports"][1] == json{{"name", "https"}, {"protocol", "TCP"}, {"appProtocol", ""}, {"port", 443},
                              {"targetPort", "web-tls"}, {"nodePort", 30443}});
  CHECK(s["selector"] == json{{"app", "web"}});
  CHECK(s["type"] == "NodePort");
  // Zero values of plain fields are what JSON leaves out; a pointer field that arrived false means false.
  CHECK_FALSE(s.contains("clusterIP"));
  CHECK_FALSE(s.contains("publishNotReadyAddresses"));
  CHECK(s["allocateLoadBalancerNodePorts"] == false);
  CHECK_FALSE(obj->contains("status"));
}

TEST_CASE("kube protobuf: a Namespace and DeleteOptions", "[fake-kube]") {
  auto ns = decodeKubeProtobuf(envelope("v1", "Namespace", len(1, meta("team-a", "")) + len(2, "") + len(3, len(1, ""))));
  REQUIRE(ns.ok());
  CHECK(*ns == json{{"apiVersion", "v1"}, {"kind", "Namespace"},
                    {"metadata", {{"name", "team-a"}, {"labels", {{"app", "web"}, {"tier", ""}}}}}});
  // A timestamp is RFC 3339 text, as in JSON.
  auto stamped = decodeKubeProtobuf(envelope("v1", "Namespace", len(1, len(1, "x") + len(8, num(1, 1700000000)))));
  REQUIRE(stamped.ok());
  CHECK((*stamped)["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z");
  auto del = decodeKubeProtobuf(envelope("meta.k8s.io/v1", "DeleteOptions", num(1, 0) + len(4, "Foreground")));
  REQUIRE(del.ok());
  CHECK((*del)["gracePeriodSeconds"] == 0);  // sent: "delete now", not "the default grace"
  CHECK((*del)["propagationPolicy"] == "Foreground");
}

TEST_CASE("kube protobuf: what it cannot decode is refused whole, with the reason", "[fake-kube]") {
  auto err = [](const std::string& body) {
    auto r = decodeKubeProtobuf(body);
    REQUIRE_FALSE(r.ok());
    return std::make_pair(r.code(), r.error());
  };
  auto [c1, m1] = err(envelope("v1", "Service", len(2, num(99, 1))));
  CHECK(c1 == dpu::ErrorCode::kNotSupported);
  CHECK_THAT(m1, Catch::Contains("field 99 of ServiceSpec (at spec)") && Catch::Contains("send the object as JSON"));
  auto [c2, m2] = err(envelope("v1", "Pod", len(1, meta("p", "default"))));
  CHECK(c2 == dpu::ErrorCode::kNotSupported);
  CHECK_THAT(m2, Catch::Contains("not v1 Pod"));
  auto [c3, m3] = err(std::string("{\"kind\":\"Service\"}"));
  CHECK(c3 == dpu::ErrorCode::kInvalid);
  CHECK_THAT(m3, Catch::Contains("magic"));
  std::string full = envelope("v1", "Service", len(1, meta("web", "a")));
  auto [c4, m4] = err(full.substr(0, full.size() - 9));
  CHECK(c4 == dpu::ErrorCode::kInvalid);
  CHECK_THAT(m4, Catch::Contains("truncated"));
  // A string field sent as a varint.
  auto [c5, m5] = err(envelope("v1", "Service", len(1, num(1, 7))));
  CHECK(c5 == dpu::ErrorCode::kInvalid);
  CHECK_THAT(m5, Catch::Contains("metadata.name: wire type 0"));
  auto [c6, m6] = err(std::string("k8s\0", 4) + len(2, ""));
  CHECK(c6 == dpu::ErrorCode::kInvalid);
  CHECK_THAT(m6, Catch::Contains("no typeMeta"));
}
