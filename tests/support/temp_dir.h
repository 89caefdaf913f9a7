// A directory of its own for one test, removed with everything in it when
// the test ends, a failed REQUIRE included.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace dpu::test {

struct TempDir {
  std::string path;
  // A new directory "<under>/<name>.XXXXXX"; path is empty if it could not be made.
  explicit TempDir(const std::string& name = "dpu-test", const std::string& under = "/tmp") {
    std::string tmpl = under + "/" + name + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
};

}  // namespace dpu::test
