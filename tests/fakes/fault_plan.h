// Failure injection shared by the in-process fakes (FakeNetlink, FakeDpuApi,
// a checkpoint writer): every operation a fake performs asks the plan first,
// by name, and the plan answers with the error to fail it with, if any. A test
// records the operations a good run makes, then fails each one in turn:
// "a failure at every step, everything undone". Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace dpu::fakes {

class FaultPlan {
 public:
  // The next call to `check`, counting from now, that is number `n` (0 is the
  // next one) fails with `e`; once. Calls whose name does not start with
  // `only` do not count (empty: all count).
  void failCall(size_t n, Error e, std::string only = "") {
    std::lock_guard lk(mu_);
    armed_ = true;
    countdown_ = n;
    error_ = std::move(e);
    only_ = std::move(only);
  }
  // The next call of exactly `op` fails with `e`; once.
  void failNext(std::string op, Error e) {
    std::lock_guard lk(mu_);
    named_.push_back({std::move(op), std::move(e)});
  }
  void clear() {
    std::lock_guard lk(mu_);
    armed_ = false;
    named_.clear();
  }

  // What the fakes call: the error for this operation, if it is the one to fail.
  std::optional<Error> check(const std::string& op) {
    std::lock_guard lk(mu_);
    log_.push_back(op);
    for (auto it = named_.begin(); it != named_.end(); ++it) {
      if (it->first == op) {
        Error e = it->second;
        named_.erase(it);
        fired_.push_back(op);
        return e;
      }
    }
    if (!armed_ || op.rfind(only_, 0) != 0) return std::nullopt;
    if (countdown_ > 0) {
      --countdown_;
      return std::nullopt;
    }
    armed_ = false;
    fired_.push_back(op);
    return error_;
  }

  // Every operation asked about, in order, and the ones that were failed.
  std::vector<std::string> log() const {
    std::lock_guard lk(mu_);
    return log_;
  }
  std::vector<std::string> fired() const {
    std::lock_guard lk(mu_);
    return fired_;
  }
  void clearLog() {
    std::lock_guard lk(mu_);
    log_.clear();
    fired_.clear();
  }

 private:
  mutable std::mutex mu_;
  bool armed_ = false;
  size_t countdown_ = 0;
  Error error_;
  std::string only_;
  std::vector<std::pair<std::string, Error>> named_;
  std::vector<std::string> log_;
  std::vector<std::string> fired_;
};

}  // namespace dpu::fakes
