// A PortPolicy direction (model.h: ModelPolicyDirection) in the form the
// dataplane's slow path matches a new connection against: the rules grouped
// by (protocol, destination port range), each group's peer prefixes flattened
// into disjoint, sorted address intervals, each interval tagged with the first
// rule (in the direction's order) whose peers hold it. A match is then a
// binary search per group whose protocol and ports fit, however many rules
// and prefixes there are: 1,000 policies allowing one protocol and port cost
// one search. The groups whose protocol and ports fit are found by an index
// per protocol over the port space (the ports cut where a group's range
// begins or ends, each piece listing the groups covering it), so 1,000
// policies each on its own port cost one binary search to find the groups
// of the packet's port, not a pass over a thousand groups. A protocol whose
// ranges nest so deeply that the pieces would list more than
// kMaxIndexEntries groups keeps a plain list of its groups instead.
//
// Semantics are exactly dpu::policy::evaluate (dpu-agent/policy/rules.h),
// which the model cannot link: tests/dpu-agent/model holds the two equal on
// random rule sets. Built on the control thread, read by any thread (const).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "common/net_address.h"
#include "model/model.h"

namespace dpu::model {

class PolicyMatcher {
 public:
  static constexpr int kNotIsolated = -2;
  static constexpr int kDenied = -1;
  // The most group references one protocol's port index holds (with at
  // least 16 per group allowed): past it, that protocol's groups are scanned.
  static constexpr size_t kMaxIndexEntries = 4096;

  PolicyMatcher() = default;  // not isolated
  explicit PolicyMatcher(const ModelPolicyDirection& direction);

  bool isolated() const { return isolated_; }
  // The index (in the direction's rules) of the first rule allowing a
  // connection with this peer address (4 or 16 bytes, network order), IP
  // protocol and destination port (0 for protocols without ports);
  // kNotIsolated when the direction is not isolated, kDenied when no rule allows it.
  int match(const uint8_t* peer, bool v6, uint8_t protocol, uint16_t port) const;
  int match(const IpAddress& peer, uint8_t protocol, uint16_t port) const {
    return match(peer.bytes.data(), !peer.isV4(), protocol, port);
  }

 private:
  using U128 = unsigned __int128;
  struct Segment {
    U128 lo;
    U128 hi;    // inclusive
    uint32_t rule;
  };
  struct PortClass {
    uint8_t protocol = 0;  // 0: every protocol, ports ignored
    uint16_t first = 0;
    uint16_t last = 65535;
    std::vector<Segment> v4, v6;  // disjoint, sorted by lo
  };
  // One protocol's groups by port: piece i covers ports starts[i] ..
  // starts[i + 1] - 1 (the last to 65535), its groups are
  // classes[offsets[i] .. offsets[i + 1]). `linear`: too many to index;
  // `classes` then lists the protocol's groups, each range tested.
  struct ProtocolIndex {
    bool linear = false;
    std::vector<uint32_t> starts;
    std::vector<uint32_t> offsets;
    std::vector<uint32_t> classes;
  };
  static int find(const std::vector<Segment>& segments, U128 address);
  void buildIndex();

  bool isolated_ = false;
  std::vector<PortClass> classes_;
  std::vector<uint32_t> any_protocol_;         // groups of rules without a protocol
  std::array<int16_t, 256> by_protocol_{};     // index into protocols_, -1: no group
  std::vector<ProtocolIndex> protocols_;
};

}  // namespace dpu::model
