#include <catch2/catch.hpp>

#include <unistd.h>

#include <thread>

#include "common/ipc.h"

using namespace dpu::ipc;
using namespace std::chrono_literals;

TEST_CASE("frames cross a unix socket; a silent peer times out; a stale socket is replaced") {
  std::string path = "/tmp/dpu-ipc-test-" + std::to_string(getpid()) + ".sock";
  auto listener = listenUnix(path);
  REQUIRE(listener.ok());
  std::thread server([&] {
    auto conn = acceptUnix(*listener, after(2s));
    REQUIRE(conn.ok());
    Frame f = recvFrame(*conn, after(2s));
    REQUIRE(f.ok());
    REQUIRE(sendFrame(*conn, "echo:" + f.payload, after(2s)).ok());
    Frame end = recvFrame(*conn, after(2s));
    CHECK(end.failure == RecvFailure::kClosed);
  });
  {
    auto c = connectUnix(path, after(1s));
    REQUIRE(c.ok());
    REQUIRE(sendFrame(*c, std::string(100000, 'x'), after(1s)).ok());
    Frame f = recvFrame(*c, after(2s));
    REQUIRE(f.ok());
    CHECK(f.payload.size() == 100005);
  }
  server.join();

  // Nobody answers: the deadline turns into an error.
  auto c = connectUnix(path, after(1s));
  REQUIRE(c.ok());
  auto t0 = Clock::now();
  Frame f = recvFrame(*c, after(100ms));
  CHECK(f.failure == RecvFailure::kTimeout);
  CHECK(Clock::now() - t0 < 2s);

  // A second listener on a live socket is refused; after close it may take over.
  CHECK_FALSE(listenUnix(path).ok());
  listener->close();
  CHECK(listenUnix(path).ok());
  unlink(path.c_str());
  CHECK_FALSE(connectUnix("/tmp/definitely-not-here.sock", after(100ms)).ok());
}
