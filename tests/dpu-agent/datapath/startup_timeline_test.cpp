// The dataplane's start-up phases, pure: spans and moments in the order they
// began, one log line, the operator API's fields, nothing after forwarding.
#include <catch2/catch.hpp>
#include <chrono>

#include "datapath/startup_timeline.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

using namespace dpu::datapath;
using namespace std::chrono_literals;

TEST_CASE("startup timeline: phases, moments, one line, the stats fields", "[dataplane][startup]") {
  const auto t0 = StartupTimeline::Clock::time_point{} + 1h;
  StartupTimeline timeline(t0, 1'700'000'000'000'000);
  timeline.add("eal", t0 + 100us, t0 + 150'100us);
  timeline.add("mbuf pool", t0 + 150'200us, t0 + 240'200us);
  timeline.mark("agent connected", t0 + 300ms);
  // Recorded late (when the port is bound), listed where it began.
  timeline.add("port uplink af_xdp", t0 + 240'300us, t0 + 280'350us);
  CHECK_FALSE(timeline.finished());
  CHECK(timeline.totalUs() == 0);
  const std::string line = timeline.finish(t0 + 402'700us);
  CHECK(line ==
        "eal 150.0 ms, mbuf pool 90.0 ms, port uplink af_xdp 40.0 ms, agent connected at 300.0 ms, "
        "forwarding at 402.7 ms");
  CHECK(timeline.finished());
  CHECK(timeline.totalUs() == 402'700);

  // Start-up is over: a port opened later is not part of it, and finishing twice changes nothing.
  timeline.add("port pf0vf9 af_xdp", t0 + 5s, t0 + 5'040ms);
  timeline.mark("agent connected", t0 + 6s);
  CHECK(timeline.finish(t0 + 7s) == line);
  CHECK(timeline.phases().size() == 5);

  dpu::dataplane::v1::OperatorReply reply;
  timeline.describe(reply);
  REQUIRE(reply.startup_size() == 5);
  CHECK(reply.startup(0).name() == "eal");
  CHECK(reply.startup(0).start_us() == 100);
  CHECK(reply.startup(0).duration_us() == 150'000);
  CHECK_FALSE(reply.startup(0).moment());
  CHECK(reply.startup(3).name() == "agent connected");
  CHECK(reply.startup(3).moment());
  CHECK(reply.startup(4).name() == "forwarding");
  CHECK(reply.startup(4).start_us() == 402'700);
  CHECK(reply.startup_us() == 402'700);
  CHECK(reply.started_unix_us() == 1'700'000'000'000'000);
}

TEST_CASE("startup timeline: times before the origin or backwards count as zero", "[dataplane][startup]") {
  const auto t0 = StartupTimeline::Clock::time_point{} + 1h;
  StartupTimeline timeline(t0);
  timeline.add("early", t0 - 5ms, t0 + 1ms);
  timeline.add("backwards", t0 + 9ms, t0 + 2ms);
  REQUIRE(timeline.phases().size() == 2);
  CHECK(timeline.phases()[0].start_us == 0);
  CHECK(timeline.phases()[0].duration_us == 1000);
  CHECK(timeline.phases()[1].duration_us == 0);
  dpu::dataplane::v1::OperatorReply reply;
  timeline.describe(reply);
  CHECK(reply.startup_us() == 0);  // not forwarding yet
}
