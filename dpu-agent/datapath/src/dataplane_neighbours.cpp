// Underlay next hops from rtnetlink events (dataplane_neighbours.h). libnl
// objects are reference counted C structs owned by their caches here: the
// callbacks only read them, and the caches go with the manager.
#include "datapath/dataplane_neighbours.h"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "common/log.h"
#include "datapath/engine.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The kernel tries a next hop itself (ucast/mcast_solicit, about 3 s) after
// one datagram; asking again sooner only queues behind that.
constexpr auto kProbeInterval = 1s;

std::optional<IpAddress> fromNl(nl_addr* a) {
  if (a == nullptr) return std::nullopt;
  const int family = nl_addr_get_family(a);
  const unsigned len = nl_addr_get_len(a);
  IpAddress ip;
  if (family == AF_INET && len == 4) {
    ip.family = IpAddress::Family::kV4;
  } else if (family == AF_INET6 && len == 16) {
    ip.family = IpAddress::Family::kV6;
  } else {
    return std::nullopt;
  }
  std::memcpy(ip.bytes.data(), nl_addr_get_binary_addr(a), len);
  return ip;
}

std::optional<MacAddress> macFromNl(nl_addr* a) {
  if (a == nullptr || nl_addr_get_len(a) != 6) return std::nullopt;
  MacAddress mac;
  std::memcpy(mac.bytes.data(), nl_addr_get_binary_addr(a), 6);
  // The engine refuses these; a neighbour entry holding one is of no use as an Ethernet destination.
  if (mac.isZero() || mac.isMulticast()) return std::nullopt;
  return mac;
}

std::string nudName(int state) {
  if (state & NUD_INCOMPLETE) return "INCOMPLETE";
  if (state & NUD_FAILED) return "FAILED";
  if (state & NUD_NOARP) return "NOARP";
  if (state & NUD_REACHABLE) return "REACHABLE";
  if (state & NUD_STALE) return "STALE";
  if (state & NUD_DELAY) return "DELAY";
  if (state & NUD_PROBE) return "PROBE";
  if (state & NUD_PERMANENT) return "PERMANENT";
  return "NONE";
}

// `prefix` covers `peer`, comparing only the prefix's bits (a route's
// destination may come with host bits set, which the kernel ignores too).
bool matches(const IpPrefix& prefix, const IpAddress& peer) {
  if (prefix.address.family != peer.family || prefix.length > peer.size() * 8) return false;
  const unsigned whole = prefix.length / 8, rest = prefix.length % 8;
  if (std::memcmp(prefix.address.bytes.data(), peer.bytes.data(), whole) != 0) return false;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (prefix.address.bytes[whole] & mask) == (peer.bytes[whole] & mask);
}

}  // namespace

std::optional<IpAddress> nextHopFor(const std::vector<UnderlayRoute>& routes, const IpAddress& peer) {
  const UnderlayRoute* best = nullptr;
  for (const auto& r : routes) {
    if (!matches(r.destination, peer)) continue;
    if (!best || r.destination.length > best->destination.length ||
        (r.destination.length == best->destination.length && r.metric < best->metric))
      best = &r;
  }
  if (!best || !best->reachable) return std::nullopt;
  return best->gateway ? *best->gateway : peer;
}

bool neighbourUsable(int nud_state) {
  return (nud_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT)) != 0;
}

// ---- KernelNextHops ----

struct KernelNextHops::Impl {
  struct Neighbour {
    int state = 0;
    std::optional<MacAddress> mac;
  };
  struct Peer {
    std::optional<IpAddress> hop;
    std::optional<MacAddress> mac;
    std::string why;
    std::optional<Clock::time_point> probed;
  };

  Options options;
  Listener listener;
  int ifindex = 0;
  nl_sock* events = nullptr;  // the manager's socket: notifications only
  nl_sock* sync = nullptr;    // dumps for a resync
  nl_cache_mngr* manager = nullptr;
  nl_cache* route_cache = nullptr;  // owned by the manager
  nl_cache* neigh_cache = nullptr;  // owned by the manager

  std::vector<UnderlayRoute> routes;
  std::map<IpAddress, Neighbour> neighbours;  // the uplink's, by address
  std::map<IpAddress, Peer> peers;
  // What the events of one dispatch touched, resolved again once it is read.
  bool routes_changed = false;
  std::set<IpAddress> changed_hops;
  Stats stats;

  ~Impl() {
    // The manager closes its socket but does not free one it was given.
    if (manager) nl_cache_mngr_free(manager);
    if (events) nl_socket_free(events);
    if (sync) nl_socket_free(sync);
  }

  static void onRoute(nl_cache*, nl_object*, int, void* arg) { static_cast<Impl*>(arg)->routes_changed = true; }

  static void onNeighbour(nl_cache*, nl_object* object, int action, void* arg) {
    static_cast<Impl*>(arg)->neighbourChanged(reinterpret_cast<rtnl_neigh*>(object), action == NL_ACT_DEL);
  }

  void neighbourChanged(rtnl_neigh* n, bool deleted) {
    const int family = rtnl_neigh_get_family(n);
    // The bridge's forwarding entries share the group (AF_BRIDGE); proxy entries have no address.
    if ((family != AF_INET && family != AF_INET6) || rtnl_neigh_get_ifindex(n) != ifindex) return;
    if (rtnl_neigh_get_flags(n) & NTF_PROXY) return;
    auto dst = fromNl(rtnl_neigh_get_dst(n));
    if (!dst) return;
    if (deleted) {
      neighbours.erase(*dst);
    } else {
      neighbours[*dst] = Neighbour{rtnl_neigh_get_state(n), macFromNl(rtnl_neigh_get_lladdr(n))};
    }
    changed_hops.insert(*dst);
  }

  void readNeighbours() {
    neighbours.clear();
    nl_cache_foreach(
        neigh_cache,
        [](nl_object* object, void* arg) {
          static_cast<Impl*>(arg)->neighbourChanged(reinterpret_cast<rtnl_neigh*>(object), false);
        },
        this);
    changed_hops.clear();
  }

  void addRoute(rtnl_route* r) {
    const int family = rtnl_route_get_family(r);
    if (family != AF_INET && family != AF_INET6) return;
    // The main table is what the kernel's own output to a peer uses without
    // policy rules (and what /proc/net/route shows); cloned entries are
    // IPv6 exceptions (PMTU, redirects), not routes.
    if (rtnl_route_get_table(r) != RT_TABLE_MAIN || (rtnl_route_get_flags(r) & RTM_F_CLONED)) return;
    UnderlayRoute route;
    nl_addr* dst = rtnl_route_get_dst(r);
    route.destination.address.family = family == AF_INET ? IpAddress::Family::kV4 : IpAddress::Family::kV6;
    if (dst != nullptr && nl_addr_get_len(dst) > 0) {
      auto address = fromNl(dst);
      if (!address) return;
      route.destination.address = *address;
      route.destination.length = static_cast<uint8_t>(nl_addr_get_prefixlen(dst));
    }
    route.metric = rtnl_route_get_priority(r);
    switch (rtnl_route_get_type(r)) {
      case RTN_UNICAST: {
        // A multipath route: the first live path out of the uplink (the
        // dataplane sends a peer's packets one way; the kernel would hash).
        const int paths = rtnl_route_get_nnexthops(r);
        rtnl_nexthop* chosen = nullptr;
        for (int i = 0; i < paths && !chosen; ++i) {
          rtnl_nexthop* nh = rtnl_route_nexthop_n(r, i);
          if (nh && rtnl_route_nh_get_ifindex(nh) == ifindex && !(rtnl_route_nh_get_flags(nh) & RTNH_F_DEAD))
            chosen = nh;
        }
        if (!chosen) return;  // another netdev's route: the dataplane sends only out of the uplink
        // RTA_VIA carries a gateway of the other family (an IPv4 route via an IPv6 link-local).
        route.gateway = fromNl(rtnl_route_nh_get_gateway(chosen));
        if (!route.gateway) route.gateway = fromNl(rtnl_route_nh_get_via(chosen));
        break;
      }
      case RTN_BLACKHOLE:
      case RTN_UNREACHABLE:
      case RTN_PROHIBIT:
        route.reachable = false;
        break;
      default:
        return;  // local, broadcast, multicast, throw: not a way to a peer
    }
    routes.push_back(route);
  }

  void readRoutes() {
    routes.clear();
    nl_cache_foreach(
        route_cache, [](nl_object* object, void* arg) { static_cast<Impl*>(arg)->addRoute(reinterpret_cast<rtnl_route*>(object)); },
        this);
    routes_changed = false;
  }

  // Resolves `peer` against the mirror; tells the listener when its MAC changed.
  void resolve(const IpAddress& address, Peer& peer) {
    peer.hop = nextHopFor(routes, address);
    std::optional<MacAddress> mac;
    std::string why;
    if (!peer.hop) {
      why = "no route to " + address.str() + " via " + options.iface + " in the main table";
    } else if (auto n = neighbours.find(*peer.hop); n == neighbours.end()) {
      why = "next hop " + peer.hop->str() + " has no neighbour entry on " + options.iface;
    } else if (!neighbourUsable(n->second.state) || !n->second.mac) {
      why = "next hop " + peer.hop->str() + " is " + nudName(n->second.state) + " on " + options.iface;
    } else {
      mac = n->second.mac;
    }
    // A peer that just lost its MAC is asked at once; one that stays unresolved once a second.
    if (mac) peer.probed.reset();
    if (!mac && peer.hop) probe(address, peer);
    const bool changed = mac != peer.mac;
    const bool was_known = peer.mac.has_value();
    peer.mac = mac;
    peer.why = why;
    if (changed && (mac || was_known)) listener(address, mac, why);
  }

  // A datagram to the discard port makes the kernel resolve the peer's next
  // hop; the peer's XDP program passes it to its kernel, which ignores it.
  void probe(const IpAddress& address, Peer& peer) {
    const auto now = Clock::now();
    if (peer.probed && now - *peer.probed < kProbeInterval) return;
    peer.probed = now;
    ++stats.probes;
    const bool v4 = address.isV4();
    int fd = ::socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    (void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, options.iface.c_str(),
                     static_cast<socklen_t>(options.iface.size()));
    sockaddr_storage to{};
    socklen_t len = 0;
    if (v4) {
      auto* sin = reinterpret_cast<sockaddr_in*>(&to);
      sin->sin_family = AF_INET;
      sin->sin_port = htons(9);
      std::memcpy(&sin->sin_addr, address.bytes.data(), 4);
      len = sizeof(sockaddr_in);
    } else {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(&to);
      sin6->sin6_family = AF_INET6;
      sin6->sin6_port = htons(9);
      std::memcpy(&sin6->sin6_addr, address.bytes.data(), 16);
      sin6->sin6_scope_id = static_cast<uint32_t>(ifindex);  // used only for a link-local peer
      len = sizeof(sockaddr_in6);
    }
    (void)::sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), len);
    ::close(fd);
  }

  // Resolves again what the events touched: every peer after a route change,
  // else the peers whose next hop's neighbour entry changed.
  void apply() {
    if (routes_changed) {
      readRoutes();
      changed_hops.clear();
      for (auto& [address, peer] : peers) resolve(address, peer);
      return;
    }
    if (changed_hops.empty()) return;
    std::set<IpAddress> hops;
    hops.swap(changed_hops);
    for (auto& [address, peer] : peers)
      if (peer.hop && hops.count(*peer.hop)) resolve(address, peer);
  }

  Result<void> resync() {
    ++stats.resyncs;
    // What is still queued is older than the dumps below: read it first so it cannot undo them.
    for (int i = 0; i < 64 && nl_cache_mngr_data_ready(manager) < 0; ++i) {
    }
    if (int err = nl_cache_resync(sync, route_cache, nullptr, nullptr); err < 0)
      return Error{"re-reading the routes after lost netlink events: " + std::string(nl_geterror(err)),
                   ErrorCode::kUnavailable};
    if (int err = nl_cache_resync(sync, neigh_cache, nullptr, nullptr); err < 0)
      return Error{"re-reading the neighbours after lost netlink events: " + std::string(nl_geterror(err)),
                   ErrorCode::kUnavailable};
    readNeighbours();
    routes_changed = true;  // resolves every peer again
    return {};
  }
};

KernelNextHops::KernelNextHops(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelNextHops::~KernelNextHops() = default;

Result<std::unique_ptr<KernelNextHops>> KernelNextHops::open(const Options& options, Listener listener) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->listener = std::move(listener);
  impl->ifindex = static_cast<int>(if_nametoindex(options.iface.c_str()));
  if (impl->ifindex == 0)
    return Error{"the uplink netdev \"" + options.iface +
                     "\" is not in this network namespace: run the dataplane where the uplink is, or set "
                     "resolve_next_hops: false and give next_hops",
                 ErrorCode::kNotFound};
  const auto fail = [](const char* what, int err) {
    return Error{std::string("netlink: ") + what + ": " + nl_geterror(err), ErrorCode::kUnavailable};
  };
  impl->events = nl_socket_alloc();
  impl->sync = nl_socket_alloc();
  if (!impl->events || !impl->sync) return Error{"netlink: out of memory", ErrorCode::kUnavailable};
  if (int err = nl_connect(impl->sync, NETLINK_ROUTE); err < 0) return fail("connect", err);
  // Connects the socket and makes it non-blocking.
  if (int err = nl_cache_mngr_alloc(impl->events, NETLINK_ROUTE, 0, &impl->manager); err < 0)
    return fail("cache manager", err);
  // Before the subscriptions, so a burst right after them has room. FORCE
  // passes net.core.rmem_max (we run as root); else the capped size.
  const int fd = nl_socket_get_fd(impl->events);
  int bytes = options.receive_buffer_bytes;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  // Each add subscribes first, then dumps: nothing changes unseen between the two.
  if (int err = nl_cache_mngr_add(impl->manager, "route/route", &Impl::onRoute, impl.get(), &impl->route_cache); err < 0)
    return fail("route cache", err);
  if (int err = nl_cache_mngr_add(impl->manager, "route/neigh", &Impl::onNeighbour, impl.get(), &impl->neigh_cache);
      err < 0)
    return fail("neighbour cache", err);
  impl->readNeighbours();
  impl->readRoutes();
  DPU_LOG(kInfo, "dataplane") << "tunnel next hops: following the routes and neighbours of " << options.iface
                              << " (ifindex " << impl->ifindex << ") by rtnetlink events, " << impl->routes.size()
                              << " route(s), " << impl->neighbours.size() << " neighbour(s)";
  return std::unique_ptr<KernelNextHops>(new KernelNextHops(std::move(impl)));
}

int KernelNextHops::fd() const { return nl_cache_mngr_get_fd(impl_->manager); }

Result<void> KernelNextHops::dispatch() {
  int read = nl_cache_mngr_data_ready(impl_->manager);
  if (read < 0) {
    // ENOBUFS (NLE_NOMEM): the socket overran and events are lost. Whatever
    // the error, the mirror may be wrong now: read both tables again.
    DPU_LOG(kWarn, "dataplane") << "tunnel next hops: netlink events lost ("
                                << (read == -NLE_NOMEM ? "the receive buffer overran" : nl_geterror(read))
                                << "); re-reading the routes and neighbours of " << impl_->options.iface;
    if (auto again = impl_->resync(); !again) return again;
  } else {
    impl_->stats.events += static_cast<uint64_t>(read);
  }
  impl_->apply();
  return {};
}

void KernelNextHops::watch(const std::vector<IpAddress>& peers) {
  std::set<IpAddress> wanted(peers.begin(), peers.end());
  for (auto it = impl_->peers.begin(); it != impl_->peers.end();) {
    it = wanted.count(it->first) ? std::next(it) : impl_->peers.erase(it);
  }
  for (const auto& address : wanted) {
    auto [it, added] = impl_->peers.try_emplace(address);
    if (added) impl_->resolve(address, it->second);
  }
}

void KernelNextHops::probeUnresolved() {
  for (auto& [address, peer] : impl_->peers)
    if (!peer.mac && peer.hop) impl_->probe(address, peer);
}

std::optional<MacAddress> KernelNextHops::macOf(const IpAddress& peer) const {
  auto it = impl_->peers.find(peer);
  if (it == impl_->peers.end()) return std::nullopt;
  return it->second.mac;
}

KernelNextHops::Stats KernelNextHops::stats() const {
  Stats s = impl_->stats;
  for (const auto& [address, peer] : impl_->peers) ++(peer.mac ? s.resolved : s.unresolved);
  return s;
}

// ---- TunnelNeighbours ----

TunnelNeighbours::TunnelNeighbours(Engine& engine, std::string iface, std::map<IpAddress, MacAddress> static_hops)
    : engine_(engine), iface_(std::move(iface)), static_(std::move(static_hops)) {}

TunnelNeighbours::~TunnelNeighbours() = default;

Result<void> TunnelNeighbours::open() {
  if (iface_.empty() || kernel_) return {};
  auto kernel = KernelNextHops::open(
      KernelNextHops::Options{iface_},
      [this](const IpAddress& peer, const std::optional<MacAddress>& mac, const std::string& why) {
        auto told = told_.find(peer);
        if (mac && told != told_.end() && told->second == *mac) {
          DPU_LOG(kInfo, "dataplane") << "tunnel peer " << peer.str() << " resolved again via " << mac->str();
          return;
        }
        if (mac) {
          tell(peer, *mac);
          return;
        }
        DPU_LOG(kWarn, "dataplane") << "tunnel peer " << peer.str() << ": " << why
                                    << (told != told_.end() ? "; keeping " + told->second.str() + " until it resolves"
                                                            : std::string());
      });
  if (!kernel) return prefixed("tunnel next hops", std::move(kernel).takeError());
  kernel_ = std::move(*kernel);
  return {};
}

int TunnelNeighbours::eventFd() const { return kernel_ ? kernel_->fd() : -1; }

void TunnelNeighbours::onEvents() {
  if (!kernel_) return;
  if (auto done = kernel_->dispatch(); !done) {
    DPU_LOG(kWarn, "dataplane") << "tunnel next hops: " << done.error();
  }
}

void TunnelNeighbours::refresh() {
  std::vector<IpAddress> kernel_peers;
  for (const auto& peer : engine_.wantedTunnelPeers()) {
    if (auto s = static_.find(peer); s != static_.end()) {
      tell(peer, s->second);
    } else {
      kernel_peers.push_back(peer);
    }
  }
  if (!kernel_) return;
  kernel_->watch(kernel_peers);
  kernel_->probeUnresolved();
}

void TunnelNeighbours::tell(const IpAddress& peer, const MacAddress& mac) {
  if (static_.count(peer) && static_.at(peer) != mac) return;  // a static entry wins over the kernel
  auto told = told_.find(peer);
  if (told != told_.end() && told->second == mac) return;
  if (auto set = engine_.setTunnelNextHop(peer, mac); !set) {
    DPU_LOG(kWarn, "dataplane") << "next hop for " << peer.str() << ": " << set.error();
    return;
  }
  DPU_LOG(kInfo, "dataplane") << "tunnel peer " << peer.str() << " via " << mac.str();
  told_[peer] = mac;
}

void TunnelNeighbours::addCounters(dataplane::v1::OperatorReply& reply) const {
  namespace v1 = dataplane::v1;
  uint64_t resolved = 0, unresolved = 0;
  for (const auto& peer : engine_.wantedTunnelPeers()) {
    const bool known = static_.count(peer) || (kernel_ && kernel_->macOf(peer));
    ++(known ? resolved : unresolved);
  }
  auto add = [&](const char* name, uint64_t value, const char* description, v1::CounterKind kind) {
    auto* c = reply.add_counters();
    c->set_name(name);
    c->set_value(value);
    c->set_description(description);
    c->set_kind(kind);
  };
  add("tunnel_peers_resolved", resolved, "remote nodes whose underlay next-hop MAC is known (static or kernel)",
      v1::COUNTER_GAUGE);
  add("tunnel_peers_unresolved", unresolved,
      "remote nodes without an underlay next-hop MAC (no route via the uplink, or its neighbour unresolved)",
      v1::COUNTER_GAUGE);
  if (!kernel_) return;
  const auto s = kernel_->stats();
  add("neighbour_events", s.events, "route and neighbour notifications read from rtnetlink", v1::COUNTER_EVENT);
  add("neighbour_resyncs", s.resyncs, "full re-reads of the routes and neighbours after lost rtnetlink events",
      v1::COUNTER_EVENT);
  add("neighbour_probes", s.probes, "datagrams sent to make the kernel resolve an underlay next hop",
      v1::COUNTER_EVENT);
}

}  // namespace dpu::datapath
