// libnl-3 plumbing: the real Netlink (see netlink.h). libnl objects are
// reference counted C structs; the small RAII holders below put every one of
// them back on every path, including errors. The free functions do one
// netlink job each on a Socket; LibnlNamespace at the end binds them to a
// namespace for the interface.
#include "host-shim/netlink.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <netlink/route/route.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

namespace dpu::hostshim::nl {

namespace {

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

template <typename T, void (*Put)(T*)>
struct Holder {
  T* p = nullptr;
  Holder() = default;
  explicit Holder(T* x) : p(x) {}
  ~Holder() {
    if (p) Put(p);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  T** out() { return &p; }
  T* get() const { return p; }
};
using LinkHolder = Holder<rtnl_link, rtnl_link_put>;
using AddrHolder = Holder<nl_addr, nl_addr_put>;
using RtAddrHolder = Holder<rtnl_addr, rtnl_addr_put>;
using RouteHolder = Holder<rtnl_route, rtnl_route_put>;
using CacheHolder = Holder<nl_cache, nl_cache_free>;

std::string nlError(int err) { return nl_geterror(err); }

nl_addr* toNl(const IpAddress& a, int prefixlen) {
  nl_addr* n = nl_addr_build(a.isV4() ? AF_INET : AF_INET6, a.bytes.data(), a.size());
  if (n) nl_addr_set_prefixlen(n, prefixlen);
  return n;
}

std::optional<IpAddress> fromNl(nl_addr* n) {
  if (!n) return std::nullopt;
  IpAddress a;
  int fam = nl_addr_get_family(n);
  unsigned len = nl_addr_get_len(n);
  if (fam == AF_INET && len == 4) {
    a.family = IpAddress::Family::kV4;
  } else if (fam == AF_INET6 && len == 16) {
    a.family = IpAddress::Family::kV6;
  } else {
    return std::nullopt;
  }
  std::memcpy(a.bytes.data(), nl_addr_get_binary_addr(n), len);
  return a;
}

LinkInfo toInfo(rtnl_link* l) {
  LinkInfo i;
  i.ifindex = rtnl_link_get_ifindex(l);
  if (const char* n = rtnl_link_get_name(l)) i.name = n;
  if (nl_addr* a = rtnl_link_get_addr(l); a && nl_addr_get_len(a) == 6)
    std::memcpy(i.mac.bytes.data(), nl_addr_get_binary_addr(a), 6);
  i.mtu = rtnl_link_get_mtu(l);
  i.up = rtnl_link_get_flags(l) & IFF_UP;
  return i;
}

Netns& Netns::operator=(Netns&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

Netns::~Netns() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Netns> Netns::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open network namespace " + path + ": " + std::strerror(errno)};
  int type = ::ioctl(fd, NS_GET_NSTYPE);
  if (type != CLONE_NEWNET) {
    ::close(fd);
    return Error{path + " is not a network namespace"};
  }
  Netns ns;
  ns.fd_ = fd;
  ns.path_ = path;
  return ns;
}

Result<Netns> Netns::current() {
  return open("/proc/" + std::to_string(::getpid()) + "/task/" + std::to_string(::gettid()) + "/ns/net");
}

Result<void> runInNetns(const Netns& ns, const std::function<Result<void>()>& fn) {
  Result<void> out = Error{"not run"};
  std::thread t([&] {
    // Only this thread changes namespace; it ends right after, so no other
    // work ever runs in the wrong netns.
    if (::setns(ns.fd(), CLONE_NEWNET) != 0) {
      out = Error{"cannot enter network namespace " + ns.path() + ": " + std::strerror(errno)};
      return;
    }
    out = fn();
  });
  t.join();
  return out;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (sk_) nl_socket_free(sk_);
    if (ioctl_fd_ >= 0) ::close(ioctl_fd_);
    sk_ = o.sk_;
    ioctl_fd_ = o.ioctl_fd_;
    o.sk_ = nullptr;
    o.ioctl_fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (sk_) nl_socket_free(sk_);
  if (ioctl_fd_ >= 0) ::close(ioctl_fd_);
}

Result<Socket> Socket::open() {
  Socket s;
  s.sk_ = nl_socket_alloc();
  if (!s.sk_) return Error{"cannot allocate a netlink socket"};
  if (int err = nl_connect(s.sk_, NETLINK_ROUTE); err < 0)
    return Error{std::string("cannot open a route netlink socket: ") + nlError(err)};
  nl_socket_set_buffer_size(s.sk_, 1 << 20, 1 << 20);
  s.ioctl_fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s.ioctl_fd_ < 0) return Error{std::string("cannot open a datagram socket: ") + std::strerror(errno)};
  return s;
}

Result<Socket> Socket::openIn(const Netns& ns) {
  Result<Socket> out = Error{"not run"};
  auto r = runInNetns(ns, [&]() -> Result<void> {
    out = open();
    return {};
  });
  if (!r) return std::move(r).takeError();
  return out;
}

Result<std::optional<LinkInfo>> findLink(const Socket& s, int ifindex);

Result<std::optional<LinkInfo>> findLink(const Socket& s, const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return std::optional<LinkInfo>{};
  auto ask = [&](unsigned long request, ifreq& r) {
    std::memset(&r, 0, sizeof(r));
    std::memcpy(r.ifr_name, name.data(), name.size());
    return ::ioctl(s.ioctlFd(), request, &r);
  };
  ifreq r;
  if (ask(SIOCGIFINDEX, r) != 0) {
    if (errno == ENODEV) return std::optional<LinkInfo>{};
    return Error{"cannot read link " + name + ": " + std::strerror(errno)};
  }
  LinkInfo info;
  info.ifindex = r.ifr_ifindex;
  info.name = name;
  if (ask(SIOCGIFHWADDR, r) == 0) std::memcpy(info.mac.bytes.data(), r.ifr_hwaddr.sa_data, 6);
  if (ask(SIOCGIFMTU, r) == 0) info.mtu = r.ifr_mtu;
  if (ask(SIOCGIFFLAGS, r) == 0) info.up = r.ifr_flags & IFF_UP;
  // Renamed or replaced between the calls: read it again by index, under rtnl.
  if (ask(SIOCGIFINDEX, r) != 0 || r.ifr_ifindex != info.ifindex) return findLink(s, info.ifindex);
  return std::optional<LinkInfo>{info};
}

Result<std::optional<LinkInfo>> findLink(const Socket& s, int ifindex) {
  LinkHolder l;
  int err = rtnl_link_get_kernel(s.get(), ifindex, nullptr, l.out());
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return std::optional<LinkInfo>{};
  if (err < 0) return Error{"cannot read link #" + std::to_string(ifindex) + ": " + nlError(err)};
  return std::optional<LinkInfo>{toInfo(l.get())};
}

// MTU, MAC and up/down of `change` onto a change request (the name is the
// caller's: a move names the link in the target netns). `mac` keeps the
// address object alive until the request is sent.
void setLinkAttributes(rtnl_link* ch, const LinkChange& change, AddrHolder& mac) {
  if (change.mtu) rtnl_link_set_mtu(ch, *change.mtu);
  if (change.mac) {
    mac.p = nl_addr_build(AF_LLC, change.mac->bytes.data(), 6);
    rtnl_link_set_addr(ch, mac.get());
  }
  if (change.up) {
    if (*change.up)
      rtnl_link_set_flags(ch, IFF_UP);
    else
      rtnl_link_unset_flags(ch, IFF_UP);
  }
}

Result<void> changeLink(const Socket& s, int ifindex, const LinkChange& change) {
  LinkHolder orig(rtnl_link_alloc());
  LinkHolder ch(rtnl_link_alloc());
  if (!orig.get() || !ch.get()) return Error{"out of memory"};
  rtnl_link_set_ifindex(orig.get(), ifindex);
  if (change.name) rtnl_link_set_name(ch.get(), change.name->c_str());
  AddrHolder mac;
  setLinkAttributes(ch.get(), change, mac);
  if (int err = rtnl_link_change(s.get(), orig.get(), ch.get(), 0); err < 0) {
    std::string what;
    if (change.name) what += " name " + *change.name;
    if (change.mac) what += " mac " + change.mac->str();
    if (change.mtu) what += " mtu " + std::to_string(*change.mtu);
    if (change.up) what += *change.up ? " up" : " down";
    return Error{"cannot set link #" + std::to_string(ifindex) + what + ": " + nlError(err)};
  }
  return {};
}

Result<void> moveLink(const Socket& s, int ifindex, const Netns& to, const std::string& new_name,
                      const LinkChange& also) {
  LinkHolder orig(rtnl_link_alloc());
  LinkHolder ch(rtnl_link_alloc());
  if (!orig.get() || !ch.get()) return Error{"out of memory"};
  rtnl_link_set_ifindex(orig.get(), ifindex);
  rtnl_link_set_ns_fd(ch.get(), to.fd());
  rtnl_link_set_name(ch.get(), new_name.c_str());
  AddrHolder mac;
  setLinkAttributes(ch.get(), also, mac);
  if (int err = rtnl_link_change(s.get(), orig.get(), ch.get(), 0); err < 0) {
    if (err == -NLE_EXIST) return Error{"an interface named " + new_name + " already exists in " + to.path()};
    std::string what;
    if (also.mac) what += " mac " + also.mac->str();
    if (also.mtu) what += " mtu " + std::to_string(*also.mtu);
    if (also.up) what += *also.up ? " up" : " down";
    return Error{"cannot move link #" + std::to_string(ifindex) + " into " + to.path() + " as " + new_name +
                 (what.empty() ? "" : " (with" + what + ")") + ": " + nlError(err)};
  }
  return {};
}

Result<void> addAddress(const Socket& s, int ifindex, const IpInterfaceAddress& a) {
  RtAddrHolder ra(rtnl_addr_alloc());
  AddrHolder local(toNl(a.address, a.length));
  if (!ra.get() || !local.get()) return Error{"out of memory"};
  rtnl_addr_set_ifindex(ra.get(), ifindex);
  rtnl_addr_set_family(ra.get(), a.address.isV4() ? AF_INET : AF_INET6);
  rtnl_addr_set_local(ra.get(), local.get());
  rtnl_addr_set_prefixlen(ra.get(), a.length);
  // No duplicate address detection: the DPU's IPAM owns these addresses, and a
  // tentative address would delay the pod's first packets by a second or more.
  if (!a.address.isV4()) rtnl_addr_set_flags(ra.get(), IFA_F_NODAD);
  int err = rtnl_addr_add(s.get(), ra.get(), 0);
  if (err < 0 && err != -NLE_EXIST) return Error{"cannot add address " + a.str() + ": " + nlError(err)};
  return {};
}

Result<std::vector<IpInterfaceAddress>> listAddresses(const Socket& s, int ifindex) {
  CacheHolder c;
  if (int err = rtnl_addr_alloc_cache(s.get(), c.out()); err < 0)
    return Error{std::string("cannot list addresses: ") + nlError(err)};
  std::vector<IpInterfaceAddress> out;
  for (nl_object* o = nl_cache_get_first(c.get()); o; o = nl_cache_get_next(o)) {
    auto* ra = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(ra) != ifindex) continue;
    auto ip = fromNl(rtnl_addr_get_local(ra));
    if (!ip) continue;
    IpInterfaceAddress a;
    a.address = *ip;
    a.length = static_cast<uint8_t>(rtnl_addr_get_prefixlen(ra));
    out.push_back(a);
  }
  return out;
}

Result<void> flushAddresses(const Socket& s, int ifindex) {
  auto addrs = listAddresses(s, ifindex);
  if (!addrs) return std::move(addrs).takeError();
  for (const auto& a : *addrs) {
    RtAddrHolder ra(rtnl_addr_alloc());
    AddrHolder local(toNl(a.address, a.length));
    rtnl_addr_set_ifindex(ra.get(), ifindex);
    rtnl_addr_set_family(ra.get(), a.address.isV4() ? AF_INET : AF_INET6);
    rtnl_addr_set_local(ra.get(), local.get());
    rtnl_addr_set_prefixlen(ra.get(), a.length);
    int err = rtnl_addr_delete(s.get(), ra.get(), 0);
    if (err < 0 && err != -NLE_NOADDR && err != -NLE_OBJ_NOTFOUND)
      return Error{"cannot remove address " + a.str() + ": " + nlError(err)};
  }
  return {};
}

rtnl_route* buildRoute(int ifindex, const RouteSpec& r) {
  rtnl_route* route = rtnl_route_alloc();
  if (!route) return nullptr;
  int family = r.dst.address.isV4() ? AF_INET : AF_INET6;
  rtnl_route_set_family(route, family);
  rtnl_route_set_table(route, RT_TABLE_MAIN);
  rtnl_route_set_protocol(route, RTPROT_STATIC);
  rtnl_route_set_type(route, RTN_UNICAST);
  nl_addr* dst = toNl(r.dst.address, r.dst.length);
  rtnl_route_set_dst(route, dst);
  nl_addr_put(dst);
  rtnl_route_set_scope(route, r.gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK);
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  rtnl_route_nh_set_ifindex(nh, ifindex);
  if (r.gw) {
    nl_addr* gw = toNl(*r.gw, r.gw->isV4() ? 32 : 128);
    rtnl_route_nh_set_gateway(nh, gw);
    nl_addr_put(gw);
  }
  rtnl_route_add_nexthop(route, nh);  // the route owns nh now
  if (r.mtu) rtnl_route_set_metric(route, RTAX_MTU, r.mtu);
  return route;
}

std::string describe(const RouteSpec& r) {
  std::string s = r.dst.str();
  if (r.gw) s += " via " + r.gw->str();
  if (r.mtu) s += " mtu " + std::to_string(r.mtu);
  return s;
}

Result<void> replaceRoute(const Socket& s, int ifindex, const RouteSpec& r) {
  RouteHolder route(buildRoute(ifindex, r));
  if (!route.get()) return Error{"out of memory"};
  if (int err = rtnl_route_add(s.get(), route.get(), NLM_F_REPLACE); err < 0)
    return Error{"cannot add route " + describe(r) + ": " + nlError(err)};
  return {};
}

Result<std::vector<RouteSpec>> listRoutes(const Socket& s, int ifindex) {
  CacheHolder c;
  if (int err = rtnl_route_alloc_cache(s.get(), AF_UNSPEC, 0, c.out()); err < 0)
    return Error{std::string("cannot list routes: ") + nlError(err)};
  std::vector<RouteSpec> out;
  for (nl_object* o = nl_cache_get_first(c.get()); o; o = nl_cache_get_next(o)) {
    auto* route = reinterpret_cast<rtnl_route*>(o);
    if (rtnl_route_get_table(route) != RT_TABLE_MAIN || rtnl_route_get_nnexthops(route) < 1) continue;
    rtnl_nexthop* nh = rtnl_route_nexthop_n(route, 0);
    if (rtnl_route_nh_get_ifindex(nh) != ifindex) continue;
    RouteSpec spec;
    nl_addr* dst = rtnl_route_get_dst(route);
    auto ip = fromNl(dst);
    if (!ip) {
      // The default route comes without a destination address.
      spec.dst.address.family =
          rtnl_route_get_family(route) == AF_INET6 ? IpAddress::Family::kV6 : IpAddress::Family::kV4;
      spec.dst.length = 0;
    } else {
      spec.dst.address = *ip;
      spec.dst.length = static_cast<uint8_t>(nl_addr_get_prefixlen(dst));
    }
    spec.gw = fromNl(rtnl_route_nh_get_gateway(nh));
    uint32_t mtu = 0;
    if (rtnl_route_get_metric(route, RTAX_MTU, &mtu) == 0) spec.mtu = mtu;
    out.push_back(spec);
  }
  return out;
}

std::optional<PfVfSettings> readPfVfSettings(const Socket& s, const std::string& pf, uint32_t vf) {
  LinkHolder l;
  if (rtnl_link_get_kernel(s.get(), 0, pf.c_str(), l.out()) < 0) return std::nullopt;
  uint32_t num = 0;
  if (rtnl_link_get_num_vf(l.get(), &num) < 0 || vf >= num) return std::nullopt;
  rtnl_link_vf* v = rtnl_link_vf_get(l.get(), vf);
  if (!v) return std::nullopt;
  PfVfSettings out;
  nl_addr* a = nullptr;
  if (rtnl_link_vf_get_addr(v, &a) == 0 && a && nl_addr_get_len(a) >= 6)
    std::memcpy(out.admin_mac.bytes.data(), nl_addr_get_binary_addr(a), 6);
  nl_vf_vlans_t* vlans = nullptr;
  if (rtnl_link_vf_get_vlans(v, &vlans) == 0 && vlans && vlans->size > 0) out.vlan = vlans->vlans[0].vf_vlan;
  uint32_t x = 0;
  if (rtnl_link_vf_get_spoofchk(v, &x) == 0) out.spoofchk = x != 0;
  if (rtnl_link_vf_get_trust(v, &x) == 0) out.trust = x != 0;
  rtnl_link_vf_put(v);
  return out;
}

Result<void> writePfVfSettings(const Socket& s, const std::string& pf, uint32_t vf, const PfVfSettings& v) {
  LinkHolder orig;
  if (int err = rtnl_link_get_kernel(s.get(), 0, pf.c_str(), orig.out()); err < 0)
    return Error{"cannot read PF " + pf + ": " + nlError(err)};
  LinkHolder ch(rtnl_link_alloc());
  rtnl_link_vf* info = rtnl_link_vf_alloc();
  rtnl_link_vf_set_index(info, vf);
  AddrHolder mac(nl_addr_build(AF_LLC, v.admin_mac.bytes.data(), 6));
  rtnl_link_vf_set_addr(info, mac.get());
  rtnl_link_vf_set_spoofchk(info, v.spoofchk);
  rtnl_link_vf_set_trust(info, v.trust);
  nl_vf_vlans_t* vlans = nullptr;
  if (rtnl_link_vf_vlan_alloc(&vlans, 1) == 0) {
    vlans->vlans[0].vf_vlan = v.vlan;
    vlans->vlans[0].vf_vlan_qos = 0;
    vlans->vlans[0].vf_vlan_proto = ETH_P_8021Q;
    rtnl_link_vf_set_vlans(info, vlans);
    rtnl_link_vf_vlan_put(vlans);
  }
  rtnl_link_vf_add(ch.get(), info);
  rtnl_link_vf_put(info);
  if (int err = rtnl_link_change(s.get(), orig.get(), ch.get(), 0); err < 0)
    return Error{"cannot restore the PF-side settings of VF " + std::to_string(vf) + " on " + pf + ": " + nlError(err)};
  return {};
}

uint16_t checksum16(const uint8_t* data, size_t len, uint32_t sum) {
  for (size_t i = 0; i + 1 < len; i += 2) sum += (data[i] << 8) | data[i + 1];
  if (len & 1) sum += data[len - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

std::vector<uint8_t> garpFrame(const MacAddress& mac, const IpAddress& ip) {
  std::vector<uint8_t> f(42, 0);
  std::memset(f.data(), 0xff, 6);
  std::memcpy(f.data() + 6, mac.bytes.data(), 6);
  f[12] = 0x08, f[13] = 0x06;
  uint8_t* a = f.data() + 14;
  a[0] = 0, a[1] = 1, a[2] = 0x08, a[3] = 0, a[4] = 6, a[5] = 4, a[6] = 0, a[7] = 1;  // request
  std::memcpy(a + 8, mac.bytes.data(), 6);
  std::memcpy(a + 14, ip.bytes.data(), 4);
  std::memcpy(a + 24, ip.bytes.data(), 4);  // target = sender: gratuitous
  return f;
}

// RFC 4861 section 4.4 with the Override flag, to all-nodes (section 7.2.6).
std::vector<uint8_t> unsolicitedNa(const MacAddress& mac, const IpAddress& ip) {
  std::vector<uint8_t> f(14 + 40 + 32, 0);
  const uint8_t all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  f[0] = 0x33, f[1] = 0x33, f[5] = 0x01;
  std::memcpy(f.data() + 6, mac.bytes.data(), 6);
  f[12] = 0x86, f[13] = 0xdd;
  uint8_t* h = f.data() + 14;
  h[0] = 0x60;
  h[5] = 32;   // payload length
  h[6] = 58;   // ICMPv6
  h[7] = 255;  // hop limit, as RFC 4861 requires
  std::memcpy(h + 8, ip.bytes.data(), 16);
  std::memcpy(h + 24, all_nodes, 16);
  uint8_t* icmp = h + 40;
  icmp[0] = 136;
  icmp[4] = 0x20;  // Override
  std::memcpy(icmp + 8, ip.bytes.data(), 16);
  icmp[24] = 2, icmp[25] = 1;  // target link-layer address option
  std::memcpy(icmp + 26, mac.bytes.data(), 6);
  uint32_t sum = 0;
  for (int i = 0; i < 32; i += 2) sum += (h[8 + i] << 8) | h[9 + i];
  sum += 32 + 58;
  uint16_t c = checksum16(icmp, 32, sum);
  icmp[2] = static_cast<uint8_t>(c >> 8), icmp[3] = static_cast<uint8_t>(c);
  return f;
}

Result<void> announceAddresses(const Netns& ns, int ifindex, const MacAddress& mac,
                               const std::vector<IpInterfaceAddress>& addrs) {
  int fd = -1;
  auto r = runInNetns(ns, [&]() -> Result<void> {
    fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error{std::string("cannot open a packet socket: ") + std::strerror(errno)};
    return {};
  });
  if (!r) return r;
  std::string failures;
  for (const auto& a : addrs) {
    auto frame = a.address.isV4() ? garpFrame(mac, a.address) : unsolicitedNa(mac, a.address);
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = ifindex;
    to.sll_halen = 6;
    to.sll_protocol = htons(a.address.isV4() ? ETH_P_ARP : ETH_P_IPV6);
    std::memcpy(to.sll_addr, frame.data(), 6);
    if (::sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0)
      failures += " " + a.str() + ": " + std::strerror(errno);
  }
  // Closing a packet socket waits for an RCU grace period (synchronize_net in
  // packet_release), ~10 ms on a busy host: close it off the ADD's path.
  std::thread([fd] { ::close(fd); }).detach();
  if (!failures.empty()) return Error{"cannot announce addresses:" + failures};
  return {};
}

// A namespace and, opened on first use, its netlink socket: an ADD reads and
// plumbs the pod's netns through one socket (one thread that setns()es).
class LibnlNamespace final : public Namespace {
 public:
  // `own`: the namespace opened for this session; else `shared` (host-shim's
  // own, opened once) with a socket of the caller's netns.
  LibnlNamespace(Netns own, std::shared_ptr<const Netns> shared)
      : own_(std::move(own)), shared_(std::move(shared)) {}

  const std::string& path() const override { return ns().path(); }
  const Netns& ns() const { return shared_ ? *shared_ : own_; }

  Result<std::optional<LinkInfo>> findLink(const std::string& name) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::findLink(**s, name);
  }
  Result<std::optional<LinkInfo>> findLink(int ifindex) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::findLink(**s, ifindex);
  }
  Result<void> changeLink(int ifindex, const LinkChange& change) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::changeLink(**s, ifindex, change);
  }
  Result<void> moveLink(int ifindex, Namespace& to, const std::string& new_name, const LinkChange& also) override {
    auto* target = dynamic_cast<LibnlNamespace*>(&to);
    if (!target) return Error{"cannot move a link into a namespace of another Netlink"};
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::moveLink(**s, ifindex, target->ns(), new_name, also);
  }
  Result<void> addAddress(int ifindex, const IpInterfaceAddress& a) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::addAddress(**s, ifindex, a);
  }
  Result<std::vector<IpInterfaceAddress>> listAddresses(int ifindex) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::listAddresses(**s, ifindex);
  }
  Result<void> flushAddresses(int ifindex) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::flushAddresses(**s, ifindex);
  }
  Result<void> replaceRoute(int ifindex, const RouteSpec& r) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::replaceRoute(**s, ifindex, r);
  }
  Result<std::vector<RouteSpec>> listRoutes(int ifindex) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::listRoutes(**s, ifindex);
  }
  std::optional<PfVfSettings> readPfVfSettings(const std::string& pf, uint32_t vf) override {
    auto s = sock();
    if (!s) return std::nullopt;
    return nl::readPfVfSettings(**s, pf, vf);
  }
  Result<void> writePfVfSettings(const std::string& pf, uint32_t vf, const PfVfSettings& v) override {
    auto s = sock();
    if (!s) return std::move(s).takeError();
    return nl::writePfVfSettings(**s, pf, vf, v);
  }
  Result<void> announceAddresses(int ifindex, const MacAddress& mac,
                                 const std::vector<IpInterfaceAddress>& addrs) override {
    return nl::announceAddresses(ns(), ifindex, mac, addrs);
  }

 private:
  Result<Socket*> sock() {
    if (!socket_) {
      auto s = shared_ ? Socket::open() : Socket::openIn(own_);
      if (!s) return std::move(s).takeError();
      socket_ = std::move(*s);
    }
    return &*socket_;
  }

  Netns own_;
  std::shared_ptr<const Netns> shared_;
  std::optional<Socket> socket_;
};

class LibnlNetlink final : public Netlink {
 public:
  explicit LibnlNetlink(Result<Netns> host) {
    if (host)
      host_ = std::make_shared<const Netns>(std::move(*host));
    else
      host_error_ = host.error();
  }
  Result<std::unique_ptr<Namespace>> host() override {
    if (!host_) return Error{"cannot open host-shim's own network namespace: " + host_error_};
    return std::unique_ptr<Namespace>(std::make_unique<LibnlNamespace>(Netns(), host_));
  }
  Result<std::unique_ptr<Namespace>> open(const std::string& path) override {
    auto ns = Netns::open(path);
    if (!ns) return std::move(ns).takeError();
    return std::unique_ptr<Namespace>(std::make_unique<LibnlNamespace>(std::move(*ns), nullptr));
  }

 private:
  std::shared_ptr<const Netns> host_;
  std::string host_error_;
};

}  // namespace

std::unique_ptr<Netlink> libnlNetlink() { return std::make_unique<LibnlNetlink>(Netns::current()); }

}  // namespace dpu::hostshim::nl
