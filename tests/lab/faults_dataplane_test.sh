#!/usr/bin/env bash
# Lab e2e, faults: dpu-dataplane of node1 is killed with SIGKILL while pings
# run every 10 ms (node2/b -> node1/a across the fabric, node1's host ->
# node1/a locally). By default node1 runs a warm standby dataplane
# (DL_DP_STANDBY, lab/lib/daemons.bash: dpu-dataplane --standby), which takes
# over by itself; FAULT_DP_STANDBY=0 measures the cold start of a new process
# instead (the lab starts it after the kill). Proves and measures:
#  - forwarding comes back by itself (the agent reconnects and pushes its
#    whole model into the new dataplane) within a bound: the outage (kill to
#    the first reply after the gap) and the lost pings are printed as
#    `FIGURE: dataplane restart outage <n> ms`, with the new process's
#    start-up phases (dpuctl startup: EAL, mbuf pool, each port on its
#    backend, sockets, the agent, the first full sync, forwarding), and must
#    stay under FAULT_DP_BOUND_MS (default 5000: a bound against a hang on a
#    loaded machine, not the target; the figure is the measurement);
#  - the pods keep their addresses (eth0 untouched, the agent's attachments
#    unchanged, the new dataplane has flows for both), TCP works again both
#    ways, and a new pod attaches and forwards;
#  - every port comes back on the backend it had (af_xdp), although the killed
#    process left its XDP programs attached (detachStaleXdpProgram, xdp.h);
#  - with the standby: the standby is the process that forwards afterwards, and
#    the lab starts the next standby, which gets warm.
source "$(dirname "$0")/common.bash" fdp
standby=${FAULT_DP_STANDBY:-1}
DL_DP_STANDBY=$standby
DL_VFS=4 lab_test_up 2 0
bound=${FAULT_DP_BOUND_MS:-5000}

ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 2 b) || fail "pod add node2/b"
check "node2/b reaches node1/a" dl_reachable node2/b "$ip_a" 10
check "node1's host reaches node1/a" dl_reachable node1/host "$ip_a" 10
check "node1/a reaches node2/b" dl_reachable node1/a "$ip_b" 10
attached() { dl_agent_api "$1" GET /v1/attachments | jq -c '[.. | strings | select(test("^10\\.244\\."))] | unique' 2>/dev/null; }
att_before=$(attached 1)
# Each port's backend (af_xdp, or the af_packet fallback), from its devargs.
backends() { dl_dpuctl 1 ports 2>/dev/null | awk 'NR == 1 { next } /^$/ { exit } { b = $NF; sub(/,.*/, "", b); sub(/_[^_]*$/, "", b); print $2 "=" b }' | sort | tr '\n' ' '; }
be_before=$(backends)
mac_a=$(ip -n "$(dl_pod_ns 1 a)" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*')

pr=$DL_DIR/ping-remote ph=$DL_DIR/ping-host
dl_ping_start node2/b "$ip_a" 4000 0.01 "$pr"; ppr=$DL_PING_PID
dl_ping_start node1/host "$ip_a" 4000 0.01 "$ph"; pph=$DL_PING_PID
# Replies (ping -D stamps each) after a moment in time: the outage is measured between such runs of them.
replies_after() { awk -F'[][]' -v t="$2" '/icmp_seq=/ && $2 > t { n++ } END { print n + 0 }' "$1"; }
flowing_since() { [ "$(replies_after "$pr" "$1")" -ge 20 ] && [ "$(replies_after "$ph" "$1")" -ge 20 ]; }
# Both pings are answered before the kill, so a gap in them is the restart's.
dl_wait 10 flowing_since 0 || fail "the pings got no replies before the kill"
old_pid=$(dl_daemon_pid 1 dataplane)
mode="cold start"
if [ "$standby" = 1 ]; then
  mode="warm standby"
  dl_wait 30 _dl_warm_standby 1 && pass "node1's standby dataplane is warm" || fail "node1's standby dataplane is not warm"
  standby_pid=$(dl_daemon_pid 1 dataplane-standby)
fi
# EPOCHREALTIME (bash): no fork between the time stamp and the kill.
t_kill=$EPOCHREALTIME
dl_daemon_stop 1 dataplane -9
t_gone=$EPOCHREALTIME
[ -z "$(dl_daemon_pid 1 dataplane)" ] && pass "dpu-dataplane of node1 (pid $old_pid) killed with SIGKILL" || fail "dpu-dataplane survived SIGKILL"
dl_daemon_start 1 dataplane || fail "dpu-dataplane of node1 did not start again"
t_up=$(date +%s.%N)
# Forwarding is back once both pings have a reply from after the new process was up.
last_reply() { awk -F'[][]' '/icmp_seq=/ { t = $2 } END { print (t == "" ? 0 : t) }' "$1"; }
after_up() { awk -v a="$(last_reply "$1")" -v b="$t_up" 'BEGIN { exit !(a > b) }'; }
back() { after_up "$pr" && after_up "$ph"; }
dl_wait 30 back
# And forwarding stays back: 20 more replies each after the new process was up.
dl_wait 10 flowing_since "$t_up"
dl_ping_stop "$ppr"; dl_ping_stop "$pph"

# The new process's start-up, phase by phase (dpuctl startup: milliseconds
# from its start; the ports' steps left out), and how long after the kill the
# old process was gone (the lab waits for that before it starts the new one) and the new one started.
startup=$(dl_dpuctl 1 --json stats 2>/dev/null | jq -r --arg kill "$t_kill" --arg gone "$t_gone" '
  def ms: (tonumber / 100 | round) / 10;
  if (.startup | length) == 0 then "no start-up phases" else
    "the old process was gone \(($gone | tonumber) * 1000 - ($kill | tonumber) * 1000 | round) ms after the kill, " +
    "the new one began \(((.started_unix_us | tonumber) / 1000 - ($kill | tonumber) * 1000) | round) ms after the kill; start-up: " +
    ([.startup[] | select(.name | test(": ") | not)
      | if .moment then "\(.name) @\(.start_us | ms)" else "\(.name) \(.duration_us | ms)" end] | join(", ")) + " ms"
  end' 2>/dev/null)
[ -n "$startup" ] || startup="start-up phases unavailable"

for p in remote host; do
  f=$DL_DIR/ping-$p
  res=$(dl_ping_result "$f"); out=$(dl_ping_outage "$f" "$t_kill")
  lost=$(( ${res% *} - ${res#* } ))
  what="node2/b -> node1/a"; [ $p = host ] && what="node1's host -> node1/a"
  if ! after_up "$f"; then
    fail "$what: no reply after the new dataplane was up ($res transmitted/received): forwarding did not come back"
    continue
  fi
  echo "FIGURE: dataplane restart outage $out ms ($mode; $what, $lost of ${res% *} pings at 10 ms lost; the new process was ready $(awk -v a="$t_kill" -v b="$t_up" 'BEGIN{printf "%d", (b-a)*1000}') ms after the kill; $startup)"
  [ "$out" -le "$bound" ] && pass "$what: forwarding back $out ms after the kill (bound $bound ms)" ||
    fail "$what: forwarding back only $out ms after the kill (bound $bound ms)"
done

if [ "$standby" = 1 ]; then
  new_pid=$(dl_daemon_pid 1 dataplane)
  [ -n "$standby_pid" ] && [ "$new_pid" = "$standby_pid" ] && pass "the warm standby (pid $standby_pid) took over" ||
    fail "the dataplane after the kill is pid ${new_pid:-none}, not the standby (pid ${standby_pid:-none})"
  dl_wait 30 _dl_warm_standby 1 && pass "the next standby (pid $(dl_daemon_pid 1 dataplane-standby)) is warm" ||
    fail "no warm standby after the takeover"
fi
same_pod() { [ "$(dl_pod_ip 1 a)" = "$ip_a" ] && [ "$(ip -n "$(dl_pod_ns 1 a)" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*')" = "$mac_a" ]; }
check "node1/a keeps its address $ip_a and MAC on the same eth0" same_pod
# A SIGKILLed dataplane leaves its XDP programs attached; the new one must not fall back to af_packet for them.
be_after=$(backends)
[ "$be_after" = "$be_before" ] && pass "every port has the backend it had before the kill ($be_after)" ||
  fail "port backends before the kill: $be_before; after: $be_after"
att_after=$(attached 1)
[ -n "$att_before" ] && [ "$att_after" = "$att_before" ] && pass "node1's agent has the same attachments ($att_after)" ||
  fail "node1's attachments changed: before $att_before, after $att_after"
flows=$(dl_dpuctl 1 dump-flows 2>/dev/null)
grep -Fqw "$ip_a" <<< "$flows" && pass "the new dataplane has flows for $ip_a" || fail "the new dataplane has no flow for $ip_a"
tcp=$(dl_tcp node2/b node1/a 5M) && pass "TCP node2/b -> node1/a after the restart ($tcp Mbit/s)" || fail "TCP node2/b -> node1/a after the restart"
tcp=$(dl_tcp node1/a node2/b 5M) && pass "TCP node1/a -> node2/b after the restart ($tcp Mbit/s)" || fail "TCP node1/a -> node2/b after the restart"
ip_c=$(dl_pod_add 1 c) && [ -n "$ip_c" ] && pass "a new pod node1/c attaches after the restart ($ip_c)" || fail "pod add node1/c after the restart"
check "node2/b reaches node1/c" dl_reachable node2/b "$ip_c" 10
check "node1/c reaches node1/a" dl_reachable node1/c "$ip_a" 10
finish
