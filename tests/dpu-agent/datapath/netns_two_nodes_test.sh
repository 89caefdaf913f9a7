#!/usr/bin/env bash
# System test: two dpu-dataplanes, each in its own "DPU" network namespace,
# joined by a veth "wire" (the underlay: the kernel owns the tunnel IPs on it,
# our XDP program steers Geneve to the dataplane's AF_XDP socket). Each node
# has a pod namespace whose eth0 is a veth whose peer, pf0vf1 in the DPU
# namespace, is the representor (hot-plugged when the model names it).
# Both dataplanes are programmed by the scripted client, which stays connected
# as an agent does. Proves:
#   1. pods on the two nodes ping each other through Geneve;
#   2. the SSH-like management traffic on the wire still reaches the kernel
#      (a TCP connect to the peer DPU's kernel works next to the XDP program);
#   3. killing the programming client and starting it again mid-traffic
#      (Hello + FullSync of the same model, a new generation) loses no packet
#      of a ping -i 0.01 flood;
#   4. a Delta that detaches the pod removes its representor port from the
#      running dataplane; one that attaches it again hot-plugs it anew.
# Runs with the uplink and representors on af_xdp (DPU_NETNS_BACKEND=af_packet
# forces af_packet); reports which one the dataplane used.
#   netns_two_nodes_test.sh BUILD_DIR
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
dir=$(mktemp -d /tmp/dpu-netns.XXXXXX)
export DPU_PROTO_PY=$dir/py
ns_dpu1=dpu1-$tag ns_dpu2=dpu2-$tag ns_pod1=pod1-$tag ns_pod2=pod2-$tag
pids=()
client1=

cleanup() {
  set +e
  [ -n "$client1" ] && kill "$client1" 2>/dev/null
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in $ns_dpu1 $ns_dpu2 $ns_pod1 $ns_pod2; do ip netns del "$ns" 2>/dev/null; done
  for n in 1 2; do lab_remove_dpdk_prefix dpu-netns$n-$tag; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}

lab_make_dpu_pair $ns_dpu1 $ns_dpu2 $tag
# A pod per node: eth0 in the pod, the representor pf0vf1 in the DPU.
for n in 1 2; do
  pod=pod$n-$tag
  ip netns add "$pod"; ip -n "$pod" link set lo up
  lab_add_vf dpu$n-$tag pf0vf1 "$pod" eth0
  ip -n "$pod" link set eth0 address 0a:58:0a:f4:0$n:05
  ip -n "$pod" link set eth0 mtu 1400
  ip -n "$pod" addr add 10.244.$n.5/24 dev eth0
  ip -n "$pod" link set eth0 up
  ip -n "$pod" route add default via 10.244.$n.1
done

model() {  # node number → LogicalModel JSON
  local n=$1 o=$((3 - $1))
  cat <<JSON
{"node": {"name": "node$n", "tunnel_ip": "192.168.100.$n", "underlay_mtu": 1500, "pod_mtu": 1400,
          "router_mac": "0a:58:0a:f4:00:01", "cluster_cidrs": ["10.244.0.0/16"]},
 "local_subnets": [{"cidr": "10.244.$n.0/24", "gateway_ip": "10.244.$n.1", "datapath_key": $n}],
 "ports": [{"name": "pod$n", "key": 1, "kind": "POD", "representor": "pf0vf1", "mac": "0a:58:0a:f4:0$n:05",
            "ips": ["10.244.$n.5"], "datapath_key": $n}],
 "remote_nodes": [{"name": "node$o", "tunnel_ip": "192.168.100.$o",
                   "subnets": [{"cidr": "10.244.$o.0/24", "gateway_ip": "10.244.$o.1", "datapath_key": $o}]}]}
JSON
}

for n in 1 2; do
  model $n > "$dir/model$n.json"
  lab_dataplane_config $n $backend dpu-netns$n-$tag "$dir/program$n.sock" "$dir/operator$n.sock" > "$dir/dp$n.yaml"
  ip netns exec dpu$n-$tag "$dataplane" --config "$dir/dp$n.yaml" > "$dir/dataplane$n.log" 2>&1 &
  pids+=($!)
done
for n in 1 2; do
  lab_wait_socket "$dir/program$n.sock" || fail "dataplane $n did not open its programming socket"
done
grep -h "uplink uplink: ethdev" "$dir"/dataplane*.log | sed 's/^/  /'

start_client() {  # node, generation → pid (stays connected)
  "$py" "$here/dataplane_client.py" --socket "$dir/program$1.sock" --model "$dir/model$1.json" \
    --generation "$2" --hold >> "$dir/client$1.log" 2>&1 &
  echo $!
}
client1=$(start_client 1 1)
pids+=($(start_client 2 1))
for n in 1 2; do
  for _ in $(seq 200); do grep -q holding "$dir/client$n.log" 2>/dev/null && break; sleep 0.05; done
  grep -q holding "$dir/client$n.log" || fail "client $n did not program its dataplane"
done

# 1. Pod to pod across the nodes (the first packets wait for ARP on both sides).
for _ in $(seq 20); do
  ip netns exec $ns_pod1 ping -c 1 -W 1 10.244.2.5 >/dev/null 2>&1 && break
done
ip netns exec $ns_pod1 ping -c 3 -i 0.2 -W 2 10.244.2.5 > "$dir/ping1.log" || fail "pod1 cannot ping pod2"
ip netns exec $ns_pod2 ping -c 3 -i 0.2 -W 2 10.244.1.5 > "$dir/ping2.log" || fail "pod2 cannot ping pod1"
echo "pods reach each other across the Geneve wire"

# 2. Management traffic to the DPU's kernel on the same port still works.
if [ "$backend" = af_xdp ]; then
  ip netns exec $ns_dpu2 "$py" -c "
import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('192.168.100.2', 2222)); s.listen(1); s.settimeout(10); c,_=s.accept(); c.sendall(b'SSH-2.0-test\r\n'); c.close()" &
  srv=$!
  listening() { [ -n "$(ip netns exec $ns_dpu2 ss -Hltn 'sport = :2222')" ]; }
  wait_for 10 listening || fail "the management test server did not listen on 192.168.100.2:2222"
  banner=$(ip netns exec $ns_dpu1 "$py" -c "
import socket; s=socket.create_connection(('192.168.100.2', 2222), timeout=5); print(s.recv(100).decode().strip())")
  wait $srv
  [ "$banner" = "SSH-2.0-test" ] || fail "management TCP to the peer DPU's kernel failed"
  echo "management TCP to the DPU kernel works next to the XDP program"
  ip netns exec $ns_dpu1 "$dpuctl" --socket "$dir/operator1.sock" stats --all | grep xdp_ | sed 's/^/  /'
fi

# 3. Restart the programming client mid-traffic: no packet lost.
ip netns exec $ns_pod1 ping -i 0.01 -c 400 -W 1 10.244.2.5 > "$dir/flood.log" 2>&1 &
flood=$!
replies() { grep -c 'bytes from' "$dir/flood.log" || true; }
replies_at_least() { [ "$(replies)" -ge "$1" ]; }
# The flood is under way through the programmed dataplanes ...
wait_for 10 replies_at_least 20 || fail "the ping flood got no replies before the client restart"
kill "$client1"; wait "$client1" 2>/dev/null || true
client1=
# ... dataplane 1 saw its client leave, and forwards on with no client at all ...
wait_for 10 matches "disconnected; forwarding on" "$dir/dataplane1.log" ||
  fail "dataplane 1 did not notice its programming client left"
wait_for 10 replies_at_least $(( $(replies) + 20 )) || fail "no ping replies while no client was connected"
# ... and the new client resyncs it while the flood goes on.
client1=$(start_client 1 2)
for _ in $(seq 100); do [ "$(grep -c holding "$dir/client1.log")" -ge 2 ] && break; sleep 0.05; done
[ "$(grep -c holding "$dir/client1.log")" -ge 2 ] || fail "the restarted client did not resync"
wait $flood || true
cat "$dir/flood.log" | tail -3
grep -q " 0% packet loss" "$dir/flood.log" || fail "packets lost while the programming client restarted"
grep -q '"generation": "2"' "$dir/client1.log" || fail "the resync did not reach generation 2"
ip netns exec $ns_dpu1 "$dpuctl" --socket "$dir/operator1.sock" ports | sed 's/^/  /'
ip netns exec $ns_dpu1 "$dpuctl" --socket "$dir/operator1.sock" dump-flows | sed 's/^/  /'

# 4. The pod detaches (its port leaves the model: the representor port is
# removed from the running dataplane) and attaches again (hot-plugged anew).
kill "$client1"; wait "$client1" 2>/dev/null || true
client1=
echo '{"base_generation": 2, "generation": 3, "delete_ports": ["pod1"]}' > "$dir/detach.json"
"$py" "$here/dataplane_client.py" --socket "$dir/program1.sock" --delta "$dir/detach.json" > "$dir/detach.log" ||
  fail "detach delta refused: $(cat "$dir/detach.log")"
for _ in $(seq 100); do
  ip netns exec $ns_dpu1 "$dpuctl" --socket "$dir/operator1.sock" ports | matches pf0vf1 || break
  sleep 0.05
done
ip netns exec $ns_dpu1 "$dpuctl" --socket "$dir/operator1.sock" ports | matches pf0vf1 && fail "pf0vf1 still there after detach"
ip netns exec $ns_pod1 ping -c 1 -W 1 10.244.2.5 >/dev/null 2>&1 && fail "a detached pod still reaches pod2"
"$py" - "$dir/model1.json" "$dir/attach.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
json.dump({"base_generation": 3, "generation": 4, "upsert_ports": model["ports"]}, open(sys.argv[2], "w"))
PY
"$py" "$here/dataplane_client.py" --socket "$dir/program1.sock" --delta "$dir/attach.json" > "$dir/attach.log" ||
  fail "attach delta refused: $(cat "$dir/attach.log")"
for _ in $(seq 20); do
  ip netns exec $ns_pod1 ping -c 1 -W 1 10.244.2.5 >/dev/null 2>&1 && break
done
ip netns exec $ns_pod1 ping -c 3 -i 0.2 -W 2 10.244.2.5 > "$dir/ping3.log" || fail "pod1 cannot ping pod2 after re-attaching"
echo "detach removes the representor port, re-attach hot-plugs it again:"
grep -h "representor pf0vf1: ethdev" "$dir/dataplane1.log" | sed 's/^.* info dataplane: /  /; s/,iface=.*//'
echo "PASS ($backend)"
