// Arrays that read as zero until written: anonymous pages from the kernel,
// each faulted in on its first use, so a large table costs nothing when it is
// made (a dataplane restart waits for its tables) and only the pages in use
// are resident. Huge pages are asked for where an array is 2 MiB or more.
// The flow cache's tables and the connection table are made of these; their
// element types must be valid as all-zero bytes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <new>

namespace dpu {

struct ZeroedPagesUnmap {
  size_t bytes = 0;
  void operator()(void* p) const { ::munmap(p, bytes); }
};

template <typename T>
using ZeroedArray = std::unique_ptr<T, ZeroedPagesUnmap>;

// COUNT (at least 1) zero Ts. Throws std::bad_alloc when the kernel refuses.
template <typename T>
ZeroedArray<T> zeroedArray(size_t count) {
  const size_t bytes = sizeof(T) * count;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (bytes >= (size_t{2} << 20)) (void)::madvise(p, bytes, MADV_HUGEPAGE);
  return ZeroedArray<T>(static_cast<T*>(p), ZeroedPagesUnmap{bytes});
}

}  // namespace dpu
