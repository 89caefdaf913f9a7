// The single Catch2 main shared by every unit-test binary. Catch2 exits with
// the number of failed assertions; 77 of them must not read as the skip code
// (support/skip.h), so that one count is reported as 78.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skip.h"

int main(int argc, char* argv[]) {
  int failed = Catch::Session().run(argc, argv);
  return failed == dpu::test::kSkipExitCode ? failed + 1 : failed;
}
