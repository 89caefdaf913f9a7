// FakeNetlink: host-shim's nl::Netlink (host-shim/include/host-shim/netlink.h)
// in memory, for in-process tests of the attach service. It keeps the state
// the kernel keeps and refuses what the kernel refuses:
//   - network namespaces by path, each with its links; a namespace held open
//     (a Namespace object alive) outlives `deleteNetns` as one held by an fd
//     does, and when the last holder goes its links die (a veth "VF") or come
//     back to the host netns (a real VF);
//   - links with ifindex, name (1-15 characters, unique per namespace), MAC
//     (unicast, non-zero), MTU (68..the device's maximum), up/down; renaming a
//     link that is up is refused (EBUSY, as kernels before live renaming do:
//     production hosts run those); a move to another namespace takes the link
//     down and drops its addresses and routes, and its `also` changes apply
//     after the move (an error leaves it moved);
//   - addresses per link; routes per namespace (main table, replace by dst): a
//     route needs its link up and its gateway on one of the link's networks;
//     taking a link down drops its routes;
//   - PF-side VF settings for PFs declared with setPf();
//   - the addresses announced (gratuitous ARP / NA), per link.
// Every operation asks the FaultPlan first ("nl.open", "nl.host",
// "nl.findLink", "nl.changeLink", "nl.moveLink", "nl.addAddress",
// "nl.listAddresses", "nl.flushAddresses", "nl.replaceRoute",
// "nl.listRoutes", "nl.readPfVfSettings", "nl.writePfVfSettings",
// "nl.announce"). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fault_plan.h"
#include "host-shim/netlink.h"

namespace dpu::fakes {

class FakeNetlink final : public hostshim::nl::Netlink {
 public:
  static constexpr const char* kHostPath = "/proc/self/ns/net";

  struct Link {
    int ifindex = 0;
    std::string name;
    MacAddress mac;
    uint32_t mtu = 1500;
    uint32_t max_mtu = 65535;
    bool up = false;
    bool real_vf = false;  // comes home when its namespace dies, instead of dying with it
    std::vector<IpInterfaceAddress> addresses;
  };
  struct Route {
    int ifindex = 0;
    hostshim::nl::RouteSpec spec;
  };

  explicit FakeNetlink(FaultPlan& faults);
  ~FakeNetlink() override;

  Result<std::unique_ptr<hostshim::nl::Namespace>> host() override;
  Result<std::unique_ptr<hostshim::nl::Namespace>> open(const std::string& path) override;

  // Set-up and inspection by tests.
  void addNetns(const std::string& path);
  // As `ip netns del`: the path goes; the namespace dies once no one holds it.
  void deleteNetns(const std::string& path);
  bool netnsExists(const std::string& path) const;
  // Adds a link to the namespace at `path` (kHostPath: host-shim's); its ifindex.
  int addLink(const std::string& path, const std::string& name, const MacAddress& mac, uint32_t mtu,
              bool real_vf = false);
  void removeLink(const std::string& path, const std::string& name);
  std::optional<Link> link(const std::string& path, const std::string& name) const;
  std::vector<Link> links(const std::string& path) const;
  std::vector<Route> routes(const std::string& path) const;
  void setPf(const std::string& pf, uint32_t num_vfs);
  std::optional<hostshim::nl::PfVfSettings> pfSettings(const std::string& pf, uint32_t vf) const;
  void setPfSettings(const std::string& pf, uint32_t vf, const hostshim::nl::PfVfSettings& s);
  // How many announcements were sent for addresses of link `ifindex`.
  size_t announcements(int ifindex) const;

  struct NsState;  // one namespace's links and routes

 private:
  class FakeNamespace;
  friend class FakeNamespace;

  void releaseLocked(const std::shared_ptr<NsState>& ns);
  void destroyLocked(NsState& ns);
  std::shared_ptr<NsState> byPathLocked(const std::string& path) const;

  FaultPlan& faults_;
  mutable std::mutex mu_;
  std::shared_ptr<NsState> host_;
  std::map<std::string, std::shared_ptr<NsState>> by_path_;
  int next_ifindex_ = 2;  // 1 is lo
  std::map<std::pair<std::string, uint32_t>, hostshim::nl::PfVfSettings> pf_settings_;
  std::map<std::string, uint32_t> pfs_;
  std::map<int, size_t> announced_;
};

// A host with a fake SR-IOV PF, as tests/fakes/fake-sysfs.bash makes one: the
// sysfs tree under `sysfs_root` (what host-shim's VF inventory reads) and, in
// FakeNetlink's host netns, one link per VF named <prefix>v<i> with PCI
// address 0000:3b:DD.F (DD.F = i+2), MTU 1500 and a MAC of its own.
void makeFakeSriovHost(FakeNetlink& netlink, const std::string& sysfs_root, const std::string& pf, uint32_t num_vfs,
                       const std::string& prefix, bool real_vfs = false);
std::string fakeVfPci(uint32_t i);
std::string fakeVfName(const std::string& prefix, uint32_t i);

}  // namespace dpu::fakes
