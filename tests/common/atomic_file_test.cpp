#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include "common/atomic_file.h"

TEST_CASE("atomic write replaces the whole file and creates directories") {
  char tmpl[] = "/tmp/dpu-atomic-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/a/b/state.pb";
  REQUIRE(dpu::writeFileAtomic(path, "one").ok());
  REQUIRE(dpu::writeFileAtomic(path, "two").ok());
  auto back = dpu::readFile(path);
  REQUIRE(back.ok());
  CHECK(*back == "two");
  CHECK_FALSE(dpu::readFile(std::string(tmpl) + "/missing").ok());
  REQUIRE(std::system((std::string("rm -rf ") + tmpl).c_str()) == 0);
}
