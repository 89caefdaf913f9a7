// NAT keepalives (nat_keepalive.h) for real: the test process moves into a
// network namespace of its own (unshare, root), where "the tunnel IP" is
// 127.0.0.1 and two UDP sockets stand in for two NATed peers, one at 4500
// and one at the port its NAT chose. What they receive is checked byte for
// byte with its source; the interval is driven by the time points given to
// tick(), never by sleeping.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "datapath/nat_keepalive.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "null_engine.h"
#include "skip.h"

namespace dpu::datapath {
namespace {

using namespace std::chrono_literals;

// An engine that only answers where keepalives go.
class TargetsEngine final : public testing::NullEngine {
 public:
  NatKeepaliveTargets targets;

  NatKeepaliveTargets natKeepaliveTargets() const override { return targets; }
};

// A peer: a UDP socket on 127.0.0.1:port.
struct Peer {
  int fd = -1;
  explicit Peer(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~Peer() { ::close(fd); }
  // Every datagram waiting (the sends are done when tick() returns: loopback
  // delivers in sendto), as "source port:payload hex".
  std::vector<std::string> received() const {
    std::vector<std::string> out;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return out;
      uint8_t buf[64];
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n = ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      REQUIRE(n >= 0);
      std::string text = std::to_string(ntohs(from.sin_port)) + ":";
      char hex[3];
      for (ssize_t i = 0; i < n; ++i) {
        std::snprintf(hex, sizeof hex, "%02x", buf[i]);
        text += hex;
      }
      out.push_back(text);
    }
  }
};

}  // namespace

TEST_CASE("NAT keepalives: one 0xff byte from port 4500 to every peer's address and port, each interval, counted",
          "[netns]") {
  if (geteuid() != 0) dpu::test::skipTest("needs root (a network namespace of its own)");
  REQUIRE(::unshare(CLONE_NEWNET) == 0);
  REQUIRE(std::system("ip link set lo up") == 0);
  const IpAddress lo = IpAddress::parse("127.0.0.1").value();

  TargetsEngine engine;
  NatKeepalives keepalives(engine, "");  // routed by the kernel: 203.0.113.9 below has no route
  Peer at4500(4500 + 1), mapped(61234);  // 4500 itself is ours: the first peer listens one above
  engine.targets.interval_s = 20;
  engine.targets.local = lo;
  engine.targets.peers = {{lo, 4501}, {lo, 61234}};

  const auto t0 = std::chrono::steady_clock::now();
  keepalives.tick(t0);
  CHECK(at4500.received() == std::vector<std::string>{"4500:ff"});
  CHECK(mapped.received() == std::vector<std::string>{"4500:ff"});
  keepalives.tick(t0 + 19s);  // not yet
  CHECK(at4500.received().empty());
  keepalives.tick(t0 + 20s);
  CHECK(at4500.received().size() == 1);
  CHECK(mapped.received().size() == 1);

  dataplane::v1::OperatorReply reply;
  keepalives.addCounters(reply);
  CHECK(testing::counterOf(reply, "ipsec_nat_keepalives_sent") == 4);
  CHECK(testing::counterOf(reply, "ipsec_nat_keepalive_failures") == 0);

  // Keepalives off (interval 0): none, however long.
  engine.targets.interval_s = 0;
  keepalives.tick(t0 + 1000s);
  CHECK(at4500.received().empty());

  // A peer with no route is a counted failure, not a stop for the others.
  engine.targets.interval_s = 1;
  engine.targets.peers = {{IpAddress::parse("203.0.113.9").value(), 4500}, {lo, 61234}};
  keepalives.tick(t0 + 2000s);
  CHECK(mapped.received() == std::vector<std::string>{"4500:ff"});
  reply.Clear();
  keepalives.addCounters(reply);
  CHECK(testing::counterOf(reply, "ipsec_nat_keepalives_sent") == 5);
  CHECK(testing::counterOf(reply, "ipsec_nat_keepalive_failures") == 1);
}

}  // namespace dpu::datapath
