// host-shim config: a good file in JSON and YAML, and each kind of bad field
// failing with a message that names it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "host-shim/config.h"

using namespace dpu::hostshim;

namespace {

std::string good(const std::string& extra = "") {
  return R"({"socket": "/run/x.sock", "stateDir": "/tmp/st", "sysfsRoot": "/tmp/sys",
    "pfs": [{"name": "p0", "index": 0, "vfs": "0-7", "reservedVfs": "7"}],
    "dpu": {"url": "http://169.254.0.2:9443", "timeoutMs": 1500, "insecure": true},
    "managementPort": {"pf": 0, "vf": 7, "ifname": "dpu-mgmt", "clusterCidrs": ["10.244.0.0/16"],
                       "serviceCidrs": ["10.96.0.0/12"]})" +
         extra + "}";
}

std::string errorOf(const std::string& text) {
  auto c = parseConfig(text, "test");
  REQUIRE_FALSE(c.ok());
  return c.error();
}

}  // namespace

TEST_CASE("VF ranges parse and refuse nonsense") {
  auto r = parseVfRanges("0-3, 6,9-10");
  REQUIRE(r.ok());
  CHECK(*r == std::set<uint32_t>{0, 1, 2, 3, 6, 9, 10});
  CHECK(parseVfRanges("").ok());
  CHECK(parseVfRanges("")->empty());
  CHECK_THAT(parseVfRanges("5-2").error(), Catch::Contains("reversed"));
  CHECK_THAT(parseVfRanges("a").error(), Catch::Contains("not a VF number"));
  CHECK_THAT(parseVfRanges("1-5000").error(), Catch::Contains("above"));
}

TEST_CASE("a good config reads in JSON and in YAML") {
  auto c = parseConfig(good(), "test");
  REQUIRE(c.ok());
  CHECK(c->socket_path == "/run/x.sock");
  REQUIRE(c->pfs.size() == 1);
  CHECK(c->pfs[0].pool.size() == 7);
  CHECK(c->pfs[0].reserved == std::set<uint32_t>{7});
  CHECK_FALSE(c->pfs[0].pool.count(7));
  CHECK(c->dpu.request_timeout_ms == 1500);
  CHECK(c->management.enabled);
  CHECK(c->management.ifname == "dpu-mgmt");

  auto y = parseConfig(R"(
socket: /run/y.sock
pfs:
  - name: p1
    index: 2
    vfs: "0-3"
dpu:
  url: http://10.0.0.1:9443
  insecure: true
log:
  level: debug
)",
                       "yaml");
  REQUIRE(y.ok());
  CHECK(y->pfs[0].index == 2);
  CHECK(y->pfs[0].pool.size() == 4);
  CHECK_FALSE(y->management.enabled);
  CHECK(y->log_level == "debug");
}

TEST_CASE("bad fields fail naming the field") {
  CHECK_THAT(errorOf(R"({"dpu": {"url": "http://x"}})"), Catch::Contains("pfs"));
  CHECK_THAT(errorOf(R"({"pfs": [{"name": "p0", "vfs": "7-1"}], "dpu": {"url": "http://x"}})"),
             Catch::Contains("pfs[0].vfs") && Catch::Contains("reversed"));
  CHECK_THAT(errorOf(R"({"pfs": [{"name": "a-name-way-too-long", "vfs": "0"}], "dpu": {"url": "http://x"}})"),
             Catch::Contains("pfs[0].name"));
  CHECK_THAT(errorOf(R"({"pfs": [{"name": "p0", "vfs": "0"}], "dpu": {"url": "ftp://x"}})"),
             Catch::Contains("dpu.url"));
  CHECK_THAT(errorOf(R"({"pfs": [{"name": "p0", "vfs": "0"}], "dpu": {"url": "https://x", "certFile": "/c"}})"),
             Catch::Contains("certFile and keyFile go together"));
  CHECK_THAT(
      errorOf(R"({"pfs": [{"name": "p0", "vfs": "0"}], "dpu": {"url": "https://x", "caFile": "/nonexistent/ca.pem", "insecure": true}})"),
      Catch::Contains("dpu.caFile") && Catch::Contains("does not exist"));
  CHECK_THAT(
      errorOf(
          R"({"pfs": [{"name": "p0", "vfs": "0"}, {"name": "p1", "index": 0, "vfs": "0"}], "dpu": {"url": "http://x"}})"),
      Catch::Contains("pfs[1].index") && Catch::Contains("another PF"));
  CHECK_THAT(errorOf(good(R"(, "sockett": "/x")")), Catch::Contains("sockett") && Catch::Contains("unknown field"));
  CHECK_THAT(errorOf(good(R"(, "log": {"level": "loud"})")), Catch::Contains("log.level"));
  // The management VF must be reserved, or a pod could get it.
  std::string not_reserved = R"({"pfs": [{"name": "p0", "vfs": "0-7"}], "dpu": {"url": "http://x", "insecure": true},
      "managementPort": {"vf": 7}})";
  CHECK_THAT(errorOf(not_reserved), Catch::Contains("managementPort.vf") && Catch::Contains("reservedVfs"));
  std::string bad_cidr = R"({"pfs": [{"name": "p0", "vfs": "0-7", "reservedVfs": "7"}], "dpu": {"url": "http://x", "insecure": true},
      "managementPort": {"vf": 7, "clusterCidrs": ["10.244.0.0/33"]}})";
  CHECK_THAT(errorOf(bad_cidr), Catch::Contains("managementPort.clusterCidrs[0]"));
  CHECK_THAT(errorOf("{not json"), Catch::Contains("test"));
}

TEST_CASE("the DPU link is mutual TLS unless insecure says otherwise, or the agent is on this host") {
  auto cfg = [](const std::string& dpu) {
    return R"({"pfs": [{"name": "p0", "vfs": "0-7"}], "dpu": )" + dpu + "}";
  };
  // Plain HTTP to the DPU: refused, naming the remedies.
  CHECK_THAT(errorOf(cfg(R"({"url": "http://169.254.0.2:9443"})")),
             Catch::Contains("dpu.url") && Catch::Contains("plain HTTP") && Catch::Contains("insecure: true") &&
                 Catch::Contains("make-tls.sh"));
  // TLS without a client certificate: the agent would refuse it anyway.
  CHECK_THAT(errorOf(cfg(R"({"url": "https://169.254.0.2:9443"})")),
             Catch::Contains("dpu.certFile") && Catch::Contains("names this node"));
  // Said in so many words: allowed.
  auto plain = parseConfig(cfg(R"({"url": "http://169.254.0.2:9443", "insecure": true})"), "test");
  REQUIRE(plain.ok());
  CHECK(plain->dpu.insecure);
  CHECK_THAT(errorOf(cfg(R"({"url": "http://169.254.0.2:9443", "insecure": "yes"})")), Catch::Contains("dpu.insecure"));
  // An agent on this host: nothing crosses the link.
  for (const char* url : {"http://127.0.0.1:9443", "http://localhost:9443/", "http://[::1]:9443", "http://127.0.0.2"}) {
    INFO(url);
    CHECK(parseConfig(cfg(std::string(R"({"url": ")") + url + R"("})"), "test").ok());
  }
  // A name is not loopback because it starts like one.
  CHECK_THAT(errorOf(cfg(R"({"url": "http://127.0.0.1.example.com:9443"})")), Catch::Contains("plain HTTP"));
}

TEST_CASE("the CNI socket's mode, allowed uids and connection bound") {
  auto c = parseConfig(good(), "test");
  REQUIRE(c.ok());
  CHECK(c->socket_mode == 0660);
  CHECK(c->socket_allowed_uids.empty());
  CHECK(c->max_connections == 64);
  CHECK(c->dpu.reconcile_interval_ms == 30000);
  auto d = parseConfig(good(R"(, "socketMode": "0600", "socketAllowedUids": [1000, 65534], "maxConnections": 8)"),
                       "test");
  REQUIRE(d.ok());
  CHECK(d->socket_mode == 0600);
  CHECK(d->socket_allowed_uids == std::set<uint32_t>{1000, 65534});
  CHECK(d->max_connections == 8);
  CHECK_THAT(errorOf(good(R"(, "socketMode": "660x")")), Catch::Contains("socketMode"));
  CHECK_THAT(errorOf(good(R"(, "socketMode": "1777")")), Catch::Contains("octal file mode"));
  CHECK_THAT(errorOf(good(R"(, "socketMode": "0066")")), Catch::Contains("its owner"));
  CHECK_THAT(errorOf(good(R"(, "socketAllowedUids": ["root"])")), Catch::Contains("socketAllowedUids"));
  CHECK_THAT(errorOf(good(R"(, "socketAllowedUids": 5)")), Catch::Contains("list of user ids"));
  CHECK_THAT(errorOf(good(R"(, "maxConnections": 0)")), Catch::Contains("maxConnections"));
}

TEST_CASE("the CNI socket's group: a gid, or a group name resolved when the config is read") {
  CHECK_FALSE(parseConfig(good(), "test")->socket_group);
  auto by_gid = parseConfig(good(R"(, "socketGroup": 4321)"), "test");
  REQUIRE(by_gid.ok());
  CHECK(by_gid->socket_group == 4321u);
  // "root" is gid 0 on every host this runs on.
  auto by_name = parseConfig(good(R"(, "socketGroup": "root")"), "test");
  REQUIRE(by_name.ok());
  CHECK(by_name->socket_group == 0u);
  CHECK_THAT(errorOf(good(R"(, "socketGroup": "no-such-group-here")")),
             Catch::Contains("socketGroup") && Catch::Contains("no group named 'no-such-group-here'"));
  CHECK_THAT(errorOf(good(R"(, "socketGroup": -1)")), Catch::Contains("group name or a gid"));
  CHECK_THAT(errorOf(good(R"(, "socketGroup": "")")), Catch::Contains("group name or a gid"));
}

TEST_CASE("a config file names this host's own certificate through ${NODE_NAME}") {
  // One ConfigMap serves every host of the DaemonSet; each host's certificate
  // must name its node (the agent refuses another's), so the path carries it.
  char dir_template[] = "/tmp/hostshim-config-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  for (const char* f : {"ca.crt", "node7.crt", "node7.key"}) std::ofstream(dir + "/" + f) << "placeholder\n";
  const std::string file = dir + "/host-shim.yaml";
  std::ofstream(file) << "socket: /run/x.sock\nstateDir: /tmp/st\nsysfsRoot: /tmp/sys\n"
                         "pfs: [{name: p0, index: 0, vfs: \"0-7\"}]\n"
                         "dpu:\n  url: https://169.254.0.2:9443\n  caFile: " + dir + "/ca.crt\n"
                         "  certFile: " + dir + "/${NODE_NAME}.crt\n  keyFile: " + dir + "/${NODE_NAME}.key\n";
  setenv("NODE_NAME", "node7", 1);
  auto c = loadConfig(file);
  REQUIRE(c.ok());
  CHECK(c->dpu.cert_file == dir + "/node7.crt");
  CHECK(c->dpu.key_file == dir + "/node7.key");

  // Another node's name: that host has no such file, and says which.
  setenv("NODE_NAME", "node8", 1);
  CHECK_THAT(loadConfig(file).error(), Catch::Contains("node8.crt' does not exist"));
  // Unset: the variable is named, not a path that happens to be missing.
  unsetenv("NODE_NAME");
  CHECK_THAT(loadConfig(file).error(), Catch::Contains("NODE_NAME is not set"));
  std::filesystem::remove_all(dir);
}
