// The DPU's answer as netlink steps (see pod_plumbing.h).
#include "host-shim/pod_plumbing.h"

#include <algorithm>

#include "common/log.h"

namespace dpu::hostshim {

Result<std::vector<nl::RouteSpec>> routesFor(const attach::v1::Attachment& a) {
  std::vector<nl::RouteSpec> out;
  bool default4 = false, default6 = false;
  for (const auto& r : a.routes()) {
    auto dst = IpPrefix::parse(r.dst(), true);
    if (!dst) return Error{"the DPU agent answered a bad route dst '" + r.dst() + "': " + dst.error()};
    nl::RouteSpec s{*dst, std::nullopt, r.mtu()};
    if (!r.gw().empty()) {
      auto gw = IpAddress::parse(r.gw());
      if (!gw) return Error{"the DPU agent answered a bad route gw '" + r.gw() + "': " + gw.error()};
      s.gw = *gw;
    }
    if (dst->length == 0) (dst->address.isV4() ? default4 : default6) = true;
    out.push_back(s);
  }
  for (const auto& ip : a.ips()) {
    if (ip.gateway().empty()) continue;
    auto gw = IpAddress::parse(ip.gateway());
    if (!gw) return Error{"the DPU agent answered a bad gateway '" + ip.gateway() + "'"};
    bool& have = gw->isV4() ? default4 : default6;
    if (have) continue;
    have = true;
    nl::RouteSpec s;
    s.dst.address.family = gw->family;
    s.dst.length = 0;
    s.gw = *gw;
    s.mtu = 0;
    out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return !x.gw && y.gw; });
  return out;
}

Result<std::vector<IpInterfaceAddress>> addressesFor(const attach::v1::Attachment& a) {
  std::vector<IpInterfaceAddress> out;
  for (const auto& ip : a.ips()) {
    auto p = IpInterfaceAddress::parse(ip.address());
    if (!p) return Error{"the DPU agent answered a bad address '" + ip.address() + "': " + p.error()};
    out.push_back(*p);
  }
  return out;
}

Result<void> plumbPod(nl::Namespace& ns, const std::string& ifname, const attach::v1::Attachment& dpu, bool replace,
                      bool link_set) {
  auto link = ns.findLink(ifname);
  if (!link) return std::move(link).takeError();
  if (!*link) return Error{"interface " + ifname + " is not in " + ns.path()};
  int idx = (*link)->ifindex;
  nl::LinkChange ch;
  auto mac = MacAddress::parse(dpu.mac());
  if (!mac) return Error{"the DPU agent answered a bad MAC '" + dpu.mac() + "'"};
  ch.mac = *mac;
  if (dpu.mtu()) ch.mtu = dpu.mtu();
  if (replace) ch.up = false;
  if (!link_set)
    if (auto r = ns.changeLink(idx, ch); !r) return r;
  auto addrs = addressesFor(dpu);
  if (!addrs) return std::move(addrs).takeError();
  auto routes = routesFor(dpu);
  if (!routes) return std::move(routes).takeError();
  if (replace)
    if (auto r = ns.flushAddresses(idx); !r) return r;
  if (!link_set) {
    nl::LinkChange up;
    up.up = true;
    if (auto r = ns.changeLink(idx, up); !r) return r;
  }
  for (const auto& a : *addrs)
    if (auto r = ns.addAddress(idx, a); !r) return r;
  for (const auto& r : *routes)
    if (auto done = ns.replaceRoute(idx, r); !done) return done;
  if (auto r = ns.announceAddresses(idx, *mac, *addrs); !r) {
    // Not fatal: the neighbours learn the address from the pod's first packet.
    DPU_LOG(kWarn, "host-shim") << ifname << " in " << ns.path() << ": " << r.error();
  }
  return {};
}

}  // namespace dpu::hostshim
