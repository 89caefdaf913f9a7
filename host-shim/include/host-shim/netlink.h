// Netlink plumbing for VFs, as an interface: network namespaces, link moves
// and renames, MAC/MTU/up, addresses, routes, VF state snapshots (incl. the
// PF-side settings the driver reports in IFLA_VFINFO_LIST) and gratuitous ARP
// / unsolicited NA. The rest of host-shim sees only Netlink and Namespace;
// libnlNetlink() is the real one (libnl-3 only, never exec `ip`), and
// tests/fakes' FakeNetlink keeps the same state in memory for in-process tests.
//
// Namespaces (the real implementation): a netlink or packet socket belongs to
// the netns it was created in. To work inside a pod's netns the socket is
// created on a short-lived thread that setns()es into it, then used from any
// thread; the daemon's own threads never change namespace. Every call is
// synchronous and returns a Result saying what failed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::hostshim::nl {

struct LinkInfo {
  int ifindex = 0;
  std::string name;
  MacAddress mac;
  uint32_t mtu = 0;
  bool up = false;
};

struct LinkChange {
  std::optional<std::string> name;
  std::optional<MacAddress> mac;
  std::optional<uint32_t> mtu;
  std::optional<bool> up;
};

struct RouteSpec {
  IpPrefix dst;
  std::optional<IpAddress> gw;
  uint32_t mtu = 0;
};

// PF-side settings of one VF, where the PF driver reports them.
struct PfVfSettings {
  MacAddress admin_mac;
  uint32_t vlan = 0;
  bool spoofchk = false;
  bool trust = false;
};

// One network namespace, held open as long as this object lives (so neither a
// runtime's unmount nor `ip netns del` can destroy it meanwhile), with a
// netlink session in it. One thread at a time.
class Namespace {
 public:
  virtual ~Namespace() = default;
  virtual const std::string& path() const = 0;

  // nullopt (not an error) when no such link exists.
  // By name, the real one reads through SIOCGIF* ioctls, which the kernel
  // answers under RCU: an RTM_GETLINK takes rtnl and so waits behind any netns
  // move in progress (15-25 ms each), which would put every other pod's move
  // into this request's latency.
  virtual Result<std::optional<LinkInfo>> findLink(const std::string& name) = 0;
  virtual Result<std::optional<LinkInfo>> findLink(int ifindex) = 0;

  virtual Result<void> changeLink(int ifindex, const LinkChange& change) = 0;
  // Moves a link into `to` and names it `new_name` there in one request, so
  // the name can never collide with a link of the source netns (EEXIST in the
  // target is reported as such). `also` (MAC, MTU, up; not name) rides in the
  // same RTM_NEWLINK: the kernel applies it to the moved link right after the
  // move, so the pod's interface costs one rtnl round instead of four. On an
  // error the link may be moved but not configured: undo as for a failed move.
  virtual Result<void> moveLink(int ifindex, Namespace& to, const std::string& new_name,
                                const LinkChange& also = {}) = 0;

  virtual Result<void> addAddress(int ifindex, const IpInterfaceAddress& a) = 0;
  virtual Result<std::vector<IpInterfaceAddress>> listAddresses(int ifindex) = 0;
  virtual Result<void> flushAddresses(int ifindex) = 0;

  // Adds or replaces (same dst in the main table) a route through ifindex.
  virtual Result<void> replaceRoute(int ifindex, const RouteSpec& r) = 0;
  virtual Result<std::vector<RouteSpec>> listRoutes(int ifindex) = 0;

  // nullopt when the PF is absent or its driver reports no VF list (veths).
  virtual std::optional<PfVfSettings> readPfVfSettings(const std::string& pf, uint32_t vf) = 0;
  virtual Result<void> writePfVfSettings(const std::string& pf, uint32_t vf, const PfVfSettings& v) = 0;

  // Gratuitous ARP for IPv4 addresses, unsolicited neighbour advertisement
  // for IPv6 ones, sent on ifindex of this namespace.
  virtual Result<void> announceAddresses(int ifindex, const MacAddress& mac,
                                         const std::vector<IpInterfaceAddress>& addrs) = 0;
};

class Netlink {
 public:
  virtual ~Netlink() = default;
  // host-shim's own netns, where the VFs live: a fresh session per call (a
  // netlink session serves one thread).
  virtual Result<std::unique_ptr<Namespace>> host() = 0;
  // A pod's netns by path. Fails when the path does not exist or is not a
  // network namespace.
  virtual Result<std::unique_ptr<Namespace>> open(const std::string& path) = 0;
};

// The real one, through libnl-3.
std::unique_ptr<Netlink> libnlNetlink();

}  // namespace dpu::hostshim::nl
