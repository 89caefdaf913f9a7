// Timing for the microbenchmarks: run a batch of operations over a pool of
// packets, reset the pool untimed, repeat, and report the median per-operation
// time. Medians, because this machine is shared and noisy.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace dpu::bench {

struct Measurement {
  double ns_per_op = 0;     // median over runs
  double ns_per_op_min = 0; // best run, for reference
};

// `reset()` prepares the pool (untimed); `op(i)` processes packet i of `pool`
// packets (timed). Each run times `rounds` passes over the pool, with a reset
// before each pass. The first run warms caches and is discarded.
template <class Reset, class Op>
Measurement measure(Reset&& reset, Op&& op, size_t pool, int runs = 9, int rounds = 8) {
  std::vector<double> per_op;
  for (int r = 0; r <= runs; ++r) {
    std::chrono::nanoseconds total{0};
    for (int round = 0; round < rounds; ++round) {
      reset();
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < pool; ++i) op(i);
      total += std::chrono::steady_clock::now() - t0;
    }
    if (r == 0) continue;
    per_op.push_back(static_cast<double>(total.count()) / static_cast<double>(pool * rounds));
  }
  std::sort(per_op.begin(), per_op.end());
  return {per_op[per_op.size() / 2], per_op.front()};
}

// Keeps a value alive so the compiler cannot drop the work that made it.
template <class T>
inline void keep(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

}  // namespace dpu::bench
