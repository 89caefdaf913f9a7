#include <catch2/catch.hpp>

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
