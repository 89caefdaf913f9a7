// The host management port (see management_port.h).
#include "host-shim/management_port.h"

#include <algorithm>

#include "common/log.h"
#include "host-shim/pod_plumbing.h"

namespace dpu::hostshim {

ManagementPort::ManagementPort(const ManagementPortConfig& config, const std::vector<VfInfo>& vfs,
                               nl::Netlink& netlink, DpuApi& dpu, AllocationStore& store, AttachmentBook& book)
    : config_(config), vfs_(vfs), netlink_(netlink), dpu_(dpu), store_(store), book_(book) {}

const VfInfo* ManagementPort::vf() const {
  for (const auto& v : vfs_)
    if (v.pf_index == config_.pf_index && v.vf_index == config_.vf_index) return &v;
  return nullptr;
}

bool ManagementPort::intact() {
  auto host = netlink_.host();
  if (!host) return true;  // cannot tell; do not churn
  const VfInfo* v = vf();
  std::string name = !config_.ifname.empty() ? config_.ifname : (v ? v->netdev : "");
  auto link = (*host)->findLink(name);
  if (!link || !*link || !(*link)->up) return false;
  auto addrs = (*host)->listAddresses((*link)->ifindex);
  if (!addrs) return true;
  const attach::v1::Attachment management = book_.management();
  for (const auto& ip : management.ips()) {
    auto want = IpInterfaceAddress::parse(ip.address());
    if (want && std::find(addrs->begin(), addrs->end(), *want) == addrs->end()) return false;
  }
  return true;
}

Result<void> ManagementPort::setup() {
  const VfInfo* v = vf();
  if (!v)
    return Error{"VF " + std::to_string(config_.vf_index) + " of PF " + std::to_string(config_.pf_index) +
                 " is not in sysfs"};
  auto c = store_.claim({{v->pf_index, v->vf_index}, kManagementOwner, v->pci_address});
  if (!c.ok()) return std::move(c).takeError();
  auto host = netlink_.host();
  if (!host) return std::move(host).takeError();
  std::optional<nl::LinkInfo> link;
  for (const auto& name : {config_.ifname, v->netdev}) {
    if (name.empty()) continue;
    auto l = (*host)->findLink(name);
    if (!l) return std::move(l).takeError();
    if (*l) {
      link = **l;
      break;
    }
  }
  if (!link) return Error{"the management VF's netdev " + v->netdev + " is not in the host netns"};
  attach::v1::AttachRequest ar;
  ar.set_kind(attach::v1::MANAGEMENT);
  ar.set_pf_index(v->pf_index);
  ar.set_vf_index(v->vf_index);
  ar.set_vf_mac(link->mac.str());
  ar.set_host_instance(book_.hostInstance());
  auto answer = dpu_.attach(ar);
  if (!answer.ok()) return std::move(answer).takeError();
  const auto& d = answer->attachment();
  nl::LinkChange ch;
  auto mac = MacAddress::parse(d.mac());
  if (!mac) return Error{"the DPU agent answered a bad MAC '" + d.mac() + "'"};
  ch.mac = *mac;
  if (d.mtu()) ch.mtu = d.mtu();
  if (!config_.ifname.empty() && link->name != config_.ifname) {
    // Older kernels rename only a link that is down.
    nl::LinkChange down;
    down.up = false;
    if (auto r = (*host)->changeLink(link->ifindex, down); !r) return r;
    ch.name = config_.ifname;
  }
  if (auto r = (*host)->changeLink(link->ifindex, ch); !r) return r;
  nl::LinkChange up;
  up.up = true;
  if (auto r = (*host)->changeLink(link->ifindex, up); !r) return r;
  auto addrs = addressesFor(d);
  if (!addrs) return std::move(addrs).takeError();
  for (const auto& a : *addrs)
    if (auto r = (*host)->addAddress(link->ifindex, a); !r) return r;
  std::optional<IpAddress> gw4, gw6;
  for (const auto& ip : d.ips()) {
    auto g = IpAddress::parse(ip.gateway());
    if (!g) continue;
    (g->isV4() ? gw4 : gw6) = *g;
  }
  std::vector<std::string> cidrs = config_.cluster_cidrs;
  cidrs.insert(cidrs.end(), config_.service_cidrs.begin(), config_.service_cidrs.end());
  for (const auto& text : cidrs) {
    auto p = IpPrefix::parse(text);
    if (!p) continue;
    nl::RouteSpec r;
    r.dst = *p;
    r.gw = p->address.isV4() ? gw4 : gw6;
    // The management address's own subnet is on-link already.
    bool own = false;
    for (const auto& a : *addrs) own = own || (a.network() == *p);
    if (own) continue;
    if (auto done = (*host)->replaceRoute(link->ifindex, r); !done) return done;
  }
  if (auto r = (*host)->announceAddresses(link->ifindex, *mac, *addrs); !r) {
    DPU_LOG(kWarn, "host-shim") << "management port: " << r.error();
  }
  if (auto r = book_.setManagement(d); !r) return r;
  DPU_LOG(kInfo, "host-shim") << "management port " << (config_.ifname.empty() ? link->name : config_.ifname)
                              << " up with " << (d.ips().empty() ? std::string("no address") : d.ips(0).address());
  return {};
}

}  // namespace dpu::hostshim
