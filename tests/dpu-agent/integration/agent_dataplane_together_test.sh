#!/usr/bin/env bash
# System test: dpu-agent and dpu-dataplane together. Two nodes, each a "DPU"
# network namespace running the real dpu-agent (file cluster source: one
# shared cluster file, each agent publishes itself next to it) and the real
# dpu-dataplane (af_xdp on veths, the netns lab of tests/dpu-agent/datapath)
# programmed by that agent through its dataplaneSocket. Representors pf0vfN
# are veth ends in the DPU namespace whose peers live in pod namespaces
# (emulated VFs). Pods are attached through the agent's REST API (curl, JSON)
# and their eth0 is configured with exactly what the agent answered (MAC,
# IP/prefix, routes, MTU), as host-shim does. Proves:
#   1. pod A <-> pod B on node 1, pod A <-> pod C on node 2 (Geneve on the
#      wire), and the host management port (MANAGEMENT attachment) to pods on
#      both nodes;
#   2. dpuctl dump-flows shows the flows of that traffic;
#   3. detaching pod B through the API removes its representor port and its
#      traffic stops both ways (no stale forwarding);
#   4. kill -9 of node 1's agent during ping -i 0.01 -c 300 from A to C, then
#      a restart: no packet lost, the resync (attachments from the checkpoint,
#      the remote node from the cluster file) invalidates no flow; afterwards
#      a new pod D attaches and works.
#   agent_dataplane_together_test.sh DPU_AGENT DPU_DATAPLANE DPUCTL
set -euo pipefail
agent=$1 dataplane=$2 dpuctl=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../datapath/netns_lab.bash"
lab_require_root_and_tools ping ip ethtool curl jq
backend=${DPU_NETNS_BACKEND:-af_xdp}
tag=$$
dir=$(mktemp -d /tmp/dpu-together.XXXXXX)
ns_dpu1=itd1-$tag ns_dpu2=itd2-$tag
ns_a=itpa-$tag ns_b=itpb-$tag ns_c=itpc-$tag ns_d=itpd-$tag ns_host=ith1-$tag
all_ns="$ns_dpu1 $ns_dpu2 $ns_a $ns_b $ns_c $ns_d $ns_host"
node1=node1-$tag node2=node2-$tag
port=$((20000 + tag % 20000))
dataplane_pids=() agent_pids=("" "" "")

cleanup() {
  set +e
  for p in "${agent_pids[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  for p in "${dataplane_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${agent_pids[@]}" "${dataplane_pids[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  for ns in $all_ns; do ip netns del "$ns" 2>/dev/null; done
  for n in 1 2; do lab_remove_dpdk_prefix dpu-itg$n-$tag; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 25 "$f" >&2; done
  exit 1
}
dpu_ns() { echo "itd$1-$tag"; }
api() {  # node method path [json body] → body in $dir/out.json, prints the HTTP status
  local n=$1 method=$2 path=$3 body=${4:-}
  local args=(-s -o "$dir/out.json" -w '%{http_code}' -X "$method" -H 'Accept: application/json')
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' -d "$body")
  ip netns exec "$(dpu_ns "$n")" curl "${args[@]}" "http://127.0.0.1:$port$path"
}
dpuctl_on() { local n=$1; shift; ip netns exec "$(dpu_ns "$n")" "$dpuctl" --socket "$dir/operator$n.sock" "$@"; }
pings() {  # ns address: true once it answers (first packets wait for ARP)
  local _
  for _ in $(seq 10); do ip netns exec "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1 && return 0; done
  return 1
}
reach() {  # ns address description
  pings "$1" "$2" && ip netns exec "$1" ping -c 2 -i 0.2 -W 2 "$2" >/dev/null || fail "$3: $1 cannot ping $2"
  echo "  ok: $3"
}

# configure NS IFNAME ANSWER — the interface as host-shim sets it from the agent's answer.
configure() {
  local ns=$1 ifname=$2 answer=$3 addr dst gw
  ip -n "$ns" link set "$ifname" down
  ip -n "$ns" link set "$ifname" address "$(jq -r .attachment.mac "$answer")"
  ip -n "$ns" link set "$ifname" mtu "$(jq -r .attachment.mtu "$answer")"
  for addr in $(jq -r '.attachment.ips[].address' "$answer"); do ip -n "$ns" addr add "$addr" dev "$ifname"; done
  ip -n "$ns" link set "$ifname" up
  while read -r dst gw; do
    [ "$dst" = 0.0.0.0/0 ] && dst=default
    if [ -n "$gw" ]; then ip -n "$ns" route add "$dst" via "$gw" dev "$ifname"; else ip -n "$ns" route add "$dst" dev "$ifname"; fi
  done < <(jq -r '.attachment.routes[] | "\(.dst) \(.gw // "")"' "$answer")
}
# attach_pod NODE NS NAME VF — POST /v1/attachments, then configure eth0; sets id_NAME and ip_NAME.
attach_pod() {
  local n=$1 ns=$2 name=$3 vf=$4 code
  code=$(api "$n" POST /v1/attachments "{\"kind\":\"POD\",\"pod\":{\"namespace\":\"default\",\"name\":\"$name\",\"uid\":\"u-$name\"},
    \"sandboxId\":\"sb-$name-$tag\",\"ifname\":\"eth0\",\"pfIndex\":0,\"vfIndex\":$vf}")
  [ "$code" = 200 ] || fail "attaching $name answered $code: $(cat "$dir/out.json")"
  cp "$dir/out.json" "$dir/attach-$name.json"
  [ "$(jq -r .attachment.representor "$dir/out.json")" = "pf0vf$vf" ] || fail "$name bound to $(jq -r .attachment.representor "$dir/out.json")"
  configure "$ns" eth0 "$dir/attach-$name.json"
  printf -v "id_${name//-/_}" '%s' "$(jq -r .attachment.id "$dir/out.json")"
  printf -v "ip_${name//-/_}" '%s' "$(jq -r '.attachment.ips[0].address' "$dir/out.json" | cut -d/ -f1)"
  echo "  attached $name on node $n: $(jq -c '.attachment | {mac, ips, mtu, routes}' "$dir/out.json")"
}
start_agent() {  # node
  local n=$1 _
  ip netns exec "$(dpu_ns "$n")" "$agent" --config "$dir/agent$n.yaml" >> "$dir/agent$n.log" 2>&1 &
  agent_pids[$n]=$!
  for _ in $(seq 200); do
    ip netns exec "$(dpu_ns "$n")" curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "${agent_pids[$n]}" 2>/dev/null || fail "agent $n exited"
    sleep 0.05
  done
  fail "agent $n did not become ready (cluster synced, dataplane programmed)"
}

# --- the lab: two DPUs on a wire; VFs pf0vf1/2/3 on node 1 (pods A, B, D),
# pf0vf0 on node 1 left in a "host" namespace (the management port), pf0vf1 on node 2 (pod C).
lab_make_dpu_pair $ns_dpu1 $ns_dpu2 $tag
for ns in $ns_a $ns_b $ns_c $ns_d $ns_host; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
lab_add_vf $ns_dpu1 pf0vf1 $ns_a eth0
lab_add_vf $ns_dpu1 pf0vf2 $ns_b eth0
lab_add_vf $ns_dpu1 pf0vf3 $ns_d eth0
lab_add_vf $ns_dpu1 pf0vf0 $ns_host mgmt0
lab_add_vf $ns_dpu2 pf0vf1 $ns_c eth0

cat > "$dir/cluster.yaml" <<YAML
# Both agents fill in their tunnel IP and pod CIDR through cluster.yaml.d/.
nodes:
  - {name: $node1}
  - {name: $node2}
YAML
for n in 1 2; do
  lab_dataplane_config $n $backend dpu-itg$n-$tag "$dir/program$n.sock" "$dir/operator$n.sock" > "$dir/dp$n.yaml"
  cat > "$dir/agent$n.yaml" <<YAML
nodeName: node$n-$tag
tunnelIP: 192.168.100.$n
uplink: uplink0
representors:
  - {pf: 0, vfCount: 8, name: "pf0vf{vf}"}
podCIDR: 10.244.$n.0/24
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
underlayMTU: 1500
clusterSource: {type: file, path: $dir/cluster.yaml}
api: {address: 127.0.0.1, port: $port}
dataplaneSocket: $dir/program$n.sock
stateDir: $dir/state$n
log: {level: info}
YAML
  ip netns exec "$(dpu_ns $n)" "$dataplane" --config "$dir/dp$n.yaml" > "$dir/dataplane$n.log" 2>&1 &
  dataplane_pids+=($!)
done
for n in 1 2; do lab_wait_socket "$dir/program$n.sock" || fail "dataplane $n did not open its programming socket"; done
for n in 1 2; do start_agent $n; done
grep -h "uplink uplink: ethdev" "$dir"/dataplane*.log | sed 's/^.* info dataplane: /  /; s/,iface=.*//'

# --- 1. attach through the API, then traffic.
attach_pod 1 $ns_a pod-a 1
attach_pod 1 $ns_b pod-b 2
attach_pod 2 $ns_c pod-c 1
code=$(api 1 POST /v1/attachments '{"kind":"MANAGEMENT","ifname":"mgmt0","pfIndex":0,"vfIndex":0}')
[ "$code" = 200 ] || fail "attaching the management port answered $code: $(cat "$dir/out.json")"
cp "$dir/out.json" "$dir/attach-mgmt.json"
configure $ns_host mgmt0 "$dir/attach-mgmt.json"
echo "  attached the management port on node 1: $(jq -c '.attachment | {mac, ips, mtu, routes}' "$dir/attach-mgmt.json")"
# Each agent learned the other from its publish file: the remote node is programmed.
# (Command output is captured before grep -q: with pipefail, grep's early
# exit would make the writer's SIGPIPE fail the pipeline.)
metrics() { ip netns exec "$(dpu_ns "$1")" curl -s "http://127.0.0.1:$port/metrics"; }
for n in 1 2; do
  for _ in $(seq 100); do grep -q '^dpu_agent_remote_nodes 1' <<< "$(metrics $n)" && break; sleep 0.05; done
  grep -q '^dpu_agent_remote_nodes 1' <<< "$(metrics $n)" || fail "agent $n does not see the other node"
done
reach $ns_a "$ip_pod_b" "pod A -> pod B (same node)"
reach $ns_b "$ip_pod_a" "pod B -> pod A (same node)"
reach $ns_a "$ip_pod_c" "pod A -> pod C (node 2, Geneve)"
reach $ns_c "$ip_pod_a" "pod C -> pod A (node 1, Geneve)"
reach $ns_host "$ip_pod_a" "host management port -> pod A"
reach $ns_host "$ip_pod_c" "host management port -> pod C (node 2)"

# --- 2. the flows of that traffic in dpuctl.
dpuctl_on 1 dump-flows > "$dir/flows1.txt" || fail "dpuctl dump-flows failed"
dpuctl_on 2 dump-flows > "$dir/flows2.txt" || fail "dpuctl dump-flows on node 2 failed"
grep -q "$ip_pod_c" "$dir/flows1.txt" || fail "node 1's flows do not show pod C's traffic: $(cat "$dir/flows1.txt")"
grep -q "$ip_pod_b" "$dir/flows1.txt" || fail "node 1's flows do not show pod B's traffic: $(cat "$dir/flows1.txt")"
grep -q "$ip_pod_a" "$dir/flows2.txt" || fail "node 2's flows do not show pod A's traffic: $(cat "$dir/flows2.txt")"
echo "  dpuctl dump-flows (node 1), IPv4 flows:"
awk 'n < 6 && /,ipv4,/ { sub(/, age:.*actions:/, " ... actions:"); print "    " $0; n++ }' "$dir/flows1.txt"

# --- 3. detach pod B: its port leaves the dataplane, its traffic stops.
code=$(api 1 DELETE "/v1/attachments/$id_pod_b")
[ "$code" = 200 ] && [ "$(jq -r .found "$dir/out.json")" = true ] || fail "detaching pod B answered $code: $(cat "$dir/out.json")"
for _ in $(seq 100); do grep -q pf0vf2 <<< "$(dpuctl_on 1 ports)" || break; sleep 0.05; done
grep -q pf0vf2 <<< "$(dpuctl_on 1 ports)" && fail "pf0vf2 is still a dataplane port after pod B detached"
ip netns exec $ns_a ping -c 2 -i 0.2 -W 1 "$ip_pod_b" >/dev/null 2>&1 && fail "pod A still reaches the detached pod B"
ip netns exec $ns_b ping -c 2 -i 0.2 -W 1 "$ip_pod_a" >/dev/null 2>&1 && fail "the detached pod B still reaches pod A"
ip netns exec $ns_b ping -c 2 -i 0.2 -W 1 "$ip_pod_c" >/dev/null 2>&1 && fail "the detached pod B still reaches pod C"
echo "  ok: detached pod B is unreachable and reaches nothing"

# --- 4. kill -9 node 1's agent under an interval ping across the nodes, restart it.
full_syncs() { metrics 1 | awk '/^dpu_agent_dataplane_full_syncs_total/ {print $2}'; }
replies() { grep -c icmp_seq= "$dir/flood.txt" 2>/dev/null || true; }
replies_reach() { [ "$(replies)" -ge "$1" ]; }
ip netns exec $ns_a ping -i 0.01 -c 300 -W 1 "$ip_pod_c" > "$dir/flood.txt" 2>&1 &
flood=$!
# The kill comes mid-stream, once the flood is known to flow (100 replies in); the restart once the dataplane
# has forwarded on without the agent (50 more replies), both with most of the 300 still to come.
wait_for 10 replies_reach 100 || fail "the ping from pod A to pod C did not get 100 replies: $(tail -n 3 "$dir/flood.txt")"
kill -9 "${agent_pids[1]}"; wait "${agent_pids[1]}" 2>/dev/null || true
agent_pids[1]=
killed_at=$(replies)
wait_for 10 replies_reach $(( killed_at + 50 )) ||
  fail "pod A got $(( $(replies) - killed_at )) replies from pod C in 10 s after node 1's agent was killed, not 50"
start_agent 1
[ "$(full_syncs)" -ge 1 ] || fail "the restarted agent did not resync the dataplane"
wait $flood || true
tail -n 2 "$dir/flood.txt" | sed 's/^/  /'
grep -h "full sync" "$dir/agent1.log" | sed 's/^.* info dataplane-client: /  agent 1: /'
# The resync after the restart carries the whole view (remote node included)
# and changes nothing in the running dataplane.
grep "full sync" "$dir/agent1.log" | tail -n 1 | matches "1 remote nodes (0 flows invalidated, 0 objects not forwarding)" ||
  fail "the resync after the agent restart changed the dataplane: $(grep "full sync" "$dir/agent1.log" | tail -n 1)"
grep -q " 0% packet loss" "$dir/flood.txt" || fail "packets lost while the agent was killed and restarted"
code=$(api 1 GET /v1/attachments)
[ "$code" = 200 ] && [ "$(jq '.attachments | length' "$dir/out.json")" = 2 ] ||
  fail "the restarted agent lost attachments (pod A and the management port): $code $(cat "$dir/out.json")"
attach_pod 1 $ns_d pod-d 3
reach $ns_d "$ip_pod_c" "pod D (attached after the restart) -> pod C"
reach $ns_d "$ip_pod_a" "pod D -> pod A"
reach $ns_c "$ip_pod_d" "pod C -> pod D"
echo "PASS ($backend)"
