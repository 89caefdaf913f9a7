// What failed → which CNI code: retry (11) only where retrying can help.
#include <catch2/catch.hpp>

#include "host-shim/cni_errors.h"

using namespace dpu::hostshim;

TEST_CASE("DPU failures map to CNI codes") {
  DpuFailure f;
  f.kind = DpuFailure::Kind::kUnreachable;
  CHECK(codeFor(f) == CniCode::kTryAgainLater);
  f.kind = DpuFailure::Kind::kRejected;
  CHECK(codeFor(f) == CniCode::kDpuRejected);
  f.kind = DpuFailure::Kind::kConflict;
  CHECK(codeFor(f) == CniCode::kVfUnavailable);
  auto r = cniError(CniCode::kInvalidEnvironment, "bad netns", "fix it");
  REQUIRE(r.has_error());
  CHECK(r.error().code() == 4);
  CHECK(r.error().msg() == "bad netns");
  CHECK(r.error().details() == "fix it");
  CHECK(static_cast<uint32_t>(CniCode::kNotAvailable) == 50);
  CHECK(static_cast<uint32_t>(CniCode::kInvalidConfig) == 7);
}

TEST_CASE("interface names as the kernel takes them") {
  CHECK(ifnameProblem("eth0").empty());
  CHECK(ifnameProblem("a23456789012345").empty());
  CHECK_THAT(ifnameProblem("a234567890123456"), Catch::Contains("at most 15"));
  CHECK_THAT(ifnameProblem(""), Catch::Contains("empty"));
  CHECK_FALSE(ifnameProblem("a/b").empty());
  CHECK_FALSE(ifnameProblem("a b").empty());
  CHECK_FALSE(ifnameProblem("..").empty());
}
