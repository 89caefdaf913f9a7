// An Engine that answers every control question with nothing and has no
// packet side (its worker calls abort): the base of the test engines of the
// dataplane's control-thread parts (neighbours, NAT keepalives), each of
// which overrides only what its part asks. A new Engine method is answered
// here once, not in every test's copy. Also: a counter of an operator reply.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath::testing {

class NullEngine : public Engine {
 public:
  Result<void> bindPort(const std::string&, uint16_t, PortRole, MacAddress) override { return {}; }
  void unbindPort(const std::string&) override {}
  std::vector<std::string> wantedRepresentors() const override { return {}; }
  std::vector<std::string> logicalPortsOf(const std::string&) const override { return {}; }
  dataplane::v1::ProgramReply program(const dataplane::v1::ProgramRequest&) override { return {}; }
  dataplane::v1::OperatorReply operate(const dataplane::v1::OperatorRequest&) override { return {}; }
  void maintain() override {}
  Result<void> setTunnelNextHop(const IpAddress&, MacAddress) override { return {}; }
  std::vector<IpAddress> wantedTunnelPeers() const override { return {}; }
  size_t bytesPerFlow() const override { return 0; }
  size_t bytesPerCompactFlow() const override { return 0; }
  WorkerContext& worker(unsigned) override { std::abort(); }
  uint16_t rxBurstSize(WorkerContext&, uint16_t) override { std::abort(); }
  void processBurst(WorkerContext&, uint16_t, rte_mbuf**, uint16_t) override { std::abort(); }
  void flush(WorkerContext&) override {}
  void quiescent(WorkerContext&) override {}
};

// The value of the reply's counter NAME; fails the test when there is none.
inline uint64_t counterOf(const dataplane::v1::OperatorReply& reply, const std::string& name) {
  for (const auto& c : reply.counters())
    if (c.name() == name) return c.value();
  FAIL("no counter " << name);
  return 0;
}

}  // namespace dpu::datapath::testing
