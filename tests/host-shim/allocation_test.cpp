// Allocation records: claim, idempotent re-claim, refusal naming the holder,
// release, survival across store instances (a restart), and 50 concurrent
// claimers never sharing a VF.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "host-shim/allocation.h"

namespace fs = std::filesystem;
using namespace dpu::hostshim;

namespace {

std::string freshDir(const char* tag) {
  auto d = fs::temp_directory_path() / (std::string("hs-alloc-") + tag + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d.string();
}

}  // namespace

TEST_CASE("a VF has one holder; records survive a new store") {
  std::string dir = freshDir("basic");
  {
    AllocationStore s(dir);
    REQUIRE(s.init().ok());
    AllocationRecord a{{0, 3}, "c1/eth0", "0000:3b:00.5"};
    CHECK(s.claim(a).ok());
    CHECK(s.claim(a).ok());  // a retried ADD
    auto held = s.claim({{0, 3}, "c2/eth0", "0000:3b:00.5"});
    REQUIRE_FALSE(held.ok());
    CHECK(held.code() == dpu::ErrorCode::kConflict);
    CHECK(held.failure().holder == "c1/eth0");
    CHECK_THAT(held.error(), Catch::Contains("held by c1/eth0"));
  }
  AllocationStore again(dir);
  REQUIRE(again.init().ok());
  auto r = again.get({0, 3});
  REQUIRE(r.has_value());
  CHECK(r->owner == "c1/eth0");
  CHECK(r->pci_address == "0000:3b:00.5");
  CHECK_FALSE(again.release({0, 3}, "c2/eth0").ok());  // not the holder
  CHECK(again.release({0, 3}, "c1/eth0").ok());
  CHECK(again.release({0, 3}, "c1/eth0").ok());  // freeing a free VF is fine
  CHECK(again.list().empty());
  fs::remove_all(dir);
}

TEST_CASE("50 concurrent claimers over 64 VFs never share one") {
  std::string dir = freshDir("conc");
  AllocationStore s(dir);
  REQUIRE(s.init().ok());
  std::mutex mu;
  std::map<uint32_t, std::string> winners;
  std::atomic<int> double_alloc{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 50; ++t) {
    threads.emplace_back([&, t] {
      std::string owner = "c" + std::to_string(t) + "/eth0";
      // Every thread walks the pool from the start, as host-shim's ADD does.
      for (uint32_t vf = 0; vf < 64; ++vf) {
        if (s.claim({{0, vf}, owner, ""}).ok()) {
          std::lock_guard lk(mu);
          if (!winners.emplace(vf, owner).second) ++double_alloc;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(double_alloc == 0);
  CHECK(winners.size() == 50);
  CHECK(s.list().size() == 50);
  fs::remove_all(dir);
}

TEST_CASE("50 concurrent claimers of one VF: exactly one wins") {
  std::string dir = freshDir("one");
  AllocationStore s(dir);
  REQUIRE(s.init().ok());
  std::atomic<int> won{0}, held{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 50; ++t)
    threads.emplace_back([&, t] {
      auto c = s.claim({{0, 1}, "c" + std::to_string(t) + "/eth0", ""});
      (c.ok() ? won : held)++;
    });
  for (auto& t : threads) t.join();
  CHECK(won == 1);
  CHECK(held == 49);
  fs::remove_all(dir);
}

TEST_CASE("a returning VF is never handed out and only its return frees it") {
  std::string dir = freshDir("returning");
  AllocationStore s(dir);
  REQUIRE(s.init().ok());
  AllocationRecord a{{0, 2}, "c1/eth0", "0000:3b:00.4"};
  REQUIRE(s.claim(a).ok());
  REQUIRE(s.markReturning(a).ok());
  auto r = s.get({0, 2});
  REQUIRE(r.has_value());
  CHECK(r->returning);
  // Not to another pod, and not to a re-ADD of the same pod either.
  auto other = s.claim({{0, 2}, "c2/eth0", "0000:3b:00.4"});
  REQUIRE_FALSE(other.ok());
  CHECK(other.code() == dpu::ErrorCode::kUnavailable);
  CHECK(other.failure().holder == "c1/eth0");
  CHECK_THAT(other.error(), Catch::Contains("still returning") && Catch::Contains("c1/eth0"));
  CHECK(s.claim(a).code() == dpu::ErrorCode::kUnavailable);
  // Cleanup paths that free records by owner leave it alone.
  CHECK(s.release({0, 2}, "c1/eth0").ok());
  CHECK(s.release({0, 2}).ok());
  CHECK(s.get({0, 2}).has_value());
  // Another owner cannot take it over; a problem is recorded and survives a restart.
  CHECK_FALSE(s.markReturning({{0, 2}, "c2/eth0", "0000:3b:00.4"}).ok());
  AllocationRecord stuck = a;
  stuck.problem = "the VF is nowhere";
  REQUIRE(s.markReturning(stuck).ok());
  {
    AllocationStore again(dir);
    auto back = again.get({0, 2});
    REQUIRE(back.has_value());
    CHECK(back->returning);
    CHECK(back->problem == "the VF is nowhere");
    CHECK_THAT(again.claim(a).error(), Catch::Contains("nowhere"));
  }
  // The return that brought it home frees it; then it is claimable again.
  CHECK(s.release({0, 2}, "c1/eth0", AllocationStore::Release::kReturnDone).ok());
  CHECK_FALSE(s.get({0, 2}).has_value());
  auto again = s.claim({{0, 2}, "c2/eth0", "0000:3b:00.4"});
  CHECK(again.ok());
  CHECK_FALSE(s.get({0, 2})->returning);
  fs::remove_all(dir);
}

TEST_CASE("marking a VF returning whose record file was removed writes it back") {
  std::string dir = freshDir("remark");
  AllocationStore s(dir);
  REQUIRE(s.init().ok());
  AllocationRecord a{{0, 4}, "c9/eth0", "0000:3b:00.6"};
  REQUIRE(s.markReturning(a).ok());
  REQUIRE(s.get({0, 4}).has_value());
  CHECK(s.claim({{0, 4}, "c8/eth0", "0000:3b:00.6"}).code() == dpu::ErrorCode::kUnavailable);
  fs::remove_all(dir);
}
