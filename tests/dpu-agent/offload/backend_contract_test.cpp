// The shared backend contract on the backends that need no device: the
// no-offload backend and the fake eswitch in both profiles.
#include <catch2/catch.hpp>

#include "backend_contract.h"
#include "fake_eswitch.h"
#include "offload/none_backend.h"

using namespace dpu::offload;

TEST_CASE("contract: no-offload backend refuses everything with 'offload disabled'", "[contract]") {
  NoOffloadBackend backend;
  contract::checkBackendContract(backend, {"none", false, "offload disabled", "offload disabled"});
  CHECK(backend.capabilities().max_flows == 0);
  CHECK_FALSE(backend.capabilities().transfer);
}

TEST_CASE("contract: fake eswitch, mlx5-like profile", "[contract]") {
  testing::FakeEswitch backend(testing::EswitchProfile::mlx5Like(16));
  contract::checkBackendContract(backend, {"fake", true, "", "inline IPsec is not available through DPDK on mlx5"});
  CHECK(backend.installedCount() == 0);
}

TEST_CASE("contract: fake eswitch, restrictive profile", "[contract]") {
  testing::FakeEswitch backend(testing::EswitchProfile::restrictive());
  // Local routed flows rewrite MACs and TTL, which this NIC cannot.
  contract::checkBackendContract(backend, {"fake", false, "action SET_MAC not supported", "inline IPsec"});
}
