// The ESP anti-replay window (RFC 4303 §3.4.3) with 64-bit extended sequence
// number inference (RFC 4303 Appendix A).
//
// The bitmap is a ring of 64-bit blocks (the RFC 6479 layout): sliding the
// window right clears whole blocks instead of shifting bits, so a jump costs
// at most one pass over the ring and an in-order packet costs one load and one
// store. The ring has at least one block more than the window needs, so the
// block holding the window's left edge is never reused for its right edge.
//
// Use: check() before the ICV is verified (cheap rejection of duplicates
// without crypto), update() only after the ICV verified (RFC 4303 §3.4.3: an
// unauthenticated packet must never move the window). Both are per-packet:
// no allocation, no locks. One window belongs to one inbound SA on one lcore.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "overlay/status.h"

namespace dpu::overlay {

class ReplayWindow {
 public:
  static constexpr uint32_t kMinSize = 64;
  static constexpr uint32_t kMaxSize = 65536;
  static constexpr uint32_t kDefaultSize = 1024;

  // `size` packets, a multiple of 64 in [kMinSize, kMaxSize] (validate with
  // validSize(); other values are rounded up and clamped). Allocates.
  explicit ReplayWindow(uint32_t size = kDefaultSize);
  static bool validSize(uint32_t size) { return size >= kMinSize && size <= kMaxSize && size % 64 == 0; }

  ReplayWindow(ReplayWindow&&) noexcept = default;
  ReplayWindow& operator=(ReplayWindow&&) noexcept = default;

  uint32_t size() const { return size_; }
  // The highest sequence number authenticated so far (0: none yet).
  uint64_t top() const { return top_; }

  // RFC 4303 Appendix A2.1: the full 64-bit sequence number a received low
  // half most plausibly stands for, given the window. Returns 0 (never a valid
  // sequence number) when the guess would fall before the first subspace.
  uint64_t inferEsn(uint32_t seq_low) const { return inferEsn(top_, size_, seq_low); }
  // The same for a window of `size` whose top is `top` (a copy of top() read
  // elsewhere, by a thread that does not hold the window).
  static uint64_t inferEsn(uint64_t top, uint32_t size, uint32_t seq_low);

  // kOk (new, or inside the window and not seen), kEspReplay (seen) or
  // kEspTooOld (left of the window, or 0).
  Status check(uint64_t seq) const;
  // Marks `seq` received, sliding the window if it is the new top. Call only
  // after check() returned kOk and the packet authenticated.
  void update(uint64_t seq);
  // Forgets everything (a new SA, or a test).
  void reset();
  // Starts the window as if every sequence number up to `last` had been
  // received: for an SA resumed from a checkpoint whose window was lost, where
  // accepting an old number again could replay a packet (RFC 4303 §3.4.3).
  void resumeAt(uint64_t last);

 private:
  uint64_t& block(uint64_t seq) { return bits_[(seq >> 6) & block_mask_]; }
  uint64_t block(uint64_t seq) const { return bits_[(seq >> 6) & block_mask_]; }

  uint64_t top_ = 0;
  uint32_t size_ = 0;
  uint32_t block_mask_ = 0;  // ring length in blocks - 1 (a power of two)
  std::unique_ptr<uint64_t[]> bits_;
};

// Inline: each runs on every ESP packet received (a call apiece cost more
// than their bodies).
inline uint64_t ReplayWindow::inferEsn(uint64_t top, uint32_t size, uint32_t seq_low) {
  const uint32_t tl = static_cast<uint32_t>(top);
  const uint32_t th = static_cast<uint32_t>(top >> 32);
  const uint32_t w = size;
  // The bottom of the window, as a low half (mod 2^32).
  const uint32_t bottom = tl - w + 1;
  uint32_t seqh;
  if (tl >= w - 1) {
    // Case A: the window lies within one subspace of 2^32. A low half at or
    // above its bottom belongs to the same subspace; below it, the next one.
    seqh = seq_low >= bottom ? th : th + 1;
  } else {
    // Case B: the window straddles a subspace boundary. A low half at or above
    // the (wrapped) bottom is in the previous subspace, which does not exist
    // before the first wrap.
    if (seq_low >= bottom) {
      if (th == 0) return 0;
      seqh = th - 1;
    } else {
      seqh = th;
    }
  }
  return uint64_t{seqh} << 32 | seq_low;
}

inline Status ReplayWindow::check(uint64_t seq) const {
  if (seq == 0) return Status::kEspTooOld;  // RFC 4303 §3.3.3: the first packet is 1
  if (seq > top_) return Status::kOk;
  if (top_ - seq >= size_) return Status::kEspTooOld;
  return (block(seq) >> (seq & 63)) & 1 ? Status::kEspReplay : Status::kOk;
}

inline void ReplayWindow::update(uint64_t seq) {
  if (seq > top_) {
    const uint64_t old_block = top_ >> 6;
    const uint64_t new_block = seq >> 6;
    const uint64_t ring = uint64_t{block_mask_} + 1;
    if (new_block - old_block >= ring) {
      std::fill(bits_.get(), bits_.get() + ring, 0);
    } else {
      for (uint64_t b = old_block + 1; b <= new_block; ++b) bits_[b & block_mask_] = 0;
    }
    top_ = seq;
  }
  block(seq) |= uint64_t{1} << (seq & 63);
}

}  // namespace dpu::overlay
