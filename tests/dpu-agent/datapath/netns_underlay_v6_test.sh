#!/usr/bin/env bash
# System test: an IPv6 underlay routed through a router, with every tunnel
# next hop learnt from the DPU kernels' tables by rtnetlink events. Two
# dpu-dataplanes in "DPU" network namespaces, each uplink0 on its own /64
# (fd00:100:1::1 and fd00:100:2::2) facing a Linux router namespace that
# forwards between them. No static next hops: each dataplane must find its
# peer's next hop through its routes (node1: via the router's link-local
# fe80::fe; node2: via its global fd00:100:2::fe), have the kernel resolve it
# with ND, and take the router's MAC, not the peer's. Pods (IPv4 inside the
# Geneve) sit on veths whose representor ends stay in the DPU namespaces.
# Proves, on one lab:
#   1. pods on the two nodes ping each other over the routed IPv6 underlay;
#   2. each dataplane reports its peer resolved (dpuctl stats) via the router MAC;
#   3. a changed neighbour MAC on node1 reaches the running dataplane: a wrong
#      MAC breaks the path, the right one restores it, and nothing polls the
#      tables between the two (the dataplane logs each change as it happens);
#   4. a deleted neighbour is asked for again at once: the kernel has the
#      router's entry back without any traffic of its own, and pods still ping.
#   netns_underlay_v6_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lab.bash"
lab_require_root_and_tools ping ip ethtool
backend=${DPU_NETNS_BACKEND:-af_xdp}
py=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
tag=$$
dir=$(mktemp -d /tmp/dpu-v6.XXXXXX)
export DPU_PROTO_PY=$dir/py
ns_dpu1=v6dpu1-$tag ns_dpu2=v6dpu2-$tag ns_router=v6rt-$tag ns_pod1=v6pod1-$tag ns_pod2=v6pod2-$tag
pids=()

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in $ns_dpu1 $ns_dpu2 $ns_router $ns_pod1 $ns_pod2; do ip netns del "$ns" 2>/dev/null; done
  for n in 1 2; do lab_remove_dpdk_prefix dpu-v6-$n-$tag; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}
# wait_for SECONDS CMD... — true once CMD succeeds, tried every 50 ms until
# SECONDS have passed (however long each try takes).
wait_for() {
  local end=$(( $(date +%s%N) + $1 * 1000000000 ))
  shift
  until "$@"; do
    [ "$(date +%s%N)" -lt "$end" ] || return 1
    sleep 0.05
  done
}
dpuctl_at() { local n=$1; shift; ip netns exec v6dpu$n-$tag "$dpuctl" --socket "$dir/operator$n.sock" "$@"; }
counter() { dpuctl_at "$1" stats --all | awk -v name="$2" '$1 == name {print $2}'; }

# The underlay: dpu1:uplink0 -- r1:router -- r2:router -- uplink0:dpu2.
for ns in $ns_dpu1 $ns_dpu2 $ns_router; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip netns exec $ns_router sysctl -qw net.ipv6.conf.all.forwarding=1
for n in 1 2; do
  ip link add u$n-$tag netns v6dpu$n-$tag type veth peer name r$n netns $ns_router
  ip -n v6dpu$n-$tag link set u$n-$tag name uplink0
  ip -n $ns_router link set r$n address 02:fe:00:00:00:0$n
  ip -n $ns_router addr add fd00:100:$n::fe/64 dev r$n nodad
  ip -n v6dpu$n-$tag addr add fd00:100:$n::$n/64 dev uplink0 nodad
  # The uplink path carries whole frames: no partial checksums.
  ip netns exec v6dpu$n-$tag ethtool -K uplink0 tx off >/dev/null 2>&1 || true
  ip netns exec $ns_router ethtool -K r$n tx off >/dev/null 2>&1 || true
  ip -n $ns_router link set r$n up
  ip -n v6dpu$n-$tag link set uplink0 up
done
# A router's usual link-local on node1's side, the one node1 routes through.
ip -n $ns_router addr add fe80::fe/64 dev r1 nodad
ip -n $ns_dpu1 -6 route add fd00:100:2::/64 via fe80::fe dev uplink0
ip -n $ns_dpu2 -6 route add fd00:100:1::/64 via fd00:100:2::fe dev uplink0

for n in 1 2; do
  pod=v6pod$n-$tag
  ip netns add "$pod"; ip -n "$pod" link set lo up
  lab_add_vf v6dpu$n-$tag pf0vf1 "$pod" eth0
  ip -n "$pod" link set eth0 address 0a:58:0a:f4:0$n:05
  ip -n "$pod" link set eth0 mtu 1400
  ip -n "$pod" addr add 10.244.$n.5/24 dev eth0
  ip -n "$pod" link set eth0 up
  ip -n "$pod" route add default via 10.244.$n.1
done

model() {  # node number → LogicalModel JSON
  local n=$1 o=$((3 - $1))
  cat <<JSON
{"node": {"name": "node$n", "tunnel_ip": "fd00:100:$n::$n", "underlay_mtu": 1500, "pod_mtu": 1400,
          "router_mac": "0a:58:0a:f4:00:01", "cluster_cidrs": ["10.244.0.0/16"]},
 "local_subnets": [{"cidr": "10.244.$n.0/24", "gateway_ip": "10.244.$n.1", "datapath_key": $n}],
 "ports": [{"name": "pod$n", "key": 1, "kind": "POD", "representor": "pf0vf1", "mac": "0a:58:0a:f4:0$n:05",
            "ips": ["10.244.$n.5"], "datapath_key": $n}],
 "remote_nodes": [{"name": "node$o", "tunnel_ip": "fd00:100:$o::$o",
                   "subnets": [{"cidr": "10.244.$o.0/24", "gateway_ip": "10.244.$o.1", "datapath_key": $o}]}]}
JSON
}

for n in 1 2; do
  model $n > "$dir/model$n.json"
  lab_dataplane_config $n $backend dpu-v6-$n-$tag "$dir/program$n.sock" "$dir/operator$n.sock" |
    sed "s/^tunnel_ip: .*/tunnel_ip: fd00:100:$n::$n/" > "$dir/dp$n.yaml"
  grep -q "^tunnel_ip: fd00:100:$n::$n$" "$dir/dp$n.yaml" || fail "the config of node $n has no IPv6 tunnel_ip"
  ip netns exec v6dpu$n-$tag "$dataplane" --config "$dir/dp$n.yaml" > "$dir/dataplane$n.log" 2>&1 &
  pids+=($!)
done
for n in 1 2; do
  lab_wait_socket "$dir/program$n.sock" || fail "dataplane $n did not open its programming socket"
  "$py" "$here/dataplane_client.py" --socket "$dir/program$n.sock" --model "$dir/model$n.json" \
    --generation 1 --hold >> "$dir/client$n.log" 2>&1 &
  pids+=($!)
done
for n in 1 2; do
  wait_for 10 matches holding "$dir/client$n.log" || fail "client $n did not program its dataplane"
done

# 1. Pod to pod over the routed IPv6 underlay (the first packets wait for ND on both sides).
pod_ping() { ip netns exec v6pod$1-$tag ping -c 1 -W 1 10.244.$2.5 >/dev/null 2>&1; }
wait_for 20 pod_ping 1 2 || fail "pod1 cannot reach pod2 over the IPv6 underlay"
ip netns exec $ns_pod1 ping -c 3 -i 0.2 -W 2 10.244.2.5 > "$dir/ping1.log" || fail "pod1 cannot ping pod2"
ip netns exec $ns_pod2 ping -c 3 -i 0.2 -W 2 10.244.1.5 > "$dir/ping2.log" || fail "pod2 cannot ping pod1"
echo "pods reach each other over Geneve on a routed IPv6 underlay"

# 2. Each dataplane resolved its peer through the router's MAC on its side.
for n in 1 2; do
  o=$((3 - n))
  [ "$(counter $n tunnel_peers_resolved)" = 1 ] || fail "node$n: tunnel_peers_resolved is not 1"
  [ "$(counter $n tunnel_peers_unresolved)" = 0 ] || fail "node$n: tunnel_peers_unresolved is not 0"
  [ "$(counter $n neighbour_events)" -gt 0 ] || fail "node$n: no neighbour events read"
  matches "tunnel peer fd00:100:$o::$o via 02:fe:00:00:00:0$n" "$dir/dataplane$n.log" ||
    fail "node$n does not send to fd00:100:$o::$o via the router's MAC 02:fe:00:00:00:0$n"
done
echo "next hops: node1 via fe80::fe, node2 via fd00:100:2::fe, both the router's MAC"
dpuctl_at 1 stats --all | grep -E '^(tunnel_peers|neighbour_)' | sed 's/^/  /'

# 3. A wrong MAC for node1's gateway reaches the dataplane and breaks the path;
# the right one, back, restores it.
ip -n $ns_dpu1 -6 neigh replace fe80::fe dev uplink0 lladdr 02:00:00:00:00:99 nud permanent
wait_for 5 matches "tunnel peer fd00:100:2::2 via 02:00:00:00:00:99" "$dir/dataplane1.log" ||
  fail "node1's dataplane did not take the changed neighbour MAC"
pod_ping 1 2 && fail "pod1 still reaches pod2 with node1's gateway at a wrong MAC"
ip -n $ns_dpu1 -6 neigh replace fe80::fe dev uplink0 lladdr 02:fe:00:00:00:01 nud reachable
wait_for 5 pod_ping 1 2 || fail "pod1 does not reach pod2 once the gateway's MAC is right again"
[ "$(grep -c "tunnel peer fd00:100:2::2 via 02:fe:00:00:00:01" "$dir/dataplane1.log")" -ge 2 ] ||
  fail "node1's dataplane did not log the MAC's return"
echo "a changed neighbour MAC reaches the running dataplane, both ways"

# 4. A deleted neighbour is asked for again at once, by the dataplane's probe:
# node1's kernel sends nothing else to the router.
probes=$(counter 1 neighbour_probes)
ip -n $ns_dpu1 -6 neigh del fe80::fe dev uplink0
gateway_back() { ip -n $ns_dpu1 -6 neigh show fe80::fe dev uplink0 | matches -E 'lladdr 02:fe:00:00:00:01 .*(REACHABLE|STALE|DELAY)'; }
wait_for 5 gateway_back || fail "node1's kernel did not resolve the router again: $(ip -n $ns_dpu1 -6 neigh show fe80::fe dev uplink0)"
[ "$(counter 1 neighbour_probes)" -gt "$probes" ] || fail "no probe after the neighbour was deleted"
wait_for 5 matches "tunnel peer fd00:100:2::2 resolved again via 02:fe:00:00:00:01" "$dir/dataplane1.log" ||
  fail "node1's dataplane did not see the router's entry come back"
ip netns exec $ns_pod1 ping -c 3 -i 0.2 -W 2 10.244.2.5 > "$dir/ping3.log" || fail "pod1 cannot ping pod2 after the delete"
echo "a deleted neighbour is resolved again at once; traffic goes on"
echo "PASS ($backend)"
