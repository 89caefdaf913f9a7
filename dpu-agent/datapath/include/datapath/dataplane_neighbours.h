// Underlay next hops for Geneve: the Ethernet destination of the outer header
// towards each remote node's tunnel IP. The kernel owns the tunnel address on
// the uplink netdev (the XDP program passes ARP to it), so its routing and
// neighbour tables already know the answer: we read /proc/net/route and
// /proc/net/arp of our network namespace for the uplink netdev (no netlink
// needed), probe unresolved next hops with a datagram to the discard port so
// the kernel ARPs for them, and hand changes to Engine::setTunnelNextHop.
// Static entries from the config take precedence (a static underlay; tests on
// pcap ports). IPv4 only for the kernel lookup; IPv6 peers need static entries.
// Control thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::datapath {

class Engine;

struct KernelRoute {
  uint32_t destination = 0;  // host order
  uint32_t mask = 0;
  uint32_t gateway = 0;      // 0: on-link
  uint32_t metric = 0;
};

// Routes of `iface` from /proc/net/route text.
std::vector<KernelRoute> parseProcRoute(std::string_view text, const std::string& iface);
// Complete entries of `iface` from /proc/net/arp text: IPv4 (host order) → MAC.
std::map<uint32_t, MacAddress> parseProcArp(std::string_view text, const std::string& iface);
// The next hop (host order) for `peer` over the routes, longest prefix first; nullopt without a route.
std::optional<uint32_t> nextHopFor(const std::vector<KernelRoute>& routes, uint32_t peer);

class TunnelNeighbours {
 public:
  // `iface` "" disables the kernel lookup (only static entries).
  TunnelNeighbours(Engine& engine, std::string iface, std::map<IpAddress, MacAddress> static_hops);
  // Resolves every peer the engine wants; tells the engine what changed.
  void refresh();
  // True while a peer probed in the last two seconds is still unresolved: the
  // kernel answers an ARP in about a millisecond, so the caller refreshes again
  // soon instead of leaving the first packets to that node without a next hop
  // for its usual period. A peer that stays silent falls back to that period.
  bool resolving() const;

 private:
  void probe(const IpAddress& peer);

  Engine& engine_;
  std::string iface_;
  std::map<IpAddress, MacAddress> static_;
  std::map<IpAddress, MacAddress> told_;  // what the engine has
  std::map<IpAddress, std::chrono::steady_clock::time_point> probed_;
  std::vector<IpAddress> unresolved_;  // peers the last refresh found no next hop for
};

}  // namespace dpu::datapath
