// Finding and configuring the uplink's attached XDP program (xdp.h).
#include "datapath/xdp.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#ifndef DPU_XDP_PROGRAM_PATH
#define DPU_XDP_PROGRAM_PATH ""
#endif
#ifndef DPU_XDP_REPRESENTOR_PROGRAM_PATH
#define DPU_XDP_REPRESENTOR_PROGRAM_PATH ""
#endif

namespace dpu::datapath {
namespace {

constexpr uint32_t kCounterCount = 4;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::string errnoText(int err) { return std::strerror(err < 0 ? -err : err); }

// The fd of the map called `name` used by the XDP program on `ifname`.
Result<int> attachedMap(const std::string& ifname, const char* name) {
  unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) return Error{"no network interface " + ifname + ": " + errnoText(errno)};
  __u32 prog_id = 0;
  // Flags 0: whichever mode (native or generic) the program was attached in.
  if (int err = bpf_xdp_query_id(static_cast<int>(ifindex), 0, &prog_id); err != 0 || prog_id == 0) {
    return Error{"no XDP program attached to " + ifname +
                 (err ? ": " + errnoText(err) : std::string()) + " (was the port created with xdp_prog=?)"};
  }
  Fd prog(bpf_prog_get_fd_by_id(prog_id));
  if (prog.fd < 0) return Error{"cannot open XDP program " + std::to_string(prog_id) + ": " + errnoText(errno)};
  std::vector<__u32> map_ids(16);
  bpf_prog_info info{};
  info.nr_map_ids = static_cast<__u32>(map_ids.size());
  info.map_ids = reinterpret_cast<uintptr_t>(map_ids.data());
  __u32 len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog.fd, &info, &len) != 0)
    return Error{"cannot read the XDP program's maps on " + ifname + ": " + errnoText(errno)};
  for (__u32 i = 0; i < std::min<__u32>(info.nr_map_ids, map_ids.size()); ++i) {
    int map_fd = bpf_map_get_fd_by_id(map_ids[i]);
    if (map_fd < 0) continue;
    bpf_map_info map_info{};
    __u32 map_len = sizeof(map_info);
    if (bpf_obj_get_info_by_fd(map_fd, &map_info, &map_len) == 0 && std::strcmp(map_info.name, name) == 0)
      return map_fd;
    close(map_fd);
  }
  return Error{"the XDP program on " + ifname + " has no map " + name + ": is it overlay_steer.bpf.o?"};
}

}  // namespace

XdpSteerConfig makeSteerConfig(const IpAddress& tunnel_ip, bool steer_arp) {
  XdpSteerConfig c;
  c.enabled = 1;
  c.flags = steer_arp ? kXdpSteerArp : 0;
  if (tunnel_ip.isV4()) {
    c.has_ip4 = 1;
    std::memcpy(&c.ip4, tunnel_ip.bytes.data(), 4);
  } else {
    c.has_ip6 = 1;
    c.ip6 = tunnel_ip.bytes;
  }
  return c;
}

Result<void> writeSteerConfig(int map_fd, const XdpSteerConfig& config) {
  uint32_t key = 0;
  if (bpf_map_update_elem(map_fd, &key, &config, BPF_ANY) != 0)
    return Error{"cannot write the XDP steering settings: " + errnoText(errno)};
  return {};
}

Result<XdpSteerCounters> readSteerCounters(int map_fd) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return Error{"cannot count the possible CPUs: " + errnoText(cpus)};
  std::vector<uint64_t> values(static_cast<size_t>(cpus));
  uint64_t sums[kCounterCount] = {};
  for (uint32_t key = 0; key < kCounterCount; ++key) {
    if (bpf_map_lookup_elem(map_fd, &key, values.data()) != 0)
      return Error{"cannot read the XDP steering counters: " + errnoText(errno)};
    for (uint64_t v : values) sums[key] += v;
  }
  return XdpSteerCounters{sums[0], sums[1], sums[2], sums[3]};
}

namespace {

// Makes a hash map of KeySize-byte keys hold exactly `keys` (value 1).
template <size_t KeySize>
Result<void> syncSet(int fd, const std::vector<std::array<uint8_t, KeySize>>& keys, const char* what) {
  std::vector<std::array<uint8_t, KeySize>> stale;
  std::array<uint8_t, KeySize> key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(fd, first ? nullptr : key.data(), next.data()) == 0) {
    first = false;
    key = next;
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) stale.push_back(key);
  }
  for (const auto& k : stale) {
    if (bpf_map_delete_elem(fd, k.data()) != 0 && errno != ENOENT)
      return Error{std::string("cannot remove an entry of the XDP map ") + what + ": " + errnoText(errno)};
  }
  const uint8_t one = 1;
  for (const auto& k : keys) {
    if (bpf_map_update_elem(fd, k.data(), &one, BPF_ANY) != 0)
      return Error{std::string("cannot write the XDP map ") + what + ": " + errnoText(errno)};
  }
  return {};
}

}  // namespace

Result<void> writeHostSteering(int macs_fd, int ip4_fd, int ip6_fd, const XdpHostSteering& steering) {
  std::vector<std::array<uint8_t, 8>> macs;
  std::vector<std::array<uint8_t, 4>> ip4s;
  std::vector<std::array<uint8_t, 16>> ip6s;
  for (const auto& mac : steering.host_macs) {
    std::array<uint8_t, 8> k{};
    std::memcpy(k.data(), mac.bytes.data(), 6);
    macs.push_back(k);
  }
  for (const auto& ip : steering.node_ips) {
    if (ip.isV4()) {
      std::array<uint8_t, 4> k{};
      std::memcpy(k.data(), ip.bytes.data(), 4);
      ip4s.push_back(k);
    } else {
      ip6s.push_back(ip.bytes);
    }
  }
  if (macs.size() > kXdpMaxHostMacs || ip4s.size() > kXdpMaxNodeIps || ip6s.size() > kXdpMaxNodeIps)
    return Error{"more host MACs or node IPs than the uplink's XDP maps hold"};
  if (auto r = syncSet(macs_fd, macs, "host_macs"); !r) return r;
  if (auto r = syncSet(ip4_fd, ip4s, "node_ip4s"); !r) return r;
  return syncSet(ip6_fd, ip6s, "node_ip6s");
}

Result<void> configureAttachedHostSteering(const std::string& ifname, const XdpHostSteering& steering) {
  auto macs = attachedMap(ifname, "host_macs");
  if (!macs) return std::move(macs).takeError();
  Fd macs_fd(*macs);
  auto ip4 = attachedMap(ifname, "node_ip4s");
  if (!ip4) return std::move(ip4).takeError();
  Fd ip4_fd(*ip4);
  auto ip6 = attachedMap(ifname, "node_ip6s");
  if (!ip6) return std::move(ip6).takeError();
  Fd ip6_fd(*ip6);
  return writeHostSteering(macs_fd.fd, ip4_fd.fd, ip6_fd.fd, steering);
}

Result<void> configureAttachedSteering(const std::string& ifname, const XdpSteerConfig& config) {
  auto map = attachedMap(ifname, "steer_cfg");
  if (!map) return std::move(map).takeError();
  Fd fd(*map);
  return writeSteerConfig(fd.fd, config);
}

Result<XdpSteerCounters> readAttachedCounters(const std::string& ifname) {
  auto map = attachedMap(ifname, "steer_stats");
  if (!map) return std::move(map).takeError();
  Fd fd(*map);
  return readSteerCounters(fd.fd);
}

Result<bool> detachStaleXdpProgram(const std::string& ifname) {
  unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) return Error{"no network interface " + ifname + ": " + errnoText(errno)};
  bpf_xdp_query_opts query{};
  query.sz = sizeof(query);
  if (int err = bpf_xdp_query(static_cast<int>(ifindex), 0, &query); err != 0)
    return Error{"cannot query the XDP program on " + ifname + ": " + errnoText(err)};
  bool detached = false;
  // Native and generic mode each hold their own program; detach in the mode it was attached in.
  for (auto [id, mode] : {std::pair{query.drv_prog_id, XDP_FLAGS_DRV_MODE},
                          std::pair{query.skb_prog_id, XDP_FLAGS_SKB_MODE}}) {
    if (id == 0) continue;
    Fd prog(bpf_prog_get_fd_by_id(id));
    if (prog.fd < 0) continue;  // gone meanwhile
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog.fd, &info, &len) != 0) continue;
    const std::string name = info.name;
    if (name != "overlay_steer" && name != "representor_red") continue;
    bpf_xdp_attach_opts opts{};
    opts.sz = sizeof(opts);
    opts.old_prog_fd = prog.fd;  // only this one: never a program someone attached meanwhile
    if (int err = bpf_xdp_detach(static_cast<int>(ifindex), mode | XDP_FLAGS_REPLACE, &opts); err != 0)
      return Error{"cannot detach the stale XDP program " + name + " from " + ifname + ": " + errnoText(err)};
    detached = true;
  }
  return detached;
}

StaleXdpSweep detachStaleXdpPrograms() {
  StaleXdpSweep sweep;
  struct if_nameindex* all = if_nameindex();
  if (all == nullptr) {
    sweep.errors.push_back(std::string("cannot list the network interfaces: ") + std::strerror(errno));
    return sweep;
  }
  for (struct if_nameindex* i = all; i->if_index != 0; ++i) {
    auto detached = detachStaleXdpProgram(i->if_name);
    if (!detached) {
      sweep.errors.push_back(detached.error());
    } else if (*detached) {
      sweep.detached.push_back(i->if_name);
    }
  }
  if_freenameindex(all);
  return sweep;
}

namespace {

// An installed dpu-dataplane (the image: /usr/bin) finds its programs in
// ../lib/dpu-cni/ next to it; a build tree's binary finds them where the
// build compiled them.
std::string programPath(const char* built) {
  if (*built == '\0') return built;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir.resize(dir.rfind('/') + 1);
    const std::string name = std::string(built).substr(std::string(built).rfind('/') + 1);
    const std::string installed = dir + "../lib/dpu-cni/" + name;
    if (::access(installed.c_str(), R_OK) == 0) return installed;
  }
  return built;
}

}  // namespace

std::string builtinXdpProgramPath() { return programPath(DPU_XDP_PROGRAM_PATH); }
std::string builtinRepresentorXdpProgramPath() { return programPath(DPU_XDP_REPRESENTOR_PROGRAM_PATH); }

}  // namespace dpu::datapath
