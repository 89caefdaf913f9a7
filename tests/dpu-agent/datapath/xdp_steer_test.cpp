// The uplink's XDP program (bpf/overlay_steer.bpf.c) on crafted packets, run by
// the kernel with BPF_PROG_TEST_RUN: which packets it steers to the dataplane's
// AF_XDP socket and which it leaves to the kernel (SSH, ARP for other
// addresses, Geneve for another node). Needs root (loading BPF); skipped with
// a message otherwise. No socket is bound here, so a steered packet comes back
// XDP_PASS through the redirect fallback and counts as "no_socket": the
// counters tell the decision apart.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "datapath/xdp.h"
#include "overlay/packet_builder.h"
#include "skip.h"

using dpu::datapath::XdpSteerCounters;
using dpu::overlay::PacketBuilder;

namespace {

constexpr uint32_t kTunnelIp = 0xc0a86401;  // 192.168.100.1
constexpr uint32_t kOtherIp = 0xc0a86402;
constexpr uint32_t kPeerIp = 0xc0a86409;
const dpu::overlay::MacAddress kMacA{0x02, 0, 0, 0, 0, 1};
const dpu::overlay::MacAddress kMacB{0x02, 0, 0, 0, 0, 2};
const dpu::overlay::Ipv6Address kTunnelIp6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const dpu::overlay::Ipv6Address kPeerIp6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};

struct Loaded {
  bpf_object* object = nullptr;
  int prog_fd = -1;
  int cfg_fd = -1;
  int stats_fd = -1;
  int host_macs_fd = -1;
  int node_ip4s_fd = -1;
  int node_ip6s_fd = -1;
  ~Loaded() {
    if (object) bpf_object__close(object);
  }
};

std::vector<uint8_t> geneve(uint32_t dst, uint16_t port = 6081) {
  std::vector<uint8_t> inner(8 + 14 + 20, 0);  // Geneve header + a stub inner frame
  inner[2] = 0x65;
  inner[3] = 0x58;
  return PacketBuilder().ethernet(kMacA, kMacB).ipv4({.src = kPeerIp, .dst = dst}).udp(40000, port, false).payload(inner).build();
}

std::vector<uint8_t> esp(uint32_t dst) {
  std::vector<uint8_t> body(40, 0xab);
  return PacketBuilder().ethernet(kMacA, kMacB).ipv4({.src = kPeerIp, .dst = dst, .protocol = 50}).payload(body).build();
}

std::vector<uint8_t> ssh(uint32_t dst) {
  return PacketBuilder().ethernet(kMacA, kMacB).ipv4({.src = kPeerIp, .dst = dst}).tcp({.src_port = 50000, .dst_port = 22}).build();
}

std::vector<uint8_t> arp(uint16_t op, uint32_t target) {
  return PacketBuilder().ethernet(kMacA, kMacB).arp(op, kMacB, kPeerIp, dpu::overlay::MacAddress{}, target).build();
}

std::vector<uint8_t> geneve6(const dpu::overlay::Ipv6Address& dst) {
  std::vector<uint8_t> inner(8 + 14 + 20, 0);
  return PacketBuilder().ethernet(kMacA, kMacB).ipv6({.src = kPeerIp6, .dst = dst}).udp(40000, 6081).payload(inner).build();
}

std::vector<uint8_t> truncated(std::vector<uint8_t> frame, size_t size) {
  frame.resize(size);
  return frame;
}

// Runs the program on one frame; returns the XDP verdict.
int run(const Loaded& l, std::vector<uint8_t> frame) {
  std::vector<uint8_t> out(frame.size() + 256);
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
              .data_size_in = static_cast<__u32>(frame.size()), .data_size_out = static_cast<__u32>(out.size()),
              .repeat = 1);
  int err = bpf_prog_test_run_opts(l.prog_fd, &opts);
  REQUIRE(err == 0);
  return static_cast<int>(opts.retval);
}

XdpSteerCounters counters(const Loaded& l) {
  auto c = dpu::datapath::readSteerCounters(l.stats_fd);
  REQUIRE(c.ok());
  return *c;
}

void load(Loaded& l) {
  std::string path = dpu::datapath::builtinXdpProgramPath();
  l.object = bpf_object__open_file(path.c_str(), nullptr);
  REQUIRE(l.object != nullptr);
  REQUIRE(bpf_object__load(l.object) == 0);
  bpf_program* prog = bpf_object__find_program_by_name(l.object, "overlay_steer");
  REQUIRE(prog != nullptr);
  l.prog_fd = bpf_program__fd(prog);
  l.cfg_fd = bpf_map__fd(bpf_object__find_map_by_name(l.object, "steer_cfg"));
  l.stats_fd = bpf_map__fd(bpf_object__find_map_by_name(l.object, "steer_stats"));
  l.host_macs_fd = bpf_map__fd(bpf_object__find_map_by_name(l.object, "host_macs"));
  l.node_ip4s_fd = bpf_map__fd(bpf_object__find_map_by_name(l.object, "node_ip4s"));
  l.node_ip6s_fd = bpf_map__fd(bpf_object__find_map_by_name(l.object, "node_ip6s"));
  REQUIRE(l.cfg_fd >= 0);
  REQUIRE(l.stats_fd >= 0);
  REQUIRE(l.host_macs_fd >= 0);
  REQUIRE(l.node_ip4s_fd >= 0);
  REQUIRE(l.node_ip6s_fd >= 0);
  // DPDK requires this name for the socket map.
  REQUIRE(bpf_object__find_map_by_name(l.object, "xsks_map") != nullptr);
}

}  // namespace

TEST_CASE("overlay_steer: only overlay traffic to our tunnel address is steered", "[xdp]") {
  if (geteuid() != 0) dpu::test::skipTest("loading BPF programs needs root");
  Loaded l;
  load(l);

  SECTION("unconfigured, everything goes to the kernel") {
    CHECK(run(l, geneve(kTunnelIp)) == XDP_PASS);
    CHECK(counters(l).passed == 1);
    CHECK(counters(l).no_socket == 0);
  }

  SECTION("configured for an IPv4 tunnel address") {
    auto ip = dpu::IpAddress::parse("192.168.100.1");
    REQUIRE(ip.ok());
    REQUIRE(dpu::datapath::writeSteerConfig(l.cfg_fd, dpu::datapath::makeSteerConfig(*ip, true)).ok());
    struct Case {
      const char* what;
      std::vector<uint8_t> frame;
      bool steered;
    };
    std::vector<Case> cases = {
        {"Geneve to us", geneve(kTunnelIp), true},
        {"Geneve to another node", geneve(kOtherIp), false},
        {"ESP to us", esp(kTunnelIp), true},
        {"ESP to another address", esp(kOtherIp), false},
        {"NAT-T to us", geneve(kTunnelIp, 4500), true},
        {"other UDP to us (DNS)", geneve(kTunnelIp, 53), false},
        {"SSH to us", ssh(kTunnelIp), false},
        {"ARP request for the tunnel address", arp(1, kTunnelIp), true},
        {"ARP reply to the tunnel address", arp(2, kTunnelIp), true},
        {"ARP for a management address", arp(1, kOtherIp), false},
        {"Geneve over IPv6 (no v6 address configured)", geneve6(kTunnelIp6), false},
        {"truncated IPv4 header to us", truncated(geneve(kTunnelIp), 14 + 12), false},
        {"truncated UDP header to us", truncated(geneve(kTunnelIp), 14 + 20 + 4), false},
    };
    uint64_t steered = 0, passed = 0;
    for (auto& c : cases) {
      INFO(c.what);
      // No socket is bound: the redirect falls back to XDP_PASS, counted as no_socket.
      CHECK(run(l, c.frame) == XDP_PASS);
      (c.steered ? steered : passed) += 1;
      auto now = counters(l);
      CHECK(now.no_socket == steered);
      CHECK(now.passed == passed);
      CHECK(now.redirected == 0);
    }
  }

  SECTION("ARP steering can be left to the kernel") {
    auto ip = dpu::IpAddress::parse("192.168.100.1");
    REQUIRE(dpu::datapath::writeSteerConfig(l.cfg_fd, dpu::datapath::makeSteerConfig(*ip, false)).ok());
    run(l, arp(1, kTunnelIp));
    CHECK(counters(l).passed == 1);
    CHECK(counters(l).no_socket == 0);
  }

  SECTION("configured for an IPv6 tunnel address") {
    auto ip = dpu::IpAddress::parse("fd00::1");
    REQUIRE(dpu::datapath::writeSteerConfig(l.cfg_fd, dpu::datapath::makeSteerConfig(*ip, true)).ok());
    run(l, geneve6(kTunnelIp6));
    CHECK(counters(l).no_socket == 1);
    run(l, geneve6(kPeerIp6));
    run(l, geneve(kTunnelIp));  // IPv4 to an address we do not own here
    CHECK(counters(l).passed == 2);
  }
}

namespace {

const dpu::overlay::MacAddress kHostMac{0x02, 0x18, 0, 0, 0, 0x01};
const dpu::overlay::MacAddress kFabricMac{0x02, 0x18, 0, 0, 0, 0xfe};
constexpr uint32_t kNodeIp = 0xac120001;   // 172.18.0.1
constexpr uint32_t kOtherNodeIp = 0xac120002;
const dpu::overlay::Ipv6Address kNodeIp6{0x20, 0x01, 0x0d, 0xb8, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const dpu::overlay::Ipv6Address kOtherIp6{0x20, 0x01, 0x0d, 0xb8, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};

std::vector<uint8_t> tcpTo(const dpu::overlay::MacAddress& dst, uint32_t ip_dst, uint16_t vlan = 0) {
  PacketBuilder b;
  b.ethernet(dst, kFabricMac);
  if (vlan != 0) b.vlan(vlan);
  return b.ipv4({.src = 0xcb007101, .dst = ip_dst}).tcp({.src_port = 80, .dst_port = 40000}).build();
}

std::vector<uint8_t> arpFor(uint16_t op, uint32_t target, const dpu::overlay::MacAddress& dst) {
  return PacketBuilder().ethernet(dst, kFabricMac).arp(op, kFabricMac, 0xac1200fe, dpu::overlay::MacAddress{}, target).build();
}

std::vector<uint8_t> dhcpOffer(const dpu::overlay::MacAddress& client) {
  return PacketBuilder()
      .ethernet(dpu::overlay::eth::kBroadcast, kFabricMac)
      .ipv4({.src = 0xac1200fe, .dst = 0xffffffff})
      .udp(67, 68)
      .dhcpReply(client, kNodeIp)
      .build();
}

std::vector<uint8_t> dhcpFromClient() {
  return PacketBuilder()
      .ethernet(dpu::overlay::eth::kBroadcast, kFabricMac)
      .ipv4({.src = 0, .dst = 0xffffffff})
      .udp(68, 67)
      .payload(std::vector<uint8_t>(300, 0))
      .build();
}

std::vector<uint8_t> solicit(const dpu::overlay::Ipv6Address& target) {
  dpu::overlay::Ipv6Address group{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, target[13], target[14], target[15]};
  return PacketBuilder()
      .ethernet(dpu::overlay::eth::ipv6MulticastMac(group.data()), kFabricMac)
      .ipv6({.src = kOtherIp6, .dst = group, .hop_limit = 255})
      .neighborSolicit(target, kFabricMac)
      .build();
}

dpu::IpAddress ipText(const char* text) { return dpu::IpAddress::parse(text).value(); }

}  // namespace

TEST_CASE("overlay_steer: the host's traffic is steered to the dataplane, the DPU's own stays with the kernel",
          "[xdp][north-south]") {
  if (geteuid() != 0) dpu::test::skipTest("loading BPF programs needs root");
  Loaded l;
  load(l);
  auto ip = dpu::IpAddress::parse("192.168.100.1");
  REQUIRE(dpu::datapath::writeSteerConfig(l.cfg_fd, dpu::datapath::makeSteerConfig(*ip, false)).ok());
  dpu::datapath::XdpHostSteering steering;
  steering.host_macs = {dpu::MacAddress{kHostMac}};
  steering.node_ips = {ipText("172.18.0.1"), ipText("2001:db8:18::1")};
  REQUIRE(dpu::datapath::writeHostSteering(l.host_macs_fd, l.node_ip4s_fd, l.node_ip6s_fd, steering).ok());

  struct Case {
    const char* what;
    std::vector<uint8_t> frame;
    bool host;     // steered for the host
    bool steered;  // steered at all
  };
  const dpu::overlay::MacAddress uplink_mac{0x02, 0, 0, 0, 0, 1};
  std::vector<Case> cases = {
      {"TCP to the host MAC", tcpTo(kHostMac, kNodeIp), true, true},
      {"tagged frame to the host MAC", tcpTo(kHostMac, kNodeIp, 100), true, true},
      {"ARP request for the node IP, broadcast", arpFor(1, kNodeIp, dpu::overlay::eth::kBroadcast), true, true},
      {"ARP reply to the node IP", arpFor(2, kNodeIp, kHostMac), true, true},
      {"ARP request for another node's IP", arpFor(1, kOtherNodeIp, dpu::overlay::eth::kBroadcast), false, false},
      {"neighbour solicitation for the node IPv6 address", solicit(kNodeIp6), true, true},
      {"neighbour solicitation for another address", solicit(kOtherIp6), false, false},
      {"TCP to the DPU's own MAC (its SSH)", tcpTo(uplink_mac, kTunnelIp), false, false},
      {"TCP to another MAC", tcpTo(kFabricMac, kNodeIp), false, false},
      {"ARP for the tunnel address, left to the kernel here", arpFor(1, kTunnelIp, dpu::overlay::eth::kBroadcast),
       false, false},
      {"Geneve to us still steered", geneve(kTunnelIp), false, true},
      {"a DHCP offer broadcast to the host's MAC (chaddr)", dhcpOffer(kHostMac), true, true},
      {"a DHCP offer broadcast to another client", dhcpOffer(kFabricMac), false, false},
      {"a DHCP client's broadcast (68 -> 67)", dhcpFromClient(), false, false},
      {"a DHCP offer cut before its chaddr", truncated(dhcpOffer(kHostMac), 14 + 20 + 8 + 30), false, false},
      {"truncated ARP", truncated(arpFor(1, kNodeIp, dpu::overlay::eth::kBroadcast), 14 + 20), false, false},
  };
  uint64_t host = 0, steered = 0, passed = 0;
  for (auto& c : cases) {
    INFO(c.what);
    CHECK(run(l, c.frame) == XDP_PASS);  // no socket bound: the redirect falls back to XDP_PASS
    host += c.host;
    (c.steered ? steered : passed) += 1;
    const auto now = counters(l);
    CHECK(now.host == host);
    CHECK(now.no_socket == steered);
    CHECK(now.passed == passed);
  }

  SECTION("the maps follow what the dataplane writes: a forgotten MAC or node IP is the kernel's again") {
    steering.host_macs.clear();
    steering.node_ips = {ipText("172.18.0.2")};
    REQUIRE(dpu::datapath::writeHostSteering(l.host_macs_fd, l.node_ip4s_fd, l.node_ip6s_fd, steering).ok());
    const auto before = counters(l);
    run(l, tcpTo(kHostMac, kNodeIp));
    run(l, arpFor(1, kNodeIp, dpu::overlay::eth::kBroadcast));
    run(l, solicit(kNodeIp6));
    run(l, dhcpOffer(kHostMac));
    CHECK(counters(l).passed == before.passed + 4);
    run(l, arpFor(1, kOtherNodeIp, dpu::overlay::eth::kBroadcast));
    CHECK(counters(l).host == before.host + 1);
  }
}
