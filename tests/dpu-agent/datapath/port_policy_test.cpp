// The dataplane's port policies, pure: the mbuf budget per port and the
// backoff of ports that could not be opened.
#include <catch2/catch.hpp>
#include <chrono>

#include "datapath/mbuf_budget.h"
#include "datapath/port_retry.h"

using namespace dpu;
using namespace dpu::datapath;
using namespace std::chrono_literals;

TEST_CASE("mbuf budget: what each backend needs and what is never budgeted", "[dataplane][policy]") {
  const PortShape shape{2, 1024, 512, 2};
  // net_af_xdp: its fill ring's stock, its socket's tx ring (sized like rx), a burst per worker.
  CHECK(afXdpDemand(shape).stock == 2048);
  CHECK(afXdpDemand(shape).in_flight == 1024 + 2 * 32);
  CHECK(afPacketDemand(shape).total() == 64);
  CHECK(measuredDemand(shape, 1024, true).total() == 1024 + 64 + 2 * 512);
  CHECK(measuredDemand(shape, 0, false).total() == 64);
  CHECK(afXdpDemand(shape).describe() == "3136 (2048 stocked + 1088 in flight)");
  // Two workers and the control lcore, each with a cache filled up to 1.5 times; a burst per worker.
  CHECK(mbufPoolReserve(2, 128) == 3 * 192 + 64);
}

TEST_CASE("mbuf budget: ports are charged, refused with the numbers, and give back", "[dataplane][policy]") {
  MbufBudget budget(8191, 416);
  CHECK(budget.unbudgeted() == 7775);
  const MbufDemand xdp = afXdpDemand(PortShape{});
  CHECK(budget.fits(xdp.total()));
  budget.charge("uplink", xdp.total());
  budget.charge("pf0vf0", xdp.total());
  CHECK(budget.budgeted() == 6208);
  CHECK(budget.unbudgeted() == 1567);
  CHECK_FALSE(budget.fits(xdp.total()));
  CHECK(budget.shortfall("pf0vf1", xdp) ==
        "pf0vf1 needs 3104 (2048 stocked + 1056 in flight) mbufs but 1567 of the pool's 8191 are unbudgeted "
        "(6208 budgeted to 2 ports, 416 kept for lcore caches and bursts); raise mbuf_pool_size by 1537");
  CHECK(budget.shortfall("pf0vf1", afPacketDemand(PortShape{})) == "");
  // Charging again replaces; releasing twice is harmless.
  budget.charge("pf0vf0", 32);
  CHECK(budget.budgeted() == 3136);
  budget.release("pf0vf0");
  budget.release("pf0vf0");
  CHECK(budget.budgeted() == 3104);
  CHECK(budget.of("uplink") == 3104);
  CHECK(budget.of("pf0vf0") == 0);
  // A reserve larger than the pool leaves nothing, rather than wrapping.
  CHECK(MbufBudget(100, 200).unbudgeted() == 0);
}

TEST_CASE("port retries: exponential backoff, a log line per reason, capacity freed retries at once",
          "[dataplane][policy]") {
  using Clock = PortRetries::Clock;
  PortRetries retries(250ms, 2s);
  const Clock::time_point t0{};
  CHECK(retries.due("a", t0));
  CHECK_FALSE(retries.nextDue());
  const Error full{"RTE_MAX_ETHPORTS (32) ports are in use", ErrorCode::kExhausted};
  CHECK(retries.failed("a", full, t0));        // first failure: log it
  CHECK_FALSE(retries.due("a", t0 + 249ms));
  CHECK(retries.due("a", t0 + 250ms));
  CHECK_FALSE(retries.failed("a", full, t0 + 250ms));  // same reason: quiet
  CHECK(retries.failure("a")->delay == 500ms);
  CHECK_FALSE(retries.failed("a", full, t0 + 750ms));
  CHECK(retries.failure("a")->delay == 1s);
  CHECK_FALSE(retries.failed("a", full, t0 + 1750ms));
  CHECK(retries.failure("a")->delay == 2s);
  CHECK_FALSE(retries.failed("a", full, t0 + 3750ms));
  CHECK(retries.failure("a")->delay == 2s);  // capped
  CHECK(retries.failure("a")->attempts == 5);
  CHECK(retries.failedAttempts() == 5);
  // A different reason is logged again.
  CHECK(retries.failed("a", Error{"no such netdev", ErrorCode::kUnavailable}, t0 + 5750ms));
  CHECK(retries.failed("a", full, t0 + 7750ms));

  CHECK(retries.failed("b", Error{"no such netdev", ErrorCode::kUnavailable}, t0 + 7750ms));
  CHECK(*retries.nextDue() == t0 + 8000ms);  // b's first retry comes before a's
  // A port closed: what failed for want of capacity is due now, the rest keeps its backoff.
  retries.retryNow(ErrorCode::kExhausted, t0 + 7800ms);
  CHECK(retries.due("a", t0 + 7800ms));
  CHECK_FALSE(retries.due("b", t0 + 7800ms));
  CHECK(retries.succeeded("a") == 7);
  CHECK(retries.succeeded("a") == 0);
  // The model drops b: forgotten.
  retries.keepOnly({"c"});
  CHECK(retries.failures().empty());
  CHECK(retries.failedAttempts() == 8);
}
