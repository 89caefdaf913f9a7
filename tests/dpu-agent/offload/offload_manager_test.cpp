// OffloadManager on the fake eswitch: per-flow state and reasons, fallback,
// capacity, merged counters, removal (and its failure), polling budget.
#include <catch2/catch.hpp>

#include "fake_eswitch.h"
#include "flows.h"
#include "offload/none_backend.h"
#include "offload/offload_manager.h"

using namespace dpu::offload;
using namespace dpu::offload::fixtures;
using testing::EswitchProfile;
using testing::FakeEswitch;
using dpu::Result;

TEST_CASE("manager: a flow the eswitch takes runs in hardware", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  auto st = m.offer(7, localFlow());
  REQUIRE(st.ok());
  CHECK(*st == OffloadState::kInHw);
  CHECK(m.status(7).state == OffloadState::kInHw);
  CHECK(m.status(7).reason.empty());
  CHECK(m.describe(7) == "offloaded");
  CHECK(m.describe(8) == "");
  CHECK(m.status(8).state == OffloadState::kNone);
  CHECK(m.stats().in_hw == 1);
  CHECK(m.stats().installed == 1);
  CHECK(sw.installedCount() == 1);
  // Offering it again while it is in hardware is the caller's mistake.
  CHECK_FALSE(m.offer(7, localFlow()).ok());
  CHECK(sw.installedCount() == 1);
}

TEST_CASE("manager: refusal of one flow does not affect the others", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  CHECK(*m.offer(0, localFlow()) == OffloadState::kInHw);
  CHECK(*m.offer(1, espFlow()) == OffloadState::kSoftware);
  CHECK(*m.offer(2, decapFlow()) == OffloadState::kInHw);
  CHECK(*m.offer(3, encapFlow()) == OffloadState::kInHw);
  CHECK(m.status(1).state == OffloadState::kSoftware);
  CHECK_THAT(std::string(m.status(1).reason), Catch::Contains("inline IPsec is not available through DPDK on mlx5"));
  CHECK_THAT(m.describe(1), Catch::StartsWith("software: inline IPsec"));
  const auto s = m.stats();
  CHECK(s.in_hw == 3);
  CHECK(s.software == 1);
  CHECK(s.refused == 1);
  CHECK(sw.installedCount() == 3);
}

TEST_CASE("manager: equal reasons are one interned string", "[manager]") {
  FakeEswitch sw(EswitchProfile::restrictive());
  OffloadManager m(sw);
  CHECK(*m.offer(0, decapFlow()) == OffloadState::kSoftware);
  auto other = decapFlow();
  other.match.key.l4_src = 1;
  CHECK(*m.offer(1, other) == OffloadState::kSoftware);
  CHECK(m.status(0).reason == "fake eswitch (restrictive): item GENEVE not supported");
  CHECK(m.status(0).reason.data() == m.status(1).reason.data());
}

TEST_CASE("manager: capacity exhaustion keeps new flows in software, with the reason", "[manager]") {
  SECTION("the eswitch's capacity") {
    FakeEswitch sw(EswitchProfile::mlx5Like(2));
    OffloadManager m(sw);
    CHECK(m.stats().capacity == 2);
    CHECK(*m.offer(0, localFlow()) == OffloadState::kInHw);
    CHECK(*m.offer(1, decapFlow()) == OffloadState::kInHw);
    CHECK(*m.offer(2, encapFlow()) == OffloadState::kSoftware);
    CHECK(m.status(2).reason == "offload table full (2 flows in hardware)");
    CHECK(sw.installCalls() == 2);  // the full table was not even asked
    // Space frees up: the software flow can be offered again.
    REQUIRE(m.withdraw(0).ok());
    CHECK(*m.offer(2, encapFlow()) == OffloadState::kInHw);
    CHECK(m.stats().software == 0);
    CHECK(m.stats().in_hw == 2);
  }
  SECTION("the manager's own limit, below the device's") {
    FakeEswitch sw(EswitchProfile::mlx5Like(100));
    OffloadManagerConfig config;
    config.max_hw_flows = 1;
    OffloadManager m(sw, config);
    CHECK(m.stats().capacity == 1);
    CHECK(*m.offer(0, localFlow()) == OffloadState::kInHw);
    CHECK(*m.offer(1, decapFlow()) == OffloadState::kSoftware);
  }
  SECTION("a device that fills up before its advertised capacity") {
    FakeEswitch sw(EswitchProfile::mlx5Like(1));
    OffloadManagerConfig config;
    OffloadManager m(sw, config);
    CHECK(*m.offer(0, localFlow()) == OffloadState::kInHw);
    sw.refuseNext("no more steering memory");
    REQUIRE(m.withdraw(0).ok());
    CHECK(*m.offer(1, localFlow()) == OffloadState::kSoftware);
    CHECK(m.status(1).reason == "no more steering memory");
  }
}

TEST_CASE("manager: hardware counters merge as deltas", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  REQUIRE(*m.offer(4, localFlow()) == OffloadState::kInHw);
  REQUIRE(*m.offer(9, decapFlow()) == OffloadState::kInHw);
  const auto local = *sw.find(localFlow());
  const auto decap = *sw.find(decapFlow());

  CHECK(m.pollCounters().empty());  // nothing hit yet
  sw.hit(local, 100, 6400);
  sw.hit(decap, 3, 300);
  sw.advance(2);
  auto d = m.pollCounters();
  REQUIRE(d.size() == 2);
  std::sort(d.begin(), d.end(), [](auto& a, auto& b) { return a.id < b.id; });
  CHECK(d[0].id == 4);
  CHECK(d[0].packets == 100);
  CHECK(d[0].bytes == 6400);
  CHECK(d[0].idle_seconds == 2);
  CHECK(d[1].id == 9);
  CHECK(d[1].packets == 3);
  CHECK(m.status(4).hw_packets == 100);
  CHECK(m.status(4).hw_bytes == 6400);
  CHECK(m.status(4).idle_seconds == 2);

  sw.hit(local, 5, 320);
  d = m.pollCounters();
  REQUIRE(d.size() == 1);
  CHECK(d[0].id == 4);
  CHECK(d[0].packets == 5);
  CHECK(d[0].bytes == 320);
  CHECK(m.pollCounters().empty());

  // Withdrawing reports what the hardware counted since the last poll.
  sw.hit(decap, 7, 700);
  auto last = m.withdraw(9);
  REQUIRE(last.ok());
  CHECK(last->id == 9);
  CHECK(last->packets == 7);
  CHECK(last->bytes == 700);
  CHECK(m.status(9).state == OffloadState::kNone);
  CHECK(sw.installedCount() == 1);
}

TEST_CASE("manager: the polling budget walks the flows round robin", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  auto f0 = localFlow(), f1 = localFlow(), f2 = localFlow();
  f1.match.key.l4_src = 1;
  f2.match.key.l4_src = 2;
  REQUIRE(*m.offer(0, f0) == OffloadState::kInHw);
  REQUIRE(*m.offer(1, espFlow()) == OffloadState::kSoftware);  // skipped, not counted in the budget
  REQUIRE(*m.offer(2, f1) == OffloadState::kInHw);
  REQUIRE(*m.offer(3, f2) == OffloadState::kInHw);
  for (const auto& f : {f0, f1, f2}) sw.hit(*sw.find(f), 1, 60);
  std::vector<uint32_t> seen;
  for (int i = 0; i < 3; ++i) {
    auto d = m.pollCounters(1);
    REQUIRE(d.size() == 1);
    seen.push_back(d[0].id);
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<uint32_t>{0, 2, 3});
}

TEST_CASE("manager: a failed removal is retried, counting what the rule still forwards", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  REQUIRE(*m.offer(1, localFlow()) == OffloadState::kInHw);
  const auto h = *sw.find(localFlow());
  sw.hit(h, 2, 128);
  sw.failNextRemove();
  auto w = m.withdraw(1);
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.error(), Catch::Contains("injected"));
  CHECK(m.status(1).state == OffloadState::kRemoving);
  CHECK(m.describe(1) == "removing");
  CHECK(m.stats().removing == 1);
  CHECK(m.stats().in_hw == 0);
  CHECK(m.stats().remove_errors == 1);
  CHECK_FALSE(m.offer(1, localFlow()).ok());  // still in the eswitch

  sw.hit(h, 1, 64);
  auto d = m.pollCounters();
  REQUIRE(d.size() == 1);  // the final counts are not lost
  CHECK(d[0].packets == 3);
  CHECK(d[0].bytes == 192);
  CHECK(m.status(1).state == OffloadState::kNone);
  CHECK(m.stats().removing == 0);
  CHECK(sw.installedCount() == 0);
  CHECK(*m.offer(1, localFlow()) == OffloadState::kInHw);
}

TEST_CASE("manager: withdrawing software flows, unknown ids and bad ids", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManagerConfig config;
  config.max_flow_id = 100;
  OffloadManager m(sw, config);
  CHECK_FALSE(m.withdraw(3).ok());
  REQUIRE(*m.offer(3, espFlow()) == OffloadState::kSoftware);
  auto w = m.withdraw(3);
  REQUIRE(w.ok());
  CHECK(w->packets == 0);
  CHECK(m.stats().software == 0);
  CHECK_FALSE(m.withdraw(3).ok());
  auto bad = m.offer(100, localFlow());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains("beyond the configured maximum"));
  // A software flow offered again replaces its record.
  REQUIRE(*m.offer(5, espFlow()) == OffloadState::kSoftware);
  REQUIRE(*m.offer(5, localFlow()) == OffloadState::kInHw);
  CHECK(m.stats().software == 0);
  CHECK(m.stats().in_hw == 1);
}

TEST_CASE("manager: rules lost under it (port restart) count as query errors", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  OffloadManager m(sw);
  REQUIRE(*m.offer(0, localFlow()) == OffloadState::kInHw);
  sw.flush();
  CHECK(m.pollCounters().empty());
  CHECK(m.stats().query_errors == 1);
}

TEST_CASE("manager: destroying it removes every rule it installed", "[manager]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  {
    OffloadManager m(sw);
    REQUIRE(*m.offer(0, localFlow()) == OffloadState::kInHw);
    REQUIRE(*m.offer(1, decapFlow()) == OffloadState::kInHw);
    CHECK(sw.installedCount() == 2);
  }
  CHECK(sw.installedCount() == 0);
}

TEST_CASE("manager: with no offload every flow is in software, 'offload disabled'", "[manager]") {
  NoOffloadBackend none;
  OffloadManager m(none);
  CHECK(*m.offer(0, localFlow()) == OffloadState::kSoftware);
  CHECK(m.describe(0) == "software: offload disabled");
  CHECK(m.pollCounters().empty());
  CHECK(m.capabilities().backend == "none");
}

TEST_CASE("manager: bookkeeping per flow", "[manager]") {
  CHECK(OffloadManager::kBookkeepingBytesPerFlow == 32);
}

namespace {

// The dataplane process that drives an OffloadBackend, which can be killed:
// once dead it touches the eswitch no more (a SIGKILLed process removes
// nothing), whatever its manager's destructor asks.
using Process = dpu::offload::testing::EswitchProcess;

// Another pod's flow of the old model, which the new one no longer has.
FlowSpec droppedFlow() { return localFlow(true); }
// A flow only the new model has.
FlowSpec newFlow() { return localFlow(false, dpu::overlay::ipproto::kIcmp); }

}  // namespace

TEST_CASE("manager: a restart replaces the old rules before removing any, traffic stays on the eswitch",
          "[manager][restart]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  // The old dataplane: pod 1 → pod 2 routed locally, Geneve from a peer to pod
  // 2, a service flow, and a flow of a pod that will be gone.
  Process old_process(sw);
  {
    OffloadManager old_manager(old_process);
    REQUIRE(*old_manager.offer(0, localFlow()) == OffloadState::kInHw);
    REQUIRE(*old_manager.offer(1, decapFlow()) == OffloadState::kInHw);
    REQUIRE(*old_manager.offer(2, natFlow()) == OffloadState::kInHw);
    REQUIRE(*old_manager.offer(3, droppedFlow()) == OffloadState::kInHw);
    for (const auto& f : {localFlow(), decapFlow(), natFlow(), droppedFlow()}) REQUIRE(sw.hit(*sw.find(f), 10, 1000));
    old_process.kill();  // SIGKILL: its manager's destructor removes nothing
  }
  sw.restart(true);  // the hardware question: here the eswitch kept them
  REQUIRE(sw.installedCount() == 4);

  // The new model: pod 2 moved to another node (same match, now Geneve), the
  // decap and service flows unchanged, a new flow, the dropped pod's flow gone.
  // At every change of the eswitch, each flow of the new model that the old
  // one had has a rule its packets hit; each old rule goes only after its
  // replacement is in.
  std::vector<std::string> events;
  bool resync_over = false;
  sw.setObserver([&](const std::string& op, OffloadHandle, const dpu::flow::FlowSpec& f) {
    events.push_back(op + (f == localFlow()       ? " old local"
                           : f == encapFlow()     ? " encap"
                           : f == droppedFlow()   ? " dropped"
                           : f == newFlow()       ? " new"
                                                  : " other"));
    for (const auto& kept : {encapFlow(), decapFlow(), natFlow()}) CHECK(sw.forwarder(kept.match).has_value());
    if (!resync_over) CHECK(sw.forwarder(droppedFlow().match).has_value());
  });
  Process new_process(sw);
  OffloadManager m(new_process);
  REQUIRE(m.beginResync() == 4);
  CHECK(m.resyncing());
  CHECK(*m.offer(10, decapFlow()) == OffloadState::kInHw);
  CHECK(*m.offer(11, encapFlow()) == OffloadState::kInHw);
  CHECK(*m.offer(12, natFlow()) == OffloadState::kInHw);
  CHECK(*m.offer(13, newFlow()) == OffloadState::kInHw);
  // The unchanged rules were taken over, never reinstalled; the changed one
  // was installed before the old one went, and now takes the packets.
  CHECK(events == std::vector<std::string>{"install encap", "remove old local", "install new"});
  CHECK(sw.forwarder(encapFlow().match) == sw.find(encapFlow()));
  // The dropped pod's rule still forwards until the new model is all in.
  CHECK(sw.find(droppedFlow()).has_value());
  resync_over = true;
  const auto result = m.endResync();
  CHECK_FALSE(m.resyncing());
  CHECK(result.adopted == 2);
  CHECK(result.replaced == 1);
  CHECK(result.removed == 1);
  CHECK(result.remove_errors == 0);
  CHECK(events.back() == "remove dropped");
  sw.setObserver(nullptr);  // the restart is over
  CHECK_FALSE(sw.find(droppedFlow()).has_value());
  CHECK(sw.installedCount() == 4);
  CHECK(m.stats().in_hw == 4);
  CHECK(m.stats().installed == 2);  // the encap and the new flow only

  // The adopted rules' counts so far were the old process's: only new traffic is reported.
  REQUIRE(sw.hit(*sw.find(decapFlow()), 3, 300));
  const auto deltas = m.pollCounters();
  REQUIRE(deltas.size() == 1);
  CHECK(deltas[0].id == 10);
  CHECK(deltas[0].packets == 3);
  CHECK(deltas[0].bytes == 300);
  // The new dataplane owns them now: withdrawing one removes its rule.
  REQUIRE(m.withdraw(12).ok());
  CHECK_FALSE(sw.find(natFlow()).has_value());
}

TEST_CASE("manager: in a restart, a flow that now stays in software takes its old rule out at once",
          "[manager][restart]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  Process old_process(sw);
  {
    OffloadManager old_manager(old_process);
    REQUIRE(*old_manager.offer(0, localFlow()) == OffloadState::kInHw);
    old_process.kill();
  }
  sw.restart(true);
  Process new_process(sw);
  OffloadManager m(new_process);
  REQUIRE(m.beginResync() == 1);
  // Same match, now encrypted: ESP stays in software, so the old rule (which
  // forwards in clear) must not keep the packets.
  CHECK(*m.offer(5, espFlow()) == OffloadState::kSoftware);
  CHECK_FALSE(sw.forwarder(localFlow().match).has_value());
  CHECK(sw.installedCount() == 0);
  const auto result = m.endResync();
  CHECK(result.replaced == 1);
  CHECK(result.removed == 0);
}

TEST_CASE("manager: in a restart, a failed removal of an old rule is retried", "[manager][restart]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  Process old_process(sw);
  {
    OffloadManager old_manager(old_process);
    REQUIRE(*old_manager.offer(0, droppedFlow()) == OffloadState::kInHw);
    old_process.kill();
  }
  sw.restart(true);
  Process new_process(sw);
  OffloadManager m(new_process);
  REQUIRE(m.beginResync() == 1);
  sw.failNextRemove();
  const auto result = m.endResync();
  CHECK(result.removed == 0);
  CHECK(result.remove_errors == 1);
  CHECK(sw.installedCount() == 1);  // still forwarding the old way: retried
  (void)m.pollCounters();
  CHECK(sw.installedCount() == 0);
}

TEST_CASE("manager: when the eswitch lost the old rules (or cannot show them), a restart installs afresh",
          "[manager][restart]") {
  FakeEswitch sw(EswitchProfile::mlx5Like());
  Process old_process(sw);
  {
    OffloadManager old_manager(old_process);
    REQUIRE(*old_manager.offer(0, localFlow()) == OffloadState::kInHw);
    old_process.kill();
  }
  sw.restart(false);  // the rules died with their process
  Process new_process(sw);
  OffloadManager m(new_process);
  CHECK(m.beginResync() == 0);
  CHECK(*m.offer(0, localFlow()) == OffloadState::kInHw);
  CHECK(m.endResync().removed == 0);
  CHECK(m.stats().installed == 1);
  // The backends that cannot see another process's rules (rte_flow) inherit none either.
  NoOffloadBackend none;
  CHECK(none.inherited().empty());
}

TEST_CASE("manager: inherited rules hold their places in the table until taken or removed", "[manager][restart]") {
  FakeEswitch sw(EswitchProfile::mlx5Like(2));
  Process old_process(sw);
  {
    OffloadManager old_manager(old_process);
    REQUIRE(*old_manager.offer(0, droppedFlow()) == OffloadState::kInHw);
    REQUIRE(*old_manager.offer(1, decapFlow()) == OffloadState::kInHw);
    old_process.kill();
  }
  sw.restart(true);
  Process new_process(sw);
  OffloadManager m(new_process);
  REQUIRE(m.beginResync() == 2);
  CHECK(*m.offer(7, newFlow()) == OffloadState::kSoftware);  // full: the old rules still forward
  CHECK(m.status(7).reason == "offload table full (2 flows in hardware)");
  CHECK(*m.offer(8, decapFlow()) == OffloadState::kInHw);  // taken over: no place needed
  m.endResync();
  CHECK(*m.offer(7, newFlow()) == OffloadState::kInHw);  // the dropped flow's place is free now
}
