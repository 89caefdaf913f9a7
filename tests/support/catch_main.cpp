// The single Catch2 main shared by every unit-test binary. Catch2 exits with
// the number of failed assertions; 77 of them must not read as the skip code
// (support/skip.h), so that one count is reported as 78. Leaks are checked
// when the tests are done, before exit destroys cpprest's static thread pool
// under its queued work (support/leak_check.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "leak_check.h"
#include "skip.h"

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  return dpu::test::checkLeaksNow(failed == dpu::test::kSkipExitCode ? failed + 1 : failed);
}
