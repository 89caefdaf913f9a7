// The fast form of a PortPolicy direction (policy_match.h).
#include "model/policy_match.h"

#include <algorithm>
#include <map>
#include <queue>
#include <tuple>

namespace dpu::model {
namespace {

using U128 = unsigned __int128;

U128 load(const uint8_t* bytes, size_t n) {
  U128 v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | bytes[i];
  return v;
}

struct Interval {
  U128 lo, hi;
  uint32_t rule;
};

}  // namespace

PolicyMatcher::PolicyMatcher(const ModelPolicyDirection& direction) : isolated_(direction.isolated) {
  if (!isolated_) return;
  // Rules by (protocol, ports), each a list of address intervals per family.
  std::map<std::tuple<uint8_t, uint16_t, uint16_t>, std::pair<std::vector<Interval>, std::vector<Interval>>> groups;
  for (uint32_t i = 0; i < direction.rules.size(); ++i) {
    const ModelPolicyRule& r = direction.rules[i];
    const auto key = r.protocol == 0 ? std::make_tuple(uint8_t{0}, uint16_t{0}, uint16_t{65535})
                                     : std::make_tuple(r.protocol, r.port_first, r.port_last);
    auto& g = groups[key];
    for (const auto& p : r.peers) {
      const bool v6 = !p.address.isV4();
      const unsigned bits = v6 ? 128 : 32;
      const U128 lo = load(p.address.bytes.data(), v6 ? 16 : 4);
      const unsigned host = bits - p.length;
      const U128 span = host == 128 ? ~U128{0} : (U128{1} << host) - 1;
      (v6 ? g.second : g.first).push_back({lo, lo + span, i});
    }
  }
  // Disjoint segments, each tagged with the lowest rule covering it: a sweep
  // over the interval ends with the covering rules in a min-heap.
  auto flatten = [](std::vector<Interval> items) {
    std::vector<Segment> out;
    // The common case, one rule's peers as the agent sends them (sorted,
    // disjoint): each interval is a segment as it is, and a rule of
    // thousands of pods costs one pass, not a sort and a sweep.
    bool disjoint = true;
    for (size_t i = 1; i < items.size() && disjoint; ++i) disjoint = items[i - 1].hi < items[i].lo;
    if (disjoint) {
      out.reserve(items.size());
      for (const auto& it : items) {
        if (!out.empty() && out.back().rule == it.rule && out.back().hi + 1 == it.lo) {
          out.back().hi = it.hi;
        } else {
          out.push_back({it.lo, it.hi, it.rule});
        }
      }
      return out;
    }
    std::sort(items.begin(), items.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
    std::vector<U128> points;  // where the covering set may change
    for (const auto& it : items) {
      points.push_back(it.lo);
      if (it.hi != ~U128{0}) points.push_back(it.hi + 1);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    using Active = std::pair<uint32_t, U128>;  // (rule, hi)
    std::priority_queue<Active, std::vector<Active>, std::greater<>> active;
    size_t next = 0;
    for (size_t j = 0; j < points.size(); ++j) {
      const U128 at = points[j];
      while (next < items.size() && items[next].lo == at) {
        active.emplace(items[next].rule, items[next].hi);
        ++next;
      }
      while (!active.empty() && active.top().second < at) active.pop();
      if (active.empty()) continue;
      // The heap's top may hide expired intervals below it only with higher
      // rules; the top itself is live, and it is the lowest live rule.
      const U128 end = j + 1 < points.size() ? points[j + 1] - 1 : ~U128{0};
      const uint32_t rule = active.top().first;
      if (!out.empty() && out.back().rule == rule && out.back().hi + 1 == at) {
        out.back().hi = end;
      } else {
        out.push_back({at, end, rule});
      }
    }
    return out;
  };
  for (auto& [key, lists] : groups) {
    PortClass c;
    std::tie(c.protocol, c.first, c.last) = key;
    c.v4 = flatten(std::move(lists.first));
    c.v6 = flatten(std::move(lists.second));
    classes_.push_back(std::move(c));
  }
  buildIndex();
}

void PolicyMatcher::buildIndex() {
  by_protocol_.fill(-1);
  std::map<uint8_t, std::vector<uint32_t>> of_protocol;
  for (uint32_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].protocol == 0) {
      any_protocol_.push_back(i);
    } else {
      of_protocol[classes_[i].protocol].push_back(i);
    }
  }
  for (auto& [protocol, members] : of_protocol) {
    ProtocolIndex index;
    // The pieces: the port space cut where a range begins or ends.
    std::vector<uint32_t> cuts{0};
    for (uint32_t i : members) {
      cuts.push_back(classes_[i].first);
      cuts.push_back(uint32_t{classes_[i].last} + 1);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.back() == 65536) cuts.pop_back();
    // Each group listed in the pieces its range covers (ranges of one
    // protocol are distinct, so a piece lists each group at most once).
    const size_t limit = std::max(kMaxIndexEntries, 16 * members.size());
    std::vector<std::vector<uint32_t>> pieces(cuts.size());
    size_t entries = 0;
    for (uint32_t i : members) {
      auto from = std::lower_bound(cuts.begin(), cuts.end(), uint32_t{classes_[i].first});
      auto to = std::upper_bound(cuts.begin(), cuts.end(), uint32_t{classes_[i].last});
      entries += static_cast<size_t>(to - from);
      if (entries > limit) break;
      for (auto it = from; it != to; ++it) pieces[static_cast<size_t>(it - cuts.begin())].push_back(i);
    }
    if (entries > limit) {
      index.linear = true;
      index.classes = std::move(members);
    } else {
      index.starts = std::move(cuts);
      index.offsets.reserve(pieces.size() + 1);
      index.classes.reserve(entries);
      for (const auto& piece : pieces) {
        index.offsets.push_back(static_cast<uint32_t>(index.classes.size()));
        index.classes.insert(index.classes.end(), piece.begin(), piece.end());
      }
      index.offsets.push_back(static_cast<uint32_t>(index.classes.size()));
    }
    by_protocol_[protocol] = static_cast<int16_t>(protocols_.size());
    protocols_.push_back(std::move(index));
  }
}

int PolicyMatcher::find(const std::vector<Segment>& segments, U128 address) {
  auto it = std::upper_bound(segments.begin(), segments.end(), address,
                             [](U128 a, const Segment& s) { return a < s.lo; });
  if (it == segments.begin()) return kDenied;
  --it;
  return address <= it->hi ? static_cast<int>(it->rule) : kDenied;
}

int PolicyMatcher::match(const uint8_t* peer, bool v6, uint8_t protocol, uint16_t port) const {
  if (!isolated_) return kNotIsolated;
  const U128 address = load(peer, v6 ? 16 : 4);
  int best = kDenied;
  auto consider = [&](uint32_t i) {
    const PortClass& c = classes_[i];
    const int r = find(v6 ? c.v6 : c.v4, address);
    if (r >= 0 && (best < 0 || r < best)) best = r;
  };
  for (uint32_t i : any_protocol_) consider(i);
  if (by_protocol_[protocol] < 0) return best;
  const ProtocolIndex& index = protocols_[static_cast<size_t>(by_protocol_[protocol])];
  if (index.linear) {
    for (uint32_t i : index.classes) {
      if (port >= classes_[i].first && port <= classes_[i].last) consider(i);
    }
    return best;
  }
  // The piece holding the port: the last that starts at or before it.
  const auto piece = static_cast<size_t>(
      std::upper_bound(index.starts.begin(), index.starts.end(), uint32_t{port}) - index.starts.begin() - 1);
  for (uint32_t k = index.offsets[piece]; k < index.offsets[piece + 1]; ++k) consider(index.classes[k]);
  return best;
}

}  // namespace dpu::model
