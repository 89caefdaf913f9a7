#!/usr/bin/env bash
# Lab e2e, faults: a DPU "reboot" on node1 — dpu-dataplane and dpu-agent
# killed with SIGKILL, the agent's state (checkpoint, IPAM, boot id) wiped,
# both started again; host-shim keeps running. Proves:
#  - host-shim sees the new boot id and replays its attachments, asking for
#    each pod's address (requested_ips): pods node1/a and node1/b work again
#    without being recreated (same netns, same eth0, same address and MAC) —
#    across the fabric, between each other and from the host management port;
#    the time from the kill to the first reply is printed as
#    `FIGURE: dpu reboot outage <n> ms`;
#  - the new agent knows both pods at their old addresses, and a pod attached
#    after the reboot gets an address neither of them has;
#  - a replayed pod is deleted cleanly (its VF goes home).
source "$(dirname "$0")/common.bash" frbt
DL_VFS=5 lab_test_up 2 0

ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 1 b) || fail "pod add node1/b"
ip_c=$(dl_pod_add 2 c) || fail "pod add node2/c"
check "node2/c reaches node1/a" dl_reachable node2/c "$ip_a" 10
check "node2/c reaches node1/b" dl_reachable node2/c "$ip_b" 10
ident() { ip -n "$(dl_pod_ns 1 "$1")" -o link show eth0 | grep -o -e '^[0-9]*:' -e 'link/ether [0-9a-f:]*' | tr '\n' ' '; }
id_a=$(ident a); id_b=$(ident b)
ino_a=$(stat -L -c %i "/run/netns/$(dl_pod_ns 1 a)")
boot_before=$(dl_agent_api 1 GET /v1/health | jq -r '.. | objects | (.bootId // .boot_id // empty)' 2>/dev/null | head -n 1)

pr=$DL_DIR/ping-remote
dl_ping_start node2/c "$ip_a" 6000 0.01 "$pr"; ppr=$DL_PING_PID
dl_ping_await "$pr" 100 || fail "node2/c's ping to node1/a got no steady replies before the reboot"
t_kill=$(date +%s.%N)
dl_dpu_reboot 1 || fail "the DPU of node1 did not start again"
t_up=$(date +%s.%N)
boot_after=$(dl_agent_api 1 GET /v1/health | jq -r '.. | objects | (.bootId // .boot_id // empty)' 2>/dev/null | head -n 1)
[ -n "$boot_after" ] && [ "$boot_after" != "$boot_before" ] && pass "the rebooted agent has a new boot id" ||
  fail "boot id before '$boot_before', after '$boot_after' (expected a new one)"
# Back once a reply arrives from after both processes were up again.
back() { awk -v b="$t_up" -F'[][]' '/icmp_seq=/ { t = $2 } END { exit !(t + 0 > b) }' "$pr"; }
dl_wait 40 back
dl_ping_await "$pr" $(( $(dl_ping_replies "$pr") + 50 ))  # a little more after it, as a gap must end in a reply
dl_ping_stop "$ppr"
out=$(dl_ping_outage "$pr" "$t_kill"); res=$(dl_ping_result "$pr")
if back; then
  echo "FIGURE: dpu reboot outage $out ms (node2/c -> node1/a, $(( ${res% *} - ${res#* } )) of ${res% *} pings at 10 ms lost)"
  pass "node2/c -> node1/a answered again $out ms after the reboot began, without recreating node1/a"
else
  fail "node2/c -> node1/a: no reply after the reboot ($res transmitted/received)"
  grep -iE 'replay|boot' "$DL_DIR/n1/host-shim.log" | tail -n 5 >&2
fi

check "node1/a: same netns, eth0, MAC and address ($ip_a)" \
  test "$(stat -L -c %i "/run/netns/$(dl_pod_ns 1 a)")|$(ident a)|$(dl_pod_ip 1 a)" = "$ino_a|$id_a|$ip_a"
check "node1/b: same eth0, MAC and address ($ip_b)" test "$(ident b)|$(dl_pod_ip 1 b)" = "$id_b|$ip_b"
check "node2/c reaches node1/b" dl_reachable node2/c "$ip_b" 20
check "node1/b reaches node2/c" dl_reachable node1/b "$ip_c" 10
check "node1/a reaches node1/b" dl_reachable node1/a "$ip_b" 10
check "node1's host reaches node1/a" dl_reachable node1/host "$ip_a" 10
tcp=$(dl_tcp node1/a node2/c 5M) && pass "TCP node1/a -> node2/c after the reboot ($tcp Mbit/s)" || fail "TCP node1/a -> node2/c after the reboot"
atts=$(dl_agent_api 1 GET /v1/attachments)
grep -Fqw "$ip_a" <<< "$atts" && grep -Fqw "$ip_b" <<< "$atts" &&
  pass "the rebooted agent has node1/a and node1/b at their old addresses (replayed)" ||
  fail "the rebooted agent's attachments do not hold $ip_a and $ip_b: $atts"
grep -qiE 'replay' "$DL_DIR/n1/host-shim.log" && pass "host-shim logged the replay" || fail "host-shim's log says nothing of a replay"

ip_d=$(dl_pod_add 1 d) && [ -n "$ip_d" ] || fail "pod add node1/d after the reboot"
[ -n "$ip_d" ] && [ "$ip_d" != "$ip_a" ] && [ "$ip_d" != "$ip_b" ] &&
  pass "node1/d attached after the reboot gets a free address ($ip_d)" || fail "node1/d got '$ip_d' (a: $ip_a, b: $ip_b)"
check "node2/c reaches node1/d" dl_reachable node2/c "$ip_d" 10
check "node2/c still reaches node1/a and node1/b" eval 'dl_reachable node2/c "$ip_a" 5 && dl_reachable node2/c "$ip_b" 5'
home0=$(dl_node_vfs_home 1)
dl_pod_del 1 a
for _ in $(seq 100); do [ "$(dl_node_vfs_home 1)" = $(( home0 + 1 )) ] && break; sleep 0.05; done
[ "$(dl_node_vfs_home 1)" = $(( home0 + 1 )) ] && pass "the replayed node1/a deleted: its VF is home" ||
  fail "after deleting node1/a $(dl_node_vfs_home 1) VFs are home, expected $(( home0 + 1 ))"
finish
