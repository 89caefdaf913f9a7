# Shared set-up of the netns lab for system tests (sourced, not run): two
# "DPU" network namespaces joined by a veth wire (uplink0, 192.168.100.N/24 on
# each side, the kernel owning the tunnel IPs), VF emulation as veth pairs
# whose representor end stays in the DPU namespace, and dpu-dataplane's
# configuration for one node. Used by netns_two_nodes_test.sh (scripted
# programming client) and tests/dpu-agent/integration (the real dpu-agent), so
# both exercise the same topology.

# shellcheck source=../../support/shell.bash
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../support/shell.bash"

# lab_require_root_and_tools TOOL... — skips the test (skip_test) when it cannot run here.
lab_require_root_and_tools() {
  [ "$(id -u)" = 0 ] || skip_test "needs root (network namespaces, XDP)"
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || skip_test "$tool is not installed"
  done
  mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
}

# lab_make_dpu_pair NS1 NS2 TAG — two DPU namespaces with lo up and the wire
# between their uplinks (uplink0: 192.168.100.1 in NS1, .2 in NS2).
lab_make_dpu_pair() {
  local ns1=$1 ns2=$2 tag=$3 ns
  for ns in "$ns1" "$ns2"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  ip link add w1-"$tag" netns "$ns1" type veth peer name w2-"$tag" netns "$ns2"
  ip -n "$ns1" link set w1-"$tag" name uplink0
  ip -n "$ns2" link set w2-"$tag" name uplink0
  ip -n "$ns1" addr add 192.168.100.1/24 dev uplink0
  ip -n "$ns2" addr add 192.168.100.2/24 dev uplink0
  for ns in "$ns1" "$ns2"; do
    # The uplink path carries whole frames: no partial checksums.
    ip netns exec "$ns" ethtool -K uplink0 tx off >/dev/null 2>&1 || true
    ip -n "$ns" link set uplink0 up
  done
}

# lab_add_vf DPU_NS REPRESENTOR PEER_NS PEER_NAME — an emulated VF: a veth
# whose end REPRESENTOR (up) stays in the DPU namespace and whose other end
# PEER_NAME (down, unconfigured) goes to PEER_NS (a pod or the host). The
# temporary names are unique per DPU namespace and representor.
lab_add_vf() {
  local dpu=$1 rep=$2 peer_ns=$3 peer=$4
  local tmp
  tmp=$(printf 'v%08x' "$(echo "$dpu/$rep" | cksum | cut -d' ' -f1)")
  ip link add "${tmp}a" netns "$peer_ns" type veth peer name "${tmp}b" netns "$dpu"
  ip -n "$peer_ns" link set "${tmp}a" name "$peer"
  ip -n "$dpu" link set "${tmp}b" name "$rep"
  # The representor path carries whole frames: no partial checksums.
  ip netns exec "$peer_ns" ethtool -K "$peer" tx off >/dev/null 2>&1 || true
  ip netns exec "$dpu" ethtool -K "$rep" tx off >/dev/null 2>&1 || true
  ip -n "$dpu" link set "$rep" up
}

# lab_dataplane_config N BACKEND FILE_PREFIX PROGRAMMING_SOCK OPERATOR_SOCK [WORKERS] [HOST_PF] —
# dpu-dataplane's YAML for node N (tunnel IP 192.168.100.N) on stdout.
# BACKEND (af_xdp or af_packet) drives the uplink and the representors;
# WORKERS (default 1) worker lcores, on the CPUs EAL's default list wraps onto;
# HOST_PF, when given, the host PF representor's netdev (north–south), on BACKEND too.
lab_dataplane_config() {
  local n=$1 backend=$2 prefix=$3 prog=$4 op=$5 workers=${6:-1} host_pf=${7:-}
  # DPDK 22.11's net_af_xdp cannot open a netdev again in the same process after
  # it removed a port on it ("Failed to create xsk socket"): a re-attached
  # representor falls back to af_packet, as the default config does.
  local reps=$backend
  [ "$backend" = af_xdp ] && reps="af_xdp, af_packet"
  # 16383 mbufs: af_xdp for the uplink and the first three representors (3,104
  # each: mbuf_budget.h), af_packet for the rest, room for a node's 31. A host
  # PF port on af_xdp takes 3,104 more, so the representors keep theirs.
  local pool=16383 host_line=""
  if [ -n "$host_pf" ]; then
    pool=19487
    host_line="host_pf: {kind: $backend, iface: $host_pf}"
  fi
  # The slow-path budget's count only (README "New flows under load"): its
  # cycle share measures the worker's iterations with the TSC, and here the
  # worker shares two CPUs with both nodes' daemons and pods, and each of its
  # transmits into a veth runs the receiver's kernel stack on its own thread.
  # Both land in the time charged to misses (up to 140 us in one iteration,
  # a run itself taking about 1), and a trickle of handshakes was dropped.
  cat <<YAML
eal: {memory_mb: 256, file_prefix: $prefix, log_level: "*:warning"}
workers: $workers
mbuf_pool_size: $pool
mbuf_cache_size: 128
idle_sleep_us: 20
flow_cache: {miss_cycle_share: 100}
uplink: {kind: $backend, iface: uplink0}
$host_line
representors: {mode: hotplug, backends: [$reps]}
tunnel_ip: 192.168.100.$n
sockets: {programming: $prog, operator: $op}
YAML
}

# lab_wait_socket PATH — true once the unix socket exists (10 s at most).
lab_wait_socket() {
  local _
  for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
  return 1
}

# lab_remove_dpdk_prefix PREFIX — the EAL runtime directory a dataplane leaves.
lab_remove_dpdk_prefix() {
  case "$1" in
    ""|*/*|.|..) return 0 ;;
  esac
  rm -rf "/var/run/dpdk/$1"
}
