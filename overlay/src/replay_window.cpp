// Anti-replay window and ESN inference: see replay_window.h.
#include "overlay/replay_window.h"

#include <algorithm>
#include <bit>

namespace dpu::overlay {

ReplayWindow::ReplayWindow(uint32_t size) {
  size = std::clamp(size, kMinSize, kMaxSize);
  size_ = (size + 63) / 64 * 64;
  // size/64 blocks hold the window; one more block lets the top block fill up
  // while the oldest one still holds the left edge.
  uint32_t blocks = std::bit_ceil(size_ / 64 + 1);
  block_mask_ = blocks - 1;
  bits_ = std::make_unique<uint64_t[]>(blocks);  // zeroed
}

void ReplayWindow::reset() {
  std::fill(bits_.get(), bits_.get() + block_mask_ + 1, 0);
  top_ = 0;
}

void ReplayWindow::resumeAt(uint64_t last) {
  std::fill(bits_.get(), bits_.get() + block_mask_ + 1, ~uint64_t{0});
  top_ = last;
  // In the top block only the numbers up to `last` are taken; later blocks are
  // cleared as the window slides into them.
  const unsigned bit = static_cast<unsigned>(last & 63);
  block(last) = bit == 63 ? ~uint64_t{0} : (uint64_t{1} << (bit + 1)) - 1;
}

uint64_t ReplayWindow::inferEsn(uint64_t top, uint32_t size, uint32_t seq_low) {
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

Status ReplayWindow::check(uint64_t seq) const {
  if (seq == 0) return Status::kEspTooOld;  // RFC 4303 §3.3.3: the first packet is 1
  if (seq > top_) return Status::kOk;
  if (top_ - seq >= size_) return Status::kEspTooOld;
  return (block(seq) >> (seq & 63)) & 1 ? Status::kEspReplay : Status::kOk;
}

void ReplayWindow::update(uint64_t seq) {
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
