// What failed → which CNI code: retry (11) only where retrying can help.
#include <catch2/catch.hpp>

#include "host-shim/cni_errors.h"
#include "host-shim/dpu_client.h"

using namespace dpu;
using namespace dpu::hostshim;

TEST_CASE("DPU failures map to CNI codes") {
  auto code = [](ErrorCode c) { return codeFor(Error{"x", c}); };
  CHECK(code(ErrorCode::kUnavailable) == CniCode::kTryAgainLater);
  CHECK(code(ErrorCode::kTimeout) == CniCode::kTryAgainLater);
  // A capacity of the node used up (507): the runtime retries once pods go.
  CHECK(code(ErrorCode::kExhausted) == CniCode::kTryAgainLater);
  CHECK(code(ErrorCode::kConflict) == CniCode::kVfUnavailable);
  CHECK(code(ErrorCode::kInvalid) == CniCode::kInvalidConfig);
  CHECK(code(ErrorCode::kForbidden) == CniCode::kDpuRejected);
  CHECK(code(ErrorCode::kNotFound) == CniCode::kDpuRejected);
  auto r = cniError(CniCode::kInvalidEnvironment, "bad netns", "fix it");
  REQUIRE(r.has_error());
  CHECK(r.error().code() == 4);
  CHECK(r.error().msg() == "bad netns");
  CHECK(r.error().details() == "fix it");
  CHECK(static_cast<uint32_t>(CniCode::kNotAvailable) == 50);
  CHECK(static_cast<uint32_t>(CniCode::kInvalidConfig) == 7);
}

TEST_CASE("the agent's HTTP statuses map to error codes") {
  CHECK(errorCodeForHttpStatus(400) == ErrorCode::kInvalid);
  CHECK(errorCodeForHttpStatus(422) == ErrorCode::kInvalid);
  CHECK(errorCodeForHttpStatus(403) == ErrorCode::kForbidden);
  CHECK(errorCodeForHttpStatus(404) == ErrorCode::kNotFound);
  CHECK(errorCodeForHttpStatus(409) == ErrorCode::kConflict);
  CHECK(errorCodeForHttpStatus(413) == ErrorCode::kTooLarge);
  CHECK(errorCodeForHttpStatus(500) == ErrorCode::kUnavailable);
  CHECK(errorCodeForHttpStatus(503) == ErrorCode::kUnavailable);
  CHECK(errorCodeForHttpStatus(507) == ErrorCode::kExhausted);
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
