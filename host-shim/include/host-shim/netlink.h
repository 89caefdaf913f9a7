// Netlink plumbing for VFs, through libnl-3 only (never exec `ip`): network
// namespaces, link moves and renames, MAC/MTU/up, addresses, routes, VF state
// snapshots (incl. the PF-side settings the driver reports in IFLA_VFINFO_LIST)
// and gratuitous ARP / unsolicited NA.
//
// Namespaces: a netlink or packet socket belongs to the netns it was created
// in. To work inside a pod's netns we create the socket on a short-lived
// thread that setns()es into it, then use the socket from any thread; the
// daemon's own threads never change namespace. Every call is synchronous and
// returns a Result saying what failed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

struct nl_sock;

namespace dpu::hostshim::nl {

// An open network namespace (a file descriptor on /proc/.../ns/net or /run/netns/<name>).
class Netns {
 public:
  Netns() = default;
  Netns(Netns&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  Netns& operator=(Netns&& o) noexcept;
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  ~Netns();

  // Fails when the path does not exist or is not a network namespace.
  static Result<Netns> open(const std::string& path);
  static Result<Netns> current();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Runs `fn` on a fresh thread that has joined `ns`, and waits for it.
Result<void> runInNetns(const Netns& ns, const std::function<Result<void>()>& fn);

// A route netlink socket bound to one netns, with a datagram socket of the
// same netns for the interface ioctls that read a link without rtnl.
class Socket {
 public:
  Socket() = default;
  Socket(Socket&& o) noexcept : sk_(o.sk_), ioctl_fd_(o.ioctl_fd_) {
    o.sk_ = nullptr;
    o.ioctl_fd_ = -1;
  }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  static Result<Socket> open();                   // in the caller's netns
  static Result<Socket> openIn(const Netns& ns);  // in ns
  nl_sock* get() const { return sk_; }
  int ioctlFd() const { return ioctl_fd_; }

 private:
  nl_sock* sk_ = nullptr;
  int ioctl_fd_ = -1;
};

struct LinkInfo {
  int ifindex = 0;
  std::string name;
  MacAddress mac;
  uint32_t mtu = 0;
  bool up = false;
};

// nullopt (not an error) when no such link exists.
// By name: through SIOCGIF* ioctls, which the kernel answers under RCU — an
// RTM_GETLINK takes rtnl and so waits behind any netns move in progress (15-25
// ms each), which would put every other pod's move into this request's latency.
Result<std::optional<LinkInfo>> findLink(const Socket& s, const std::string& name);
Result<std::optional<LinkInfo>> findLink(const Socket& s, int ifindex);
Result<std::vector<LinkInfo>> listLinks(const Socket& s);

struct LinkChange {
  std::optional<std::string> name;
  std::optional<MacAddress> mac;
  std::optional<uint32_t> mtu;
  std::optional<bool> up;
};
Result<void> changeLink(const Socket& s, int ifindex, const LinkChange& change);
// Moves a link into `to` and names it `new_name` there in one request, so the
// name can never collide with a link of the source netns (EEXIST in the target
// is reported as such). `also` (MAC, MTU, up; not name) rides in the same
// RTM_NEWLINK: the kernel applies it to the moved link right after the move,
// so the pod's interface costs one rtnl round instead of four. On an error the
// link may be moved but not configured: undo as for a failed move.
Result<void> moveLink(const Socket& s, int ifindex, const Netns& to, const std::string& new_name,
                      const LinkChange& also = {});

Result<void> addAddress(const Socket& s, int ifindex, const IpInterfaceAddress& a);
Result<std::vector<IpInterfaceAddress>> listAddresses(const Socket& s, int ifindex);
Result<void> flushAddresses(const Socket& s, int ifindex);

struct RouteSpec {
  IpPrefix dst;
  std::optional<IpAddress> gw;
  uint32_t mtu = 0;
};
// Adds or replaces (same dst in the main table) a route through ifindex.
Result<void> replaceRoute(const Socket& s, int ifindex, const RouteSpec& r);
Result<void> deleteRoute(const Socket& s, int ifindex, const RouteSpec& r);
Result<std::vector<RouteSpec>> listRoutes(const Socket& s, int ifindex);

// PF-side settings of one VF, where the PF driver reports them.
struct PfVfSettings {
  MacAddress admin_mac;
  uint32_t vlan = 0;
  bool spoofchk = false;
  bool trust = false;
};
// nullopt when the PF is absent or its driver reports no VF list (veths).
std::optional<PfVfSettings> readPfVfSettings(const Socket& s, const std::string& pf, uint32_t vf);
Result<void> writePfVfSettings(const Socket& s, const std::string& pf, uint32_t vf, const PfVfSettings& v);

// Gratuitous ARP for IPv4 addresses, unsolicited neighbour advertisement for
// IPv6 ones, sent from a packet socket inside `ns` on ifindex.
Result<void> announceAddresses(const Netns& ns, int ifindex, const MacAddress& mac,
                               const std::vector<IpInterfaceAddress>& addrs);

}  // namespace dpu::hostshim::nl
