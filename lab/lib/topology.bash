# lab/lib/topology.bash — the lab's wires (ARCHITECTURE.md "The lab"): the
# fabric netns with its bridge, the external netns on it (the world outside
# the cluster), and per node a host netns and a DPU netns joined by the
# host<->DPU link, the host PF (a veth: the host's PF netdev with the node IP,
# its representor pf0hpf in the DPU netns), the node's VFs (veth pairs: the VF
# end in the host netns, described by the fake sysfs tree of
# tests/fakes/fake-sysfs.bash; the representor pf0vfN in the DPU netns) and
# the DPU uplink on the fabric. Sourced by lab/lib/lab.bash.
#
# Addresses (the same in every node: each node has its own namespaces):
#   host<->DPU link   host end "dpulink" 169.254.0.1/30, DPU end "hostlink" 169.254.0.2/30
#                     (dpu-agent's REST API listens on 169.254.0.2:9443, only there)
#   uplink            "uplink0" in the DPU netns, tunnel IP 192.168.100.N/24; its peer
#                     "nN" is a port of bridge "fabric" in the fabric netns (behind a NAT:
#                     10.200.N.2/24, its peer in the NAT's netns, see nat.bash)
#   VFs               host netns: p0v<i> (PCI $(fake_sysfs_vf_pci i)); DPU netns: pf0vf<i>
#                     the last VF is the host management port (host-shim renames it dpu-mgmt)
#   pod CIDR          10.244.N.0/24 (gateway .1 on the DPU, management port .2); DL_POD_CIDR_LEN=27
#                     makes it 10.244.N.0/27 (a small pool: tests that need the IPAM to reuse addresses)
#   host PF           "hostpf0" in the host netns: the node IP 172.18.0.N/24, default route via
#                     172.18.0.254; its peer "pf0hpf" (the host PF representor) in the DPU netns,
#                     which the dataplane bridges with the uplink (north–south). The host netns
#                     has no netdev named after the fake sysfs PF (p0): nothing collides.
#   external          netns NAME-external, "ext0" on the fabric bridge: 172.18.0.254/24 (the node
#                     network's gateway) and, on its loopback, 203.0.113.1 (an address outside
#                     every cluster range: "the internet", reached through the gateway)
#
# Dual stack (`dpu-lab up --dual-stack`, DL_DUAL_STACK=1; recorded in lab.env) adds IPv6 beside
# every IPv4 range above, which stays as it is:
#   pod CIDR          fd00:10:244:N::/64 (gateway ::1 on the DPU, management port ::2, pods from
#                     ::3), inside the cluster CIDR fd00:10:244::/48 (N written in decimal digits: a
#                     distinct group per node); a pod gets one address of each family
#   service CIDR      fd00:10:96::/112 (a dual-stack service's IPv6 cluster IP: the first free
#                     fd00:10:96::X from ::a)
#   host PF           hostpf0 also has the node IP fd00:18::N/64 (nodad: no DAD wait), default
#                     route via fe80::fe, the gateway's link-local address, as a router
#                     advertisement gives it (and so in the agent's northSouth.gateways). pf0hpf
#                     keeps IPv6 off: the dataplane bridges the frames, the representor has no
#                     address of its own and sends nothing
#   external          ext0 also has fd00:18::fe/64 and fe80::fe (the gateway) and, on its
#                     loopback, 2001:db8:1::1 (the IPv6 "internet", reached through the gateway)
#   fabric            the bridge does no multicast snooping: a hub for neighbour solicitations,
#                     whichever MLD reports it saw before the dataplanes ran
#
# Functions (public):
#   dl_fabric_up                    the fabric netns and its bridge
#   dl_node_wires_up N NUMVFS       host + DPU netns, link, VFs, uplink of node N
#   dl_node_repair_vfs N            recreate VFs that died with a pod netns deleted without CNI DEL
#   dl_node_vfs_home N              how many pool VFs are in the host netns (host-shim returns a
#                                   deleted pod's VF asynchronously: poll)
#   dl_tunnel_ip N / dl_pod_cidr N / dl_node_name N / dl_node_ip N (the node IP, no prefix)
#   dl_external_ns / dl_external_ip (203.0.113.1) / DL_NODE_GATEWAY (172.18.0.254)
#   dl_dual_stack                   true in a dual-stack lab (DL_DUAL_STACK=1)
#   dl_pod_cidr6 N / dl_node_ip6 N / dl_external_ip6 (2001:db8:1::1) / DL_NODE_GATEWAY6 (fd00:18::fe)
#                                   / DL_NODE_ROUTER6 (fe80::fe, the same gateway's link-local address)
#                                   the IPv6 ones (defined in any lab; used only in a dual-stack one)
#   dl_pod_cidrs N / dl_cluster_cidrs / dl_service_cidrs
#                                   "A, B" lists of the lab's CIDRs (IPv4 first; IPv6 in dual stack)
#   dl_ns_exec NS CMD...            ip netns exec NS CMD...

DL_LINK_HOST_IP=169.254.0.1
DL_LINK_DPU_IP=169.254.0.2
DL_API_PORT=9443
DL_METRICS_PORT=9476   # dpu-dataplane's Prometheus endpoint, on the same link
DL_PF=p0
DL_VF_PREFIX=p0
DL_HOST_PF=hostpf0        # the host PF netdev in the host netns (its representor: pf0hpf)
DL_NODE_NET=172.18.0      # the node network (/24): node N is .N, the gateway .254
DL_NODE_GATEWAY=$DL_NODE_NET.254
DL_EXTERNAL_IP=203.0.113.1
DL_CLUSTER_CIDR=10.244.0.0/16
DL_SERVICE_CIDR=10.96.0.0/12
# Dual stack (DL_DUAL_STACK=1): the IPv6 ranges.
DL_NODE_NET6=fd00:18:     # the node network (/64): node N is ::N, the gateway ::fe
DL_NODE_GATEWAY6=fd00:18::fe   # the gateway's address on the node network
DL_NODE_ROUTER6=fe80::fe       # and its link-local one, which the routes and northSouth.gateways use
DL_EXTERNAL_IP6=2001:db8:1::1
DL_CLUSTER_CIDR6=fd00:10:244::/48
DL_SERVICE_CIDR6=fd00:10:96::/112

# Behind a NAT (nat.bash) a node's tunnel IP is a private one.
dl_tunnel_ip() { if dl_nat_node "$1"; then echo "10.200.$1.2"; else echo "192.168.100.$1"; fi; }
dl_node_ip() { echo "$DL_NODE_NET.$1"; }
dl_external_ns() { echo "$DL_NAME-external"; }
dl_external_ip() { echo "$DL_EXTERNAL_IP"; }
dl_pod_cidr() { echo "10.244.$1.0/${DL_POD_CIDR_LEN:-24}"; }
dl_dual_stack() { [ "${DL_DUAL_STACK:-0}" = 1 ]; }
dl_node_ip6() { echo "$DL_NODE_NET6:$1"; }
dl_external_ip6() { echo "$DL_EXTERNAL_IP6"; }
dl_pod_cidr6() { echo "fd00:10:244:$1::/64"; }
dl_pod_cidrs() { if dl_dual_stack; then echo "$(dl_pod_cidr "$1"), $(dl_pod_cidr6 "$1")"; else dl_pod_cidr "$1"; fi; }
dl_cluster_cidrs() { if dl_dual_stack; then echo "$DL_CLUSTER_CIDR, $DL_CLUSTER_CIDR6"; else echo "$DL_CLUSTER_CIDR"; fi; }
dl_service_cidrs() { if dl_dual_stack; then echo "$DL_SERVICE_CIDR, $DL_SERVICE_CIDR6"; else echo "$DL_SERVICE_CIDR"; fi; }
dl_node_name() { echo "node$1"; }
dl_ns_exec() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

_dl_netns_add() {
  dl_record netns "$1"
  ip netns add "$1" || { dl_die "cannot create netns $1"; return 1; }
  ip -n "$1" link set lo up
}

# Whole frames on every veth the dataplane touches (af_xdp/af_packet hand the
# DPDK ports what the kernel put on the wire: no partial checksums, no TSO).
_dl_no_offload() { ip netns exec "$1" ethtool -K "$2" tx off >/dev/null 2>&1 || true; }

dl_fabric_up() {
  local ns ext
  ns=$(dl_fabric_ns)
  _dl_netns_add "$ns" || return 1
  ip -n "$ns" link add fabric type bridge || return 1
  # A dumb switch for IPv6 too: a solicitation reaches every port, whatever MLD
  # reports the bridge saw (a host's went nowhere while its dataplane was not up yet).
  if dl_dual_stack; then ip -n "$ns" link set fabric type bridge mcast_snooping 0 || return 1; fi
  ip -n "$ns" link set fabric up
  # The world outside the cluster: the node network's gateway, and beyond it an
  # address in no cluster range.
  ext=$(dl_external_ns)
  _dl_netns_add "$ext" || return 1
  ip link add ext0 netns "$ext" type veth peer name ext netns "$ns" || return 1
  ip -n "$ext" addr add "$DL_NODE_GATEWAY/24" dev ext0
  # (On its loopback: a dummy netdev needs a kernel module a CI machine may lack.)
  ip -n "$ext" addr add "$DL_EXTERNAL_IP/32" dev lo || return 1
  if dl_dual_stack; then
    ip -n "$ext" addr add "$DL_NODE_GATEWAY6/64" dev ext0 nodad || return 1
    ip -n "$ext" addr add "$DL_NODE_ROUTER6/64" dev ext0 nodad || return 1
    ip -n "$ext" addr add "$DL_EXTERNAL_IP6/128" dev lo || return 1
  fi
  _dl_no_offload "$ext" ext0
  _dl_no_offload "$ns" ext
  ip -n "$ns" link set ext master fabric
  ip -n "$ns" link set ext up
  ip -n "$ext" link set ext0 up
}

_dl_vf_to_dpu() {  # N I: move representor pf0vf<i> from the host netns to the DPU netns
  local n=$1 i=$2 host dpu
  host=$(dl_node_ns "$n" host); dpu=$(dl_node_ns "$n" dpu)
  ip -n "$host" link set "pf0vf$i" netns "$dpu" || return 1
  _dl_no_offload "$host" "$(fake_sysfs_vf_name "$DL_VF_PREFIX" "$i")"
  _dl_no_offload "$dpu" "pf0vf$i"
  ip -n "$dpu" link set "pf0vf$i" up
}

dl_node_wires_up() {
  local n=$1 vfs=$2 host dpu fab i
  host=$(dl_node_ns "$n" host); dpu=$(dl_node_ns "$n" dpu); fab=$(dl_fabric_ns)
  mkdir -p "$DL_DIR/n$n" || return 1
  _dl_netns_add "$host" || return 1
  _dl_netns_add "$dpu" || return 1
  # host<->DPU link (created in place: no name is ever used in the machine's netns)
  ip link add dpulink netns "$host" type veth peer name hostlink netns "$dpu" || return 1
  ip -n "$host" addr add "$DL_LINK_HOST_IP/30" dev dpulink
  ip -n "$dpu" addr add "$DL_LINK_DPU_IP/30" dev hostlink
  ip -n "$host" link set dpulink up
  ip -n "$dpu" link set hostlink up
  # uplink on the fabric
  local mtu=${DL_UNDERLAY_MTU:-1500}  # the physical network's MTU, which the agent's pod MTU derives from
  if dl_nat_node "$n"; then
    # Behind a NAT (nat.bash): the uplink's peer is the NAT's private side, the default route goes there.
    _dl_netns_add "$(dl_nat_ns "$n")" || return 1
    ip link add uplink0 netns "$dpu" mtu "$mtu" type veth peer name priv0 netns "$(dl_nat_ns "$n")" mtu "$mtu" ||
      return 1
    ip -n "$dpu" addr add "$(dl_tunnel_ip "$n")/24" dev uplink0
    _dl_no_offload "$dpu" uplink0
    dl_nat_up "$n" || return 1
    ip -n "$dpu" link set uplink0 up
    ip -n "$dpu" route add default via "10.200.$n.1" dev uplink0 || return 1
  else
    ip link add uplink0 netns "$dpu" mtu "$mtu" type veth peer name "n$n" netns "$fab" mtu "$mtu" || return 1
    ip -n "$dpu" addr add "$(dl_tunnel_ip "$n")/24" dev uplink0
    _dl_no_offload "$dpu" uplink0
    _dl_no_offload "$fab" "n$n"
    ip -n "$fab" link set "n$n" master fabric
    ip -n "$fab" link set "n$n" up
    ip -n "$dpu" link set uplink0 up
  fi
  # The host PF: the node IP on the host's end; the DPU bridges its
  # representor with the uplink. The representor has no address and sends
  # nothing of its own (no IPv6 link-local chatter towards the host).
  ip link add "$DL_HOST_PF" netns "$host" mtu "$mtu" type veth peer name pf0hpf netns "$dpu" mtu "$mtu" || return 1
  ip netns exec "$dpu" sysctl -qw net.ipv6.conf.pf0hpf.disable_ipv6=1
  _dl_no_offload "$host" "$DL_HOST_PF"
  _dl_no_offload "$dpu" pf0hpf
  ip -n "$dpu" link set pf0hpf up
  ip -n "$host" addr add "$(dl_node_ip "$n")/24" dev "$DL_HOST_PF"
  ip -n "$host" link set "$DL_HOST_PF" up
  ip -n "$host" route add default via "$DL_NODE_GATEWAY" dev "$DL_HOST_PF"
  if dl_dual_stack; then
    # nodad: the address is usable at once (the node network's addresses are the lab's to give).
    ip -n "$host" addr add "$(dl_node_ip6 "$n")/64" dev "$DL_HOST_PF" nodad || return 1
    ip -n "$host" -6 route add default via "$DL_NODE_ROUTER6" dev "$DL_HOST_PF" || return 1
  fi
  # VFs: the fake SR-IOV PF in the host netns, then each representor to the DPU.
  fake_sysfs_create "$DL_DIR/n$n/sysfs" "$DL_PF" "$vfs" "$DL_VF_PREFIX" "$host" || return 1
  for (( i = 0; i < vfs; i++ )); do _dl_vf_to_dpu "$n" "$i" || return 1; done
}

# A veth VF dies with the pod netns it is in when that netns is deleted without
# a CNI DEL (a real VF would return to the host); this puts such VFs back. A VF
# whose representor still exists is alive somewhere and is left alone.
dl_node_repair_vfs() {
  local n=$1 host dpu vfs i vf tries
  host=$(dl_node_ns "$n" host); dpu=$(dl_node_ns "$n" dpu)
  vfs=$(cat "$DL_DIR/n$n/sysfs/class/net/$DL_PF/device/sriov_numvfs")
  for (( i = 0; i < vfs - 1; i++ )); do
    vf=$(fake_sysfs_vf_name "$DL_VF_PREFIX" "$i")
    ip -n "$host" link show "$vf" >/dev/null 2>&1 && continue
    tries=0  # a netns being deleted releases its veths asynchronously
    while ip -n "$dpu" link show "pf0vf$i" >/dev/null 2>&1 && [ $tries -lt 40 ]; do sleep 0.05; tries=$(( tries + 1 )); done
    ip -n "$dpu" link show "pf0vf$i" >/dev/null 2>&1 && continue
    ip -n "$host" link add "$vf" type veth peer name "pf0vf$i" || return 1
    _dl_vf_to_dpu "$n" "$i" || return 1
  done
}

dl_node_vfs_home() {
  ip -n "$(dl_node_ns "$1" host)" -o link show | grep -c ": $DL_VF_PREFIX""v[0-9]*[:@]"
}
