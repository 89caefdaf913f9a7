// The in-memory netlink (see fake_netlink.h). Error texts read like the real
// implementation's (host-shim/src/netlink.cpp), errno text included, so the
// messages tests see are the ones an operator would.
#include "fake_netlink.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace dpu::fakes {

namespace nl = hostshim::nl;
namespace fs = std::filesystem;

struct FakeNetlink::NsState {
  std::string path;
  bool mounted = true;  // reachable by path (until deleteNetns)
  int holders = 0;      // Namespace objects alive
  bool dead = false;
  std::map<int, Link> links;
  std::vector<Route> routes;
};

namespace {

bool validName(const std::string& s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (c <= ' ' || c == '/' || c == ':') return false;
  return true;
}

bool reachable(const FakeNetlink::Link& l, const std::vector<FakeNetlink::Route>& routes, const IpAddress& gw) {
  for (const auto& a : l.addresses)
    if (a.network().contains(gw)) return true;
  for (const auto& r : routes)
    if (r.ifindex == l.ifindex && !r.spec.gw && r.spec.dst.contains(gw)) return true;
  return false;
}

std::string describe(const nl::LinkChange& c) {
  std::string what;
  if (c.name) what += " name " + *c.name;
  if (c.mac) what += " mac " + c.mac->str();
  if (c.mtu) what += " mtu " + std::to_string(*c.mtu);
  if (c.up) what += *c.up ? " up" : " down";
  return what;
}

}  // namespace

class FakeNetlink::FakeNamespace final : public nl::Namespace {
 public:
  FakeNamespace(FakeNetlink& owner, std::shared_ptr<NsState> ns) : owner_(owner), ns_(std::move(ns)), path_(ns_->path) {}
  ~FakeNamespace() override {
    std::lock_guard lk(owner_.mu_);
    owner_.releaseLocked(ns_);
  }

  const std::string& path() const override { return path_; }

  Result<std::optional<nl::LinkInfo>> findLink(const std::string& name) override {
    if (auto e = owner_.faults_.check("nl.findLink")) return *e;
    std::lock_guard lk(owner_.mu_);
    for (const auto& [i, l] : ns_->links)
      if (l.name == name) return std::optional<nl::LinkInfo>{info(l)};
    return std::optional<nl::LinkInfo>{};
  }

  Result<std::optional<nl::LinkInfo>> findLink(int ifindex) override {
    if (auto e = owner_.faults_.check("nl.findLink")) return *e;
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return std::optional<nl::LinkInfo>{};
    return std::optional<nl::LinkInfo>{info(it->second)};
  }

  Result<void> changeLink(int ifindex, const nl::LinkChange& change) override {
    if (auto e = owner_.faults_.check("nl.changeLink")) return *e;
    std::lock_guard lk(owner_.mu_);
    return changeLocked(*ns_, ifindex, change);
  }

  Result<void> moveLink(int ifindex, nl::Namespace& to, const std::string& new_name,
                        const nl::LinkChange& also) override {
    if (auto e = owner_.faults_.check("nl.moveLink")) return *e;
    auto* target = dynamic_cast<FakeNamespace*>(&to);
    if (!target) return Error{"cannot move a link into a namespace of another Netlink"};
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return Error{"cannot move link #" + std::to_string(ifindex) + ": No such device"};
    if (!validName(new_name))
      return Error{"cannot move link #" + std::to_string(ifindex) + " as " + new_name + ": Invalid argument"};
    NsState& dst = *target->ns_;
    for (const auto& [i, l] : dst.links)
      if (l.name == new_name && (&dst != ns_.get() || i != ifindex))
        return Error{"an interface named " + new_name + " already exists in " + dst.path};
    Link moved = it->second;
    ns_->links.erase(it);
    std::erase_if(ns_->routes, [&](const Route& r) { return r.ifindex == ifindex; });
    moved.name = new_name;
    moved.up = false;
    moved.addresses.clear();
    dst.links[ifindex] = moved;
    if (auto r = changeLocked(dst, ifindex, also); !r)
      return Error{"cannot move link #" + std::to_string(ifindex) + " into " + dst.path + " as " + new_name +
                   " (with" + describe(also) + "): " + r.error()};
    return {};
  }

  Result<void> addAddress(int ifindex, const IpInterfaceAddress& a) override {
    if (auto e = owner_.faults_.check("nl.addAddress")) return *e;
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return Error{"cannot add address " + a.str() + ": No such device"};
    auto& addrs = it->second.addresses;
    if (std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
    return {};
  }

  Result<std::vector<IpInterfaceAddress>> listAddresses(int ifindex) override {
    if (auto e = owner_.faults_.check("nl.listAddresses")) return *e;
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return std::vector<IpInterfaceAddress>{};
    return it->second.addresses;
  }

  Result<void> flushAddresses(int ifindex) override {
    if (auto e = owner_.faults_.check("nl.flushAddresses")) return *e;
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return {};
    it->second.addresses.clear();
    // Routes via a gateway that is no longer reachable go with the addresses.
    std::erase_if(ns_->routes, [&](const Route& r) {
      return r.ifindex == ifindex && r.spec.gw && !reachable(it->second, ns_->routes, *r.spec.gw);
    });
    return {};
  }

  Result<void> replaceRoute(int ifindex, const nl::RouteSpec& r) override {
    if (auto e = owner_.faults_.check("nl.replaceRoute")) return *e;
    std::lock_guard lk(owner_.mu_);
    std::string what = r.dst.str() + (r.gw ? " via " + r.gw->str() : "");
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end()) return Error{"cannot add route " + what + ": No such device"};
    if (!it->second.up) return Error{"cannot add route " + what + ": Network is down"};
    if (r.gw && !reachable(it->second, ns_->routes, *r.gw))
      return Error{"cannot add route " + what + ": Network is unreachable"};
    std::erase_if(ns_->routes, [&](const Route& x) { return x.spec.dst == r.dst; });
    ns_->routes.push_back({ifindex, r});
    return {};
  }

  Result<std::vector<nl::RouteSpec>> listRoutes(int ifindex) override {
    if (auto e = owner_.faults_.check("nl.listRoutes")) return *e;
    std::lock_guard lk(owner_.mu_);
    std::vector<nl::RouteSpec> out;
    auto it = ns_->links.find(ifindex);
    // The kernel's own route to each address's network, on a link that is up.
    if (it != ns_->links.end() && it->second.up)
      for (const auto& a : it->second.addresses) out.push_back({a.network(), std::nullopt, 0});
    for (const auto& r : ns_->routes)
      if (r.ifindex == ifindex) out.push_back(r.spec);
    return out;
  }

  std::optional<nl::PfVfSettings> readPfVfSettings(const std::string& pf, uint32_t vf) override {
    if (owner_.faults_.check("nl.readPfVfSettings")) return std::nullopt;
    std::lock_guard lk(owner_.mu_);
    if (!owner_.pfs_.count(pf) || vf >= owner_.pfs_.at(pf)) return std::nullopt;
    auto it = owner_.pf_settings_.find({pf, vf});
    return it == owner_.pf_settings_.end() ? nl::PfVfSettings{} : it->second;
  }

  Result<void> writePfVfSettings(const std::string& pf, uint32_t vf, const nl::PfVfSettings& v) override {
    if (auto e = owner_.faults_.check("nl.writePfVfSettings")) return *e;
    std::lock_guard lk(owner_.mu_);
    if (!owner_.pfs_.count(pf)) return Error{"cannot read PF " + pf + ": Object not found"};
    if (vf >= owner_.pfs_.at(pf))
      return Error{"cannot restore the PF-side settings of VF " + std::to_string(vf) + " on " + pf +
                   ": Invalid argument"};
    owner_.pf_settings_[{pf, vf}] = v;
    return {};
  }

  Result<void> announceAddresses(int ifindex, const MacAddress&, const std::vector<IpInterfaceAddress>& addrs) override {
    if (auto e = owner_.faults_.check("nl.announce")) return *e;
    std::lock_guard lk(owner_.mu_);
    auto it = ns_->links.find(ifindex);
    if (it == ns_->links.end() || !it->second.up) return Error{"cannot announce addresses: Network is down"};
    owner_.announced_[ifindex] += addrs.size();
    return {};
  }

 private:
  static nl::LinkInfo info(const Link& l) { return {l.ifindex, l.name, l.mac, l.mtu, l.up}; }

  static Result<void> changeLocked(NsState& ns, int ifindex, const nl::LinkChange& change) {
    auto it = ns.links.find(ifindex);
    std::string what = "cannot set link #" + std::to_string(ifindex) + describe(change);
    if (it == ns.links.end()) return Error{what + ": No such device"};
    Link& l = it->second;
    if (change.name && *change.name != l.name) {
      if (!validName(*change.name)) return Error{what + ": Invalid argument"};
      for (const auto& [i, other] : ns.links)
        if (i != ifindex && other.name == *change.name) return Error{what + ": File exists"};
      // A rename in the same request as "down" happens after it goes down only
      // on kernels that rename live links; refuse both as older kernels do.
      if (l.up) return Error{what + ": Device or resource busy"};
    }
    if (change.mac && (change.mac->isZero() || change.mac->isMulticast()))
      return Error{what + ": Cannot assign requested address"};
    if (change.mtu && (*change.mtu < 68 || *change.mtu > l.max_mtu)) return Error{what + ": Invalid argument"};
    if (change.name) l.name = *change.name;
    if (change.mac) l.mac = *change.mac;
    if (change.mtu) l.mtu = *change.mtu;
    if (change.up) {
      if (l.up && !*change.up) std::erase_if(ns.routes, [&](const Route& r) { return r.ifindex == ifindex; });
      l.up = *change.up;
    }
    return {};
  }

  FakeNetlink& owner_;
  std::shared_ptr<NsState> ns_;
  std::string path_;
};

FakeNetlink::FakeNetlink(FaultPlan& faults) : faults_(faults), host_(std::make_shared<NsState>()) {
  host_->path = kHostPath;
  host_->holders = 1;  // host-shim's own: never dies
  by_path_[kHostPath] = host_;
}

FakeNetlink::~FakeNetlink() = default;

std::shared_ptr<FakeNetlink::NsState> FakeNetlink::byPathLocked(const std::string& path) const {
  auto it = by_path_.find(path);
  return it == by_path_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<nl::Namespace>> FakeNetlink::host() {
  if (auto e = faults_.check("nl.host")) return *e;
  std::lock_guard lk(mu_);
  ++host_->holders;
  return std::unique_ptr<nl::Namespace>(std::make_unique<FakeNamespace>(*this, host_));
}

Result<std::unique_ptr<nl::Namespace>> FakeNetlink::open(const std::string& path) {
  if (auto e = faults_.check("nl.open")) return *e;
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  if (!ns) return Error{"cannot open network namespace " + path + ": No such file or directory"};
  ++ns->holders;
  return std::unique_ptr<nl::Namespace>(std::make_unique<FakeNamespace>(*this, ns));
}

void FakeNetlink::releaseLocked(const std::shared_ptr<NsState>& ns) {
  if (--ns->holders == 0 && !ns->mounted) destroyLocked(*ns);
}

void FakeNetlink::destroyLocked(NsState& ns) {
  if (ns.dead) return;
  ns.dead = true;
  for (auto& [i, l] : ns.links) {
    if (!l.real_vf) continue;
    // A physical device goes back to the host netns, down, without its
    // addresses; under a kernel-chosen name if its own is taken there.
    Link home = l;
    home.up = false;
    home.addresses.clear();
    for (const auto& [j, other] : host_->links)
      if (other.name == home.name) home.name = "dev" + std::to_string(i);
    host_->links[i] = home;
  }
  ns.links.clear();
  ns.routes.clear();
}

void FakeNetlink::addNetns(const std::string& path) {
  std::lock_guard lk(mu_);
  auto ns = std::make_shared<NsState>();
  ns->path = path;
  by_path_[path] = ns;
}

void FakeNetlink::deleteNetns(const std::string& path) {
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  if (!ns || ns == host_) return;
  by_path_.erase(path);
  ns->mounted = false;
  if (ns->holders == 0) destroyLocked(*ns);
}

bool FakeNetlink::netnsExists(const std::string& path) const {
  std::lock_guard lk(mu_);
  return byPathLocked(path) != nullptr;
}

int FakeNetlink::addLink(const std::string& path, const std::string& name, const MacAddress& mac, uint32_t mtu,
                         bool real_vf) {
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  if (!ns) return 0;
  Link l;
  l.ifindex = next_ifindex_++;
  l.name = name;
  l.mac = mac;
  l.mtu = mtu;
  l.real_vf = real_vf;
  ns->links[l.ifindex] = l;
  return l.ifindex;
}

void FakeNetlink::removeLink(const std::string& path, const std::string& name) {
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  if (!ns) return;
  std::erase_if(ns->links, [&](const auto& kv) { return kv.second.name == name; });
}

std::optional<FakeNetlink::Link> FakeNetlink::link(const std::string& path, const std::string& name) const {
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  if (!ns) return std::nullopt;
  for (const auto& [i, l] : ns->links)
    if (l.name == name) return l;
  return std::nullopt;
}

std::vector<FakeNetlink::Link> FakeNetlink::links(const std::string& path) const {
  std::lock_guard lk(mu_);
  std::vector<Link> out;
  if (auto ns = byPathLocked(path))
    for (const auto& [i, l] : ns->links) out.push_back(l);
  return out;
}

std::vector<FakeNetlink::Route> FakeNetlink::routes(const std::string& path) const {
  std::lock_guard lk(mu_);
  auto ns = byPathLocked(path);
  return ns ? ns->routes : std::vector<Route>{};
}

void FakeNetlink::setPf(const std::string& pf, uint32_t num_vfs) {
  std::lock_guard lk(mu_);
  pfs_[pf] = num_vfs;
}

std::optional<nl::PfVfSettings> FakeNetlink::pfSettings(const std::string& pf, uint32_t vf) const {
  std::lock_guard lk(mu_);
  auto it = pf_settings_.find({pf, vf});
  if (it == pf_settings_.end()) return std::nullopt;
  return it->second;
}

void FakeNetlink::setPfSettings(const std::string& pf, uint32_t vf, const nl::PfVfSettings& s) {
  std::lock_guard lk(mu_);
  pf_settings_[{pf, vf}] = s;
}

size_t FakeNetlink::announcements(int ifindex) const {
  std::lock_guard lk(mu_);
  auto it = announced_.find(ifindex);
  return it == announced_.end() ? 0 : it->second;
}

std::string fakeVfPci(uint32_t i) {
  uint32_t n = i + 2;
  char buf[32];
  std::snprintf(buf, sizeof buf, "0000:3b:%02x.%x", n >> 3, n & 7);
  return buf;
}

std::string fakeVfName(const std::string& prefix, uint32_t i) { return prefix + "v" + std::to_string(i); }

void makeFakeSriovHost(FakeNetlink& netlink, const std::string& sysfs_root, const std::string& pf, uint32_t num_vfs,
                       const std::string& prefix, bool real_vfs) {
  fs::path dev = fs::path(sysfs_root) / "class/net" / pf / "device";
  fs::create_directories(dev);
  fs::create_directories(fs::path(sysfs_root) / "bus/pci/devices");
  std::ofstream(dev / "sriov_numvfs") << num_vfs << "\n";
  for (uint32_t i = 0; i < num_vfs; ++i) {
    std::string name = fakeVfName(prefix, i);
    fs::path pci_dir = fs::path(sysfs_root) / "bus/pci/devices" / fakeVfPci(i);
    fs::create_directories(pci_dir / "net" / name);
    fs::create_symlink(pci_dir, dev / ("virtfn" + std::to_string(i)));
    MacAddress mac;
    mac.bytes = {0x02, 0x3b, 0x00, 0x00, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
    netlink.addLink(FakeNetlink::kHostPath, name, mac, 1500, real_vfs);
  }
}

}  // namespace dpu::fakes
