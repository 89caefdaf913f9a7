// Underlay next hops (datapath/dataplane_neighbours.h).
//  [pure]  the next-hop choice over routes (longest prefix, metric, gateways of
//          either family, unreachable routes) and the usable neighbour states.
//  [netns] the real thing in a network namespace made for the test: a veth
//          "uplink0" whose peer, in a second namespace, answers ARP and ND.
//          Routes and neighbours are changed with `ip`; every change must reach
//          the listener (and the engine) through its rtnetlink event: the tests
//          only ever poll the event fd and dispatch, so a change that needed a
//          table read to be seen would never arrive. Root; skipped (exit 77) without.
#include <fcntl.h>
#include <linux/neighbour.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "datapath/dataplane_neighbours.h"
#include "datapath/engine.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "null_engine.h"
#include "skip.h"

using namespace dpu;
using namespace dpu::datapath;
using namespace std::chrono_literals;

namespace {

IpAddress ip(const char* text) { return *IpAddress::parse(text); }
MacAddress mac(const char* text) { return *MacAddress::parse(text); }

UnderlayRoute route(const char* prefix, const char* gateway = nullptr, uint32_t metric = 0) {
  UnderlayRoute r;
  r.destination = *IpPrefix::parse(prefix);
  if (gateway) r.gateway = ip(gateway);
  r.metric = metric;
  return r;
}

}  // namespace

TEST_CASE("neighbours: the next hop is the peer on-link, else the gateway of the longest prefix", "[pure]") {
  std::vector<UnderlayRoute> routes = {
      route("192.168.100.0/24"),
      route("10.20.0.0/16", "192.168.100.254"),
      route("10.20.3.0/24", "192.168.100.253"),
      route("0.0.0.0/0", "192.168.100.1", 100),
      route("0.0.0.0/0", "192.168.100.2", 50),  // the lower metric wins
  };
  CHECK(nextHopFor(routes, ip("192.168.100.7")) == ip("192.168.100.7"));
  CHECK(nextHopFor(routes, ip("10.20.9.1")) == ip("192.168.100.254"));
  CHECK(nextHopFor(routes, ip("10.20.3.4")) == ip("192.168.100.253"));
  CHECK(nextHopFor(routes, ip("172.16.0.1")) == ip("192.168.100.2"));
  CHECK_FALSE(nextHopFor({}, ip("172.16.0.1")).has_value());
  // A family's routes say nothing about the other family.
  CHECK_FALSE(nextHopFor(routes, ip("fd00::1")).has_value());
}

TEST_CASE("neighbours: IPv6 routes, link-local and cross-family gateways, unreachable routes", "[pure]") {
  std::vector<UnderlayRoute> routes = {
      route("fd00:100::/64"),
      route("fd00:200::/48", "fe80::1"),
      route("10.40.0.0/16", "fe80::1"),  // RFC 5549: an IPv4 route via an IPv6 next hop
      route("::/0", "fd00:100::fe"),
  };
  CHECK(nextHopFor(routes, ip("fd00:100::2")) == ip("fd00:100::2"));
  CHECK(nextHopFor(routes, ip("fd00:200:0:7::9")) == ip("fe80::1"));
  CHECK(nextHopFor(routes, ip("10.40.1.1")) == ip("fe80::1"));
  CHECK(nextHopFor(routes, ip("2001:db8::1")) == ip("fd00:100::fe"));

  // An unreachable (or blackhole, prohibit) route that is the best match stops the lookup.
  UnderlayRoute closed = route("fd00:200:0:7::/64");
  closed.reachable = false;
  routes.push_back(closed);
  CHECK_FALSE(nextHopFor(routes, ip("fd00:200:0:7::9")).has_value());
  CHECK(nextHopFor(routes, ip("fd00:200:0:8::9")) == ip("fe80::1"));

  // Host bits in a route's destination are ignored, as the kernel does.
  UnderlayRoute sloppy;
  sloppy.destination.address = ip("10.50.1.1");
  sloppy.destination.length = 16;
  sloppy.gateway = ip("192.168.100.9");
  CHECK(nextHopFor({sloppy}, ip("10.50.200.3")) == ip("192.168.100.9"));
}

TEST_CASE("neighbours: which neighbour states give a usable MAC", "[pure]") {
  for (int usable : {NUD_REACHABLE, NUD_STALE, NUD_DELAY, NUD_PROBE, NUD_PERMANENT}) CHECK(neighbourUsable(usable));
  for (int unusable : {NUD_INCOMPLETE, NUD_FAILED, NUD_NOARP, NUD_NONE}) CHECK_FALSE(neighbourUsable(unusable));
}

TEST_CASE("neighbours: an uplink that is not here fails at open, naming it", "[pure]") {
  auto k = KernelNextHops::open({"no-such-up9"}, [](auto&&...) {});
  REQUIRE_FALSE(k.ok());
  CHECK(k.code() == ErrorCode::kNotFound);
  CHECK_THAT(k.error(), Catch::Contains("no-such-up9") && Catch::Contains("resolve_next_hops"));
}

// ---- the real kernel ----

namespace {

void sh(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

std::string output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    pclose(p);
  }
  return out;
}

// Two namespaces joined by a veth: "uplink0" (192.168.77.1/24, fd00:77::1/64)
// in `dpu`, where the test thread runs while the lab lives, and "wire0"
// (192.168.77.2/24, fd00:77::2/64, MAC kPeerMac) in `peer`, whose kernel
// answers ARP and ND. Both go away with the lab, whatever the test did.
class NetnsLab {
 public:
  static constexpr const char* kPeerMac = "02:77:00:00:00:02";

  NetnsLab() {
    const std::string tag = std::to_string(getpid());
    dpu = "nbr-dpu-" + tag;
    peer = "nbr-peer-" + tag;
    sh("ip netns add " + dpu);
    sh("ip netns add " + peer);
    sh("ip -n " + dpu + " link add uplink0 type veth peer name wire0 netns " + peer);
    sh("ip -n " + peer + " link set wire0 address " + kPeerMac);
    sh("ip -n " + dpu + " addr add 192.168.77.1/24 dev uplink0");
    sh("ip -n " + dpu + " addr add fd00:77::1/64 dev uplink0 nodad");
    sh("ip -n " + peer + " addr add 192.168.77.2/24 dev wire0");
    sh("ip -n " + peer + " addr add fd00:77::2/64 dev wire0 nodad");
    sh("ip -n " + dpu + " link set uplink0 up");
    sh("ip -n " + peer + " link set wire0 up");
    sh("ip -n " + dpu + " link set lo up");
    // Enter the namespace: the netlink and probe sockets are made here.
    home_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = ::open(("/run/netns/" + dpu).c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(home_ >= 0);
    REQUIRE(target >= 0);
    REQUIRE(setns(target, CLONE_NEWNET) == 0);
    ::close(target);
  }
  ~NetnsLab() {
    if (home_ >= 0) {
      (void)setns(home_, CLONE_NEWNET);
      ::close(home_);
    }
    (void)std::system(("ip netns del " + dpu + " 2>/dev/null").c_str());
    (void)std::system(("ip netns del " + peer + " 2>/dev/null").c_str());
  }
  // `ip` in the DPU namespace.
  void ip(const std::string& args) const { sh("ip -n " + dpu + " " + args); }

  std::string dpu, peer;

 private:
  int home_ = -1;
};

bool root() { return geteuid() == 0; }

// Waits (5 s at most) on `fd` and calls `dispatch` whenever it is readable,
// until `done`. Nothing else runs: what changes, changes through events.
bool pumpUntil(int fd, const std::function<void()>& dispatch, const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!done()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) dispatch();
  }
  return true;
}

struct Change {
  IpAddress peer;
  std::optional<MacAddress> mac;
  std::string why;
};

struct Watcher {
  std::vector<Change> changes;
  std::unique_ptr<KernelNextHops> kernel;

  explicit Watcher(int receive_buffer_bytes = 4 * 1024 * 1024) {
    auto k = KernelNextHops::open({"uplink0", receive_buffer_bytes},
                                  [this](const IpAddress& p, const std::optional<MacAddress>& m, const std::string& w) {
                                    changes.push_back({p, m, w});
                                  });
    REQUIRE(k.ok());
    kernel = std::move(*k);
  }
  // Dispatches events until the listener has said `peer` resolves to `want` (nullopt: lost it).
  bool until(const IpAddress& peer, std::optional<MacAddress> want) {
    return pumpUntil(
        kernel->fd(), [&] { REQUIRE(kernel->dispatch().ok()); },
        [&] { return !changes.empty() && changes.back().peer == peer && changes.back().mac == want; });
  }
};

}  // namespace

TEST_CASE("neighbours: IPv4 next hops follow the kernel's events", "[netns]") {
  if (!root()) dpu::test::skipTest("needs root (network namespaces)");
  NetnsLab lab;
  Watcher w;
  const IpAddress on_link = ip("192.168.77.2"), far = ip("10.20.3.4"), elsewhere = ip("10.30.1.1");

  // An on-link peer the kernel has never heard of: watching probes it, the
  // kernel ARPs, and the answer arrives as an event.
  w.kernel->watch({on_link});
  CHECK(w.kernel->stats().probes == 1);
  REQUIRE(w.until(on_link, mac(NetnsLab::kPeerMac)));

  // Behind a gateway whose neighbour entry is permanent.
  lab.ip("neigh add 192.168.77.254 lladdr 02:00:00:00:00:fe dev uplink0 nud permanent");
  lab.ip("route add 10.20.0.0/16 via 192.168.77.254 dev uplink0");
  // Another netdev's route and neighbour are not the uplink's.
  lab.ip("link add other0 type veth peer name other1");
  lab.ip("link set other0 up");
  lab.ip("addr add 192.168.88.1/24 dev other0");
  lab.ip("neigh add 192.168.88.254 lladdr 02:00:00:00:88:fe dev other0 nud permanent");
  lab.ip("route add 10.30.0.0/16 via 192.168.88.254 dev other0");
  w.kernel->watch({on_link, far, elsewhere});  // the mirror has them now or will on the next dispatch
  REQUIRE(w.until(far, mac("02:00:00:00:00:fe")));
  CHECK_FALSE(w.kernel->macOf(elsewhere).has_value());
  CHECK(w.kernel->macOf(on_link) == mac(NetnsLab::kPeerMac));

  // A changed MAC. The mirror changes only when its event is dispatched:
  // until then the old MAC stands, and the first dispatch after the fd turns
  // readable brings the new one.
  lab.ip("neigh replace 192.168.77.254 lladdr 02:00:00:00:00:ef dev uplink0 nud reachable");
  CHECK(w.kernel->macOf(far) == mac("02:00:00:00:00:fe"));
  REQUIRE(w.until(far, mac("02:00:00:00:00:ef")));

  // STALE is still usable; FAILED is not.
  lab.ip("neigh replace 192.168.77.254 lladdr 02:00:00:00:00:ef dev uplink0 nud stale");
  lab.ip("neigh replace 192.168.77.254 dev uplink0 nud failed");
  REQUIRE(w.until(far, std::nullopt));
  CHECK_THAT(w.changes.back().why, Catch::Contains("192.168.77.254 is FAILED"));

  // A deleted neighbour: the peer loses its MAC and is probed at once, which
  // makes the kernel ask for the gateway again (nobody answers for .254).
  lab.ip("neigh replace 192.168.77.254 lladdr 02:00:00:00:00:fe dev uplink0 nud permanent");
  REQUIRE(w.until(far, mac("02:00:00:00:00:fe")));
  const auto probes = w.kernel->stats().probes;
  lab.ip("neigh del 192.168.77.254 dev uplink0");
  REQUIRE(w.until(far, std::nullopt));
  CHECK_THAT(w.changes.back().why, Catch::Contains("no neighbour entry"));
  CHECK(w.kernel->stats().probes == probes + 1);
  CHECK_THAT(output("ip -n " + lab.dpu + " neigh show 192.168.77.254 dev uplink0"),
             Catch::Contains("INCOMPLETE") || Catch::Contains("FAILED"));

  // A changed route: the same peer now goes via the on-link neighbour.
  lab.ip("route replace 10.20.0.0/16 via 192.168.77.2 dev uplink0");
  REQUIRE(w.until(far, mac(NetnsLab::kPeerMac)));
  // A more specific route with a worse metric still wins; a deleted route takes the peer's next hop away.
  lab.ip("route add 10.20.3.0/24 via 192.168.77.250 dev uplink0 metric 500");
  lab.ip("neigh add 192.168.77.250 lladdr 02:00:00:00:00:fa dev uplink0 nud permanent");
  REQUIRE(w.until(far, mac("02:00:00:00:00:fa")));
  lab.ip("route del 10.20.3.0/24");
  REQUIRE(w.until(far, mac(NetnsLab::kPeerMac)));
  lab.ip("route del 10.20.0.0/16");
  REQUIRE(w.until(far, std::nullopt));
  CHECK_THAT(w.changes.back().why, Catch::Contains("no route to 10.20.3.4 via uplink0"));

  // No table was read but through events; the process never polled.
  CHECK(w.kernel->stats().events > 0);
  CHECK(w.kernel->stats().resyncs == 0);
  CHECK(w.kernel->stats().resolved == 1);
  CHECK(w.kernel->stats().unresolved == 2);
}

TEST_CASE("neighbours: IPv6 next hops: ND, link-local gateways, an IPv4 route via IPv6", "[netns]") {
  if (!root()) dpu::test::skipTest("needs root (network namespaces)");
  NetnsLab lab;
  Watcher w;
  const IpAddress on_link = ip("fd00:77::2"), far = ip("fd00:20:0:1::5"), v4_via_v6 = ip("10.40.1.1");

  // Neighbour discovery, started by the probe.
  w.kernel->watch({on_link});
  REQUIRE(w.until(on_link, mac(NetnsLab::kPeerMac)));

  // A link-local gateway, as routers advertise themselves.
  lab.ip("-6 neigh add fe80::fe lladdr 02:00:00:00:06:fe dev uplink0 nud permanent");
  lab.ip("-6 route add fd00:20::/48 via fe80::fe dev uplink0");
  lab.ip("route add 10.40.0.0/16 via inet6 fe80::fe dev uplink0");
  w.kernel->watch({on_link, far, v4_via_v6});
  REQUIRE(pumpUntil(
      w.kernel->fd(), [&] { REQUIRE(w.kernel->dispatch().ok()); },
      [&] { return w.kernel->macOf(far) && w.kernel->macOf(v4_via_v6); }));
  CHECK(w.kernel->macOf(far) == mac("02:00:00:00:06:fe"));
  CHECK(w.kernel->macOf(v4_via_v6) == mac("02:00:00:00:06:fe"));

  // A changed MAC reaches both peers behind that gateway.
  lab.ip("-6 neigh replace fe80::fe lladdr 02:00:00:00:06:ef dev uplink0 nud reachable");
  REQUIRE(pumpUntil(
      w.kernel->fd(), [&] { REQUIRE(w.kernel->dispatch().ok()); },
      [&] {
        return w.kernel->macOf(far) == mac("02:00:00:00:06:ef") && w.kernel->macOf(v4_via_v6) == mac("02:00:00:00:06:ef");
      }));

  // Deleted: both lose it and are probed; the peer on-link keeps its own.
  const auto probes = w.kernel->stats().probes;
  lab.ip("-6 neigh del fe80::fe dev uplink0");
  REQUIRE(pumpUntil(
      w.kernel->fd(), [&] { REQUIRE(w.kernel->dispatch().ok()); },
      [&] { return !w.kernel->macOf(far) && !w.kernel->macOf(v4_via_v6); }));
  CHECK(w.kernel->stats().probes == probes + 2);
  CHECK(w.kernel->macOf(on_link) == mac(NetnsLab::kPeerMac));

  // The peer's own entry changes MAC (its NIC replaced): an event, a new MAC.
  lab.ip("-6 neigh replace fd00:77::2 lladdr 02:77:00:00:00:99 dev uplink0 nud permanent");
  REQUIRE(w.until(on_link, mac("02:77:00:00:00:99")));
}

namespace {

// Records what TunnelNeighbours tells the engine; the packet side is not used here.
class RecordingEngine final : public testing::NullEngine {
 public:
  std::vector<IpAddress> peers;
  std::map<IpAddress, MacAddress> hops;
  unsigned sets = 0;

  Result<void> setTunnelNextHop(const IpAddress& peer, MacAddress next_hop) override {
    ++sets;
    hops[peer] = next_hop;
    return {};
  }
  std::vector<IpAddress> wantedTunnelPeers() const override { return peers; }
};

}  // namespace

TEST_CASE("neighbours: a neighbour event reaches the engine without a refresh; static entries win", "[netns]") {
  if (!root()) dpu::test::skipTest("needs root (network namespaces)");
  NetnsLab lab;
  RecordingEngine engine;
  const IpAddress kernel_peer = ip("192.168.77.2"), static_peer = ip("fd00:77::2"), far = ip("10.9.9.9");
  engine.peers = {kernel_peer, static_peer, far};
  TunnelNeighbours neighbours(engine, "uplink0", {{static_peer, mac("02:00:00:00:00:77")}});
  CHECK(neighbours.eventFd() == -1);  // nothing open yet
  REQUIRE(neighbours.open().ok());
  REQUIRE(neighbours.eventFd() >= 0);

  // The model arrived: the static entry at once, the kernel's peer once its ARP is answered.
  neighbours.refresh();
  CHECK(engine.hops.at(static_peer) == mac("02:00:00:00:00:77"));
  auto onEvents = [&] { neighbours.onEvents(); };
  REQUIRE(pumpUntil(neighbours.eventFd(), onEvents, [&] { return engine.hops.count(kernel_peer) == 1; }));
  CHECK(engine.hops.at(kernel_peer) == mac(NetnsLab::kPeerMac));

  // From here on refresh() is never called: only the event fd drives the engine.
  const unsigned sets = engine.sets;
  lab.ip("neigh replace 192.168.77.2 lladdr 02:00:00:00:00:42 dev uplink0 nud permanent");
  REQUIRE(pumpUntil(neighbours.eventFd(), onEvents,
                    [&] { return engine.hops.at(kernel_peer) == mac("02:00:00:00:00:42"); }));
  CHECK(engine.sets == sets + 1);
  // A route and neighbour for the third peer appear: told as they happen.
  lab.ip("neigh add 192.168.77.200 lladdr 02:00:00:00:00:c8 dev uplink0 nud permanent");
  lab.ip("route add 10.9.0.0/16 via 192.168.77.200 dev uplink0");
  REQUIRE(pumpUntil(neighbours.eventFd(), onEvents, [&] { return engine.hops.count(far) == 1; }));
  CHECK(engine.hops.at(far) == mac("02:00:00:00:00:c8"));
  // A kernel entry for the static peer does not replace the static entry.
  lab.ip("-6 neigh replace fd00:77::2 lladdr 02:00:00:00:00:66 dev uplink0 nud permanent");
  lab.ip("neigh replace 192.168.77.2 lladdr 02:00:00:00:00:43 dev uplink0 nud permanent");  // a marker after it
  REQUIRE(pumpUntil(neighbours.eventFd(), onEvents,
                    [&] { return engine.hops.at(kernel_peer) == mac("02:00:00:00:00:43"); }));
  CHECK(engine.hops.at(static_peer) == mac("02:00:00:00:00:77"));

  // A deleted neighbour leaves the engine its last MAC while the kernel asks again.
  lab.ip("neigh del 192.168.77.200 dev uplink0");
  lab.ip("neigh replace 192.168.77.2 lladdr 02:00:00:00:00:44 dev uplink0 nud permanent");  // marker
  REQUIRE(pumpUntil(neighbours.eventFd(), onEvents,
                    [&] { return engine.hops.at(kernel_peer) == mac("02:00:00:00:00:44"); }));
  CHECK(engine.hops.at(far) == mac("02:00:00:00:00:c8"));

  dataplane::v1::OperatorReply reply;
  neighbours.addCounters(reply);
  CHECK(testing::counterOf(reply, "tunnel_peers_resolved") == 2);  // the static one and 192.168.77.2
  CHECK(testing::counterOf(reply, "tunnel_peers_unresolved") == 1);
  CHECK(testing::counterOf(reply, "neighbour_probes") == 2);  // 192.168.77.2 at first, 10.9.9.9 when its neighbour went
  CHECK(testing::counterOf(reply, "neighbour_events") > 0);
  CHECK(testing::counterOf(reply, "neighbour_resyncs") == 0);
}

TEST_CASE("neighbours: events lost to a full socket are recovered by re-reading the tables", "[netns]") {
  if (!root()) dpu::test::skipTest("needs root (network namespaces)");
  NetnsLab lab;
  Watcher w(1);  // the kernel's minimum receive buffer: a few events fill it
  const IpAddress far = ip("10.20.3.4");
  lab.ip("neigh add 192.168.77.254 lladdr 02:00:00:00:00:fe dev uplink0 nud permanent");
  lab.ip("route add 10.20.0.0/16 via 192.168.77.254 dev uplink0");
  REQUIRE(pumpUntil(
      w.kernel->fd(), [&] { REQUIRE(w.kernel->dispatch().ok()); },
      [&] {
        w.kernel->watch({far});
        return w.kernel->macOf(far).has_value();
      }));

  // Many events while nobody reads, the one that matters last.
  const std::string batch = "/tmp/nbr-batch-" + std::to_string(getpid());
  {
    std::ofstream out(batch);
    for (int i = 1; i <= 400; ++i)
      out << "neigh add fd00:77::" << std::hex << (0x1000 + i) << std::dec
          << " lladdr 02:00:00:00:10:01 dev uplink0 nud permanent\n";
    out << "neigh replace 192.168.77.254 lladdr 02:00:00:00:00:ef dev uplink0 nud permanent\n";
  }
  lab.ip("-batch " + batch);
  std::remove(batch.c_str());
  CHECK(w.kernel->macOf(far) == mac("02:00:00:00:00:fe"));
  REQUIRE(w.until(far, mac("02:00:00:00:00:ef")));
  CHECK(w.kernel->stats().resyncs >= 1);
}
