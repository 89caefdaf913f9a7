// Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable
// Software Network Load Balancer", NSDI 2016, §3.4), as Katran and Cilium use
// it for service backends.
//
// A table of M entries (M prime) names a backend in every entry; a
// connection takes the entry its hash selects. Each backend has a
// permutation of the entries from two hashes of its identity, and the
// backends take turns claiming their next preferred free entry, so:
//  - every backend holds floor(M/N) or ceil(M/N) entries: with M ≥ 100·N
//    (sizeFor) each backend's share is within 1 % of 1/N;
//  - the table depends only on the set of backend identities, not on the order
//    they are given in, nor on the process: every DPU builds the same table,
//    and a restarted dataplane picks the same backend for a mid-stream packet;
//  - adding or removing one backend changes few entries besides those it
//    takes or gives up (the paper's "minimal disruption"; tests measure it).
//
// Identities are the backends' (address, port) bytes; the hash of a
// connection is the caller's (tupleHash), with a fixed seed for the same reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dpu::lb {

// A backend's identity: its address (4 or 16 bytes) and port.
struct BackendId {
  uint8_t addr[16] = {};
  uint8_t addr_len = 4;
  uint16_t port = 0;
};

class MaglevTable {
 public:
  static constexpr uint16_t kNone = 0xffff;  // lookup() of an empty table
  static constexpr size_t kMaxBackends = 0xfffe;

  // The table size for `backends`: the smallest prime of a fixed list that is
  // at least 100 times the backends (at least 251), capped at 65,521.
  static uint32_t sizeFor(size_t backends);

  MaglevTable() = default;
  // The table over `backends` (at most kMaxBackends; duplicates are the
  // caller's error), of sizeFor(backends.size()) entries unless `size` (a
  // prime) is given. An empty list gives an empty table.
  explicit MaglevTable(std::span<const BackendId> backends, uint32_t size = 0);

  bool empty() const { return entries_.empty(); }
  uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
  // The index (into the list it was built from) of the backend for `hash`.
  uint16_t lookup(uint64_t hash) const {
    return entries_.empty() ? kNone : entries_[static_cast<uint32_t>(hash % entries_.size())];
  }
  const std::vector<uint16_t>& entries() const { return entries_; }
  // Each backend's fraction of the entries, by index.
  std::vector<double> shares(size_t backends) const;

 private:
  std::vector<uint16_t> entries_;
};

// The hash of a connection's 5-tuple (addresses of addr_len bytes, ports and
// protocol as the packet has them), with a fixed seed: the same on every DPU
// and across restarts. Both the Maglev choice and client-IP affinity use it.
uint64_t tupleHash(const uint8_t* src, const uint8_t* dst, size_t addr_len, uint16_t src_port, uint16_t dst_port,
                   uint8_t protocol);
// The hash of one address (session affinity by client IP).
uint64_t addressHash(const uint8_t* addr, size_t addr_len);

}  // namespace dpu::lb
