// The contract every OffloadBackend keeps (offload.h), as one test body run
// against each backend: none, the fake eswitch, and rte_flow on a DPDK port.
// What differs between them is only what they accept, passed in Expectations.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "flows.h"
#include "offload/offload.h"

namespace dpu::offload::contract {

struct Expectations {
  std::string backend;         // capabilities().backend
  bool accepts_plain = false;  // a local VF→VF flow goes into hardware
  std::string refusal;         // text every refusal of a plain flow contains (when !accepts_plain)
  std::string esp_refusal;     // text the refusal of an ESP flow contains
};

inline void checkBackendContract(OffloadBackend& backend, const Expectations& e) {
  using namespace fixtures;
  INFO("backend " << e.backend);
  CHECK(backend.capabilities().backend == e.backend);

  // Unknown handles: an error, nothing changes.
  CHECK_FALSE(backend.remove(OffloadHandle{0xdead}).ok());
  CHECK_FALSE(backend.query(OffloadHandle{0xdead}).ok());

  // ESP never goes into hardware, and the refusal says why.
  const auto esp_validate = backend.validate(espFlow());
  REQUIRE_FALSE(esp_validate.ok());
  CHECK_THAT(esp_validate.error(), Catch::Contains(e.esp_refusal));
  const auto esp_install = backend.install(espFlow());
  REQUIRE_FALSE(esp_install.ok());
  CHECK_THAT(esp_install.error(), Catch::Contains(e.esp_refusal));

  // validate and install agree, flow by flow; a refusal names its reason.
  const auto plain = localFlow();
  const auto validated = backend.validate(plain);
  CHECK(validated.ok() == e.accepts_plain);
  auto handle = backend.install(plain);
  REQUIRE(handle.ok() == e.accepts_plain);
  if (!e.accepts_plain) {
    CHECK_FALSE(handle.error().empty());
    CHECK_THAT(handle.error(), Catch::Contains(e.refusal));
    CHECK(validated.error() == handle.error());
    return;
  }

  // Installed: counters start at zero, two flows get distinct handles, the
  // refusal of one flow (ESP, before) did not affect the others.
  const auto counters = backend.query(*handle);
  REQUIRE(counters.ok());
  CHECK(counters->packets == 0);
  CHECK(counters->bytes == 0);
  auto second = backend.install(decapFlow());
  if (second.ok()) {
    CHECK_FALSE(*second == *handle);
    CHECK(backend.remove(*second).ok());
  }
  CHECK(backend.remove(*handle).ok());
  // Removed: the handle is unknown now.
  CHECK_FALSE(backend.remove(*handle).ok());
  CHECK_FALSE(backend.query(*handle).ok());
}

}  // namespace dpu::offload::contract
