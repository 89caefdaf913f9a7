// IPAM over one node pod CIDR. Offsets 0 (the network), 1 (the gateway: the
// distributed router's port on this node's switch) and 2 (the host management
// port) are reserved, and so is the IPv4 broadcast address. Addresses in use
// come from the attachments (so the checkpoint of attachments is the record);
// addresses released recently are handed out last, oldest first, so an address
// is not reused while a stale peer may still send to it — across restarts too,
// because the released list is checkpointed.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::control {

class Ipam {
 public:
  // Released addresses remembered for late reuse (beyond this, the oldest is forgotten:
  // by then a whole pool's worth of other addresses has been handed out).
  static constexpr size_t kMaxRecentlyReleased = 4096;

  explicit Ipam(IpPrefix pool);

  const IpPrefix& pool() const { return pool_; }
  IpAddress gateway() const { return pool_.at(1); }
  IpAddress managementAddress() const { return pool_.at(2); }
  bool isReserved(const IpAddress& a) const;

  // A fresh address: the lowest never-recently-used free one, else the oldest released.
  Result<IpAddress> allocate();
  // Marks an address as in use (restore from checkpoint, the management port).
  Result<void> claim(const IpAddress& a);
  // Returns it to the pool, at the end of the reuse queue. Unknown addresses are ignored.
  void release(const IpAddress& a);

  bool inUse(const IpAddress& a) const { return used_.count(a) != 0; }
  uint64_t usedCount() const { return used_.size(); }
  uint64_t capacity() const;  // addresses assignable to pods
  std::vector<std::string> recentlyReleased() const;
  void setRecentlyReleased(const std::vector<std::string>& addresses);

 private:
  uint64_t firstOffset() const { return 3; }
  uint64_t endOffset() const;  // one past the last assignable offset

  IpPrefix pool_;
  std::set<IpAddress> used_;
  std::deque<IpAddress> recent_;
  std::set<IpAddress> recent_set_;
  uint64_t cursor_;
};

}  // namespace dpu::control
