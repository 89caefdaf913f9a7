// IPAM over one node pod CIDR (see ipam.h).
#include "control/ipam.h"

#include <algorithm>

namespace dpu::control {

Ipam::Ipam(IpPrefix pool) : pool_(pool), cursor_(3) {}

uint64_t Ipam::endOffset() const {
  uint64_t size = pool_.size();
  if (pool_.address.isV4()) return size - 1;  // the broadcast address
  // An IPv6 pool is effectively endless; stop the walk at 2^32 addresses.
  return std::min<uint64_t>(size, uint64_t{1} << 32);
}

uint64_t Ipam::capacity() const {
  uint64_t end = endOffset();
  return end > firstOffset() ? end - firstOffset() : 0;
}

bool Ipam::isReserved(const IpAddress& a) const {
  if (!pool_.contains(a)) return false;
  for (uint64_t off = 0; off < firstOffset(); ++off) {
    if (pool_.at(off) == a) return true;
  }
  return pool_.address.isV4() && pool_.at(pool_.size() - 1) == a;
}

Result<IpAddress> Ipam::allocate() {
  const uint64_t first = firstOffset(), end = endOffset();
  if (end <= first) return Error{"pod CIDR " + pool_.str() + " has no assignable addresses"};
  // Free and not recently released, walking on from where the last allocation
  // stopped. Every address skipped is in used_ or recent_, so the walk is
  // bounded by their sizes, not by the pool's.
  const uint64_t span = end - first;
  for (uint64_t i = 0; i < span; ++i) {
    uint64_t off = first + (cursor_ - first + i) % span;
    IpAddress a = pool_.at(off);
    if (used_.count(a) || recent_set_.count(a)) continue;
    used_.insert(a);
    cursor_ = first + (off - first + 1) % span;
    return a;
  }
  if (!recent_.empty()) {
    IpAddress a = recent_.front();
    recent_.pop_front();
    recent_set_.erase(a);
    used_.insert(a);
    return a;
  }
  return Error{"pod CIDR " + pool_.str() + " is exhausted (" + std::to_string(used_.size()) +
               " addresses in use): detach unused pods or give the node a larger podCIDR"};
}

Result<void> Ipam::claim(const IpAddress& a) {
  if (!pool_.contains(a)) return Error{a.str() + " is not in the pod CIDR " + pool_.str()};
  if (used_.count(a)) return Error{a.str() + " is already in use"};
  used_.insert(a);
  if (recent_set_.erase(a)) recent_.erase(std::find(recent_.begin(), recent_.end(), a));
  return {};
}

void Ipam::release(const IpAddress& a) {
  if (!used_.erase(a)) return;
  if (isReserved(a)) return;
  recent_.push_back(a);
  recent_set_.insert(a);
  while (recent_.size() > kMaxRecentlyReleased) {
    recent_set_.erase(recent_.front());
    recent_.pop_front();
  }
}

std::vector<std::string> Ipam::recentlyReleased() const {
  std::vector<std::string> out;
  out.reserve(recent_.size());
  for (const auto& a : recent_) out.push_back(a.str());
  return out;
}

void Ipam::setRecentlyReleased(const std::vector<std::string>& addresses) {
  recent_.clear();
  recent_set_.clear();
  for (const auto& text : addresses) {
    auto a = IpAddress::parse(text);
    if (!a || !pool_.contains(*a) || used_.count(*a) || recent_set_.count(*a) || isReserved(*a)) continue;
    recent_.push_back(*a);
    recent_set_.insert(*a);
  }
}

}  // namespace dpu::control
