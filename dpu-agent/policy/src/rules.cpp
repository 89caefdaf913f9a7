// The compiled rule set's match and its prefix arithmetic (rules.h).
#include "policy/rules.h"

#include <algorithm>
#include <sstream>

namespace dpu::policy {
namespace {

bool bitSet(const IpAddress& a, unsigned i) { return (a.bytes[i / 8] >> (7 - i % 8)) & 1; }

// The prefix's two halves, one bit longer.
std::pair<IpPrefix, IpPrefix> halves(const IpPrefix& p) {
  IpPrefix low{p.address, static_cast<uint8_t>(p.length + 1)};
  IpPrefix high = low;
  high.address.bytes[p.length / 8] |= static_cast<uint8_t>(0x80u >> (p.length % 8));
  return {low, high};
}

bool inside(const IpPrefix& inner, const IpPrefix& outer) {
  return inner.address.family == outer.address.family && inner.length >= outer.length &&
         outer.contains(inner.address);
}

void subtractInto(const IpPrefix& from, const std::vector<IpPrefix>& except, std::vector<IpPrefix>& out) {
  bool overlapped = false;
  for (const auto& e : except) {
    if (e.address.family != from.address.family || !from.overlaps(e)) continue;
    if (inside(from, e)) return;  // wholly excepted
    overlapped = true;
  }
  if (!overlapped) {
    out.push_back(from);
    return;
  }
  // Some except lies strictly inside `from`: split, and keep what is not excepted.
  auto [low, high] = halves(from);
  subtractInto(low, except, out);
  subtractInto(high, except, out);
}

}  // namespace

uint8_t ipProtocol(Protocol p) {
  switch (p) {
    case Protocol::kTcp: return kIpProtoTcp;
    case Protocol::kUdp: return kIpProtoUdp;
    case Protocol::kSctp: return kIpProtoSctp;
  }
  return kIpProtoTcp;
}

bool evaluate(const DirectionRules& rules, const IpAddress& peer, uint8_t ip_protocol, uint16_t port) {
  if (!rules.isolated) return true;
  for (const auto& r : rules.rules) {
    if (r.protocol != kIpProtoAny && (r.protocol != ip_protocol || port < r.port_first || port > r.port_last))
      continue;
    for (const auto& p : r.peers)
      if (p.contains(peer)) return true;
  }
  return false;
}

std::vector<IpPrefix> subtractPrefixes(const IpPrefix& from, const std::vector<IpPrefix>& except) {
  std::vector<IpPrefix> out;
  subtractInto(from, except, out);
  return out;
}

std::vector<IpPrefix> normalizePrefixes(std::vector<IpPrefix> prefixes) {
  // Address order puts a prefix before everything inside it (same address,
  // longer). The compiler's lists are often one peer's, normalized already:
  // checking the order costs one pass, sorting it again many.
  const auto before = [](const IpPrefix& a, const IpPrefix& b) {
    if (a.address != b.address) return a.address < b.address;
    return a.length < b.length;
  };
  if (!std::is_sorted(prefixes.begin(), prefixes.end(), before)) std::sort(prefixes.begin(), prefixes.end(), before);
  std::vector<IpPrefix> out;
  for (const auto& p : prefixes) {
    if (!out.empty() && inside(p, out.back())) continue;
    out.push_back(p);
    // Merge sibling halves as long as the last two make up their parent.
    while (out.size() >= 2) {
      const IpPrefix& a = out[out.size() - 2];
      const IpPrefix& b = out.back();
      if (a.address.family != b.address.family || a.length != b.length || a.length == 0) break;
      if (bitSet(a.address, a.length - 1u)) break;  // `a` is a high half: its sibling came before it
      IpPrefix parent{a.address, static_cast<uint8_t>(a.length - 1)};
      if (halves(parent).second != b) break;
      out.pop_back();
      out.back() = parent;
    }
  }
  return out;
}

std::string describe(const DirectionRules& rules) {
  std::ostringstream s;
  if (!rules.isolated) return "not isolated\n";
  s << "isolated by";
  for (const auto& p : rules.policies) s << " " << p;
  s << "\n";
  for (const auto& r : rules.rules) {
    s << "  allow " << r.policy << " proto ";
    if (r.protocol == kIpProtoAny) s << "any";
    else s << int(r.protocol) << " ports " << r.port_first << "-" << r.port_last;
    s << " peers";
    for (const auto& p : r.peers) s << " " << p.str();
    s << "\n";
  }
  return s.str();
}

}  // namespace dpu::policy
