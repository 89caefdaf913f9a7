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

TEST_CASE("An error keeps its code and holder through prefixing and takeError") {
  Result<int> conflict = Error{"VF 0/3 is held", dpu::ErrorCode::kConflict, "att-7"};
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.code() == dpu::ErrorCode::kConflict);
  CHECK(conflict.failure().holder == "att-7");
  Result<void> wrapped = dpu::prefixed("attach", std::move(conflict).takeError());
  CHECK(wrapped.error() == "attach: VF 0/3 is held");
  CHECK(wrapped.code() == dpu::ErrorCode::kConflict);
  CHECK(wrapped.failure().holder == "att-7");
  Result<void> plain = Error{"no"};
  CHECK(plain.code() == dpu::ErrorCode::kFailed);
  CHECK(std::string(dpu::errorCodeName(dpu::ErrorCode::kExhausted)) == "exhausted");
  CHECK(std::string(dpu::errorCodeName(std::move(plain).takeError().code)) == "failed");
}
