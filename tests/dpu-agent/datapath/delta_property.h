// The harness of the fast-path property tests (engine_*_delta_property_test.cpp):
// two Engines and the fake dataplane get the same requests — one Engine each
// as sent (its fast path), the other the same change as a whole-model request
// — and all three must answer alike: status, message, generation, problems
// word for word and the refusal count. Each test compares its own view of
// what was programmed after that.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "fake_dataplane_model.h"

namespace delta_property {

namespace v1 = dpu::dataplane::v1;

class Harness {
 public:
  explicit Harness(uint32_t seed) : rng_(seed) {
    for (auto* e : {&incremental_, &whole_}) {
      dpu::datapath::EngineConfig config;
      config.flow_cache_entries = 1024;  // no packets here: small tables, quick requests
      config.conntrack_entries = 1024;
      auto created = dpu::datapath::Engine::create(config);
      REQUIRE(created.ok());
      *e = std::move(*created);
    }
  }

  uint64_t refusals() const { return fake_.refusedCount(); }
  unsigned accepted() const { return accepted_; }

 protected:
  unsigned pick(unsigned n) { return std::uniform_int_distribution<unsigned>(0, n - 1)(rng_); }

  // REQ to the fast-path Engine and the fake, WHOLE to the other Engine; the
  // three answers compared. The caller holds INFO(REQ) for what it checks next.
  v1::ProgramReply program(const v1::ProgramRequest& req, const v1::ProgramRequest& whole) {
    const auto a = incremental_->program(req);
    const auto b = whole_->program(whole);
    const auto c = fake_.apply(req);
    REQUIRE(a.status() == b.status());
    REQUIRE(a.status() == c.status());
    REQUIRE(a.message() == b.message());
    REQUIRE(a.generation() == b.generation());
    REQUIRE(a.generation() == c.generation());
    REQUIRE(problems(a) == problems(b));
    REQUIRE(problems(a) == problems(c));
    REQUIRE(refusedCounter(*incremental_) == refusedCounter(*whole_));
    REQUIRE(refusedCounter(*incremental_) == fake_.refusedCount());
    if (a.status() == v1::OK) ++accepted_;
    generation_ = a.generation();
    return a;
  }

  std::mt19937 rng_;
  std::unique_ptr<dpu::datapath::Engine> incremental_, whole_;
  dpu::fakes::FakeDataplaneModel fake_;
  uint64_t generation_ = 0;
  unsigned accepted_ = 0;

 private:
  static std::vector<std::string> problems(const v1::ProgramReply& r) {
    std::vector<std::string> out;
    for (const auto& p : r.problems()) out.push_back(std::to_string(p.kind()) + " " + p.name() + ": " + p.reason());
    return out;
  }

  static uint64_t refusedCounter(dpu::datapath::Engine& e) {
    v1::OperatorRequest req;
    req.mutable_stats();
    const auto reply = e.operate(req);
    for (const auto& c : reply.counters()) {
      if (c.name() == "ObjectRefused") return c.value();
    }
    return 0;
  }
};

}  // namespace delta_property
