#!/usr/bin/env bash
# Lab e2e: a node filled to its dataplane's port limit. Every pod's VF has a
# representor, and every representor is a DPDK ethdev: with Debian's DPDK
# (RTE_MAX_ETHPORTS 32) the dataplane opens the uplink and 31 representors,
# the management port's and 30 pods'. One node with 40 VFs.
# Proves:
#  - the limit is visible: the agent knows the dataplane's capacity (/metrics)
#    and dpuctl stats reports it;
#  - a node filled to it has every pod on a port of its own (no representor
#    left failed) and its pods reach each other;
#  - the next ADD fails at once with CNI code 11 and a message that names the
#    limit (RTE_MAX_ETHPORTS) and the remedy (-Dmax_ethports), and leaves
#    nothing behind: no address, attachment, dataplane port or netns, the VF
#    back in the host netns;
#  - a DEL frees a slot: the next ADD works and the new pod is reachable.
source "$(dirname "$0")/common.bash" ports
vfs=40
DL_VFS=$vfs lab_test_up 1 0

capacity=$(dl_dpuctl 1 stats --all 2>/dev/null | awk '$1 == "port_capacity" { print $2 }')
[ -n "$capacity" ] && [ "$capacity" -gt 1 ] || { fail "dpuctl stats has no port_capacity ('$capacity')"; finish; }
metric() { dl_agent_metrics 1 | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { print $2; exit }'; }
dl_agent_metrics() { dl_agent_curl "$1" /metrics -s --max-time 5; }
agent_capacity=$(metric dpu_agent_dataplane_port_capacity)
[ "$agent_capacity" = "$capacity" ] && pass "the dataplane can open $capacity representors, and the agent knows it" ||
  fail "dpuctl says the capacity is $capacity, the agent's metrics '$agent_capacity'"
pods=$(( capacity - 1 ))  # the management port holds one
if [ "$pods" -ge "$vfs" ]; then
  echo "SKIP: this build's DPDK opens $capacity representors, more than the lab's $vfs VFs"
  finish
fi

# --- fill the node: pods p1..pN, ten at a time.
for (( first = 1; first <= pods; first += 10 )); do
  bg=()
  for (( i = first; i < first + 10 && i <= pods; i++ )); do
    dl_pod_add 1 "p$i" > "$DL_DIR/p$i.ip" 2> "$DL_DIR/p$i.err" & bg+=($!)
  done
  wait "${bg[@]}"
done
got=$(cat "$DL_DIR"/p*.ip | sort -u | grep -c .)
errs=$(cat "$DL_DIR"/p*.err)
[ "$got" = "$pods" ] && [ -z "$errs" ] && pass "$pods pods added: the node is at its limit of $capacity representors ($(elapsed))" ||
  fail "$pods pods: $got distinct addresses; errors: $errs"
reps() { dl_dpuctl 1 --json ports | jq '[.ports[] | select(.role == "representor" and .state != "failed")] | length'; }
failed() { dl_dpuctl 1 --json ports | jq -r '[.ports[] | select(.state == "failed") | .name] | join(" ")'; }
# An ADD returns when the agent holds the attachment; the dataplane opens
# its representor a moment later.
all_open() { [ "$(reps)" = "$capacity" ] && [ -z "$(failed)" ]; }
wait_for 10 all_open && pass "every attachment has its representor open ($capacity)" ||
  fail "representors open: $(reps) of $capacity; failed: $(failed)"
check "node1/p1 reaches node1/p$pods" dl_reachable node1/p1 "$(cat "$DL_DIR/p$pods.ip")" 10
check "node1/p$pods reaches node1/p1" dl_reachable node1/p$pods "$(cat "$DL_DIR/p1.ip")" 10

# --- one pod more.
attachments() { dl_agent_api 1 GET /v1/attachments | jq '.attachments | length'; }
att_before=$(attachments)
ips_before=$(metric dpu_agent_ipam_addresses_used)
home_before=$(dl_node_vfs_home 1)
# As a runtime does it (dl_pod_add would also put back VFs a failed ADD lost:
# here nothing may need that).
ns=$(dl_pod_ns 1 extra)
ip netns add "$ns"
t=$(date +%s%N)
out=$(dl_cni 1 add extra 2>/dev/null) && fail "the pod beyond the limit was added: $out"
ms=$(( ($(date +%s%N) - t) / 1000000 ))
echo "  the ADD beyond the limit answered in $ms ms: $out"
json=$(grep -o '{.*}' <<< "$out" | tail -n 1)
code=$(jq -r '.code' <<< "$json" 2>/dev/null)
[ "$code" = 11 ] && pass "the ADD beyond the limit fails with CNI code 11 (try again later)" || fail "its CNI code is '$code', not 11"
grep -q 'RTE_MAX_ETHPORTS' <<< "$json" && grep -q -- '-Dmax_ethports' <<< "$json" &&
  pass "its message names the limit (RTE_MAX_ETHPORTS) and the remedy (-Dmax_ethports)" ||
  fail "its message does not name the limit and the remedy: $json"
[ "$(attachments)" = "$att_before" ] && pass "the agent holds no attachment for it ($att_before)" ||
  fail "attachments: $att_before before, $(attachments) after"
[ "$(metric dpu_agent_ipam_addresses_used)" = "$ips_before" ] && pass "no pod address was taken ($ips_before in use)" ||
  fail "pod addresses in use: $ips_before before, $(metric dpu_agent_ipam_addresses_used) after"
[ "$(reps)" = "$capacity" ] && [ -z "$(failed)" ] && pass "the dataplane has no port for it" ||
  fail "representors open: $(reps); failed: $(failed)"
for _ in $(seq 100); do [ "$(dl_node_vfs_home 1)" = "$home_before" ] && break; sleep 0.05; done
[ "$(dl_node_vfs_home 1)" = "$home_before" ] && pass "its VF is back in the host netns ($home_before there)" ||
  fail "VFs in the host netns: $home_before before, $(dl_node_vfs_home 1) after"
check "its netns holds nothing but lo" [ "$(ip -n "$ns" -o link show | grep -vc ': lo:')" = 0 ]
ip netns del "$ns"

# --- a DEL frees a slot.
dl_pod_del 1 p1 || fail "pod del node1/p1"
ip_extra=$(dl_pod_add 1 extra) && [ -n "$ip_extra" ] && pass "after a DEL the next ADD works ($ip_extra)" ||
  fail "pod add node1/extra after a DEL"
check "node1/extra reaches node1/p$pods" dl_reachable node1/extra "$(cat "$DL_DIR/p$pods.ip")" 10
[ "$(reps)" = "$capacity" ] && [ -z "$(failed)" ] && pass "still $capacity representors open, none failed" ||
  fail "representors open: $(reps); failed: $(failed)"
finish
