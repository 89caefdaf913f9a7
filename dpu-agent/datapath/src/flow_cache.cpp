// The flow cache's slow operations: the tables, removing, releasing action
// records, and the control thread's consistent read (flow_cache.h).
#include "flow_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "common/zeroed_pages.h"

namespace dpu::datapath {

namespace {
// The table's arrays: zero pages, faulted in on first use (common/zeroed_pages.h).
template <typename T>
T* mapArray(size_t count, ZeroedArray<T>& owner) {
  owner = zeroedArray<T>(count);
  return owner.get();
}
}  // namespace

FlowTable::FlowTable(uint32_t entries) {
  const uint32_t n = std::bit_ceil(std::max<uint32_t>(entries, FlowBucket::kWays));
  mask_ = n - 1;
  bucket_mask_ = n / FlowBucket::kWays - 1;
  action_capacity_ = std::max<uint32_t>(n / 2, 4);
  cache_resident_ = size_t{n} * (sizeof(FlowEntry) + sizeof(FlowBucket) / FlowBucket::kWays) <= (size_t{1} << 20);
  const uint32_t slots = std::bit_ceil(action_capacity_) * 2;
  action_slots_mask_ = slots - 1;
  buckets_ = mapArray(n / FlowBucket::kWays, buckets_mem_);
  entries_ = mapArray(n, entries_mem_);
  extras_ = mapArray(n, extras_mem_);
  tails_ = mapArray(n, tails_mem_);
  actions_ = mapArray(size_t{action_capacity_} + 1, actions_mem_);
  action_slots_ = mapArray(slots, action_slots_mem_);
  free_actions_.reserve(action_capacity_);
  for (uint32_t i = action_capacity_; i >= 1; --i) free_actions_.push_back(i);
}

size_t FlowTable::bytesPerSlot() { return bytesPerCompactSlot() + sizeof(KeyTail); }

size_t FlowTable::bytesPerCompactSlot() {
  // Action records: half a slot each, and two index slots per record.
  return sizeof(FlowEntry) + sizeof(FlowExtra) + sizeof(FlowBucket) / FlowBucket::kWays + sizeof(FlowActions) / 2 +
         sizeof(uint32_t);
}

uint32_t FlowTable::identityHash(const FlowActions& a) {
  uint64_t m[2];
  std::memcpy(&m[0], a.set_src.data(), 6);
  std::memcpy(reinterpret_cast<uint8_t*>(&m[0]) + 6, a.set_dst.data(), 2);
  m[1] = 0;
  std::memcpy(&m[1], a.set_dst.data() + 2, 4);
  uint64_t h = (uint64_t{a.dep_in} << 32 | a.dep_out) * 0x9e3779b185ebca87ull;
  h ^= (uint64_t{a.ops} | uint64_t{a.out_port} << 16 | uint64_t{a.mtu} << 32 | uint64_t{a.encap_ingress} << 48) *
       0xc2b2ae3d27d4eb4full;
  h ^= (uint64_t{a.drop_reason} | uint64_t{a.encap_subnet} << 8 | uint64_t{a.decap_len} << 16 | m[1] << 24) *
       0x165667b19e3779f9ull;
  h ^= m[0] * 0x85ebca77c2b2ae63ull;
  h ^= (uint64_t{a.encap_egress} | uint64_t{a.dep_nat} << 16 | uint64_t{a.tracked} << 48) * 0x27d4eb2f165667c5ull;
  if (a.ops & op::kNat) {
    // Records that differ only in their rewrite (one per backend, or per
    // SNAT connection) spread over the index too.
    uint64_t n[5];
    static_assert(sizeof n <= sizeof a.nat);
    std::memcpy(n, &a.nat, sizeof n);
    for (uint64_t w : n) h = (h ^ w) * 0x9e3779b185ebca87ull;
  }
  return static_cast<uint32_t>(h ^ h >> 29 ^ h >> 47);
}

void FlowTable::unlink(uint32_t i) {
  FlowActions& a = actions_[i];
  if (!a.linked) return;
  a.linked = 0;
  uint32_t s = a.identity_hash & action_slots_mask_;
  while (action_slots_[s] != i) s = (s + 1) & action_slots_mask_;
  // Backward-shift deletion: later entries of the probe run move up, so
  // lookups never need tombstones.
  for (uint32_t next = (s + 1) & action_slots_mask_;; next = (next + 1) & action_slots_mask_) {
    const uint32_t j = action_slots_[next];
    if (j == 0) break;
    const uint32_t home = actions_[j].identity_hash & action_slots_mask_;
    // j may move to s if its home is not in the cyclic range (s, next].
    if (((next - home) & action_slots_mask_) >= ((next - s) & action_slots_mask_)) {
      action_slots_[s] = j;
      s = next;
    }
  }
  action_slots_[s] = 0;
}

void FlowTable::release(uint32_t i) {
  FlowActions& a = actions_[i];
  if (--a.refs != 0) return;
  unlink(i);
  __atomic_store_n(&actions_in_use_, actions_in_use_ - 1, __ATOMIC_RELAXED);
  free_actions_.push_back(i);
}

void FlowTable::remove(uint32_t index) {
  FlowEntry& e = entries_[index];
  const uint32_t action = e.actionIndex();
  if (action == 0) return;
  buckets_[index / FlowBucket::kWays].sig[index % FlowBucket::kWays] = 0;
  __atomic_store_n(&extras_[index].flow_id, 0, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_release);
  e.actions = 0;
  release(action);
}

bool FlowTable::read(uint32_t index, FlowRecord& out) const {
  const FlowExtra& x = extras_[index];
  const uint32_t before = __atomic_load_n(&x.flow_id, __ATOMIC_ACQUIRE);
  if (before == 0) return false;
  // Racy copies by design (seqlock): validated by the id check below. The
  // action record cannot be reused while this flow names it.
  FlowEntry e;
  std::memcpy(static_cast<void*>(&e), static_cast<const void*>(&entries_[index]), sizeof e);
  const uint32_t action = e.actionIndex();
  if (action == 0 || action > action_capacity_) return false;
  FlowActions a;
  std::memcpy(static_cast<void*>(&a), static_cast<const void*>(&actions_[action]), sizeof a);
  FlowExtra xc;
  std::memcpy(static_cast<void*>(&xc), static_cast<const void*>(&x), sizeof xc);
  const bool is_long = (e.actions & FlowEntry::kLongKey) != 0;
  KeyTail tail{};
  if (is_long) std::memcpy(static_cast<void*>(&tail), static_cast<const void*>(&tails_[index]), sizeof tail);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (__atomic_load_n(&x.flow_id, __ATOMIC_RELAXED) != before || xc.flow_id != before) return false;
  a.fill(out);
  out.key = is_long ? KeyTail::join(e.key, tail) : e.key.expand();
  out.flow_id = before;
  out.used_ms = e.used_ms;
  out.encap_sport = e.sport();
  out.tun_family = xc.tun_family;
  out.packets = e.packets();
  out.bytes = e.bytes;
  out.tun_remote = xc.tun_remote;
  out.tun_ingress = xc.tun_ingress;
  out.tun_egress = xc.tun_egress;
  out.created_s = xc.created_s;
  out.allowed_egress = xc.allowedEgress();
  out.allowed_ingress = xc.allowedIngress();
  return true;
}

}  // namespace dpu::datapath
