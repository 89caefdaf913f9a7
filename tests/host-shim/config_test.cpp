// host-shim config: a good file in JSON and YAML, and each kind of bad field
// failing with a message that names it.
#include <catch2/catch.hpp>

#include "host-shim/config.h"

using namespace dpu::hostshim;

namespace {

std::string good(const std::string& extra = "") {
  return R"({"socket": "/run/x.sock", "stateDir": "/tmp/st", "sysfsRoot": "/tmp/sys",
    "pfs": [{"name": "p0", "index": 0, "vfs": "0-7", "reservedVfs": "7"}],
    "dpu": {"url": "http://169.254.0.2:9443", "timeoutMs": 1500},
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
      errorOf(R"({"pfs": [{"name": "p0", "vfs": "0"}], "dpu": {"url": "https://x", "caFile": "/nonexistent/ca.pem"}})"),
      Catch::Contains("dpu.caFile") && Catch::Contains("does not exist"));
  CHECK_THAT(
      errorOf(
          R"({"pfs": [{"name": "p0", "vfs": "0"}, {"name": "p1", "index": 0, "vfs": "0"}], "dpu": {"url": "http://x"}})"),
      Catch::Contains("pfs[1].index") && Catch::Contains("another PF"));
  CHECK_THAT(errorOf(good(R"(, "sockett": "/x")")), Catch::Contains("sockett") && Catch::Contains("unknown field"));
  CHECK_THAT(errorOf(good(R"(, "log": {"level": "loud"})")), Catch::Contains("log.level"));
  // The management VF must be reserved, or a pod could get it.
  std::string not_reserved = R"({"pfs": [{"name": "p0", "vfs": "0-7"}], "dpu": {"url": "http://x"},
      "managementPort": {"vf": 7}})";
  CHECK_THAT(errorOf(not_reserved), Catch::Contains("managementPort.vf") && Catch::Contains("reservedVfs"));
  std::string bad_cidr = R"({"pfs": [{"name": "p0", "vfs": "0-7", "reservedVfs": "7"}], "dpu": {"url": "http://x"},
      "managementPort": {"vf": 7, "clusterCidrs": ["10.244.0.0/33"]}})";
  CHECK_THAT(errorOf(bad_cidr), Catch::Contains("managementPort.clusterCidrs[0]"));
  CHECK_THAT(errorOf("{not json"), Catch::Contains("test"));
}
