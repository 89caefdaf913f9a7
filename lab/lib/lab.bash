# lab/lib/lab.bash — the dpu-lab library: an emulated multi-node cluster of
# hosts and DPUs in network namespaces on one Linux machine (ARCHITECTURE.md
# "The lab"), running the real host-shim, dpu-agent and dpu-dataplane per node.
# lab/dpu-lab is its command line; tests source this file and call the
# functions directly (one lab per test, each with its own name):
#
#   source "$DPU_SOURCE_DIR/lab/lib/lab.bash"
#   export DPU_BUILD_DIR=/work/build-x
#   dl_init "t$$"                                # the lab's name: [a-z0-9]{1,12}
#   trap 'dl_down' EXIT                          # removes everything, also after a failed up
#   dl_up 2 0 || exit 1                          # 2 nodes, 0 pods each (VFs: DL_VFS, default 8)
#   ip_a=$(dl_pod_add 1 a); ip_b=$(dl_pod_add 2 b)
#   dl_exec node1/a ping -c1 "$ip_b"
#   dl_assert_gone                               # after dl_down: nothing of the lab is left
#
# Library files (each documents its functions at the top):
#   core.bash      name, state dir, record of what was created, waiting, detached processes
#   topology.bash  fabric bridge, per-node host/DPU netns, host<->DPU link, VFs, uplink
#   daemons.bash   configs, start/stop/readiness of dataplane, agent, host-shim; dpuctl; agent API
#   pods.bash      pods via dpu-cni (libcni driver or direct exec), exec targets
#   traffic.bash   ping / TCP / UDP measurements, the connectivity matrix, captures
#   faults.bash    background traffic across a fault, outages, node removal, DPU reboot, drop counters
#   services.bash  Services and their EndpointSlices in the cluster file (service add/backends/del/list, apply, delete)
#   policy.bash    namespaces, pod labels and ports, NetworkPolicies in the cluster file (ns add, label, pod add --ns)
#   kube.bash      Kubernetes mode (DL_KUBE=1): fake API server, kubectl, agents' Kubernetes source, kubelet stand-in
#   ipsec.bash     IPsec on a running lab: per-node mode, rollout on and off node by node, key rotation
#   nat.bash       a NAT (nftables in a netns of its own) in front of a node: NAT traversal
# Functions here:
#   dl_up NODES PODS_PER_NODE   build the topology, start everything, add pods pod1..podM per node
#   dl_down                     stop and remove everything the lab made (idempotent)
#   dl_status                   daemons, pods and addresses per node
#   dl_exec TARGET CMD...       run CMD in fabric | external | nodeN/host | nodeN/dpu | nodeN/POD
#   dl_nodes                    the node numbers of the lab (from its state)
#   dl_assert_gone              fail, naming what is left, if any netns, process, DPDK dir or state remains
# Knobs (environment): DPU_BUILD_DIR (default <repo>/build/release), DL_VFS (VFs per node incl.
# the management port, default 8), DL_BACKEND (af_xdp | af_packet), DL_UNDERLAY_MTU (1280..1500, default 1500),
# DL_IPSEC (the agents' ipsec setting: false, true, or "{mode: keys}"; default false), DL_IPSEC_PSK=1 (with
# IPsec, a cluster PSK made for the lab), DL_IPSEC_GRACE (the agents' gracePeriodSeconds when the lab sets
# IPsec per node, default 5),
# DL_POD_CIDR_LEN (24: pod CIDR 10.244.N.0/24), DL_DUAL_STACK=1 (IPv6 beside IPv4: pod, cluster and service
# CIDRs, node IPs, the external side; topology.bash has the addresses), DL_CNI_RUNTIME (cnidriver | exec), DL_RUN_DIR (/run/dpu-lab),
# DL_NAT="N..." / DL_NAT_MODE (static | masquerade) / DL_NAT_KEEPALIVE (seconds, default 20): nodes behind
# a NAT (nat.bash; needs IPsec), DL_KUBE=1 (Kubernetes mode: pods come from kubectl, see kube.bash), DL_QUIET=1 (no progress lines), DL_MATRIX_RETRIES (1), DL_TCP_BYTES / DL_UDP_MBIT / DL_UDP_BYTES (matrix sizes).
# Fault tests: dl_daemon_stop N agent|dataplane|host-shim [-9], dl_daemon_start, dl_wipe_dpu_state N
# (a DPU "reboot"), dl_write_cluster_file N... (rewrite the cluster file) — see daemons.bash; a node's own
# publish file keeps it in the cluster: dl_cluster_remove_node N removes both; dl_dpu_reboot N (faults.bash).

DL_LIB_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
DL_SOURCE_DIR=$(cd "$DL_LIB_DIR/../.." && pwd)
: "${DPU_BUILD_DIR:=$DL_SOURCE_DIR/build/release}"

# shellcheck source=../../tests/fakes/fake-sysfs.bash
source "$DL_SOURCE_DIR/tests/fakes/fake-sysfs.bash"
# lab_dataplane_config, lab_remove_dpdk_prefix (and tests/support/shell.bash's `matches`)
# shellcheck source=../../tests/dpu-agent/datapath/netns_lab.bash
source "$DL_SOURCE_DIR/tests/dpu-agent/datapath/netns_lab.bash"
source "$DL_LIB_DIR/core.bash"
source "$DL_LIB_DIR/topology.bash"
source "$DL_LIB_DIR/daemons.bash"
source "$DL_LIB_DIR/pods.bash"
source "$DL_LIB_DIR/traffic.bash"
source "$DL_LIB_DIR/faults.bash"
source "$DL_LIB_DIR/kube.bash"
source "$DL_LIB_DIR/services.bash"
source "$DL_LIB_DIR/policy.bash"
source "$DL_LIB_DIR/ipsec.bash"
source "$DL_LIB_DIR/nat.bash"

dl_nodes() {
  local d
  for d in "$DL_DIR"/n[0-9]*; do [ -d "$d" ] && echo "${d##*/n}"; done | sort -n
}

dl_up() {
  local nodes=${1:-2} pods=${2:-0} vfs=${DL_VFS:-8} n p
  [ "$(id -u)" = 0 ] || { dl_die "needs root (network namespaces, XDP)"; return 1; }
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 50 ] ||
    { dl_die "--nodes must be 1..50, not '$nodes'"; return 1; }
  [[ "$vfs" =~ ^[0-9]+$ ]] && [ "$vfs" -ge 2 ] && [ "$vfs" -le 64 ] || { dl_die "DL_VFS must be 2..64, not '$vfs'"; return 1; }
  [[ "$pods" =~ ^[0-9]+$ ]] && [ "$pods" -le $(( vfs - 1 )) ] ||
    { dl_die "--pods-per-node must be 0..$(( vfs - 1 )) (DL_VFS=$vfs VFs, one is the management port), not '$pods'"; return 1; }
  [[ "${DL_POD_CIDR_LEN:-24}" =~ ^(1[6-9]|2[0-9])$ ]] || { dl_die "DL_POD_CIDR_LEN must be 16..29"; return 1; }
  # Jumbo underlays do not fit the lab: XDP on a veth caps its MTU, the dataplane's mbufs are 2 KB.
  [[ "${DL_UNDERLAY_MTU:-1500}" =~ ^[0-9]+$ ]] && [ "${DL_UNDERLAY_MTU:-1500}" -ge 1280 ] &&
    [ "${DL_UNDERLAY_MTU:-1500}" -le 1500 ] || { dl_die "DL_UNDERLAY_MTU must be 1280..1500"; return 1; }
  [[ "${DL_IPSEC:-false}" =~ ^(false|true|\{mode:\ (off|keys|on)\})$ ]] ||
    { dl_die "DL_IPSEC must be false, true, or \"{mode: off|keys|on}\", not '${DL_IPSEC}'"; return 1; }
  dl_nat_check "$nodes" || return 1
  [ "${DL_DUAL_STACK:-0}" = 0 ] || [ "${DL_DUAL_STACK:-0}" = 1 ] || { dl_die "DL_DUAL_STACK must be 0 or 1"; return 1; }
  local kube=${DL_KUBE:-0}
  [ "$kube" = 0 ] || [ "$kube" = 1 ] || { dl_die "DL_KUBE must be 0 or 1"; return 1; }
  [ "$kube" = 0 ] || [ "$pods" = 0 ] ||
    { dl_die "in Kubernetes mode pods come from kubectl (dpu-lab kubectl run/apply), not --pods-per-node"; return 1; }
  dl_check_binaries || return 1
  local tool
  for tool in ip ethtool curl jq setsid; do
    command -v "$tool" >/dev/null || { dl_die "$tool is not installed (scripts/install-deps.sh)"; return 1; }
  done
  if dl_exists || [ -n "$(ip netns list | grep "^$DL_NAME-")" ]; then
    dl_die "lab $DL_NAME exists already (its state: $DL_DIR); run: lab/dpu-lab --name $DL_NAME down"; return 1
  fi
  mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
  mkdir -p "$DL_DIR" || return 1
  : > "$DL_DIR/created"
  printf 'DL_NODES=%s\nDL_VFS=%s\nDL_POD_CIDR_LEN=%s\nDL_KUBE=%s\nDPU_BUILD_DIR=%s\nDL_IPSEC=%s\nDL_IPSEC_GRACE=%s\nDL_NAT_KEEPALIVE=%s\nDL_DUAL_STACK=%s\n' \
    "$nodes" "$vfs" "${DL_POD_CIDR_LEN:-24}" "$kube" "$DPU_BUILD_DIR" "${DL_IPSEC:-false}" "${DL_IPSEC_GRACE:-5}" \
    "${DL_NAT_KEEPALIVE:-20}" "${DL_DUAL_STACK:-0}" > "$DL_DIR/lab.env"
  dl_nat_record || return 1
  if [ "${DL_IPSEC_PSK:-0}" = 1 ]; then dl_ipsec_make_psk || return 1; fi
  dl_log "wires: fabric bridge, $nodes node(s) with $vfs VFs each"
  dl_fabric_up || return 1
  for (( n = 1; n <= nodes; n++ )); do dl_node_wires_up "$n" "$vfs" || return 1; done
  if [ "$kube" = 1 ]; then
    dl_log "Kubernetes mode: fake API server on $DL_KUBE_IP:$DL_KUBE_PORT, Nodes node1..node$nodes"
    dl_kube_up "$nodes" || return 1
  else
    dl_write_cluster_file $(seq 1 "$nodes")
  fi
  for (( n = 1; n <= nodes; n++ )); do dl_node_configs "$n" "$vfs" || return 1; done
  for (( n = 1; n <= nodes; n++ )); do
    dl_log "node$n: starting dpu-dataplane, dpu-agent, host-shim"
    dl_node_start "$n" || return 1
  done
  if [ "$kube" = 1 ]; then dl_kubelet_start || return 1; fi
  dl_log "nodes up; management ports: $(for n in $(seq 1 "$nodes"); do printf 'node%s %s  ' "$n" "$(dl_mgmt_ip "$n")"; done)"
  for (( n = 1; n <= nodes; n++ )); do
    for (( p = 1; p <= pods; p++ )); do
      local ip
      ip=$(dl_pod_add "$n" "pod$p") && [ -n "$ip" ] || { dl_die "node$n: pod$p got no address"; return 1; }
      dl_log "node$n: pod$p $ip"
    done
  done
}

dl_down() {
  local line kind value ns pid
  [ -n "${DL_NAME:-}" ] || return 0
  if [ -f "$DL_DIR/created" ]; then
    # Daemons first, newest first (host-shim before the agent before the dataplane).
    while read -r kind value; do
      [ "$kind" = proc ] && dl_proc_stop "$value"
    done < <(tac "$DL_DIR/created")
  fi
  for pid in $(dl_lab_pids); do _dl_pid_stop "$pid" -9; done
  # Pods' namespaces before the nodes' (a VF in a pod dies with it either way).
  # Whatever still runs in one of them is the lab's, whatever its command line
  # (a server a test started from elsewhere): deleting the name would leave
  # it running.
  for ns in $(ip netns list | awk '{print $1}' | grep "^$DL_NAME-" | sort -r); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  if [ -f "$DL_DIR/created" ]; then
    while read -r kind value; do
      case $kind in
        netns) ip netns del "$value" 2>/dev/null ;;
        dpdk) lab_remove_dpdk_prefix "$value" ;;
      esac
    done < "$DL_DIR/created"
  fi
  for line in /var/run/dpdk/"$DL_NAME"-dp*; do [ -e "$line" ] && lab_remove_dpdk_prefix "${line##*/}"; done
  [ -n "$DL_DIR" ] && [ "$DL_DIR" != / ] && rm -rf "$DL_DIR"
  return 0
}

dl_assert_gone() {
  local left=() ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep "^$DL_NAME-"); do left+=("netns $ns"); done
  for pid in $(dl_lab_pids); do left+=("process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline")"); done
  for ns in /var/run/dpdk/"$DL_NAME"-dp*; do [ -e "$ns" ] && left+=("DPDK runtime dir $ns"); done
  [ -e "$DL_DIR" ] && left+=("state dir $DL_DIR")
  if [ ${#left[@]} -gt 0 ]; then
    printf 'dpu-lab: lab %s left behind: %s\n' "$DL_NAME" "${left[@]}" >&2
    return 1
  fi
}

dl_status() {
  dl_exists || { echo "lab $DL_NAME: down"; return 0; }
  local n w pid
  echo "lab $DL_NAME: state $DL_DIR, binaries $(grep ^DPU_BUILD_DIR= "$DL_DIR/lab.env" | cut -d= -f2)"
  echo "fabric: netns $(dl_fabric_ns), bridge fabric"
  if dl_dual_stack; then
    echo "dual stack: IPv4 and IPv6; cluster CIDRs $(dl_cluster_cidrs), service CIDRs $(dl_service_cidrs)"
    echo "external: netns $(dl_external_ns), $DL_NODE_GATEWAY/24 and $DL_NODE_GATEWAY6/64, $DL_NODE_ROUTER6 (the node network's gateway) and $(dl_external_ip), $(dl_external_ip6) (outside every cluster range)"
  else
    echo "external: netns $(dl_external_ns), $DL_NODE_GATEWAY/24 (the node network's gateway) and $(dl_external_ip) (outside every cluster range)"
  fi
  if dl_kube_enabled; then
    echo "kubernetes: API https://$DL_KUBE_IP:$DL_KUBE_PORT (fake_kube_apiserver, pid $(cat "$DL_DIR/kube/apiserver.pid" 2>/dev/null)), admin kubeconfig $DL_DIR/kube/admin.kubeconfig (dpu-lab kubectl ...)"
  fi
  for n in $(dl_nodes); do
    if dl_dual_stack; then
      printf 'node%s: host netns %s, dpu netns %s, node IPs %s/24 %s/64 (host PF %s, representor pf0hpf), tunnel %s, pod CIDRs %s, management port %s %s\n' "$n" \
        "$(dl_node_ns "$n" host)" "$(dl_node_ns "$n" dpu)" "$(dl_node_ip "$n")" "$(dl_node_ip6 "$n")" "$DL_HOST_PF" \
        "$(dl_tunnel_ip "$n")" "$(dl_pod_cidrs "$n")" "$(dl_mgmt_ip "$n")" "$(dl_mgmt_ip6 "$n")"
    else
      printf 'node%s: host netns %s, dpu netns %s, node IP %s/24 (host PF %s, representor pf0hpf), tunnel %s, pod CIDR %s, management port %s\n' "$n" \
        "$(dl_node_ns "$n" host)" "$(dl_node_ns "$n" dpu)" "$(dl_node_ip "$n")" "$DL_HOST_PF" "$(dl_tunnel_ip "$n")" \
        "$(dl_pod_cidr "$n")" "$(dl_mgmt_ip "$n")"
    fi
    if dl_nat_node "$n"; then
      printf '  behind a NAT: netns %s, public address %s (its natAddress), mode %s\n' "$(dl_nat_ns "$n")" \
        "$(dl_nat_address "$n")" "$(dl_nat_mode "$n")"
    fi
    for w in dataplane agent host-shim; do
      pid=$(dl_daemon_pid "$n" "$w")
      if [ -n "$pid" ]; then printf '  %-10s running, pid %s\n' "$w" "$pid"; else printf '  %-10s NOT RUNNING\n' "$w"; fi
    done
  done
  local pod
  while read -r n pod; do
    [ -n "$pod" ] && printf '  pod node%s/%s: %s (netns %s)\n' "$n" "$pod" \
      "$(dl_pod_ip "$n" "$pod")$(dl_dual_stack && echo " $(dl_pod_ip6 "$n" "$pod")")" "$(dl_pod_ns "$n" "$pod")"
  done < <(dl_pods)
  local name ip ports backends
  while read -r name ip ports backends; do
    [[ "$name" == */* ]] || name=default/$name
    [ "$name" != default/ ] && printf '  service %s: cluster IP %s, ports %s, backends %s\n' "$name" "$ip" "$ports" "${backends:-(none)}"
  done < <(dl_service_list)
}

dl_exec() {
  local ns
  ns=$(dl_target_ns "$1") || return 1
  shift
  ip netns exec "$ns" "$@"
}
