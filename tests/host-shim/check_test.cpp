// CHECK's comparison of live state with prevResult.
#include <catch2/catch.hpp>

#include "host-shim/check.h"

using namespace dpu;
using namespace dpu::hostshim;

namespace {

const char* kPrev = R"({"cniVersion": "1.1.0",
  "interfaces": [{"name": "eth0", "mac": "0a:58:0a:f4:01:05", "mtu": 1400, "sandbox": "/run/netns/p1"}],
  "ips": [{"address": "10.244.1.5/24", "gateway": "10.244.1.1", "interface": 0}],
  "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.1.1"}]})";

LiveInterface live() {
  LiveInterface l;
  l.exists = true;
  l.mac = *MacAddress::parse("0a:58:0a:f4:01:05");
  l.mtu = 1400;
  l.addresses.push_back(*IpInterfaceAddress::parse("10.244.1.5/24"));
  nl::RouteSpec r;
  r.dst = *IpPrefix::parse("0.0.0.0/0");
  r.gw = *IpAddress::parse("10.244.1.1");
  l.routes.push_back(r);
  return l;
}

}  // namespace

TEST_CASE("CHECK passes when live matches prevResult") {
  CHECK(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", live()).ok());
}

TEST_CASE("CHECK names the first difference") {
  auto l = live();
  l.mtu = 9000;
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", l).error(), Catch::Contains("MTU 9000"));
  l = live();
  l.mac = *MacAddress::parse("02:00:00:00:00:01");
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", l).error(), Catch::Contains("MAC"));
  l = live();
  l.addresses.clear();
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", l).error(),
             Catch::Contains("lacks address 10.244.1.5/24"));
  l = live();
  l.routes.clear();
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", l).error(),
             Catch::Contains("lacks route 0.0.0.0/0"));
  l = live();
  l.exists = false;
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/p1", l).error(), Catch::Contains("does not exist"));
  CHECK_THAT(compareWithPrevResult(kPrev, "net1", "/run/netns/p1", live()).error(),
             Catch::Contains("no interface net1"));
  CHECK_THAT(compareWithPrevResult(kPrev, "eth0", "/run/netns/other", live()).error(),
             Catch::Contains("no interface eth0"));
  CHECK_FALSE(compareWithPrevResult("[1,2]", "eth0", "/run/netns/p1", live()).ok());
}

TEST_CASE("routes of other interfaces in a chained result are not ours") {
  const char* prev = R"({"interfaces": [{"name": "eth0", "sandbox": "/run/netns/p1"}, {"name": "net1"}],
    "ips": [{"address": "10.244.1.5/24", "interface": 0}, {"address": "192.168.9.2/24", "interface": 1}],
    "routes": [{"dst": "192.168.0.0/16", "gw": "192.168.9.1"}]})";
  CHECK(compareWithPrevResult(prev, "eth0", "/run/netns/p1", live()).ok());
}

TEST_CASE("CHECK fails unless the DPU's dataplane forwards for the attachment, with the reason") {
  auto answer = [](const std::string& state) {
    attach::v1::AttachResponse r;
    r.mutable_attachment()->set_id("att-1");
    r.mutable_attachment()->set_dataplane_state(state);
    return Result<attach::v1::AttachResponse>(r);
  };
  CHECK(checkDataplaneState("att-1", answer("programmed")).ok());
  auto pending = checkDataplaneState("att-1", answer("pending"));
  REQUIRE_FALSE(pending.ok());
  CHECK(pending.code() == ErrorCode::kUnavailable);  // retrying helps: CNI code 11
  auto refused = checkDataplaneState("att-1", answer("refused: mac 0a:58:a9:fe:00:01 is the router MAC"));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.code() != ErrorCode::kUnavailable);
  CHECK_THAT(refused.error(), Catch::Contains("does not forward for attachment att-1: refused: mac 0a:58:a9:fe:00:01"));
  auto unavailable = checkDataplaneState("att-1", answer("port unavailable: pf0vf3 missing"));
  REQUIRE_FALSE(unavailable.ok());
  CHECK_THAT(unavailable.error(), Catch::Contains("port unavailable: pf0vf3 missing"));

  Result<attach::v1::AttachResponse> down = Error{"connection refused", ErrorCode::kUnavailable};
  auto d = checkDataplaneState("att-1", down);
  REQUIRE_FALSE(d.ok());
  CHECK(d.code() == ErrorCode::kUnavailable);
  CHECK_THAT(d.error(), Catch::Contains("connection refused"));
  Result<attach::v1::AttachResponse> gone = Error{"404", ErrorCode::kNotFound};
  auto g = checkDataplaneState("att-1", gone);
  REQUIRE_FALSE(g.ok());
  CHECK(g.code() == ErrorCode::kUnavailable);  // host-shim replays it: retry
  CHECK_THAT(g.error(), Catch::Contains("has no attachment att-1"));
  Result<attach::v1::AttachResponse> forbidden = Error{"403", ErrorCode::kForbidden};
  auto f = checkDataplaneState("att-1", forbidden);
  REQUIRE_FALSE(f.ok());
  CHECK(f.code() != ErrorCode::kUnavailable);
}
