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

}  // namespace dpu::overlay
