// representor_redirect: the XDP program dpu-dataplane attaches to a
// representor netdev opened with net_af_xdp. Every frame a pod sends belongs
// to the dataplane, so everything goes to the AF_XDP socket of its queue
// (XDP_PASS only when no socket is bound there yet).
//
// Why our own program rather than libxdp's default one: DPDK loads a program
// given with xdp_prog= itself and detaches it when the port closes, whereas
// the default program is owned by libxdp, which (without a bpffs, as under
// `ip netns exec`) keeps a reference after the socket is deleted, so a port
// removed when a pod detaches could not be opened again on the same netdev.
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

// DPDK's net_af_xdp requires this name.
struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int representor_redirect(struct xdp_md* ctx) {
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
