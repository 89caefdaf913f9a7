#include <catch2/catch.hpp>

#include "common/result.h"

using dpu::Error;
using dpu::Result;

TEST_CASE("Result carries a value or a message") {
  Result<int> good = 7;
  REQUIRE(good.ok());
  CHECK(*good == 7);
  Result<int> bad = Error{"no"};
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "no");
  Result<void> fine;
  CHECK(fine.ok());
  Result<void> failed = dpu::prefixed("loading x", Error{"missing"});
  CHECK(failed.error() == "loading x: missing");
}
