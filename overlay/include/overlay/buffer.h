// PacketBuffer: a packet in a caller-owned byte array with headroom and tailroom.
//
// It mirrors the rte_mbuf data operations (prepend/adj/append/trim) so the same
// transforms run on a DPDK mbuf in the dataplane (wrap its data room) and on a
// plain array in tests, tools and fuzzers. It never owns or allocates memory;
// every operation that would leave the array fails and changes nothing, so a
// transform that runs out of room leaves the packet as it was.
#pragma once

#include <cstdint>
#include <span>

namespace dpu::overlay {

class PacketBuffer {
 public:
  PacketBuffer() = default;
  // `base` holds `capacity` bytes; the packet is `length` bytes starting at `offset`.
  PacketBuffer(uint8_t* base, uint32_t capacity, uint32_t offset, uint32_t length)
      : base_(base), capacity_(capacity), offset_(offset), length_(length) {
    if (offset_ > capacity_) offset_ = capacity_;
    if (length_ > capacity_ - offset_) length_ = capacity_ - offset_;
  }

  uint8_t* data() { return base_ + offset_; }
  const uint8_t* data() const { return base_ + offset_; }
  uint32_t size() const { return length_; }
  uint32_t headroom() const { return offset_; }
  uint32_t tailroom() const { return capacity_ - offset_ - length_; }
  std::span<uint8_t> bytes() { return {data(), length_}; }
  std::span<const uint8_t> bytes() const { return {data(), length_}; }

  // Grows the packet at the front by n bytes; returns the new start, or nullptr
  // (and no change) when the headroom is too small.
  uint8_t* prepend(uint32_t n) {
    if (n > offset_) return nullptr;
    offset_ -= n;
    length_ += n;
    return data();
  }
  // Removes n bytes from the front; false (and no change) if the packet is shorter.
  bool adj(uint32_t n) {
    if (n > length_) return false;
    offset_ += n;
    length_ -= n;
    return true;
  }
  // Grows the packet at the end by n bytes; returns the first new byte or nullptr.
  uint8_t* append(uint32_t n) {
    if (n > tailroom()) return nullptr;
    uint8_t* tail = data() + length_;
    length_ += n;
    return tail;
  }
  // Removes n bytes from the end; false (and no change) if the packet is shorter.
  bool trim(uint32_t n) {
    if (n > length_) return false;
    length_ -= n;
    return true;
  }

 private:
  uint8_t* base_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t offset_ = 0;
  uint32_t length_ = 0;
};

}  // namespace dpu::overlay
