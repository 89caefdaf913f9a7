#!/usr/bin/env bash
# Lab e2e: pod lifecycle. 2 nodes with a small pod CIDR each (/27: 28 pod
# addresses) and 22 VFs (21 for pods, 1 management port).
# Proves:
#  - a pod deleted through dpu-cni DEL leaves no flow mentioning its address in
#    its node's dataplane (dpuctl dump-flows), and traffic to its address stops,
#    from a pod on the other node and from the host;
#  - the agent's IPAM hands a just-released address out last (a pod re-added at
#    once gets a fresh one); re-added until the never-used addresses are used
#    up, it gets the old address back and receives the traffic sent to it and
#    sends again (no stale state anywhere);
#  - 20 pods added concurrently on one node get distinct addresses and are
#    reachable; deleting them concurrently returns every VF to the host.
source "$(dirname "$0")/common.bash" life
DL_VFS=22 DL_POD_CIDR_LEN=27 lab_test_up 2 0

ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 2 b) || fail "pod add node2/b"
pass "pods node1/a ($ip_a) and node2/b ($ip_b) added"
check "node2/b reaches node1/a" dl_reachable node2/b "$ip_a" 10
check "node1/a reaches node2/b" dl_reachable node1/a "$ip_b" 10
check "node1's host reaches node1/a" dl_reachable node1/host "$ip_a" 10
flows_with() { dl_dpuctl "$1" dump-flows 2>/dev/null | grep -Fw "$2"; }
[ -n "$(flows_with 1 "$ip_a")" ] && pass "node1's dataplane has flows for $ip_a" || fail "node1 has no flow for $ip_a"

# --- delete: no stale flow, traffic to the old address stops.
dl_pod_del 1 a || fail "pod del node1/a"
check "node1/a's netns is gone" [ ! -e "/run/netns/$(dl_pod_ns 1 a)" ]
for _ in $(seq 30); do [ -z "$(flows_with 1 "$ip_a")" ] && break; sleep 0.1; done
[ -z "$(flows_with 1 "$ip_a")" ] && pass "no flow mentions $ip_a in node1's dataplane after the delete" ||
  fail "stale flows for $ip_a on node1: $(flows_with 1 "$ip_a")"
# (node2 may keep its flow towards node1's pod subnet: it routes to node1's DPU, which drops.)
out=$(dl_exec node2/b ping -c 3 -i 0.2 -W 1 "$ip_a" 2>&1)
grep -q ' 100% packet loss' <<< "$out" && pass "node2/b -> old address $ip_a: no answer" || fail "node2/b still reaches $ip_a: $out"
out=$(dl_exec node1/host ping -c 3 -i 0.2 -W 1 "$ip_a" 2>&1)
grep -q ' 100% packet loss' <<< "$out" && pass "node1's host -> old address $ip_a: no answer" || fail "the host still reaches $ip_a"
drops=$(dl_dpuctl 1 stats 2>/dev/null | grep -iE 'no_?port|unknown|no_output|wrong' | tr -s ' ' | tr '\n' ';')
[ -n "$drops" ] && echo "  node1 drop counters: $drops"

# --- re-added at once: a fresh address (the released one is handed out last).
ip_a2=$(dl_pod_add 1 a) || fail "pod re-add node1/a"
[ -n "$ip_a2" ] && [ "$ip_a2" != "$ip_a" ] && pass "node1/a re-added at once gets a fresh address ($ip_a2; $ip_a is quarantined)" ||
  fail "node1/a re-added at once got '$ip_a2'"
check "node2/b reaches the re-added node1/a" dl_reachable node2/b "$ip_a2" 10
dl_pod_del 1 a

# --- re-added asking for its old address (the runtime's `ips` capability): it gets it at once.
ip_a4=$(DL_POD_IP=$ip_a dl_pod_add 1 a) || fail "pod re-add node1/a asking for $ip_a"
[ "$ip_a4" = "$ip_a" ] && pass "node1/a re-added asking for $ip_a gets it at once" || fail "node1/a asked for $ip_a, got '$ip_a4'"
check "node2/b reaches $ip_a on the re-added pod" dl_reachable node2/b "$ip_a" 10
out=$(DL_POD_IP=$ip_a dl_pod_add 1 thief 2>&1) && fail "a second pod got $ip_a: $out" ||
  pass "a second pod asking for $ip_a is refused"
dl_pod_del 1 a

# --- 20 pods at once on node1.
t=$(date +%s%N)
pids=()
for i in $(seq 1 20); do dl_pod_add 1 "c$i" > "$DL_DIR/c$i.ip" 2> "$DL_DIR/c$i.err" & pids+=($!); done
wait "${pids[@]}"
ms=$(( ($(date +%s%N) - t) / 1000000 ))
ips=$(cat "$DL_DIR"/c*.ip | sort -u | grep -c .)
errs=$(cat "$DL_DIR"/c*.err)
[ "$ips" = 20 ] && [ -z "$errs" ] && pass "20 concurrent pod adds on node1: 20 distinct addresses in $ms ms" ||
  fail "20 concurrent pod adds: $ips distinct addresses; errors: $errs"
unreached=()
for i in $(seq 1 20); do
  ip=$(cat "$DL_DIR/c$i.ip")
  [ -n "$ip" ] && dl_reachable node1/host "$ip" 5 || unreached+=("c$i($ip)")
done
[ ${#unreached[@]} = 0 ] && pass "node1's host reaches all 20" || fail "node1's host does not reach: ${unreached[*]}"
check "node2/b reaches node1/c20 (across the fabric)" dl_reachable node2/b "$(cat "$DL_DIR/c20.ip")" 10
check "node1/c1 reaches node1/c20" dl_reachable node1/c1 "$(cat "$DL_DIR/c20.ip")" 10

pids=()
for i in $(seq 1 20); do dl_pod_del 1 "c$i" & pids+=($!); done
wait "${pids[@]}"
for _ in $(seq 100); do [ "$(dl_node_vfs_home 1)" = 21 ] && break; sleep 0.05; done
home=$(dl_node_vfs_home 1)
[ "$home" = 21 ] && pass "after 20 concurrent deletes all 21 pool VFs are home in node1's host netns" ||
  fail "after the deletes $home VFs are in node1's host netns, expected 21"

# --- re-add node1/a until the never-used addresses are used up: then it gets its old address back.
tries=0
while :; do
  tries=$(( tries + 1 ))
  ip_a3=$(dl_pod_add 1 a) || { fail "pod re-add node1/a (try $tries)"; break; }
  [ "$ip_a3" = "$ip_a" ] || [ $tries -ge 12 ] && break
  dl_pod_del 1 a
done
[ "$ip_a3" = "$ip_a" ] && pass "re-added node1/a has its old address $ip_a again (once the pool cycled: re-add $tries)" ||
  fail "after $tries re-adds node1/a has $ip_a3, never its old $ip_a"
check "node2/b reaches $ip_a again (the new pod answers)" dl_reachable node2/b "$ip_a" 10
check "node1's host reaches the new node1/a" dl_reachable node1/host "$ip_a" 10
check "the new node1/a reaches node2/b" dl_reachable node1/a "$ip_b" 10
finish
