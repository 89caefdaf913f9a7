#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include "common/config_doc.h"

using dpu::FieldReader;
using dpu::parseConfigText;

TEST_CASE("JSON and YAML read to the same document") {
  auto j = parseConfigText(R"({"socket": "/run/x.sock", "mtu": 1400, "on": true, "pfs": [{"name": "p0"}]})", "t");
  auto y = parseConfigText("socket: /run/x.sock\nmtu: 1400\non: true\npfs:\n  - name: p0\n", "t");
  REQUIRE(j.ok());
  REQUIRE(y.ok());
  CHECK(*j == *y);
  auto quoted = parseConfigText("v: \"1400\"\n", "t");
  REQUIRE(quoted.ok());
  CHECK((*quoted)["v"].is_string());
}

TEST_CASE("syntax errors name the source") {
  auto bad = parseConfigText("{\"a\": ", "/etc/x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains("/etc/x.json is not valid JSON"));
  // A number no double holds is an error of the document, not an exception.
  auto huge = parseConfigText("{\"tunnelIP\": 2547.168777e77777777777777}", "/etc/x.json");
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.error(), Catch::Contains("/etc/x.json is not valid JSON"));
  auto badYaml = parseConfigText("a: [1, 2\n", "/etc/x.yaml");
  REQUIRE_FALSE(badYaml.ok());
  CHECK_THAT(badYaml.error(), Catch::Contains("/etc/x.yaml"));
}

TEST_CASE("FieldReader names the field and what is expected") {
  auto doc = parseConfigText(R"({"mtu": 99999, "name": 5, "pfs": [{"name": "p0"}, {"nmae": "p1"}]})", "t");
  REQUIRE(doc.ok());
  {
    FieldReader r(*doc, "config");
    r.uint("mtu", 576, 9216);
    auto done = r.finish(true);
    REQUIRE_FALSE(done.ok());
    CHECK(done.error() == "config.mtu: must be between 576 and 9216, not 99999");
  }
  {
    FieldReader r(*doc, "config");
    r.str("name");
    CHECK(r.error() == "config.name: must be a string, not an integer");
  }
  {
    FieldReader r(*doc, "config");
    r.ignore({"mtu", "name"});
    for (auto& pf : r.objects("pfs")) {
      pf.str("name");
    }
    auto done = r.finish();
    REQUIRE_FALSE(done.ok());
    CHECK(done.error() == "config.pfs[1].name: is required");
  }
  {
    FieldReader r(*doc, "config");
    r.ignore({"mtu", "pfs"});
    auto done = r.finish();
    REQUIRE_FALSE(done.ok());
    CHECK_THAT(done.error(), Catch::Contains("config.name: unknown field"));
  }
  {
    auto ok = parseConfigText(R"({"a": "x"})", "t");
    FieldReader r(*ok, "config");
    CHECK(r.str("a") == "x");
    CHECK(r.uint("b", 1, 10, 5) == 5);
    CHECK(r.finish().ok());
  }
}

TEST_CASE("config files: ${NAME} in values comes from the environment", "[config]") {
  char path[] = "/tmp/config_doc_env.XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string text = "node: \"${DPU_TEST_NODE}\"\nlist: [\"a-${DPU_TEST_NODE}\", \"$${LITERAL}\"]\n# ${IN_COMMENT}\n";
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  setenv("DPU_TEST_NODE", "node-7", 1);
  auto doc = dpu::loadConfigFile(path);
  REQUIRE(doc.ok());
  CHECK((*doc)["node"] == "node-7");
  CHECK((*doc)["list"][0] == "a-node-7");
  CHECK((*doc)["list"][1] == "${LITERAL}");
  unsetenv("DPU_TEST_NODE");
  auto unset = dpu::loadConfigFile(path);
  REQUIRE_FALSE(unset.ok());
  CHECK_THAT(unset.error(), Catch::Contains("config.list[0]: the environment variable DPU_TEST_NODE is not set"));
  unlink(path);
}
