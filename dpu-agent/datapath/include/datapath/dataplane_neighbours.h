// Underlay next hops for Geneve: the Ethernet destination of the outer header
// towards each remote node's tunnel IP, IPv4 and IPv6. The kernel owns the
// tunnel address on the uplink netdev (the XDP program passes ARP and ND to
// it), so its routing and neighbour tables already know the answer. This file
// keeps a mirror of them (libnl-route's route and neighbour caches under one
// cache manager, fed by RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE and
// RTNLGRP_NEIGH events on one NETLINK_ROUTE socket) and hands every change of
// a peer's next-hop MAC to Engine::setTunnelNextHop as soon as its event is
// read: nothing polls the tables.
//
// A peer's next hop is what the uplink's routes in the main table say (the
// longest prefix, then the lowest metric; a gateway, or the peer itself
// on-link), and its MAC is that address's neighbour entry on the uplink when
// the entry is REACHABLE, STALE, DELAY, PROBE or PERMANENT. When it is absent,
// INCOMPLETE or FAILED, a datagram to the peer's discard port makes the kernel
// resolve it (at most once a second per peer); the answer arrives as an event.
// Static entries from the config take precedence (a static underlay; tests on
// pcap ports).
//
// A peer that loses its next hop (neighbour deleted or FAILED, route gone)
// keeps the MAC the engine last had until a new one resolves: the engine has
// no "unknown again" state, and the old MAC is the one most likely still right
// while the kernel re-resolves (an `ip neigh flush`, a garbage-collected entry).
//
// Control thread only: every call, and every callback, runs on the caller's thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::dataplane::v1 {
class OperatorReply;
}

namespace dpu::datapath {

class Engine;

// One route of the uplink, as the next-hop choice needs it.
struct UnderlayRoute {
  IpPrefix destination;
  uint32_t metric = 0;               // lower wins between routes of one prefix length
  std::optional<IpAddress> gateway;  // nullopt: the destination is on-link
  bool reachable = true;             // false: blackhole, unreachable or prohibit
};

// The next hop towards `peer` over `routes` (any family mix): the gateway of the
// most specific matching route, or `peer` itself when that route is on-link;
// nullopt when no route matches or the best one is not reachable.
std::optional<IpAddress> nextHopFor(const std::vector<UnderlayRoute>& routes, const IpAddress& peer);

// True for the neighbour states (linux/neighbour.h NUD_*) whose link-layer address
// may be used: REACHABLE, STALE, DELAY, PROBE, PERMANENT. INCOMPLETE, FAILED,
// NOARP and NONE are not.
bool neighbourUsable(int nud_state);

// The kernel's view of the uplink: the mirror of its routes and neighbours, the
// peers being watched, and what each resolves to. Owns one netlink socket.
class KernelNextHops {
 public:
  struct Options {
    std::string iface;                         // the uplink netdev, in this network namespace
    int receive_buffer_bytes = 4 * 1024 * 1024;  // room for a burst of events (an `ip neigh flush`)
  };
  // Called when a watched peer's next-hop MAC changes: a MAC, or nullopt when it
  // has none any more (`why` says what is missing). Not called for a new peer
  // that is not resolved yet.
  using Listener = std::function<void(const IpAddress& peer, const std::optional<MacAddress>& mac,
                                      const std::string& why)>;
  struct Stats {
    uint64_t events = 0;     // route and neighbour notifications read
    uint64_t resyncs = 0;    // full re-reads after the socket overran (events were lost)
    uint64_t probes = 0;     // datagrams sent to make the kernel resolve a next hop
    uint64_t resolved = 0;   // watched peers with a MAC now
    uint64_t unresolved = 0; // watched peers without one
  };

  // Subscribes, then reads the current routes and neighbours. Fails (kNotFound)
  // when `iface` is not a netdev here, or when netlink cannot be opened.
  static Result<std::unique_ptr<KernelNextHops>> open(const Options& options, Listener listener);
  ~KernelNextHops();
  KernelNextHops(const KernelNextHops&) = delete;
  KernelNextHops& operator=(const KernelNextHops&) = delete;

  // The socket to poll(2) for POLLIN (and POLLERR: an overrun).
  int fd() const;
  // Reads every pending event without blocking, updates the mirror and tells the
  // listener what changed. After an overrun it re-reads both tables, so nothing
  // lost stays wrong. An error means netlink itself failed.
  Result<void> dispatch();
  // The peers to resolve (replaces the set). A new peer is resolved against the
  // mirror at once, and probed when it has a route but no usable neighbour.
  void watch(const std::vector<IpAddress>& peers);
  // Probes the watched peers still unresolved whose last probe is a second old:
  // a peer that did not answer (FAILED) is asked again.
  void probeUnresolved();
  // What a watched peer resolves to now (nullopt: unresolved or not watched).
  std::optional<MacAddress> macOf(const IpAddress& peer) const;
  Stats stats() const;

  struct Impl;

 private:
  explicit KernelNextHops(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The engine's tunnel next hops: static entries, else the kernel's (above).
class TunnelNeighbours {
 public:
  // `iface` "" disables the kernel lookup (only static entries).
  TunnelNeighbours(Engine& engine, std::string iface, std::map<IpAddress, MacAddress> static_hops);
  ~TunnelNeighbours();
  // Opens the kernel lookup (nothing to do without an iface). Start-up fails on an error.
  Result<void> open();
  // The fd to poll for POLLIN|POLLERR, -1 without a kernel lookup.
  int eventFd() const;
  // The event fd is readable: take the changes to the engine.
  void onEvents();
  // The engine's peers may have changed (after each accepted model change), and
  // once a second: watch the peers the engine wants, re-probe those unresolved.
  void refresh();
  // Peers and netlink counters for the operator API's stats.
  void addCounters(dataplane::v1::OperatorReply& reply) const;

 private:
  void tell(const IpAddress& peer, const MacAddress& mac);

  Engine& engine_;
  std::string iface_;
  std::map<IpAddress, MacAddress> static_;
  std::map<IpAddress, MacAddress> told_;  // what the engine has
  std::unique_ptr<KernelNextHops> kernel_;
};

}  // namespace dpu::datapath
