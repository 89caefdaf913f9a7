#!/usr/bin/env bash
# System test: twenty representors added at once. One dpu-dataplane in a DPU
# network namespace with its uplink on a veth, twenty pods (a netns each,
# eth0 a veth whose peer pf0vfN in the DPU namespace is the representor) and
# one FullSync that names all twenty, from the scripted programming client.
# The mbuf pool (16,383) cannot give every port af_xdp's 3,104 mbufs. Proves:
#   1. every representor receives and delivers real packets: each pod pings
#      the next one, and every port counts received packets;
#   2. the budget holds and is visible in `dpuctl ports --json`: every port has
#      a backend and its mbufs, the first representors (in attach order) are on
#      af_xdp, the rest on af_packet with the mbuf budget as the reason, and
#      what is budgeted fits the pool.
# With DPDK's default pool layout and no budget, the af_xdp representors whose
# fill rings were stocked from the upper part of the pool received nothing
# (mbuf_pool.h), and the pool ran dry under af_packet ports.
#   netns_representors_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lab.bash"
lab_require_root_and_tools ping ip ethtool jq
py=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
pods=20
pool=16383
tag=$$
dir=$(mktemp -d /tmp/dpu-reps.XXXXXX)
export DPU_PROTO_PY=$dir/py
dpu=reps-dpu-$tag peer=reps-peer-$tag
pod_ns() { echo "reps-p$1-$tag"; }
pids=()

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for (( i = 0; i < pods; i++ )); do ip netns del "$(pod_ns $i)" 2>/dev/null; done
  ip netns del "$dpu" 2>/dev/null; ip netns del "$peer" 2>/dev/null
  lab_remove_dpdk_prefix "dpu-reps-$tag"
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  ip netns exec "$dpu" "$dpuctl" --socket "$dir/operator.sock" ports >&2 2>&1
  tail -n 30 "$dir/dataplane.log" >&2
  exit 1
}
ctl() { ip netns exec "$dpu" "$dpuctl" --socket "$dir/operator.sock" "$@"; }

ip netns add "$dpu"; ip -n "$dpu" link set lo up
ip netns add "$peer"
ip link add "u1-$tag" netns "$dpu" type veth peer name "u2-$tag" netns "$peer"
ip -n "$dpu" link set "u1-$tag" name uplink0
ip -n "$dpu" addr add 192.168.100.1/24 dev uplink0
ip -n "$dpu" link set uplink0 up
ip -n "$peer" link set "u2-$tag" up
ports=""
for (( i = 0; i < pods; i++ )); do
  ns=$(pod_ns $i)
  ip netns add "$ns"; ip -n "$ns" link set lo up
  lab_add_vf "$dpu" "pf0vf$i" "$ns" eth0
  mac=$(printf '0a:58:0a:f4:01:%02x' $(( 10 + i )))
  ip -n "$ns" link set eth0 address "$mac" mtu 1400
  ip -n "$ns" addr add "10.244.1.$(( 10 + i ))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via 10.244.1.1
  ports+="${ports:+,}{\"name\": \"pod$i\", \"key\": $(( i + 1 )), \"kind\": \"POD\", \"representor\": \"pf0vf$i\",
           \"mac\": \"$mac\", \"ips\": [\"10.244.1.$(( 10 + i ))\"], \"datapath_key\": 1}"
done
cat > "$dir/model.json" <<JSON
{"node": {"name": "node1", "tunnel_ip": "192.168.100.1", "underlay_mtu": 1500, "pod_mtu": 1400,
          "router_mac": "0a:58:0a:f4:00:01", "cluster_cidrs": ["10.244.0.0/16"]},
 "local_subnets": [{"cidr": "10.244.1.0/24", "gateway_ip": "10.244.1.1", "datapath_key": 1}],
 "ports": [$ports]}
JSON
lab_dataplane_config 1 af_xdp "dpu-reps-$tag" "$dir/program.sock" "$dir/operator.sock" |
  sed "s/^mbuf_pool_size: .*/mbuf_pool_size: $pool/" > "$dir/dataplane.yaml"
grep -q "^mbuf_pool_size: $pool$" "$dir/dataplane.yaml" || fail "no mbuf_pool_size in the lab's dataplane config"
ip netns exec "$dpu" "$dataplane" --config "$dir/dataplane.yaml" > "$dir/dataplane.log" 2>&1 &
pids+=($!)
lab_wait_socket "$dir/program.sock" || fail "the dataplane did not open its programming socket"
"$py" "$here/dataplane_client.py" --socket "$dir/program.sock" --model "$dir/model.json" --hold > "$dir/client.log" 2>&1 &
pids+=($!)
for _ in $(seq 400); do grep -q holding "$dir/client.log" 2>/dev/null && break; sleep 0.05; done
grep -q holding "$dir/client.log" || fail "the client did not program the dataplane: $(cat "$dir/client.log")"
# The FullSync's reply came after the ports were reconciled: none may be missing.
problems=$(grep -c '"problems"' "$dir/client.log" || true)
[ "$problems" = 0 ] || fail "the dataplane reports ports it could not open: $(grep problems "$dir/client.log")"
echo "twenty representors opened from one FullSync"

# 1. Each pod pings the next one (all at once); the first packets wait for ARP.
for (( i = 0; i < pods; i++ )); do
  to=10.244.1.$(( 10 + (i + 1) % pods ))
  ( for _ in $(seq 10); do ip netns exec "$(pod_ns $i)" ping -c 1 -W 1 "$to" >/dev/null 2>&1 && break; done
    ip netns exec "$(pod_ns $i)" ping -c 3 -i 0.2 -W 2 "$to" > "$dir/ping$i.log" 2>&1; echo $? > "$dir/ping$i.rc" ) &
done
wait_pings() { for (( i = 0; i < pods; i++ )); do [ -f "$dir/ping$i.rc" ] || return 1; done; }
for _ in $(seq 1200); do wait_pings && break; sleep 0.05; done
wait_pings || fail "the pings did not end"
bad=()
for (( i = 0; i < pods; i++ )); do [ "$(cat "$dir/ping$i.rc")" = 0 ] || bad+=("pod$i"); done
[ ${#bad[@]} = 0 ] || fail "pods that got no answer from the next pod: ${bad[*]}"
echo "every pod reaches the next one"

ctl --json ports > "$dir/ports.json"
ctl ports | sed 's/^/  /'
silent=$(jq -r '[.ports[] | select(.role == "representor" and ((.rx_packets | tonumber) == 0 or (.tx_packets | tonumber) == 0)) | .name] | join(" ")' "$dir/ports.json")
[ -z "$silent" ] || fail "representors that received or sent nothing: $silent"
echo "every representor received and sent packets"

# 2. The budget: backends, reasons, mbufs.
reps=$(jq '[.ports[] | select(.role == "representor")] | length' "$dir/ports.json")
[ "$reps" = "$pods" ] || fail "$reps representors listed, not $pods"
nameless=$(jq -r '[.ports[] | select(.backend == "" or (.mbufs | tonumber) == 0) | .name] | join(" ")' "$dir/ports.json")
[ -z "$nameless" ] || fail "ports without a backend or a budget: $nameless"
# Attach order is the port key, pod0 first.
order=$(jq -r '[.ports[] | select(.role == "representor")] | sort_by(.name | ltrimstr("pf0vf") | tonumber) | map(.backend) | join(" ")' "$dir/ports.json")
xdp=$(tr ' ' '\n' <<< "$order" | grep -c '^af_xdp$' || true)
[ "$xdp" -ge 2 ] || fail "only $xdp representors on af_xdp: $order"
grep -Eq "^(af_xdp ){$xdp}(af_packet ?)+$" <<< "$order " || fail "af_xdp is not given in attach order: $order"
reasonless=$(jq -r '[.ports[] | select(.backend == "af_packet" and (.backend_reason | contains("mbuf budget") | not)) | .name] | join(" ")' "$dir/ports.json")
[ -z "$reasonless" ] || fail "af_packet ports that do not say the mbuf budget is why: $reasonless"
budgeted=$(jq '[.ports[].mbufs | tonumber] | add' "$dir/ports.json")
ctl --json stats > "$dir/stats.json"
counter() { jq -r --arg n "$1" '.counters[] | select(.name == $n) | .value' "$dir/stats.json"; }
reserved=$(counter mbufs_reserved)
[ "$(counter mbufs_budgeted)" = "$budgeted" ] || fail "mbufs_budgeted $(counter mbufs_budgeted), the ports' sum $budgeted"
[ $(( budgeted + reserved )) -le "$pool" ] || fail "$budgeted mbufs budgeted and $reserved reserved: more than the pool's $pool"
echo "budget: uplink and $xdp representors on af_xdp, $(( pods - xdp )) on af_packet (mbuf budget), $budgeted of $pool mbufs budgeted, $reserved reserved, $(counter mbufs_free) free"
echo "PASS"
