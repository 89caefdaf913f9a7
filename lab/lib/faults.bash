# lab/lib/faults.bash — what the fault and security tests (tests/lab/faults_*,
# security_*) need beyond the daemons' stop/start: traffic that runs in the
# background while a daemon is killed (an interval ping whose every reply is
# time-stamped, a timed iperf3 TCP transfer), the outage a ping saw, a node's
# removal from the cluster, a DPU "reboot", and one drop counter of a node's
# dataplane. Sourced by lab/lib/lab.bash.
#
# Functions (public):
#   dl_ping_start SRC IP COUNT INTERVAL OUT   ping -D in SRC's netns in the background (pid in DL_PING_PID)
#   dl_ping_stop PID [SECONDS]       wait up to SECONDS (default: none) for it to end, then SIGINT (ping prints its summary)
#   dl_ping_result OUT               "TRANSMITTED RECEIVED" from ping's summary (empty when there is none)
#   dl_ping_replies OUT              the replies OUT holds so far
#   dl_ping_await OUT N [SECONDS]    wait (default 10 s) until OUT holds N replies: traffic that is
#                                    known to flow, where a fixed sleep would only hope it does
#   dl_ping_missing OUT              the icmp_seq numbers that got no reply
#   dl_ping_outage OUT SINCE         ms from SINCE (epoch seconds, fractional) to the first reply after the
#                                    first gap in icmp_seq at or after SINCE; 0 when no reply is missing
#   dl_tcp_start SRC DST SECONDS OUT [PORT] [MBIT]   an iperf3 TCP transfer SRC -> DST for SECONDS in the
#                                    background, paced to MBIT Mbit/s (default 200: below what the lab's
#                                    veths carry, so a ping beside it is not lost to queue overflow)
#                                    (client pid in DL_TCP_PID, server pid in DL_TCP_SERVER_PID); JSON in OUT
#   dl_tcp_wait OUT                  wait for the transfer started into OUT; prints "MBIT_S RETRANSMITS",
#                                    false when it failed (the iperf3 error on stderr)
#   dl_cluster_remove_node N         rewrite the cluster file without node N and remove N's publish file
#                                    (<cluster file>.d/nodeN.json, which would otherwise keep N in the cluster)
#   dl_dpu_reboot N                  both DPU processes killed (-9), the agent's state wiped, both started again
#   dl_drop_count N REASON           node N's dataplane drop counter REASON (a dpuctl stats name), 0 when absent

dl_ping_start() {
  local src=$1 ip=$2 count=$3 interval=$4 out=$5 ns
  ns=$(dl_target_ns "$src") || return 1
  # -D: every reply carries its arrival time (the outage is measured from it); -W 5: the last replies are
  # waited for even on a machine so loaded that an RTT nears a second.
  ip netns exec "$ns" ping -n -D -c "$count" -i "$interval" -W 5 "$ip" > "$out" 2>&1 &
  DL_PING_PID=$!
}

dl_ping_stop() {
  local pid=$1 secs=${2:-0} i
  for (( i = 0; i < secs * 10; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -INT "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

dl_ping_result() {
  sed -n 's/^\([0-9]*\) packets transmitted, \([0-9]*\) received.*/\1 \2/p' "$1"
}

dl_ping_replies() { grep -c icmp_seq= "$1" 2>/dev/null || true; }

dl_ping_await() {
  local out=$1 n=$2 secs=${3:-10}
  _dl_ping_has() { [ "$(dl_ping_replies "$1")" -ge "$2" ]; }
  dl_wait "$secs" _dl_ping_has "$out" "$n"
}

# dl_ping_missing OUT — the icmp_seq numbers (1..transmitted) that got no reply, space-separated.
dl_ping_missing() {
  awk '/icmp_seq=/ { s = $0; sub(/.*icmp_seq=/, "", s); sub(/ .*/, "", s); got[s + 0] = 1 }
       / packets transmitted/ { n = $1 }
       END { for (i = 1; i <= n; i++) if (!(i in got)) printf "%d ", i }' "$1"
}

dl_ping_outage() {
  awk -v since="$2" '
    /icmp_seq=/ {
      ts = $1; gsub(/[\[\]]/, "", ts)
      seq = $0; sub(/.*icmp_seq=/, "", seq); sub(/ .*/, "", seq); seq += 0
      if (ts + 0 >= since + 0 && have && seq != last + 1) { printf "%d\n", (ts - since) * 1000; found = 1; exit }
      last = seq; have = 1
    }
    END { if (!found) print 0 }' "$1"
}

dl_tcp_start() {
  local src=$1 dst=$2 secs=$3 out=$4 port=${5:-5211} mbit=${6:-200} ip dns sns
  ip=$(dl_target_ip "$dst") || return 1
  dns=$(dl_target_ns "$dst") || return 1
  sns=$(dl_target_ns "$src") || return 1
  # Bounded: a test that dies before dl_tcp_wait leaves no server behind in a deleted netns.
  ip netns exec "$dns" timeout $(( secs + 30 )) iperf3 -s -1 -p "$port" > "$out.server" 2>&1 &
  DL_TCP_SERVER_PID=$!
  if ! dl_wait 5 _dl_listening "$dns" "$port"; then
    kill "$DL_TCP_SERVER_PID" 2>/dev/null; wait "$DL_TCP_SERVER_PID" 2>/dev/null
    dl_die "iperf3 server in $dst did not listen on port $port"; return 1
  fi
  echo "$DL_TCP_SERVER_PID" > "$out.spid"
  ip netns exec "$sns" timeout $(( secs + 20 )) iperf3 -c "$ip" -p "$port" -t "$secs" -b "${mbit}M" -J --connect-timeout 3000 \
    > "$out" 2> "$out.err" &
  DL_TCP_PID=$!
  echo "$DL_TCP_PID" > "$out.cpid"
}

dl_tcp_wait() {
  local out=$1 cpid spid
  cpid=$(cat "$out.cpid" 2>/dev/null); spid=$(cat "$out.spid" 2>/dev/null)
  [ -n "$cpid" ] && wait "$cpid" 2>/dev/null
  if [ -n "$spid" ]; then
    dl_wait 5 bash -c "! kill -0 $spid 2>/dev/null"
    kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
  fi
  if ! jq -e '.error == null and .end.sum_received.bytes > 0' "$out" >/dev/null 2>&1; then
    echo "iperf3: $(jq -r '.error // empty' "$out" 2>/dev/null) $(cat "$out.err" 2>/dev/null)" >&2
    return 1
  fi
  jq -r '"\(.end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10) \(.end.sum_sent.retransmits // 0)"' "$out"
}

dl_cluster_remove_node() {
  local gone=$1 n keep=()
  for n in $(dl_nodes); do [ "$n" = "$gone" ] || keep+=("$n"); done
  # A node's own publish file adds it to the cluster even when the file does
  # not list it (file_source.h): a node that leaves takes both with it.
  rm -f "$DL_DIR/cluster.yaml.d/$(dl_node_name "$gone").json"
  dl_write_cluster_file "${keep[@]}"
}

dl_dpu_reboot() {
  local n=$1
  dl_daemon_stop "$n" agent -9
  dl_daemon_stop "$n" dataplane-standby -9
  dl_daemon_stop "$n" dataplane -9
  dl_wipe_dpu_state "$n"
  dl_daemon_start "$n" dataplane && dl_daemon_start "$n" agent
}

dl_drop_count() {
  local n=$1 reason=$2 v
  v=$(dl_dpuctl "$n" stats --all 2>/dev/null | awk -v r="$reason" '$1 == r { print $2; exit }')
  echo "${v:-0}"
}
