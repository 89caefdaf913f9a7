// Bringing a VF home (see vf_home.h).
#include "host-shim/vf_home.h"

#include "common/log.h"
#include "host-shim/vf_inventory.h"

namespace dpu::hostshim {

namespace {

nl::LinkChange down() {
  nl::LinkChange c;
  c.up = false;
  return c;
}

// Out of the pod's namespace and home under the VF's own name. `held`: the
// namespace DEL kept open, the VF known by ifindex; else the recorded netns.
Result<void> leavePod(nl::Netlink& netlink, nl::Namespace& host, const Attachment& a, nl::Namespace* held,
                      int pod_ifindex) {
  const auto& snap = a.snapshot();
  if (held && pod_ifindex > 0) {
    auto l = held->findLink(pod_ifindex);
    if (!l) return std::move(l).takeError();
    if (!*l) return {};
    if ((*l)->up)
      if (auto r = held->changeLink(pod_ifindex, down()); !r) return r;
    return held->moveLink(pod_ifindex, host, snap.netdev());
  }
  if (a.netns().empty()) return {};
  auto pod = netlink.open(a.netns());
  if (!pod) return {};  // the namespace is gone: the VF is home (a real VF) or gone (a veth)
  // Ours is the link under the pod's name with one of our MACs, or under the
  // VF's own name (a move whose rename failed); never someone else's eth0.
  std::optional<nl::LinkInfo> mine;
  auto by_name = (*pod)->findLink(a.ifname());
  if (!by_name) return std::move(by_name).takeError();
  // A returning VF was set down by DEL; an up one there is a newer ADD's.
  if (*by_name && ((*by_name)->mac.str() == a.dpu().mac() || (*by_name)->mac.str() == snap.mac()) &&
      !(a.returning() && (*by_name)->up))
    mine = **by_name;
  if (!mine) {
    auto by_vf = (*pod)->findLink(snap.netdev());
    if (!by_vf) return std::move(by_vf).takeError();
    if (*by_vf) mine = **by_vf;
  }
  if (!mine) return {};
  if (auto r = (*pod)->changeLink(mine->ifindex, down()); !r) return r;
  return (*pod)->moveLink(mine->ifindex, host, snap.netdev());
}

}  // namespace

Result<bool> bringVfHome(nl::Netlink& netlink, const Config& config, const Attachment& a, nl::Namespace* held,
                         int pod_ifindex) {
  const auto& snap = a.snapshot();
  auto host = netlink.host();
  if (!host) return std::move(host).takeError();
  if (auto r = leavePod(netlink, **host, a, held, pod_ifindex); !r) return std::move(r).takeError();
  // Now in the host netns: under its own name, under the pod's name (only
  // with one of our MACs: the host may have an eth0 of its own, which must
  // never be renamed), or under the name sysfs reports for its PCI address.
  auto ours = [&](const nl::LinkInfo& l) { return l.mac.str() == a.dpu().mac() || l.mac.str() == snap.mac(); };
  std::vector<std::pair<std::string, bool>> names = {{snap.netdev(), false}, {a.ifname(), true}};
  if (auto n = vfNetdevName(config.sysfs_root, a.pci_address())) names.emplace_back(*n, false);
  std::optional<nl::LinkInfo> found;
  for (const auto& [n, check_mac] : names) {
    auto l = (*host)->findLink(n);
    if (!l) return std::move(l).takeError();
    if (*l && (!check_mac || ours(**l))) {
      found = **l;
      break;
    }
  }
  if (!found) {
    DPU_LOG(kInfo, "host-shim") << "VF " << a.pci_address() << " (" << snap.netdev() << ") is gone; nothing to restore";
    return false;
  }
  nl::LinkChange ch = down();
  if (found->name != snap.netdev()) ch.name = snap.netdev();
  if (auto mac = MacAddress::parse(snap.mac())) ch.mac = *mac;
  if (snap.mtu()) ch.mtu = snap.mtu();
  if (auto r = (*host)->changeLink(found->ifindex, ch); !r) return std::move(r).takeError();
  (void)(*host)->flushAddresses(found->ifindex);
  if (snap.has_pf_settings()) {
    const PfConfig* pf = config.pfByIndex(a.pf_index());
    nl::PfVfSettings s;
    if (auto m = MacAddress::parse(snap.admin_mac())) s.admin_mac = *m;
    s.vlan = snap.vlan();
    s.spoofchk = snap.spoofchk();
    s.trust = snap.trust();
    if (pf)
      if (auto r = (*host)->writePfVfSettings(pf->name, a.vf_index(), s); !r) return std::move(r).takeError();
  }
  return true;
}

}  // namespace dpu::hostshim
