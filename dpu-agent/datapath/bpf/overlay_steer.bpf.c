// overlay_steer: the XDP program dpu-dataplane attaches to an af_xdp uplink.
//
// The uplink netdev is shared with the DPU's own kernel stack (SSH, the
// Kubernetes API, the BlueField management services). This program sends only
// our overlay traffic into the AF_XDP socket of the receive queue and passes
// everything else to the kernel:
//   - Geneve (UDP 6081) to our tunnel address, IPv4 and IPv6;
//   - ESP (IP protocol 50) and ESP in UDP (NAT-T, UDP 4500) to our tunnel address;
//   - when STEER_ARP is set: ARP whose target protocol address is our tunnel
//     IPv4 address (requests for us and replies to our requests), because the
//     dataplane, not the kernel, owns the tunnel address. Other ARP (the
//     kernel's management addresses) stays with the kernel;
//   - the host's traffic, which the dataplane bridges to the host PF
//     (north–south): frames to one of the host's MACs (map host_macs, any
//     ethertype, tagged or not), ARP whose target is a node IPv4 address
//     (node_ip4s: requests from the fabric, broadcast, and replies), and IPv6
//     neighbour solicitations whose target is a node IPv6 address (node_ip6s:
//     sent to the solicited-node group), and a DHCP server's answers whose
//     client hardware address (chaddr) is one of the host's MACs (broadcast to
//     a client that has no address yet). The dataplane fills these maps as it
//     learns the host's MACs and is told the node IPs.
// A frame goes to the AF_XDP socket or to the kernel, never to both: other
// broadcast and multicast (router advertisements, ARP for other addresses)
// stay with the kernel.
// Until the dataplane writes steer_cfg (after DPDK has loaded and attached the
// program, see datapath/xdp.h), enabled is 0 and every packet goes to the
// kernel: failing open keeps management traffic alive.
//
// DPDK's net_af_xdp (xdp_prog= devarg) loads this object itself and fills the
// map it requires to be called "xsks_map". The map names below are part of
// the contract with xdp.cpp, which finds them by name on the attached program.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define GENEVE_PORT 6081
#define NATT_PORT 4500
#define IPPROTO_ESP_ 50
#define ARP_HDR_LEN 28
#define STEER_ARP 1u
#define ICMPV6_NEIGHBOR_SOLICIT 135
#define DHCP_SERVER_PORT 67
#define DHCP_CLIENT_PORT 68
#define DHCP_CHADDR_OFFSET 28  // in the BOOTP header, after op, htype, hlen (RFC 2131 §2)

// Keep in sync with datapath/xdp.h (XdpSteerConfig).
struct steer_config {
  __u32 enabled;
  __u32 flags;
  __u32 has_ip4;
  __u32 has_ip6;
  __u32 ip4;        // network order
  __u8 ip6[16];
};

// Keep in sync with datapath/xdp.h (XdpSteerCounter).
enum steer_counter {
  STEER_REDIRECTED = 0,  // handed to the AF_XDP socket
  STEER_PASSED = 1,      // not ours: to the kernel
  STEER_NO_SOCKET = 2,   // ours, but no socket on this queue: to the kernel
  STEER_HOST = 3,        // of the steered ones: the host's (north–south)
  STEER_COUNTERS = 4,
};

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct steer_config);
} steer_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, STEER_COUNTERS);
  __type(key, __u32);
  __type(value, __u64);
} steer_stats SEC(".maps");

// North–south (keep in sync with datapath/xdp.h): the host's MACs (the
// address in the key's first 6 bytes, the rest zero) and the node IPs.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, __u64);
  __type(value, __u8);
} host_macs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16);
  __type(key, __u32);  // network order
  __type(value, __u8);
} node_ip4s SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16);
  __type(key, struct in6_addr);
  __type(value, __u8);
} node_ip6s SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64* value = bpf_map_lookup_elem(&steer_stats, &which);
  if (value) *value += 1;
}

static __always_inline int pass(void) {
  count(STEER_PASSED);
  return XDP_PASS;
}

static __always_inline int steer(struct xdp_md* ctx) {
  // XDP_PASS as the fallback: with no socket bound to this queue the packet
  // reaches the kernel instead of being dropped.
  int verdict = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
  count(verdict == XDP_REDIRECT ? STEER_REDIRECTED : STEER_NO_SOCKET);
  return verdict;
}

static __always_inline int steer_host(struct xdp_md* ctx) {
  count(STEER_HOST);
  return steer(ctx);
}

// clang does not inline memcmp for BPF; compare the address as four words.
static __always_inline int same_ip6(const struct in6_addr* a, const __u8* b) {
  const __u32* x = (const __u32*)a;
  __u32 y[4];
  __builtin_memcpy(y, b, 16);
  return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

// A DHCP server's answer (UDP 67 -> 68, BOOTREPLY, Ethernet chaddr) to one
// of the host's MACs.
static __always_inline int is_dhcp_reply_for_host(void* l4, void* end) {
  struct udphdr* udp = l4;
  if ((void*)(udp + 1) > end) return 0;
  if (udp->source != bpf_htons(DHCP_SERVER_PORT) || udp->dest != bpf_htons(DHCP_CLIENT_PORT)) return 0;
  __u8* bootp = (__u8*)(udp + 1);
  if ((void*)(bootp + DHCP_CHADDR_OFFSET + 6) > end) return 0;
  if (bootp[0] != 2 || bootp[1] != 1 || bootp[2] != 6) return 0;
  __u64 mac = 0;
  __builtin_memcpy(&mac, bootp + DHCP_CHADDR_OFFSET, 6);
  return bpf_map_lookup_elem(&host_macs, &mac) != 0;
}

static __always_inline int is_overlay_l4(__u8 proto, void* l4, void* end) {
  if (proto == IPPROTO_ESP_) return 1;
  if (proto != IPPROTO_UDP) return 0;
  struct udphdr* udp = l4;
  if ((void*)(udp + 1) > end) return 0;
  __u16 dport = bpf_ntohs(udp->dest);
  return dport == GENEVE_PORT || dport == NATT_PORT;
}

SEC("xdp")
int overlay_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  __u32 zero = 0;
  struct steer_config* cfg = bpf_map_lookup_elem(&steer_cfg, &zero);
  if (!cfg || !cfg->enabled) return pass();

  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return pass();
  // Unicast to the host: the host's, whatever it carries.
  if (!(eth->h_dest[0] & 1)) {
    __u64 mac = 0;
    __builtin_memcpy(&mac, eth->h_dest, 6);
    if (bpf_map_lookup_elem(&host_macs, &mac)) return steer_host(ctx);
  }
  __u16 proto = eth->h_proto;
  void* l3 = eth + 1;
  // One 802.1Q/802.1ad tag, as on a VLAN-tagged underlay.
  if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
    if (l3 + 4 > end) return pass();
    proto = *(__u16*)(l3 + 2);
    l3 += 4;
  }

  if (proto == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = l3;
    if ((void*)(ip + 1) > end) return pass();
    if (ip->ihl < 5) return pass();
    // Fragments other than the first carry no L4 header; leave them to the kernel.
    if (ip->frag_off & bpf_htons(0x1fff)) return pass();
    void* l4 = l3 + ip->ihl * 4;
    // (Unicast to a host MAC was steered above.)
    if (ip->protocol == IPPROTO_UDP && is_dhcp_reply_for_host(l4, end)) return steer_host(ctx);
    if (!cfg->has_ip4 || ip->daddr != cfg->ip4) return pass();
    return is_overlay_l4(ip->protocol, l4, end) ? steer(ctx) : pass();
  }
  if (proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = l3;
    if ((void*)(ip6 + 1) > end) return pass();
    // A neighbour solicitation for a node IPv6 address (no extension headers:
    // RFC 4861 sends them without). The target follows the 8-byte ICMPv6 header.
    if (ip6->nexthdr == IPPROTO_ICMPV6) {
      __u8* icmp = (__u8*)(ip6 + 1);
      if ((void*)(icmp + 8 + 16) <= end && icmp[0] == ICMPV6_NEIGHBOR_SOLICIT) {
        struct in6_addr target;
        __builtin_memcpy(&target, icmp + 8, 16);
        if (bpf_map_lookup_elem(&node_ip6s, &target)) return steer_host(ctx);
      }
    }
    if (!cfg->has_ip6) return pass();
    if (!same_ip6(&ip6->daddr, cfg->ip6)) return pass();
    // Extension headers are not followed: Geneve and ESP senders do not use them.
    return is_overlay_l4(ip6->nexthdr, ip6 + 1, end) ? steer(ctx) : pass();
  }
  if (proto == bpf_htons(ETH_P_ARP)) {
    __u8* arp = l3;
    if ((void*)(arp + ARP_HDR_LEN) > end) return pass();
    // Ethernet/IPv4 ARP only (htype 1, ptype 0x0800, hlen 6, plen 4); target protocol address at offset 24.
    if (arp[0] != 0 || arp[1] != 1 || arp[2] != 0x08 || arp[3] != 0x00 || arp[4] != 6 || arp[5] != 4) return pass();
    __u32 target;
    __builtin_memcpy(&target, arp + 24, 4);
    if (bpf_map_lookup_elem(&node_ip4s, &target)) return steer_host(ctx);
    return (cfg->flags & STEER_ARP) && cfg->has_ip4 && target == cfg->ip4 ? steer(ctx) : pass();
  }
  return pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
