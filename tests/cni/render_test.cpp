// Results, errors and VERSION answers rendered exactly as each CNI version
// defines them (golden JSON, key order as libcni marshals it), chaining merges,
// and the verbs end to end against a stand-in for host-shim.
#include <catch2/catch.hpp>

#include <map>

#include "cni/plugin.h"
#include "cni/render.h"

using namespace dpu::cni;
namespace v1 = dpu::cni::v1;
using nlohmann::ordered_json;

namespace {

v1::CniResult sampleResult() {
  v1::CniResult r;
  auto* i = r.add_interfaces();
  i->set_name("eth0");
  i->set_mac("0a:58:0a:f4:01:05");
  i->set_mtu(1400);
  i->set_sandbox("/run/netns/pod1");
  i->set_pci_id("0000:03:00.2");
  auto* ip = r.add_ips();
  ip->set_address("10.244.1.5/24");
  ip->set_gateway("10.244.1.1");
  ip->set_interface(0);
  auto* ip6 = r.add_ips();
  ip6->set_address("fd00::5/64");
  ip6->set_interface(0);
  auto* rt = r.add_routes();
  rt->set_dst("0.0.0.0/0");
  rt->set_gw("10.244.1.1");
  rt->set_mtu(1400);
  r.mutable_dns()->add_nameservers("10.96.0.10");
  r.mutable_dns()->add_search("svc.cluster.local");
  return r;
}

}  // namespace

TEST_CASE("result golden JSON per version") {
  auto r = sampleResult();
  CHECK(renderResult(r, "1.1.0").dump() ==
        R"({"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:01:05","mtu":1400,)"
        R"("sandbox":"/run/netns/pod1","pciID":"0000:03:00.2"}],"ips":[{"interface":0,"address":"10.244.1.5/24",)"
        R"("gateway":"10.244.1.1"},{"interface":0,"address":"fd00::5/64"}],"routes":[{"dst":"0.0.0.0/0",)"
        R"("gw":"10.244.1.1","mtu":1400}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}})");
  CHECK(renderResult(r, "1.0.0").dump() ==
        R"({"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:01:05",)"
        R"("sandbox":"/run/netns/pod1"}],"ips":[{"interface":0,"address":"10.244.1.5/24",)"
        R"("gateway":"10.244.1.1"},{"interface":0,"address":"fd00::5/64"}],"routes":[{"dst":"0.0.0.0/0",)"
        R"("gw":"10.244.1.1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}})");
  CHECK(renderResult(r, "0.4.0").dump() ==
        R"({"cniVersion":"0.4.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:01:05",)"
        R"("sandbox":"/run/netns/pod1"}],"ips":[{"version":"4","interface":0,"address":"10.244.1.5/24",)"
        R"("gateway":"10.244.1.1"},{"version":"6","interface":0,"address":"fd00::5/64"}],"routes":[{"dst":"0.0.0.0/0",)"
        R"("gw":"10.244.1.1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}})");
}

TEST_CASE("empty parts are omitted; the config's dns is the fallback") {
  v1::CniResult r;
  r.add_interfaces()->set_name("net1");
  auto* ip = r.add_ips();
  ip->set_address("10.0.0.2/24");
  ip->set_interface(-1);
  CHECK(renderResult(r, "1.0.0").dump() ==
        R"({"cniVersion":"1.0.0","interfaces":[{"name":"net1"}],"ips":[{"address":"10.0.0.2/24"}]})");
  ordered_json dns = ordered_json::parse(R"({"nameservers":["1.1.1.1"]})");
  CHECK(renderResult(r, "1.0.0", &dns)["dns"] == dns);
}

TEST_CASE("chaining: ours is appended to prevResult with shifted interface indexes") {
  auto prev = ordered_json::parse(R"({"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"veth1"}],
      "ips":[{"interface":1,"address":"192.168.0.2/24"}],"routes":[{"dst":"192.168.0.0/16"}],
      "dns":{"nameservers":["9.9.9.9"]},"x-extra":true})");
  auto ours = renderResult(sampleResult(), "1.0.0");
  auto merged = mergeResults(prev, ours, "1.0.0");
  REQUIRE(merged["interfaces"].size() == 3);
  CHECK(merged["interfaces"][2]["name"] == "eth0");
  REQUIRE(merged["ips"].size() == 3);
  CHECK(merged["ips"][0]["interface"] == 1);
  CHECK(merged["ips"][1]["interface"] == 2);
  CHECK(merged["ips"][2]["interface"] == 2);
  CHECK(merged["routes"].size() == 2);
  CHECK(merged["dns"]["nameservers"][0] == "9.9.9.9");  // the earlier plugin's dns stays
  CHECK(merged["x-extra"] == true);
  auto empty_prev = ordered_json::parse(R"({"cniVersion":"1.0.0"})");
  auto m2 = mergeResults(empty_prev, ours, "1.0.0");
  CHECK(m2["ips"][0]["interface"] == 0);
  CHECK(m2["dns"]["nameservers"][0] == "10.96.0.10");
}

TEST_CASE("error and VERSION golden JSON") {
  CHECK(renderError("1.0.0", fail(ErrorCode::kInvalidConfig, "invalid network configuration", "mtu: bad")) ==
        "{\"cniVersion\":\"1.0.0\",\"code\":7,\"msg\":\"invalid network configuration\",\"details\":\"mtu: bad\"}\n");
  CHECK(renderError("0.4.0", Failure{11, "try again", ""}) == "{\"cniVersion\":\"0.4.0\",\"code\":11,\"msg\":\"try again\"}\n");
  CHECK(renderVersion("1.0.0") ==
        "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n");
  // Bytes that are not UTF-8 never make rendering fail.
  CHECK_NOTHROW(renderError("1.1.0", Failure{7, "bad \xff name", ""}));
}

namespace {

struct FakeShim {
  std::vector<v1::CniRequest> seen;
  std::optional<v1::CniResponse> answer;
  std::string transport_error;
  Transport transport() {
    return [this](const std::string&, const v1::CniRequest& req, dpu::ipc::Deadline) -> dpu::Result<v1::CniResponse> {
      seen.push_back(req);
      if (!transport_error.empty()) return dpu::Error{transport_error};
      return *answer;
    };
  }
};

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars](std::string_view k) -> std::optional<std::string> {
    auto it = vars.find(std::string(k));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> attachEnv(const std::string& verb) {
  return {{"CNI_COMMAND", verb}, {"CNI_CONTAINERID", "ctr1"}, {"CNI_NETNS", "/proc/self/ns/net"},
          {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"},
          {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"}};
}

}  // namespace

TEST_CASE("ADD forwards the request and prints the result") {
  FakeShim shim;
  shim.answer.emplace();
  *shim.answer->mutable_result() = sampleResult();
  auto out = run(envOf(attachEnv("ADD")),
                 R"({"cniVersion":"1.1.0","name":"dpunet","type":"dpu-cni","mtu":1400,"runtimeConfig":{"mac":"0a:58:0a:f4:01:05","deviceID":"0000:03:00.2"}})",
                 shim.transport());
  CHECK(out.exit_code == 0);
  REQUIRE(shim.seen.size() == 1);
  const auto& req = shim.seen[0];
  CHECK(req.command() == v1::ADD);
  CHECK(req.container_id() == "ctr1");
  CHECK(req.ifname() == "eth0");
  CHECK(req.netns() == "/proc/self/ns/net");
  CHECK(req.pod().namespace_() == "default");
  CHECK(req.pod().name() == "web");
  CHECK(req.network_name() == "dpunet");
  CHECK(req.cni_version() == "1.1.0");
  CHECK(req.device_id() == "0000:03:00.2");
  CHECK(req.requested_mac() == "0a:58:0a:f4:01:05");
  CHECK(req.requested_mtu() == 1400);
  auto printed = ordered_json::parse(out.stdout_text);
  CHECK(printed["cniVersion"] == "1.1.0");
  CHECK(printed["interfaces"][0]["pciID"] == "0000:03:00.2");
}

TEST_CASE("chained ADD merges into prevResult") {
  FakeShim shim;
  shim.answer.emplace();
  *shim.answer->mutable_result() = sampleResult();
  auto out = run(envOf(attachEnv("ADD")),
                 R"({"cniVersion":"1.0.0","name":"n","type":"dpu-cni","prevResult":{"cniVersion":"1.0.0",
                   "interfaces":[{"name":"lo0"}],"ips":[{"interface":0,"address":"127.0.0.2/8"}]}})",
                 shim.transport());
  REQUIRE(out.exit_code == 0);
  auto printed = ordered_json::parse(out.stdout_text);
  CHECK(printed["interfaces"].size() == 2);
  CHECK(printed["ips"][1]["interface"] == 1);
  CHECK_FALSE(shim.seen[0].prev_result_json().empty());
}

TEST_CASE("host-shim errors are passed on with their code") {
  FakeShim shim;
  shim.answer.emplace();
  auto* e = shim.answer->mutable_error();
  e->set_code(7);
  e->set_msg("VF not in the pool");
  e->set_details("deviceID 0000:03:00.7 is not one of the pool's VFs");
  auto out = run(envOf(attachEnv("ADD")), R"({"cniVersion":"1.0.0","name":"n","type":"dpu-cni"})", shim.transport());
  CHECK(out.exit_code == 1);
  auto printed = ordered_json::parse(out.stdout_text);
  CHECK(printed["code"] == 7);
  CHECK(printed["details"] == "deviceID 0000:03:00.7 is not one of the pool's VFs");
  CHECK(printed["cniVersion"] == "1.0.0");

  e->set_code(0);  // a confused peer must not read as success
  auto zero = run(envOf(attachEnv("ADD")), R"({"cniVersion":"1.0.0","name":"n","type":"dpu-cni"})", shim.transport());
  CHECK(ordered_json::parse(zero.stdout_text)["code"] == 999);
}

TEST_CASE("host-shim unreachable: 11 for ADD, DEL, CHECK and GC, 50 for STATUS") {
  FakeShim shim;
  shim.transport_error = "cannot connect to /run/x.sock: No such file or directory";
  const char* conf = R"({"cniVersion":"1.1.0","name":"n","type":"dpu-cni","prevResult":{},"cni.dev/valid-attachments":[]})";
  for (const char* verb : {"ADD", "DEL", "CHECK"}) {
    auto out = run(envOf(attachEnv(verb)), conf, shim.transport());
    CHECK(out.exit_code == 1);
    auto printed = ordered_json::parse(out.stdout_text);
    CHECK(printed["code"] == 11);
    CHECK_THAT(printed["details"].get<std::string>(), Catch::Contains("host-shim"));
  }
  auto gc = run(envOf({{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/x"}}), conf, shim.transport());
  CHECK(ordered_json::parse(gc.stdout_text)["code"] == 11);
  auto status = run(envOf({{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/x"}}), conf, shim.transport());
  CHECK(status.exit_code == 1);
  CHECK(ordered_json::parse(status.stdout_text)["code"] == 50);
}

TEST_CASE("DEL, CHECK, STATUS and GC print nothing on success") {
  FakeShim shim;
  shim.answer.emplace();
  shim.answer->mutable_result();
  const char* conf = R"({"cniVersion":"1.1.0","name":"n","type":"dpu-cni","prevResult":{},
      "cni.dev/valid-attachments":[{"containerID":"ctr1","ifname":"eth0"}]})";
  for (const char* verb : {"DEL", "CHECK"}) {
    auto out = run(envOf(attachEnv(verb)), conf, shim.transport());
    CHECK(out.exit_code == 0);
    CHECK(out.stdout_text.empty());
  }
  auto gc = run(envOf({{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/x"}}), conf, shim.transport());
  CHECK(gc.exit_code == 0);
  REQUIRE(shim.seen.back().valid_attachments_size() == 1);
  CHECK(shim.seen.back().valid_attachments(0).container_id() == "ctr1");
  auto status = run(envOf({{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/x"}}), conf, shim.transport());
  CHECK(status.exit_code == 0);
  CHECK(status.stdout_text.empty());
}

TEST_CASE("validation failures never reach host-shim") {
  FakeShim shim;
  auto out = run(envOf(attachEnv("ADD")), "{oops", shim.transport());
  CHECK(out.exit_code == 1);
  CHECK(ordered_json::parse(out.stdout_text)["code"] == 6);
  CHECK(shim.seen.empty());
}
