// The real dpu-cni binary, run as a runtime runs it (controlled environment,
// config on stdin), against a stand-in host-shim on a unix socket: exit codes
// and stdout JSON for good input and for each kind of bad input. Needs no root.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "plugin_exec.h"

using namespace dpu::cni::test;
using nlohmann::json;
namespace v1 = dpu::cni::v1;

namespace {

std::string socketPath(const char* tag) {
  return "/tmp/dpu-cni-test-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}

std::map<std::string, std::string> addEnv() {
  return {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "ctr-" + std::to_string(::getpid())},
          {"CNI_NETNS", "/proc/self/ns/net"}, {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"}};
}

std::string conf(const std::string& socket, const std::string& version = "1.0.0") {
  return R"({"cniVersion":")" + version + R"(","name":"dpunet","type":"dpu-cni","socket":")" + socket + R"("})";
}

// Every failure is the spec's error object with exit code 1.
json expectError(const Exec& e, int code) {
  INFO("stdout: " << e.out << "\nstderr: " << e.err);
  CHECK(e.exit_code == 1);
  json j = json::parse(e.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["code"] == code);
  CHECK(j.contains("cniVersion"));
  CHECK(j["msg"].is_string());
  CHECK(j["details"].is_string());
  return j;
}

}  // namespace

TEST_CASE("binary: ADD through the socket prints the result, exit 0") {
  FakeHostShim shim(socketPath("ok"), podAddedResponse());
  auto e = runPlugin(DPU_CNI_BINARY, addEnv(), conf(shim.path()));
  INFO(e.err);
  REQUIRE(e.exit_code == 0);
  json j = json::parse(e.out);
  CHECK(j["cniVersion"] == "1.0.0");
  CHECK(j["interfaces"][0]["name"] == "eth0");
  CHECK(j["ips"][0]["address"] == "10.244.1.5/24");
  CHECK_FALSE(j["ips"][0].contains("version"));
  CHECK(shim.lastCommand() == v1::ADD);

  auto old = runPlugin(DPU_CNI_BINARY, addEnv(), conf(shim.path(), "0.4.0"));
  REQUIRE(old.exit_code == 0);
  CHECK(json::parse(old.out)["ips"][0]["version"] == "4");
}

TEST_CASE("binary: VERSION") {
  auto e = runPlugin(DPU_CNI_BINARY, {{"CNI_COMMAND", "VERSION"}}, R"({"cniVersion":"1.0.0"})");
  REQUIRE(e.exit_code == 0);
  json j = json::parse(e.out);
  CHECK(j["cniVersion"] == "1.0.0");
  CHECK(j["supportedVersions"] == json::array({"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}));
}

TEST_CASE("binary: DEL, CHECK, STATUS, GC succeed silently") {
  v1::CniResponse empty;
  empty.mutable_result();
  FakeHostShim shim(socketPath("quiet"), empty);
  auto env = addEnv();
  env["CNI_COMMAND"] = "DEL";
  env.erase("CNI_NETNS");
  auto del = runPlugin(DPU_CNI_BINARY, env, conf(shim.path()));
  CHECK(del.exit_code == 0);
  CHECK(del.out.empty());
  env = addEnv();
  env["CNI_COMMAND"] = "CHECK";
  std::string check_conf = R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","socket":")" + shim.path() +
                           R"(","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}})";
  auto check = runPlugin(DPU_CNI_BINARY, env, check_conf);
  CHECK(check.exit_code == 0);
  auto status = runPlugin(DPU_CNI_BINARY, {{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/usr/lib/cni"}},
                          conf(shim.path(), "1.1.0"));
  CHECK(status.exit_code == 0);
  CHECK(shim.lastCommand() == v1::STATUS);
  std::string gc_conf = R"({"cniVersion":"1.1.0","name":"dpunet","type":"dpu-cni","socket":")" + shim.path() +
                        R"(","cni.dev/valid-attachments":[]})";
  auto gc = runPlugin(DPU_CNI_BINARY, {{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/usr/lib/cni"}}, gc_conf);
  CHECK(gc.exit_code == 0);
  CHECK(shim.lastCommand() == v1::GC);
}

TEST_CASE("binary: bad input gets the spec's code and never reaches host-shim") {
  FakeHostShim shim(socketPath("bad"), podAddedResponse());
  SECTION("malformed JSON: 6") {
    auto j = expectError(runPlugin(DPU_CNI_BINARY, addEnv(), "{\"cniVersion\": \"1.0.0\", "), 6);
  }
  SECTION("unknown cniVersion: 1") {
    auto j = expectError(runPlugin(DPU_CNI_BINARY, addEnv(), conf(shim.path(), "7.0.0")), 1);
    CHECK(j["cniVersion"] == "7.0.0");
  }
  SECTION("missing environment: 4, naming the variables") {
    auto env = addEnv();
    env.erase("CNI_CONTAINERID");
    env.erase("CNI_IFNAME");
    auto j = expectError(runPlugin(DPU_CNI_BINARY, env, conf(shim.path())), 4);
    CHECK_THAT(j["msg"].get<std::string>(), Catch::Contains("CNI_CONTAINERID,CNI_IFNAME"));
  }
  SECTION("no CNI_COMMAND: 4") {
    expectError(runPlugin(DPU_CNI_BINARY, {}, conf(shim.path())), 4);
  }
  SECTION("ifname over 15 characters: 4 (an invalid CNI_IFNAME, as libcni's own check says)") {
    auto env = addEnv();
    env["CNI_IFNAME"] = "sixteen-chars-xx";
    auto j = expectError(runPlugin(DPU_CNI_BINARY, env, conf(shim.path())), 4);
    CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("at most 15"));
  }
  SECTION("netns that does not exist: 4 on ADD") {
    auto env = addEnv();
    env["CNI_NETNS"] = "/run/netns/no-such-ns-" + std::to_string(::getpid());
    auto j = expectError(runPlugin(DPU_CNI_BINARY, env, conf(shim.path())), 4);
    CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("does not exist"));
  }
  SECTION("a field of ours with the wrong type: 7, naming it") {
    std::string c = R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","mtu":"big"})";
    auto j = expectError(runPlugin(DPU_CNI_BINARY, addEnv(), c), 7);
    CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("mtu"));
  }
  SECTION("ipam: 2, with key and value") {
    std::string c = R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","ipam":{"type":"host-local"}})";
    auto j = expectError(runPlugin(DPU_CNI_BINARY, addEnv(), c), 2);
    CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("ipam"));
  }
  SECTION("unknown CNI_ARGS key without IgnoreUnknown: 4") {
    auto env = addEnv();
    env["CNI_ARGS"] = "K8S_POD_NAME=a;COLOUR=blue";
    auto j = expectError(runPlugin(DPU_CNI_BINARY, env, conf(shim.path())), 4);
    CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("COLOUR"));
  }
  CHECK(shim.requests() == 0);
}

TEST_CASE("binary: a megabyte of nested arrays is refused before it is parsed, in a few MB") {
  FakeHostShim shim(socketPath("deep"), podAddedResponse());
  // 500,000 nested arrays once grew the plugin to 41 MB before it answered.
  auto hostile = runPlugin(DPU_CNI_BINARY, addEnv(), std::string(500000, '[') + std::string(500000, ']'));
  CHECK_THAT(expectError(hostile, 6)["details"].get<std::string>(), Catch::Contains("at most 256 KiB"));
  auto deep = runPlugin(DPU_CNI_BINARY, addEnv(), std::string(100000, '[') + std::string(100000, ']'));
  auto j = expectError(deep, 6);
  CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("levels deep"));
  // The same binary answering a good ADD, for scale.
  auto good = runPlugin(DPU_CNI_BINARY, addEnv(), conf(shim.path()));
  REQUIRE(good.exit_code == 0);
  INFO("peak RSS: " << hostile.max_rss_kb << " KiB refusing the megabyte, " << deep.max_rss_kb
                      << " KiB refusing 200 KB of nesting, " << good.max_rss_kb << " KiB for an ADD");
  CHECK(hostile.max_rss_kb < good.max_rss_kb + 4096);
  CHECK(deep.max_rss_kb < good.max_rss_kb + 4096);
  CHECK(shim.requests() == 1);
}

TEST_CASE("binary: a refusal is logged to the config's logFile, not to stderr") {
  std::string log = "/tmp/dpu-cni-test-" + std::to_string(::getpid()) + ".log";
  ::unlink(log.c_str());
  std::string c = R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","logFile":")" + log + R"(","mtu":"big"})";
  auto e = runPlugin(DPU_CNI_BINARY, addEnv(), c);
  expectError(e, 7);
  CHECK(e.err.empty());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("refused ADD ctr-"));
  CHECK_THAT(text, Catch::Contains("mtu"));
  ::unlink(log.c_str());
  // Without a usable logFile the refusal stays on stderr.
  auto plain = runPlugin(DPU_CNI_BINARY, addEnv(), R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","mtu":"big"})");
  expectError(plain, 7);
  CHECK_THAT(plain.err, Catch::Contains("refused ADD"));
}

TEST_CASE("binary: host-shim down is 11 for ADD and DEL, 50 for STATUS") {
  std::string nowhere = socketPath("nowhere");
  expectError(runPlugin(DPU_CNI_BINARY, addEnv(), conf(nowhere)), 11);
  auto env = addEnv();
  env["CNI_COMMAND"] = "DEL";
  expectError(runPlugin(DPU_CNI_BINARY, env, conf(nowhere)), 11);
  expectError(runPlugin(DPU_CNI_BINARY, {{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/x"}}, conf(nowhere, "1.1.0")), 50);
}

TEST_CASE("binary: host-shim's refusal is passed on") {
  v1::CniResponse refusal;
  auto* e = refusal.mutable_error();
  e->set_code(7);
  e->set_msg("deviceID is not in the VF pool");
  e->set_details("0000:03:00.7 is not one of pf0's pool VFs 0-3; pick one of them or leave deviceID out");
  FakeHostShim shim(socketPath("refuse"), refusal);
  auto j = expectError(runPlugin(DPU_CNI_BINARY, addEnv(), conf(shim.path())), 7);
  CHECK_THAT(j["details"].get<std::string>(), Catch::Contains("pool"));
}
