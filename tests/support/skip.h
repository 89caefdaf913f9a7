// For a test binary that cannot run here (no root, a kernel feature missing):
// it says why on a "SKIP:" line and exits with the skip code, which ctest
// reports as skipped instead of passed (SKIP_RETURN_CODE, tests/CMakeLists.txt).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dpu::test {

inline constexpr int kSkipExitCode = 77;

[[noreturn]] inline void skipTest(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(kSkipExitCode);
}

}  // namespace dpu::test
