// The locks of a dataplane and its warm standby (takeover.h), with real
// processes: the active lock refuses a second active one and names it, a
// standby waits while the active one lives and gets the lock when it is
// killed (SIGKILL: the kernel releases it), a waiting standby stops when told,
// and two slots exist, no third.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include "datapath/takeover.h"

using namespace dpu;
using namespace dpu::datapath;
using namespace std::chrono_literals;

namespace {

std::string tempSocket() {
  char dir[] = "/tmp/dpu-takeover-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return std::string(dir) + "/run/dataplane.sock";  // the lock's directory does not exist yet
}

// A child process that holds the active lock (and published its pid) until killed.
pid_t activeChild(const std::string& socket) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    auto held = acquireActive(socket);
    const char ok = held && held->publish(std::to_string(::getpid()) + "\n") ? 1 : 0;
    (void)!::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  ::close(ready[0]);
  REQUIRE(ok == 1);
  return pid;
}

void killChild(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

TEST_CASE("takeover: one active dataplane; a standby takes over when it is killed", "[dataplane][takeover]") {
  const std::string socket = tempSocket();
  const pid_t active = activeChild(socket);
  CHECK(activeLockOwner(socket) == active);

  auto second = acquireActive(socket);
  REQUIRE_FALSE(second);
  CHECK(second.code() == ErrorCode::kConflict);
  CHECK_THAT(second.error(), Catch::Contains("pid " + std::to_string(active)) && Catch::Contains("--standby"));

  std::atomic<bool> stop{false};
  auto waiting = std::async(std::launch::async, [&] { return waitForActive(socket, stop, 10ms); });
  // Held by a live process: the standby keeps waiting.
  CHECK(waiting.wait_for(100ms) == std::future_status::timeout);
  killChild(active);
  auto taken = waiting.get();
  REQUIRE(taken);
  CHECK(taken->held());
  CHECK(taken->path() == socket + ".lock");
  // Now this process is active: another is refused, and then the lock is free again.
  CHECK_FALSE(acquireActive(socket));
  *taken = HeldLock();
  CHECK(acquireActive(socket));
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path().parent_path());
}

TEST_CASE("takeover: a waiting standby stops when told", "[dataplane][takeover]") {
  const std::string socket = tempSocket();
  const pid_t active = activeChild(socket);
  std::atomic<bool> stop{false};
  auto waiting = std::async(std::launch::async, [&] { return waitForActive(socket, stop, 10ms); });
  stop = true;
  auto stopped = waiting.get();
  REQUIRE_FALSE(stopped);
  CHECK(stopped.code() == ErrorCode::kClosed);
  killChild(active);
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path().parent_path());
}

TEST_CASE("takeover: two slots, each its own EAL prefix; no third dataplane", "[dataplane][takeover]") {
  const std::string socket = tempSocket();
  auto a = claimSlot(socket);
  REQUIRE(a);
  CHECK(a->name == "a");
  auto b = claimSlot(socket);
  REQUIRE(b);
  CHECK(b->name == "b");
  auto third = claimSlot(socket);
  REQUIRE_FALSE(third);
  CHECK(third.code() == ErrorCode::kConflict);
  CHECK_THAT(third.error(), Catch::Contains("run already"));
  // The process in slot a is gone: its slot is free for the next standby.
  a->lock = HeldLock();
  auto next = claimSlot(socket);
  REQUIRE(next);
  CHECK(next->name == "a");
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path().parent_path());
}
