// The uplink's XDP program (bpf/overlay_steer.bpf.c) seen from user space.
//
// DPDK's net_af_xdp loads the object itself (devarg xdp_prog=) and attaches it
// to the netdev, so we cannot set its read-only data before load. Instead the
// program reads its settings from the map "steer_cfg", which starts zeroed
// (steering disabled: everything goes to the kernel) and which we fill after
// the port has started, by finding the program attached to the interface and
// its map by name. The same lookup reads the per-CPU decision counters, and
// fills the north–south maps (host_macs, node_ip4s, node_ip6s): what the
// program steers for the host besides our tunnel traffic.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"

namespace dpu::datapath {

// Mirrors `struct steer_config` in overlay_steer.bpf.c.
struct XdpSteerConfig {
  uint32_t enabled = 0;
  uint32_t flags = 0;
  uint32_t has_ip4 = 0;
  uint32_t has_ip6 = 0;
  uint32_t ip4 = 0;  // network order
  std::array<uint8_t, 16> ip6{};
};
static_assert(sizeof(XdpSteerConfig) == 36);
inline constexpr uint32_t kXdpSteerArp = 1;

// Mirrors `enum steer_counter`.
struct XdpSteerCounters {
  uint64_t redirected = 0;  // into the AF_XDP socket
  uint64_t passed = 0;      // to the kernel: not overlay traffic
  uint64_t no_socket = 0;   // overlay traffic, but no socket on the queue: to the kernel
  uint64_t host = 0;        // of the steered (or no_socket) ones: the host's (north–south)
};

// The north–south maps' content: frames to `host_macs`, and ARP / IPv6
// neighbour solicitations for `node_ips`, are the host's (at most
// kXdpMaxHostMacs and kXdpMaxNodeIps per family, the maps' sizes).
struct XdpHostSteering {
  std::vector<MacAddress> host_macs;
  std::vector<IpAddress> node_ips;
};
inline constexpr size_t kXdpMaxHostMacs = 256;
inline constexpr size_t kXdpMaxNodeIps = 16;

XdpSteerConfig makeSteerConfig(const IpAddress& tunnel_ip, bool steer_arp);

// Fills steer_cfg of the program attached to `ifname` (any XDP mode).
Result<void> configureAttachedSteering(const std::string& ifname, const XdpSteerConfig& config);
Result<XdpSteerCounters> readAttachedCounters(const std::string& ifname);
// Makes the north–south maps of the program attached to `ifname` hold exactly `steering`.
Result<void> configureAttachedHostSteering(const std::string& ifname, const XdpHostSteering& steering);

// A dataplane that dies without closing its ports (SIGKILL, a crash) leaves
// its XDP programs attached to the netdevs; net_af_xdp then refuses the port
// ("XDP program already attached") and a restarted dataplane would run every
// port on the af_packet fallback. Detaches the program on `ifname` when it is
// one of ours (by name: overlay_steer, representor_redirect, as the kernel
// keeps them, 15 characters); anything else is left alone. True when it
// detached one.
Result<bool> detachStaleXdpProgram(const std::string& ifname);

// The same on every netdev of this network namespace, for a dataplane that
// starts: its predecessor's programs on the uplink and the representors go
// in one sweep that dpu-dataplane runs beside EAL's start, rather than one
// detach (tens of milliseconds on a veth) on the way to each port's opening.
// A dataplane owns these two programs in its namespace.
struct StaleXdpSweep {
  std::vector<std::string> detached;  // the netdevs it detached a program from
  std::vector<std::string> errors;    // what it could not detach, and why
};
StaleXdpSweep detachStaleXdpPrograms();

// On a program or map fd (tests load the object themselves).
Result<void> writeSteerConfig(int map_fd, const XdpSteerConfig& config);
Result<XdpSteerCounters> readSteerCounters(int map_fd);
// The same on the three maps' fds (host_macs, node_ip4s, node_ip6s): entries
// not in `steering` are deleted, the others added.
Result<void> writeHostSteering(int macs_fd, int ip4_fd, int ip6_fd, const XdpHostSteering& steering);

// The uplink's overlay_steer and the representors' representor_redirect:
// installed in ../lib/dpu-cni/ beside the binary (the image), else the
// objects built with this tree (CMake passes their paths).
std::string builtinXdpProgramPath();
std::string builtinRepresentorXdpProgramPath();

}  // namespace dpu::datapath
