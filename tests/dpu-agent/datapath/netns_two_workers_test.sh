#!/usr/bin/env bash
# System test: the two-node netns lab (netns_lab.bash) with `workers: 2` on
# each dataplane. Every port is net_af_packet with a queue pair per worker
# (net_af_xdp opens one queue on a veth and is passed over, saying why), the
# kernel's PACKET_FANOUT_HASH spreads flows over the queues, and the two
# workers poll one queue of each port. Two pods per node. Proves:
#   1. every pod reaches its peer on the other node (ping, both directions);
#   2. 50 UDP 5-tuples per pod pair, 20 datagrams each, all arrive;
#   3. dpuctl shows each worker polling a queue of every port, more than one
#      worker receiving on the pods' ports, and the per-worker receive counts
#      adding up to each port's total.
# DPU_NETNS_WORKERS=1 DPU_NETNS_BACKEND=af_packet runs the same with one
# worker (one queue per port) on the same backend, for comparison; DPU_NETNS_IPERF=1 then prints an iperf3 UDP rate between two
# pods (figures only, nothing asserted on them).
#   netns_two_workers_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lab.bash"
lab_require_root_and_tools ping ip ethtool
py=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
workers=${DPU_NETNS_WORKERS:-2}
backend=${DPU_NETNS_BACKEND:-af_xdp}
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
tag=$$
dir=$(mktemp -d /tmp/dpu-workers.XXXXXX)
export DPU_PROTO_PY=$dir/py
ns_dpu1=dpu1-$tag ns_dpu2=dpu2-$tag
pods="1a 1b 2a 2b"
pids=()

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in $ns_dpu1 $ns_dpu2; do ip netns del "$ns" 2>/dev/null; done
  for p in $pods; do ip netns del "pod$p-$tag" 2>/dev/null; done
  for n in 1 2; do lab_remove_dpdk_prefix dpu-workers$n-$tag; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}

lab_make_dpu_pair $ns_dpu1 $ns_dpu2 $tag
# Pods NA (10.244.N.5 on pf0vf1) and NB (10.244.N.6 on pf0vf2) on node N.
for p in $pods; do
  n=${p:0:1}
  case ${p:1} in a) vf=1 host=5 ;; *) vf=2 host=6 ;; esac
  ns=pod$p-$tag
  ip netns add "$ns"; ip -n "$ns" link set lo up
  lab_add_vf dpu$n-$tag pf0vf$vf "$ns" eth0
  ip -n "$ns" link set eth0 address 0a:58:0a:f4:0$n:0$host
  ip -n "$ns" link set eth0 mtu 1400
  ip -n "$ns" addr add 10.244.$n.$host/24 dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via 10.244.$n.1
done

model() {  # node number → LogicalModel JSON
  local n=$1 o=$((3 - $1))
  cat <<JSON
{"node": {"name": "node$n", "tunnel_ip": "192.168.100.$n", "underlay_mtu": 1500, "pod_mtu": 1400,
          "router_mac": "0a:58:0a:f4:00:01", "cluster_cidrs": ["10.244.0.0/16"]},
 "local_subnets": [{"cidr": "10.244.$n.0/24", "gateway_ip": "10.244.$n.1", "datapath_key": $n}],
 "ports": [{"name": "pod${n}a", "key": 1, "kind": "POD", "representor": "pf0vf1", "mac": "0a:58:0a:f4:0$n:05",
            "ips": ["10.244.$n.5"], "datapath_key": $n},
           {"name": "pod${n}b", "key": 2, "kind": "POD", "representor": "pf0vf2", "mac": "0a:58:0a:f4:0$n:06",
            "ips": ["10.244.$n.6"], "datapath_key": $n}],
 "remote_nodes": [{"name": "node$o", "tunnel_ip": "192.168.100.$o",
                   "subnets": [{"cidr": "10.244.$o.0/24", "gateway_ip": "10.244.$o.1", "datapath_key": $o}]}]}
JSON
}

for n in 1 2; do
  model $n > "$dir/model$n.json"
  lab_dataplane_config $n $backend dpu-workers$n-$tag "$dir/program$n.sock" "$dir/operator$n.sock" $workers > "$dir/dp$n.yaml"
  ip netns exec dpu$n-$tag "$dataplane" --config "$dir/dp$n.yaml" > "$dir/dataplane$n.log" 2>&1 &
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
grep -h "running: \|uplink uplink: ethdev" "$dir"/dataplane*.log | sed 's/^.* info dataplane: /  /'

# 1. Every pod reaches its peer on the other node.
for pair in "1a 10.244.2.5" "1b 10.244.2.6" "2a 10.244.1.5" "2b 10.244.1.6"; do
  set -- $pair
  for _ in $(seq 20); do ip netns exec pod$1-$tag ping -c 1 -W 1 "$2" >/dev/null 2>&1 && break; done
  ip netns exec pod$1-$tag ping -c 3 -i 0.2 -W 2 "$2" > "$dir/ping$1.log" || fail "pod$1 cannot ping $2"
done
echo "all four pods reach their peers across the Geneve wire"

# 2. 50 UDP 5-tuples per pair (source ports 40000..40049), 20 datagrams each.
flows=50 per_flow=20
for pair in "2a 10.244.2.5" "2b 10.244.2.6"; do
  set -- $pair
  ip netns exec pod$1-$tag "$py" - "$2" $flows $per_flow > "$dir/udp$1.txt" 2> "$dir/udp$1.log" <<'PY' &
import socket, sys, collections
ip, flows, per_flow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((ip, 5000))
print("listening", flush=True)
s.settimeout(10)
got = collections.Counter()
try:
    while sum(got.values()) < flows * per_flow:
        data, (src, sport) = s.recvfrom(2048)
        got[(src, sport)] += 1
except socket.timeout:
    pass
print("flows", len(got), "datagrams", sum(got.values()), flush=True)
PY
  pids+=($!)
done
for p in 2a 2b; do wait_for 10 matches listening "$dir/udp$p.txt" || fail "the UDP receiver in pod$p did not start"; done
for pair in "1a 10.244.1.5 10.244.2.5" "1b 10.244.1.6 10.244.2.6"; do
  set -- $pair
  ip netns exec pod$1-$tag "$py" - "$2" "$3" $flows $per_flow <<'PY' || fail "the UDP sender in pod$1 failed"
import socket, sys, time
src, dst, flows, per_flow = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
socks = []
for i in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 40000 + i))
    socks.append(s)
for _ in range(per_flow):
    for s in socks:
        s.sendto(b"x" * 64, (dst, 5000))
    time.sleep(0.002)
PY
done
for p in 2a 2b; do
  wait_for 15 matches "^flows" "$dir/udp$p.txt" || fail "the UDP receiver in pod$p did not finish"
  result=$(grep '^flows' "$dir/udp$p.txt")
  echo "  pod$p received: $result"
  [ "$result" = "flows $flows datagrams $((flows * per_flow))" ] || fail "pod$p: not every datagram of every flow arrived"
done
echo "$flows UDP flows per pod pair, $per_flow datagrams each: all arrived"

# 3. What dpuctl shows: each worker polls a queue of every port, the ports
# that received the 50 flows (node 1: the senders' representors; node 2: the
# uplink, Geneve from node 1) received on both workers, and the split adds up
# to the totals (read until an instant in which no packet is in flight
# between the two counters). Node 2's representors received only the pings'
# replies and ARP, a few flows that may all hash to one worker.
for n in 1 2; do
  ip netns exec dpu$n-$tag "$dpuctl" --socket "$dir/operator$n.sock" ports | sed 's/^/  /'
  check() {
    ip netns exec dpu$n-$tag "$dpuctl" --socket "$dir/operator$n.sock" ports --json > "$dir/ports$n.json" &&
    "$py" - "$dir/ports$n.json" $workers $n > "$dir/check$n.txt" 2>&1 <<'PY'
import json, sys
ports = json.load(open(sys.argv[1]))["ports"]
workers = int(sys.argv[2])
carried_flows = (lambda name: name.startswith("pf0vf")) if sys.argv[3] == "1" else (lambda name: name == "uplink")
problems = []
rx_by_worker = [0] * workers
for p in ports:
    name = p["name"]
    queue_workers = p.get("queue_workers", [])
    if p.get("rx_queues") != workers or sorted(queue_workers) != list(range(workers)):
        problems.append(f"{name}: rx queues {p.get('rx_queues')} on workers {queue_workers}, want one on each worker")
    if p.get("rx_spread") != ("kernel fanout" if workers > 1 else "single"):
        problems.append(f"{name}: spread {p.get('rx_spread')}")
    split = [int(v) for v in p.get("worker_rx_packets", [])]
    total = int(p.get("rx_packets", 0))
    if sum(split) != total:
        problems.append(f"{name}: per-worker rx {split} sum to {sum(split)}, not rx_packets {total}")
    if carried_flows(name) and not all(v > 0 for v in split):
        problems.append(f"{name}: rx by worker {split}: 50 flows did not reach both workers")
    for w, v in enumerate(split):
        rx_by_worker[w] += v
if not all(rx_by_worker):
    problems.append(f"rx by worker over all ports {rx_by_worker}")
print("; ".join(problems) if problems else f"ok: rx by worker {rx_by_worker}")
sys.exit(1 if problems else 0)
PY
  }
  wait_for 5 check || fail "node $n: $(tail -1 "$dir/check$n.txt")"
  echo "  node $n: $(tail -1 "$dir/check$n.txt")"
done
if [ -n "${DPU_NETNS_IPERF:-}" ]; then
  ip netns exec pod2a-$tag iperf3 -s -1 -B 10.244.2.5 > "$dir/iperf-server.log" 2>&1 &
  pids+=($!)
  # Its control connection is TCP (5201) even for a UDP test: the client starts once that listens.
  iperf_listening() { [ -n "$(ip netns exec pod2a-$tag ss -Hltn "sport = :5201")" ]; }
  wait_for 10 iperf_listening || fail "the iperf3 server in pod2a does not listen on TCP 5201: $(cat "$dir/iperf-server.log")"
  ip netns exec pod1a-$tag iperf3 -c 10.244.2.5 -B 10.244.1.5 -u -b 0 -l 64 -P 8 -t 5 --json > "$dir/iperf.json" ||
    fail "iperf3 failed"
  "$py" -c "
import json, sys
s = json.load(open('$dir/iperf.json'))['end']['sum']
print(f'  iperf3 UDP 64 B, 8 streams, pod1a -> pod2a, $workers worker(s): {s[\"packets\"] / s[\"seconds\"] / 1e3:.1f} kpps sent, '
      f'{s[\"packets\"] * (1 - s[\"lost_percent\"] / 100) / s[\"seconds\"] / 1e3:.1f} kpps received ({s[\"lost_percent\"]:.1f}% lost)')"
fi
echo "PASS ($workers workers)"
