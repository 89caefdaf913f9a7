// Underlay next hops from the kernel's tables: /proc/net/route and
// /proc/net/arp as the kernel prints them, longest-prefix choice of the next hop.
#include <catch2/catch.hpp>

#include "datapath/dataplane_neighbours.h"

using namespace dpu::datapath;

namespace {

// Captured from a namespace with uplink0 = 192.168.100.1/24 and a route to
// 10.20.0.0/16 via 192.168.100.254 (addresses in the kernel's in-memory order).
constexpr const char* kRoutes =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "uplink0\t0064A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "uplink0\t0000140A\tFE64A8C0\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
    "eth9\t00000000\t0164A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";

constexpr const char* kArp =
    "IP address       HW type     Flags       HW address            Mask     Device\n"
    "192.168.100.2    0x1         0x2         e2:a3:80:20:8f:91     *        uplink0\n"
    "192.168.100.254  0x1         0x2         02:00:00:00:00:fe     *        uplink0\n"
    "192.168.100.3    0x1         0x0         00:00:00:00:00:00     *        uplink0\n"
    "192.168.100.9    0x1         0x2         02:00:00:00:00:09     *        eth9\n";

uint32_t ip(const char* text) { return dpu::IpAddress::parse(text)->v4HostOrder(); }

}  // namespace

TEST_CASE("neighbours: routes and ARP entries of the uplink only", "[dataplane]") {
  auto routes = parseProcRoute(kRoutes, "uplink0");
  REQUIRE(routes.size() == 2);
  CHECK(routes[0].destination == ip("192.168.100.0"));
  CHECK(routes[0].mask == ip("255.255.255.0"));
  CHECK(routes[0].gateway == 0);
  CHECK(routes[1].gateway == ip("192.168.100.254"));

  auto arp = parseProcArp(kArp, "uplink0");
  CHECK(arp.size() == 2);  // the incomplete entry and eth9's are left out
  CHECK(arp.at(ip("192.168.100.2")).str() == "e2:a3:80:20:8f:91");
}

TEST_CASE("neighbours: the next hop is the peer on-link, else the gateway", "[dataplane]") {
  auto routes = parseProcRoute(kRoutes, "uplink0");
  CHECK(nextHopFor(routes, ip("192.168.100.2")) == ip("192.168.100.2"));
  CHECK(nextHopFor(routes, ip("10.20.3.4")) == ip("192.168.100.254"));
  CHECK_FALSE(nextHopFor(routes, ip("172.16.0.1")).has_value());  // eth9's default route is not ours
  CHECK(parseProcRoute("garbage\nmore garbage\n", "uplink0").empty());
}
