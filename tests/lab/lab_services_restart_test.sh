#!/usr/bin/env bash
# Lab e2e, Services across restarts and bad service objects (docs/services.md
# "Restarts"). Two nodes: a client on node1; two backends on node2 behind a
# ClusterIP (TCP 5201, an iperf3 server in each), so every connection through
# it is DNATed on node1 and tunnelled to node2; an iperf3 server in the
# external namespace for egress SNAT. Each transfer is iperf3 (TCP, paced,
# -i 0.1), its control and data connections balanced to the same backend:
# the client pod's only ephemeral port and the data port (--cport) are chosen
# by probing which backend Maglev gives each (a probe connection reset at
# once). Assertions are on behaviour; the gaps are printed as FIGURE lines. Proves:
#  - dpu-agent of node1 killed with SIGKILL mid-stream: the transfer completes
#    on its one data connection with every byte sent received, and the
#    restarted agent leaves the connection's conntrack entry as it was;
#  - dpu-dataplane of node1 killed with SIGKILL mid-stream, the data
#    connection placed by session affinity on another backend than Maglev
#    alone would give it: the transfer goes on after the restart on its one
#    data connection, to the same backend, because the new process takes the
#    old one's connection and affinity tables over (ConntrackAdopted; none
#    picked up loose: `dpuctl conntrack` shows the entry as it was); a
#    process that lost them would send it by Maglev to the other backend,
#    whose stack resets it; the longest gap in the bytes received;
#  - the same across a restart with another conntrack.max_entries (the old
#    table's connections carried into the new one, the log saying so);
#  - the same for an egress-SNAT connection to the external namespace: it
#    goes on after the restart, translated to the node-IP port it had (its
#    longer gap: the new process learns the host's and the gateway's MACs
#    again first, docs/services.md "Restarts");
#  - bad Services and EndpointSlices in the cluster file (port 0, a port
#    twice, an unknown protocol, an endpoint address 224.0.0.1 or 0.0.0.0),
#    each written beside the good service: refused with the field named in
#    the agent's log, counted in dpu_agent_cluster_malformed_objects_total on
#    both agents, the good service keeps serving, `dpuctl services` shows
#    nothing of it; with them gone a new service is programmed. (The file
#    source refuses a file with a bad object as a whole and keeps its last
#    good state: file_source.h.)
source "$(dirname "$0")/common.bash" svcr
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
DL_VFS=4 lab_test_up 2 0
lab() { bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" "$@"; }

ip_c=$(dl_pod_add 1 client) || fail "pod add node1/client"
ip_1=$(dl_pod_add 2 web1) || fail "pod add node2/web1"
ip_2=$(dl_pod_add 2 web2) || fail "pod add node2/web2"
ext=$(dl_external_ip) node1=$(dl_node_ip 1)
for b in web1 web2; do
  dl_spawn "$DL_DIR/iperf-$b.pid" "$(dl_pod_ns 2 $b)" "$DL_DIR/iperf-$b.log" iperf3 -s -p 5201 -J -i 0.1 -I "$DL_DIR/iperf3-$b.pid" ||
    fail "could not start iperf3 in node2/$b"
done
dl_spawn "$DL_DIR/iperf-ext.pid" "$(dl_external_ns)" "$DL_DIR/iperf-ext.log" iperf3 -s -p 5202 -B "$ext" -J -i 0.1 -I "$DL_DIR/iperf3-ext.pid" ||
  fail "could not start iperf3 in the external namespace"
for ns in "$(dl_pod_ns 2 web1)" "$(dl_pod_ns 2 web2)" "$(dl_external_ns)"; do
  dl_wait 5 _dl_listening "$ns" "$([ "$ns" = "$(dl_external_ns)" ] && echo 5202 || echo 5201)" ||
    fail "no iperf3 server listens in $ns"
done

vip=$(lab service add iperf --port tcp/5201 --backends node2/web1,node2/web2) || fail "dpu-lab service add iperf"

# A connection from the client's port PORT to the service, reset at once
# (no TIME_WAIT keeps the port): Maglev's choice for that 5-tuple.
cat > "$DL_DIR/probe.py" <<'PYEOF'
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[3])))
s.settimeout(2)
s.connect((sys.argv[1], int(sys.argv[2])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
PYEOF
# The conntrack entry of the client's connection from PORT to ADDRESS:
# "ORIGINAL REPLY STATE" (without its timers).
ct_entry() {  # ADDRESS PORT
  dl_dpuctl 1 conntrack --address "$1" --port "$2" 2>/dev/null |
    awk -v s="$ip_c:$2" '$1 == "tcp" && $2 == s { print $2, $3, $4, $5, $6, $7, $8; exit }'
}
backend_of() { local e; e=$(ct_entry "$vip" "$1"); e=${e#* * * }; echo "${e%%:*}"; }
probe() { dl_exec node1/client "$PY" "$DL_DIR/probe.py" "$vip" 5201 "$1" >/dev/null 2>&1 && backend_of "$1"; }
check "the client reaches the service $vip:5201 (a probe connection)" dl_wait 15 probe 39999

# pick_ports BASE: CPORT (iperf3's control connection: the client pod's only
# ephemeral port) and DPORT (its data connection) that Maglev sends to one
# backend, BACKEND.
pick_ports() {
  local d
  BACKEND=$(probe "$1") && [ -n "$BACKEND" ] || return 1
  for (( d = $1 + 1; d < $1 + 40; d++ )); do
    [ "$(probe $d)" = "$BACKEND" ] || continue
    CPORT=$1 DPORT=$d
    dl_exec node1/client sysctl -qw net.ipv4.ip_local_port_range="$CPORT $CPORT"
    return
  done
  return 1
}

# pick_ports_against BASE: CPORT (BASE) whose connection Maglev sends to
# BACKEND, and DPORT whose connection Maglev alone sends to the other, OTHER.
pick_ports_against() {
  local d b
  BACKEND=$(probe "$1") && [ -n "$BACKEND" ] || return 1
  for (( d = $1 + 1; d < $1 + 40; d++ )); do
    b=$(probe $d) && [ -n "$b" ] || continue
    [ "$b" != "$BACKEND" ] || continue
    CPORT=$1 DPORT=$d OTHER=$b
    dl_exec node1/client sysctl -qw net.ipv4.ip_local_port_range="$CPORT $CPORT"
    return
  done
  return 1
}

# stream_start TAG ADDRESS PORT DATA-PORT [SECONDS]: a paced iperf3 transfer (6 s) from
# the client, the server's report (per 100 ms interval: the servers run with -i 0.1) included; running once
# its data connection is established.
stream_start() {
  local out=$DL_DIR/$1.json
  dl_exec node1/client timeout 40 iperf3 -c "$2" -p "$3" --cport "$4" -t "${5:-6}" -b 20M -i 0.1 -J --get-server-output \
    --connect-timeout 3000 > "$out" 2> "$out.err" &
  STREAM_PID=$!
  dl_wait 5 stream_established "$2" "$4"
}
stream_established() { dl_exec node1/client ss -Htn state established "sport = :$2" | grep -q .; }
# stream_result TAG DATA-PORT (after `wait "$STREAM_PID"`, in this shell): true when the transfer completed on one data
# connection from DATA-PORT with every byte sent received; says what it saw
# and the longest run of 100 ms intervals in which the server received nothing.
stream_result() {
  local out=$DL_DIR/$1.json
  if ! jq -e '.error == null' "$out" >/dev/null 2>&1; then
    echo "iperf3 failed: $(jq -r '.error // empty' "$out" 2>/dev/null) $(cat "$out.err" 2>/dev/null)"
    return 1
  fi
  jq -r '
    [.server_output_json.intervals[] | .sum | {s: .seconds, b: .bytes}] as $iv
    | (reduce range(0; $iv | length) as $i ({run: 0, max: 0, end: 0};
         if $iv[$i].b == 0 then .run += $iv[$i].s | (if .run > .max then .max = .run | .end = $i + 1 else . end)
         else .run = 0 end)) as $gap
    | "sent \(.end.sum_sent.bytes) received \(.server_output_json.end.sum_received.bytes // .end.sum_received.bytes)"
      + " connections \(.start.connected | length) data_port \(.start.connected[0].local_port)"
      + " retransmits \(.end.sum_sent.retransmits // 0) gap_ms \($gap.max * 1000 | round)"
      + " after_gap \([$iv[$gap.end:][].b] | add // 0)"
      + " mbit \(.end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10)"' "$out"
}
# "sent S received S connections 1 data_port DPORT ...": nothing lost, no reconnect.
whole() { [[ "$1" =~ ^sent\ ([0-9]+)\ received\ ([0-9]+)\ connections\ 1\ data_port\ $2\  ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[1]}" -gt 0 ]; }
# The transfer went on after its longest gap on its one data connection from DATA-PORT, without an error.
resumed() { [[ "$1" =~ ^sent\ [0-9]+\ received\ [0-9]+\ connections\ 1\ data_port\ $2\ .*\ after_gap\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; }
field() { sed -n "s/.* $2 \([^ ]*\).*/\1/p" <<< "$1"; }

# --- 1. dpu-agent SIGKILL mid-stream: nothing happens to the connection.
pick_ports 40000 || fail "no data port found that Maglev sends where the control port goes"
stream_start agent "$vip" 5201 "$DPORT" || fail "the iperf3 transfer through $vip did not start"
sleep 1  # mid-stream
before=$(ct_entry "$vip" "$DPORT")
dl_daemon_stop 1 agent -9
[ -z "$(dl_daemon_pid 1 agent)" ] || fail "dpu-agent of node1 survived SIGKILL"
dl_daemon_start 1 agent || fail "dpu-agent of node1 did not start again"
after=$(ct_entry "$vip" "$DPORT")
[ -n "$before" ] && [ "$before" = "$after" ] &&
  pass "the restarted agent left the connection's conntrack entry as it was: $after" ||
  fail "conntrack entry of the data connection before the agent restart: '$before'; after: '$after'"
wait "$STREAM_PID"
r=$(stream_result agent "$DPORT")
whole "$r" "$DPORT" && pass "agent SIGKILL mid-stream: the transfer through $vip completed on one connection, every byte received ($r)" ||
  fail "agent SIGKILL mid-stream: $r"
echo "FIGURE: agent restart under an iperf3 stream through a ClusterIP: longest gap $(field "$r" gap_ms) ms, $(field "$r" retransmits) retransmits, $(field "$r" mbit) Mbit/s (paced to 20)"

# --- 2. dpu-dataplane SIGKILL mid-stream: the new process takes the connection over.
# The data port is one Maglev alone sends to the other backend than the
# control port's; session affinity sends it to the control connection's. A new
# process without the old one's tables would pick the data connection up
# loose and send it by Maglev to the other backend, whose stack resets it.
pick_ports_against 40100 || fail "no data port found that Maglev sends elsewhere than the control port"
lab service add iperf --port tcp/5201 --affinity 600 --backends node2/web1,node2/web2 >/dev/null ||
  fail "service add iperf --affinity 600"
check "node1 balances iperf with affinity 10m00s" dl_wait 15 eval \
  "grep -qE '^default/iperf +tcp-5201 +cluster-ip .* 10m00s +2/2 ' <<< \"\$(dl_dpuctl 1 services 2>&1)\""
stream_start dataplane "$vip" 5201 "$DPORT" || fail "the iperf3 transfer through $vip did not start"
sleep 1  # mid-stream
before=$(ct_entry "$vip" "$DPORT")
[ "$(backend_of "$DPORT")" = "$BACKEND" ] &&
  pass "affinity sent the data connection to $BACKEND, where its control connection went (Maglev alone: $OTHER)" ||
  fail "data connection's backend before the restart: '$(backend_of "$DPORT")' (want $BACKEND, Maglev alone $OTHER)"
loose0=$(dl_drop_count 1 ConntrackLoose)
t_kill=$EPOCHREALTIME
dl_daemon_stop 1 dataplane -9
dl_daemon_start 1 dataplane || fail "dpu-dataplane of node1 did not start again"
t_up=$EPOCHREALTIME
wait "$STREAM_PID"
r=$(stream_result dataplane "$DPORT")
after=$(ct_entry "$vip" "$DPORT")
resumed "$r" "$DPORT" && pass "dataplane SIGKILL mid-stream: the transfer through $vip went on after the restart on its one connection ($r)" ||
  fail "dataplane SIGKILL mid-stream: $r"
# The entry is the old process's, taken over: the same tuples, to the same backend, not picked up loose.
[ -n "$before" ] && [ "${after% *}" = "${before% *}" ] && [ "$(backend_of "$DPORT")" = "$BACKEND" ] &&
  pass "the new dataplane goes on with the connection's entry, to $BACKEND: $after" ||
  fail "conntrack entry of the data connection before the dataplane restart: '$before'; after: '$after' (backend $BACKEND)"
adopted=$(dl_drop_count 1 ConntrackAdopted)
[ "$adopted" -ge 2 ] && pass "node1's new dataplane took $adopted connections over from the old one's table" ||
  fail "node1's new dataplane counts $adopted ConntrackAdopted (want the control and data connections)"
[ "$(dl_drop_count 1 ConntrackLoose)" = 0 ] && pass "node1's new dataplane picked up no connection loose" ||
  fail "node1's new dataplane picked up $(dl_drop_count 1 ConntrackLoose) connection(s) loose (before: $loose0)"
echo "FIGURE: dataplane restart under an iperf3 stream through a ClusterIP (affinity against Maglev): longest gap $(field "$r" gap_ms) ms in the bytes received (100 ms intervals), $(field "$r" retransmits) retransmits; the new process was ready $(awk -v a="$t_kill" -v b="$t_up" 'BEGIN { printf "%d", (b - a) * 1000 }') ms after the kill"

lab service add iperf --port tcp/5201 --backends node2/web1,node2/web2 >/dev/null || fail "service add iperf (no affinity)"

# --- 2b. A restart with another conntrack.max_entries (a changed config: a
# cold start, the standby that read the old one stopped first): the new
# process carries the old table's connections into its own: the transfer
# goes on, its entry as it was, none picked up loose.
pick_ports 40150 || fail "no data port found that Maglev sends where the control port goes"
stream_start resize "$vip" 5201 "$DPORT" || fail "the iperf3 transfer through $vip did not start"
sleep 1  # mid-stream
before=$(ct_entry "$vip" "$DPORT")
dl_proc_stop "$DL_DIR/n1/dataplane-standby.pid"
grep -q '^conntrack:' "$DL_DIR/n1/dataplane.yaml" && fail "node1's dataplane config sets conntrack already"
echo "conntrack: {max_entries: 131072}" >> "$DL_DIR/n1/dataplane.yaml"
log_lines=$(wc -l < "$DL_DIR/n1/dataplane.log")
dl_daemon_stop 1 dataplane -9
dl_daemon_start 1 dataplane || fail "dpu-dataplane of node1 did not start again with the new table size"
wait "$STREAM_PID"
r=$(stream_result resize "$DPORT")
after=$(ct_entry "$vip" "$DPORT")
resumed "$r" "$DPORT" &&
  pass "restart with conntrack.max_entries 262144 -> 131072 mid-stream: the transfer went on on its one connection ($r)" ||
  fail "restart with another conntrack.max_entries mid-stream: $r"
[ -n "$before" ] && [ "${after% *}" = "${before% *}" ] && [ "$(backend_of "$DPORT")" = "$BACKEND" ] &&
  pass "the resized table holds the connection's entry as it was, to $BACKEND: $after" ||
  fail "conntrack entry of the data connection before the resizing restart: '$before'; after: '$after' (backend $BACKEND)"
said=$(tail -n +"$(( log_lines + 1 ))" "$DL_DIR/n1/dataplane.log" | grep -m1 'conntrack: carried .* connections over from the table of 262144 entries')
[ -n "$said" ] && pass "node1's dataplane log: ${said#*engine: }" ||
  fail "node1's dataplane log does not say it carried connections over: $(tail -n +"$(( log_lines + 1 ))" "$DL_DIR/n1/dataplane.log" | grep conntrack | head -3)"
[ "$(dl_drop_count 1 ConntrackLoose)" = 0 ] && pass "the resized dataplane picked up no connection loose" ||
  fail "the resized dataplane picked up $(dl_drop_count 1 ConntrackLoose) connection(s) loose"
echo "FIGURE: dataplane restart with another conntrack.max_entries under an iperf3 stream through a ClusterIP: longest gap $(field "$r" gap_ms) ms, $(field "$r" retransmits) retransmits"

# --- 3. egress SNAT: a pod's connection to the external namespace across a dataplane restart.
snat_port() { dl_dpuctl 1 conntrack --address "$ext" --port "$1" 2>/dev/null |
  awk -v s="$ip_c:$1" '$1 == "tcp" && $2 == s { split($7, a, ":"); print a[2]; exit }'; }
dl_exec node1/client sysctl -qw net.ipv4.ip_local_port_range="40200 40200"
stream_start egress "$ext" 5202 40201 8 || fail "the iperf3 transfer to $ext did not start"
sleep 1  # mid-stream
port0=$(snat_port 40201)
t_kill=$EPOCHREALTIME
dl_daemon_stop 1 dataplane -9
dl_daemon_start 1 dataplane || fail "dpu-dataplane of node1 did not start again"
t_up=$EPOCHREALTIME
wait "$STREAM_PID"
r=$(stream_result egress 40201)
port1=$(snat_port 40201)
resumed "$r" 40201 && pass "egress SNAT, dataplane SIGKILL mid-stream: the transfer to $ext went on after the restart on its one connection ($r)" ||
  fail "egress SNAT, dataplane SIGKILL mid-stream: $r"
[ -n "$port0" ] && [ "$port0" = "$port1" ] &&
  pass "the new dataplane translates the connection to the node IP's port it had: $node1:$port1" ||
  fail "egress SNAT port of the data connection before the restart: '$port0'; after: '$port1'"
echo "FIGURE: dataplane restart under an egress-SNAT iperf3 stream: longest gap $(field "$r" gap_ms) ms in the bytes received, $(field "$r" retransmits) retransmits; the new process was ready $(awk -v a="$t_kill" -v b="$t_up" 'BEGIN { printf "%d", (b - a) * 1000 }') ms after the kill"
dl_exec node1/client sysctl -qw net.ipv4.ip_local_port_range="32768 60999"

# --- 4. bad service objects in the cluster file, one at a time beside the good service.
malformed() { dl_metrics "$1" agent | awk '$1 == "dpu_agent_cluster_malformed_objects_total{source=\"file\"}" { print $2 }'; }
refused_case() {  # NAME EXPECTED-LOG-TEXT SERVICE [SLICE]
  local name=$1 expect=$2 m1 m2 lines ok=0 why=""
  m1=$(malformed 1) m2=$(malformed 2)
  lines=$(wc -l < "$DL_DIR/n1/agent.log")
  dl_service_raw "$name" "$3" "${4:-}" || { fail "could not write service $name"; return; }
  counted() { [ "$(malformed "$1")" -gt "$2" ]; }
  dl_wait 10 counted 1 "${m1:-0}" && dl_wait 10 counted 2 "${m2:-0}" || { ok=1; why+="no agent counted the object malformed; "; }
  local said
  said=$(tail -n +"$(( lines + 1 ))" "$DL_DIR/n1/agent.log" | grep -F -- "$expect" | head -n 1)
  [ -n "$said" ] || { ok=1; why+="node1's agent log does not say '$expect': $(tail -n +"$(( lines + 1 ))" "$DL_DIR/n1/agent.log" | tail -n 3); "; }
  probe 39998 >/dev/null || { ok=1; why+="the good service stopped answering; "; }
  ! dl_dpuctl 1 services 2>/dev/null | grep -q "default/$name " || { ok=1; why+="dpuctl services shows it; "; }
  if [ $ok = 0 ]; then pass "$name refused, the field named (${said##*cluster.yaml.}), the good service still serves, nothing of it programmed"
  else fail "$name: $why"; fi
  dl_service_del "$name"
}
refused_case bad-port0 "ports[0].port: must be" \
  "{namespace: default, name: bad-port0, clusterIP: 10.96.0.20, ports: [{name: p, protocol: TCP, port: 0}]}"
refused_case bad-twice "ports[1]: port 80/TCP is listed twice" \
  "{namespace: default, name: bad-twice, clusterIP: 10.96.0.21, ports: [{name: a, protocol: TCP, port: 80}, {name: b, protocol: TCP, port: 80}]}"
refused_case bad-proto "ports[0].protocol: must be TCP, UDP or SCTP, not \"ICMP\"" \
  "{namespace: default, name: bad-proto, clusterIP: 10.96.0.22, ports: [{name: p, protocol: ICMP, port: 80}]}"
for addr in 224.0.0.1 0.0.0.0; do
  refused_case "bad-ep-${addr//./-}" "endpoints[1].addresses[0]: '$addr' is" \
    "{namespace: default, name: bad-ep-${addr//./-}, clusterIP: 10.96.0.23, ports: [{name: p, protocol: TCP, port: 5201}]}" \
    "{namespace: default, name: bad-ep-lab, service: bad-ep-${addr//./-}, addressType: IPv4, ports: [{name: p, protocol: TCP, port: 5201}], endpoints: [{addresses: [$ip_1], conditions: {ready: true}, nodeName: node2}, {addresses: [$addr], conditions: {ready: true}, nodeName: node2}]}"
done
# The file is good again: a new service is taken.
late=$(lab service add late --port tcp/5201 --backends node2/web1) || fail "dpu-lab service add late"
programmed() { dl_dpuctl 1 services 2>/dev/null | grep -qE "^default/late +tcp-5201 +cluster-ip +$late:5201 .* 1/1 "; }
check "with the bad objects gone a new service ($late) is programmed" dl_wait 15 programmed
finish
