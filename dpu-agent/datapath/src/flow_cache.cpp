// The flow cache's slow operations: claiming a way, publishing, removing, and
// the control thread's consistent read (flow_cache.h).
#include "flow_cache.h"

#include <sys/mman.h>

#include <bit>
#include <new>

namespace dpu::datapath {

namespace {
// Zeroed memory from mmap, with huge pages requested for large tables.
void* mapTable(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (bytes >= (size_t{2} << 20)) (void)madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}
}  // namespace

void FlowTable::Unmap::operator()(void* p) const { munmap(p, bytes); }

FlowTable::FlowTable(uint32_t entries) {
  uint32_t n = std::bit_ceil(std::max<uint32_t>(entries, FlowBucket::kWays));
  mask_ = n - 1;
  bucket_mask_ = n / FlowBucket::kWays - 1;
  const size_t bucket_bytes = sizeof(FlowBucket) * (n / FlowBucket::kWays);
  const size_t entry_bytes = sizeof(FlowEntry) * n;
  buckets_ = static_cast<FlowBucket*>(mapTable(bucket_bytes));
  buckets_mem_ = std::unique_ptr<FlowBucket, Unmap>(buckets_, Unmap{bucket_bytes});
  entries_ = static_cast<FlowEntry*>(mapTable(entry_bytes));
  entries_mem_ = std::unique_ptr<FlowEntry, Unmap>(entries_, Unmap{entry_bytes});
  const size_t extra_bytes = sizeof(FlowExtra) * n;
  extras_ = static_cast<FlowExtra*>(mapTable(extra_bytes));
  extras_mem_ = std::unique_ptr<FlowExtra, Unmap>(extras_, Unmap{extra_bytes});
}

uint32_t FlowTable::claim(uint64_t hash, uint32_t now_ms, bool& evicted) {
  const uint32_t b = bucketOf(hash);
  FlowBucket& bk = buckets_[b];
  unsigned way = FlowBucket::kWays;
  uint32_t oldest_idle = 0;
  const unsigned preferred = preferredWay(hash);
  for (unsigned i = 0; i < FlowBucket::kWays; ++i) {
    const unsigned w = (preferred + i) % FlowBucket::kWays;
    if (bk.sig[w] == 0) {
      way = w;
      break;
    }
    const uint32_t idle = now_ms - entries_[b * FlowBucket::kWays + w].used_ms;
    if (way == FlowBucket::kWays || idle > oldest_idle) {
      way = w;
      oldest_idle = idle;
    }
  }
  evicted = bk.sig[way] != 0;
  const uint32_t index = b * FlowBucket::kWays + way;
  bk.sig[way] = 0;
  __atomic_store_n(&entries_[index].flow_id, 0, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_release);
  return index;
}

void FlowTable::publish(uint32_t index, uint64_t hash, uint32_t now_ms) {
  if (++next_flow_id_ == 0) next_flow_id_ = 1;
  touch(entries_[index], now_ms);
  __atomic_store_n(&entries_[index].flow_id, next_flow_id_, __ATOMIC_RELEASE);
  FlowBucket& bk = buckets_[index / FlowBucket::kWays];
  bk.sig[index % FlowBucket::kWays] = signature(hash);
}

void FlowTable::remove(uint32_t index) {
  buckets_[index / FlowBucket::kWays].sig[index % FlowBucket::kWays] = 0;
  __atomic_store_n(&entries_[index].flow_id, 0, __ATOMIC_RELEASE);
}

bool FlowTable::read(uint32_t index, FlowRecord& out) const {
  const FlowEntry& e = entries_[index];
  const uint32_t before = __atomic_load_n(&e.flow_id, __ATOMIC_ACQUIRE);
  if (before == 0) return false;
  // A racy copy by design (seqlock): validated by the id check below.
  std::memcpy(static_cast<void*>(static_cast<FlowEntry*>(&out)), static_cast<const void*>(&e), sizeof(FlowEntry));
  std::memcpy(static_cast<void*>(static_cast<FlowExtra*>(&out)), static_cast<const void*>(&extras_[index]),
              sizeof(FlowExtra));
  std::atomic_thread_fence(std::memory_order_acquire);
  return __atomic_load_n(&e.flow_id, __ATOMIC_RELAXED) == before && out.flow_id == before;
}

}  // namespace dpu::datapath
