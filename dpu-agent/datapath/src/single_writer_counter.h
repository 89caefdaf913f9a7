// A 64-bit counter one thread writes and others read: the update and the
// read, apart from the counter tables of counters.h (which size by DPDK's
// port limit), for code that must not include DPDK.
#pragma once

#include <cstdint>

namespace dpu::datapath {

// Single-writer counter update: a plain load and store, atomic only so that a
// concurrent reader never sees a torn value.
inline void bump(uint64_t& counter, uint64_t n = 1) {
  __atomic_store_n(&counter, __atomic_load_n(&counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}
inline uint64_t readCounter(const uint64_t& counter) { return __atomic_load_n(&counter, __ATOMIC_RELAXED); }

}  // namespace dpu::datapath
