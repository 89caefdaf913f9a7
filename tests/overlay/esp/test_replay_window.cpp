// The anti-replay window (RFC 4303 §3.4.3) and ESN inference (Appendix A):
// in-order, reordered, duplicate, too old, jumps beyond the window, the
// 2^32 boundary cases of Appendix A2.2, and a random walk against a naive
// reference model, for windows of 64, 1024 and 4096 packets.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "overlay/replay_window.h"

using dpu::overlay::ReplayWindow;
using dpu::overlay::Status;

namespace {

// Accept-and-update, as the inbound SA does after a packet authenticated.
Status receive(ReplayWindow& w, uint64_t seq) {
  Status s = w.check(seq);
  if (s == Status::kOk) w.update(seq);
  return s;
}

constexpr uint64_t k2p32 = uint64_t{1} << 32;

}  // namespace

TEST_CASE("Replay window: in order, duplicates, reordering within the window", "[replay]") {
  for (uint32_t size : {64u, 1024u, 4096u}) {
    INFO("window " << size);
    ReplayWindow w(size);
    CHECK(w.size() == size);
    CHECK(receive(w, 0) == Status::kEspTooOld);  // never sent (RFC 4303 §3.3.3)
    for (uint64_t s = 1; s <= 3 * size; ++s) REQUIRE(receive(w, s) == Status::kOk);
    CHECK(w.top() == 3 * size);
    // Every packet in the window is a duplicate now; one further left is too old.
    for (uint64_t s = 2 * size + 1; s <= 3 * size; ++s) REQUIRE(w.check(s) == Status::kEspReplay);
    CHECK(w.check(2 * size) == Status::kEspTooOld);

    // Reordering: skip ahead, then fill the holes backwards down to the edge.
    const uint64_t top = 3 * size + size;  // a jump of exactly one window
    REQUIRE(receive(w, top) == Status::kOk);
    for (uint64_t s = top - 1; s > top - size; --s) REQUIRE(receive(w, s) == Status::kOk);
    CHECK(receive(w, top - size) == Status::kEspTooOld);
    CHECK(receive(w, top - size + 1) == Status::kEspReplay);
  }
}

TEST_CASE("Replay window: a jump beyond the window forgets everything older", "[replay]") {
  for (uint32_t size : {1024u, 4096u}) {
    ReplayWindow w(size);
    for (uint64_t s = 1; s <= 100; ++s) receive(w, s);
    for (uint64_t jump : {uint64_t{size} - 1, uint64_t{size} + 1, uint64_t{10} * size, uint64_t{1} << 40}) {
      INFO("window " << size << " jump " << jump);
      const uint64_t old_top = w.top();
      const uint64_t top = old_top + jump;
      REQUIRE(receive(w, top) == Status::kOk);
      // Everything in the new window other than the top is fresh: no stale
      // bits survived from the blocks the ring reused.
      for (uint64_t s = top - size + 1; s < top; ++s) {
        if (s <= old_top && old_top - s < size && jump < size) continue;  // genuinely seen before
        REQUIRE(w.check(s) == Status::kOk);
      }
      CHECK(w.check(top - size) == Status::kEspTooOld);
      CHECK(w.check(top) == Status::kEspReplay);
    }
  }
}

TEST_CASE("Replay window agrees with a naive model on a random walk", "[replay]") {
  for (uint32_t size : {64u, 1024u, 4096u}) {
    ReplayWindow w(size);
    std::set<uint64_t> seen;
    uint64_t top = 0;
    std::mt19937_64 rng(size);
    for (int i = 0; i < 200000; ++i) {
      uint64_t seq;
      switch (rng() % 4) {
        case 0:
          seq = top + 1 + rng() % 3;
          break;  // ahead
        case 1:
          seq = top + rng() % (3 * size);
          break;  // jumps
        default:
          seq = top > 2 * size ? top - rng() % (2 * size) : rng() % (top + 2);
          break;  // behind
      }
      Status expected;
      if (seq == 0)
        expected = Status::kEspTooOld;
      else if (seq > top)
        expected = Status::kOk;
      else if (top - seq >= size)
        expected = Status::kEspTooOld;
      else
        expected = seen.count(seq) ? Status::kEspReplay : Status::kOk;
      Status got = receive(w, seq);
      REQUIRE(got == expected);
      if (got == Status::kOk) {
        seen.insert(seq);
        if (seq > top) top = seq;
      }
    }
  }
}

TEST_CASE("ESN inference follows RFC 4303 Appendix A2", "[replay][esn]") {
  const uint32_t W = 1024;
  ReplayWindow w(W);

  SECTION("before any packet: the first subspace only") {
    CHECK(w.inferEsn(1) == 1);
    CHECK(w.inferEsn(5000) == 5000);
    // A low half just below 2^32 would belong to subspace -1.
    CHECK(w.inferEsn(0xffffffff) == 0);
    CHECK(w.check(w.inferEsn(0xffffffff)) == Status::kEspTooOld);
  }
  SECTION("case A: window within one subspace, near its end") {
    receive(w, 0xfffffff0);
    CHECK(w.inferEsn(0xfffffff1) == 0xfffffff1);                  // ahead, same subspace
    CHECK(w.inferEsn(0xfffffff0 - W + 1) == 0xfffffff0 - W + 1);  // the window's left edge
    CHECK(w.inferEsn(0x00000002) == k2p32 + 2);                   // wrapped: next subspace
    CHECK(w.inferEsn(0xfffffff0 - W) == k2p32 + 0xfffffff0 - W);  // left of the window: taken as next
  }
  SECTION("case B: window straddling 2^32") {
    receive(w, 0xffffff00);
    receive(w, k2p32 + 5);
    CHECK(w.top() == k2p32 + 5);
    CHECK(w.inferEsn(6) == k2p32 + 6);            // ahead
    CHECK(w.inferEsn(0xfffffff0) == 0xfffffff0);  // late packet from before the wrap
    CHECK(w.check(0xfffffff0) == Status::kOk);
    CHECK(w.check(w.inferEsn(0xffffff00)) == Status::kEspReplay);
    CHECK(w.inferEsn(5 - W + 1) == 0xffffffff - W + 7);
    CHECK(w.inferEsn(2) == k2p32 + 2);
  }
  SECTION("case B in a later subspace") {
    receive(w, 3 * k2p32 - 10);
    receive(w, 3 * k2p32 + 100);
    CHECK(w.inferEsn(0xfffffffa) == 3 * k2p32 - 6);
    CHECK(w.inferEsn(101) == 3 * k2p32 + 101);
  }
  SECTION("a full walk across the boundary, all reordered by two") {
    for (uint64_t s = 1; s <= 3000; s += 1000) receive(w, s);
    receive(w, 0x80000000);
    receive(w, 0xfffffc00);
    for (uint64_t base = 0xfffffc00; base < k2p32 + 2048; base += 2) {
      for (uint64_t s : {base + 2, base + 1}) {
        const uint64_t inferred = w.inferEsn(static_cast<uint32_t>(s));
        REQUIRE(inferred == s);
        REQUIRE(receive(w, inferred) == Status::kOk);
      }
    }
  }
}

TEST_CASE("a window resumed at a sequence number treats everything up to it as received") {
  ReplayWindow w(1024);
  w.resumeAt(5000);
  CHECK(w.top() == 5000);
  CHECK(w.check(5000) == Status::kEspReplay);
  CHECK(w.check(4000) == Status::kEspReplay);
  CHECK(w.check(3000) == Status::kEspTooOld);
  CHECK(w.check(5001) == Status::kOk);
  w.update(5001);
  w.update(5003);
  CHECK(w.check(5002) == Status::kOk);  // new numbers to the right of the resume point are tracked normally
  CHECK(w.check(5003) == Status::kEspReplay);
  // ESN inference starts from the resume point: a sender resumed just below 2^32 crosses into epoch 1.
  ReplayWindow e(1024);
  e.resumeAt(0xfffffffdull);
  CHECK(e.inferEsn(0xfffffffe) == 0xfffffffeull);
  CHECK(e.inferEsn(1) == 0x100000001ull);
}
