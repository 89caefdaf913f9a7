#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
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
    auto f = recvFrame(*conn, after(2s));
    REQUIRE(f.ok());
    REQUIRE(sendFrame(*conn, "echo:" + *f, after(2s)).ok());
    auto end = recvFrame(*conn, after(2s));
    REQUIRE_FALSE(end.ok());
    CHECK(end.code() == dpu::ErrorCode::kClosed);
  });
  {
    auto c = connectUnix(path, after(1s));
    REQUIRE(c.ok());
    REQUIRE(sendFrame(*c, std::string(100000, 'x'), after(1s)).ok());
    auto f = recvFrame(*c, after(2s));
    REQUIRE(f.ok());
    CHECK(f->size() == 100005);
  }
  server.join();

  // Nobody answers: the deadline turns into an error.
  auto c = connectUnix(path, after(1s));
  REQUIRE(c.ok());
  auto t0 = Clock::now();
  auto f = recvFrame(*c, after(100ms));
  REQUIRE_FALSE(f.ok());
  CHECK(f.code() == dpu::ErrorCode::kTimeout);
  CHECK(Clock::now() - t0 < 2s);

  // A second listener on a live socket is refused; after close it may take over.
  CHECK_FALSE(listenUnix(path).ok());
  listener->close();
  CHECK(listenUnix(path).ok());
  unlink(path.c_str());
  CHECK_FALSE(connectUnix("/tmp/definitely-not-here.sock", after(100ms)).ok());
}

TEST_CASE("a listening socket appears with its mode, whatever the umask, and leaves no temporary file") {
  std::string dir = "/tmp/dpu-ipc-mode-" + std::to_string(getpid());
  std::string path = dir + "/s.sock";
  auto mode_of = [&] {
    struct stat st{};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    return st.st_mode & 07777;
  };
  mode_t old = ::umask(0);  // nothing taken away: the socket must still not be more open
  auto a = listenUnix(path, 0600);
  ::umask(077);  // everything but the owner's taken away: the mode must still be whole
  REQUIRE(a.ok());
  CHECK(mode_of() == 0600);
  a->close();
  auto b = listenUnix(path, 0660);
  ::umask(old);
  REQUIRE(b.ok());
  CHECK(mode_of() == 0660);
  auto c = connectUnix(path, after(1s));  // renamed into place, connect finds it
  CHECK(c.ok());
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.path().filename() != "s.sock";
  CHECK(files == 0);
  b->close();
  std::filesystem::remove_all(dir);
}

TEST_CASE("a frame begun before the deadline is read whole; one cut off is an error, not a timeout") {
  std::string path = "/tmp/dpu-ipc-test-cut-" + std::to_string(getpid()) + ".sock";
  auto listener = listenUnix(path);
  REQUIRE(listener.ok());
  auto c = connectUnix(path, after(1s));
  REQUIRE(c.ok());
  auto conn = acceptUnix(*listener, after(1s));
  REQUIRE(conn.ok());
  const char header[4] = {0, 0, 0, 5};

  // The header now, the payload 200 ms later: a reader polling every 20 ms
  // must not give up half-way (its next read would take "hello" for a header).
  REQUIRE(::send(c->fd(), header, 4, MSG_NOSIGNAL) == 4);
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    ::send(c->fd(), "hello", 5, MSG_NOSIGNAL);
  });
  auto f = recvFrame(*conn, after(20ms));
  late.join();
  REQUIRE(f.ok());
  CHECK(*f == "hello");

  // A payload that never comes: an error of its own, not "ask again".
  REQUIRE(::send(c->fd(), header, 4, MSG_NOSIGNAL) == 4);
  auto cut = recvFrame(*conn, after(20ms));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.code() != dpu::ErrorCode::kTimeout);
  CHECK(cut.error().find("middle of a message") != std::string::npos);
  unlink(path.c_str());
}
