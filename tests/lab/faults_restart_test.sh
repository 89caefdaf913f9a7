#!/usr/bin/env bash
# Lab e2e, faults: the control plane restarts under traffic. 2 nodes, pods
# node1/a and node2/b; while an interval ping (every 10 ms, node2/b -> node1/a)
# and an iperf3 TCP transfer (node1/a -> node2/b, 20 Mbit/s) run:
#  - dpu-agent of both nodes is killed with SIGKILL and started again: not one
#    ping is lost and the TCP transfer completes (the dataplane forwards with
#    its last programmed state; the agent's resync changes nothing that
#    forwards); after the restart a new pod attaches on each node and is
#    reachable across the fabric;
#  - host-shim of node1 is restarted (SIGTERM, then SIGKILL): not one ping is
#    lost, the pods keep working, a new pod attaches afterwards and a pod made
#    before the restarts is deleted cleanly (its VF goes home).
# On a loss, a window without a fault runs as the control; only when it loses
# pings too (a CPU-starved machine) is the faulty window tried once more.
source "$(dirname "$0")/common.bash" frst
DL_VFS=6 lab_test_up 2 0

ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 2 b) || fail "pod add node2/b"
check "node2/b reaches node1/a" dl_reachable node2/b "$ip_a" 10
check "node1/a reaches node2/b" dl_reachable node1/a "$ip_b" 10

# traffic_window WHAT CMD...: runs CMD 1.5 s into 10 ms pings (node2/b ->
# node1/a) and a TCP transfer (node1/a -> node2/b, paced to 20 Mbit/s); true
# when no ping was lost and the transfer completed; says what went wrong.
traffic_window() {
  local what=$1; shift
  local pout=$DL_DIR/ping-$RANDOM tout=$DL_DIR/tcp-$RANDOM count=600 res tcp ok=0
  dl_ping_start node2/b "$ip_a" $count 0.01 "$pout" || { echo "  $what: ping did not start"; return 1; }
  local ppid=$DL_PING_PID
  dl_tcp_start node1/a node2/b 6 "$tout" 5211 20 || { echo "  $what: iperf3 did not start"; dl_ping_stop "$ppid"; return 1; }
  # Both flowing before the restart (1.5 s of 10 ms pings).
  dl_ping_await "$pout" 150 || { echo "  $what: the ping got no steady replies before the restart"; dl_ping_stop "$ppid"; return 1; }
  lastseq() { grep -o 'icmp_seq=[0-9]*' "$pout" | tail -n 1 | cut -d= -f2; }
  local t=$(date +%s%N) seq0 seq1
  seq0=$(lastseq)
  "$@" || { echo "  $what: the restart itself failed"; ok=1; }
  seq1=$(lastseq)
  echo "  $what took $(( ($(date +%s%N) - t) / 1000000 )) ms (kill to ready)"
  kill -0 "$ppid" 2>/dev/null || { echo "  $what: the ping ended before the restart did: it proves nothing"; ok=1; }
  # The ping ends by itself (count) unless the machine is very slow: then it is interrupted.
  dl_ping_stop "$ppid" 25
  res=$(dl_ping_result "$pout")
  if [ -n "$res" ] && [ "${res% *}" = "${res#* }" ] && [ "${res% *}" -ge 100 ]; then
    echo "  $what: ${res% *} pings every 10 ms across it, none lost"
  else
    echo "  $what: pings transmitted/received: ${res:-none}; no reply to icmp_seq $(dl_ping_missing "$pout")(the restart ran from seq ${seq0:-?} to ${seq1:-?}); $(tail -n 1 "$pout")"
    local n
    for n in 1 2; do  # where they went: the ports' drop columns (cumulative)
      echo "    node$n ports (name rx tx rx_drop tx_drop): $(dl_dpuctl $n ports 2>/dev/null | awk 'NR == 1 { next } /^$/ { exit } { printf "%s %s %s %s %s; ", $2, $5, $6, $7, $8 }')"
    done
    ok=1
  fi
  if tcp=$(dl_tcp_wait "$tout"); then
    echo "  $what: the TCP transfer across it completed (${tcp% *} Mbit/s, ${tcp#* } retransmits)"
  else
    echo "  $what: the TCP transfer across it failed"; ok=1
  fi
  return $ok
}

# under_traffic WHAT CMD...: the fault under traffic must lose nothing. A
# machine starved of CPU (the dataplane's worker not scheduled for a second)
# drops pings with no fault at all: then the window runs once more, with the
# fault again, and a loss without a fault is shown beside it as the control.
under_traffic() {
  local what=$1; shift
  if traffic_window "$what" "$@"; then pass "$what: no ping lost, the TCP transfer completed"; return; fi
  if traffic_window "control window (no fault)" true; then
    fail "$what: pings lost or the transfer failed with the fault, none without it (see above)"
    return
  fi
  echo "  note: the control window lost pings too: the machine is overloaded; the fault once more"
  if traffic_window "$what (again)" "$@"; then pass "$what (second try): no ping lost, the TCP transfer completed"
  else fail "$what: pings lost in both tries (and in the control window: an overloaded machine?)"; fi
}

restart_agents() {
  local n
  for n in 1 2; do dl_daemon_stop "$n" agent -9; done
  [ -z "$(dl_daemon_pid 1 agent)$(dl_daemon_pid 2 agent)" ] || { echo "  an agent survived SIGKILL" >&2; return 1; }
  sleep 0.3
  for n in 1 2; do dl_daemon_start "$n" agent || return 1; done
}
under_traffic "dpu-agent SIGKILL on both nodes and restart" restart_agents

ip_c=$(dl_pod_add 1 c) && [ -n "$ip_c" ] && pass "after the agent restart node1/c attaches ($ip_c)" || fail "pod add node1/c after the agent restart"
ip_d=$(dl_pod_add 2 d) && [ -n "$ip_d" ] && pass "after the agent restart node2/d attaches ($ip_d)" || fail "pod add node2/d after the agent restart"
check "node2/d reaches node1/c" dl_reachable node2/d "$ip_c" 10
check "node1/c reaches node2/b" dl_reachable node1/c "$ip_b" 10
check "node1/a reaches node2/d" dl_reachable node1/a "$ip_d" 10

restart_shim() { dl_daemon_stop 1 host-shim && dl_daemon_start 1 host-shim; }
kill_shim() { dl_daemon_stop 1 host-shim -9 && dl_daemon_start 1 host-shim; }
under_traffic "host-shim restart (SIGTERM) on node1" restart_shim
under_traffic "host-shim SIGKILL and restart on node1" kill_shim

ip_e=$(dl_pod_add 1 e) && [ -n "$ip_e" ] && pass "after the host-shim restarts node1/e attaches ($ip_e)" || fail "pod add node1/e after the host-shim restarts"
check "node2/b reaches node1/e" dl_reachable node2/b "$ip_e" 10
check "node1/c (made before the restarts) reaches node2/b" dl_reachable node1/c "$ip_b" 10
check "node2/b reaches node1/a (made before the restarts)" dl_reachable node2/b "$ip_a" 10
check "node1's host (management port) reaches node1/a after the restarts" dl_reachable node1/host "$ip_a" 10
home0=$(dl_node_vfs_home 1)
dl_pod_del 1 c || fail "pod del node1/c"
for _ in $(seq 100); do [ "$(dl_node_vfs_home 1)" = $(( home0 + 1 )) ] && break; sleep 0.05; done
[ "$(dl_node_vfs_home 1)" = $(( home0 + 1 )) ] && pass "node1/c (attached before the restarts) deleted: its VF is home" ||
  fail "after deleting node1/c $(dl_node_vfs_home 1) VFs are home, expected $(( home0 + 1 ))"
finish
