#!/usr/bin/env bash
# Lab e2e, what a Service does besides balancing (docs/services.md): named
# target ports, session affinity, hairpin, internalTrafficPolicy Local,
# endpoints changing under traffic and UDP's stale connections, each through
# the real daemons. Two nodes: node1 has client and backend web1, node2 has
# client2 and backend web2. Every server answers "NAME PEER-IP:PEER-PORT", so
# the client sees which backend answered and the backend whom it saw.
# Proves:
#  - named targetPort: a service with ports tcp/80 -> "http" and udp/53 ->
#    "dns", whose pods name "http" 8080 (web1) and 8081 (web2): two
#    EndpointSlices (one per set of numbers), and both backends answer on
#    their own number over both protocols;
#  - hairpin: web1 reaching its own service lands on itself seeing the
#    hairpin address 169.254.169.5, and on web2 seeing web1's own address;
#  - session affinity (UDP, timeoutSeconds 2): 15 queries from new source
#    ports, most of which Maglev alone sends to the other backend (known
#    from the same ports without affinity), all reach the first one's backend;
#    once no new connection came for the timeout, a port Maglev sends to the
#    other backend reaches it, and the client sticks to that one; affinity
#    removed: new ports reach both backends again;
#  - internalTrafficPolicy Local (backend only on node1): from node2 the
#    connection fails (dropped, ServiceNoLocalEndpoint), from node1 it works;
#  - endpoints changing under traffic: a client opening one connection after
#    another while web2 is removed from the endpoints and added back. Asserted:
#    every connection of the run is answered (the removed pod keeps serving,
#    as a terminating pod does, so even one in flight to it completes); every
#    connection made after node1's dataplane showed web2 gone is answered
#    by web1; after it showed web2 back, web2 answers again;
#  - UDP stale conntrack: a client sending from one source port to a UDP
#    service whose only backend (still running) is replaced: its next
#    datagrams reach the new backend and no later one the old (ConntrackFlushed);
#    endpoints removed: refused (ICMP port unreachable); back: the same port
#    reaches web2 again (which an answer of web2's in flight at the first
#    flush, cached as a routed flow, used to prevent).
source "$(dirname "$0")/common.bash" pol
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
DL_VFS=4 lab_test_up 2 0
lab() { bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" "$@"; }
HAIRPIN=169.254.169.5  # the dataplane's hairpin source (docs/services.md)

ip_c=$(dl_pod_add 1 client) || fail "pod add node1/client"
ip_1=$(dl_pod_add 1 web1) || fail "pod add node1/web1"
ip_c2=$(dl_pod_add 2 client2) || fail "pod add node2/client2"
ip_2=$(dl_pod_add 2 web2) || fail "pod add node2/web2"

# The backends: who_server.py, answering "NAME PEER-IP:PEER-PORT" on each TCP and UDP port.
# UDP queries, one per source port given: "PORT ANSWER" per line (ANSWER:
# "NAME PEER", REFUSED or TIMEOUT).
cat > "$DL_DIR/udp_ports.py" <<'PYEOF'
import socket, sys
vip, port = sys.argv[1], int(sys.argv[2])
for sport in sys.argv[3:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.bind(("0.0.0.0", int(sport)))
    s.connect((vip, port))
    try:
        s.send(b"q")
        out = s.recv(2048).decode()
    except ConnectionRefusedError:
        out = "REFUSED"
    except socket.timeout:
        out = "TIMEOUT"
    print(sport, out, flush=True)
    s.close()
PYEOF
# Traffic for the changes: connections one after another (TCP: an HTTP GET
# each; UDP: a datagram every 50 ms from ONE source port) until STOP exists,
# a line per request: "START-NS RESULT" (TCP: "... from SOURCE-PORT").
cat > "$DL_DIR/loop.py" <<'PYEOF'
import http.client, os, socket, sys, time
mode, vip, port, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if mode == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(sys.argv[5])))
    s.connect((vip, port))
    s.settimeout(0.3)
while not os.path.exists(stop):
    t = time.time_ns()
    sport = None
    try:
        if mode == "tcp":
            # Connected by hand so that a handshake that times out still
            # names its source port (the report shows its connections).
            c = http.client.HTTPConnection(vip, port, timeout=3)
            c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.sock.settimeout(3)
            try:
                c.sock.connect((vip, port))
            finally:
                sport = c.sock.getsockname()[1] or None
            connected = time.time_ns()
            c.request("GET", "/")
            out = c.getresponse().read().decode() + " from " + str(sport) + " connected " + str(connected)
            c.close()
        else:
            s.send(b"q")
            out = s.recv(2048).decode()
            time.sleep(0.05)
    except ConnectionRefusedError:
        out = "REFUSED"
        time.sleep(0.05)
    except Exception as e:
        out = "ERROR %s from %s" % (type(e).__name__, sport)
    print(t, out, flush=True)
PYEOF
dl_spawn "$DL_DIR/web1.pid" "$(dl_pod_ns 1 web1)" "$DL_DIR/web1.log" "$PY" "$LAB_TESTS/who_server.py" web1 8080 5353 ||
  fail "could not start web1"
dl_spawn "$DL_DIR/web2.pid" "$(dl_pod_ns 2 web2)" "$DL_DIR/web2.log" "$PY" "$LAB_TESTS/who_server.py" web2 8081 5353 ||
  fail "could not start web2"

http() { dl_exec "${3:-node1/client}" curl -s --max-time "${2:-2}" "http://$1/"; }
answers() { [[ "$(http "$1")" == "$2 "* ]]; }  # ADDRESS:PORT NAME
check "web1 serves on 8080 (direct)" dl_wait 10 answers "$ip_1:8080" web1
check "web2 serves on 8081 (direct, across nodes)" dl_wait 10 answers "$ip_2:8081" web2
tcp_round() {  # ADDRESS:PORT N [FROM]: "web1=X web2=Y other=Z", then the peers each backend saw
  local i out w1=0 w2=0 other=0 p1=" " p2=" " peer
  for (( i = 0; i < $2; i++ )); do
    out=$(http "$1" 2 "${3:-node1/client}")
    peer=${out#* }; peer=${peer%:*}
    case ${out%% *} in
      web1) w1=$(( w1 + 1 )); [[ "$p1" == *" $peer "* ]] || p1+="$peer " ;;
      web2) w2=$(( w2 + 1 )); [[ "$p2" == *" $peer "* ]] || p2+="$peer " ;;
      *) other=$(( other + 1 )) ;;
    esac
  done
  p1=${p1# }; p2=${p2# }
  echo "web1=$w1 web2=$w2 other=$other web1-saw=${p1% } web2-saw=${p2% }"
}
udp_count() {  # FILE OF "PORT ANSWER": "web1=X web2=Y other=Z"
  awk '{ n[$2 == "web1" || $2 == "web2" ? $2 : "other"]++ }
       END { printf "web1=%d web2=%d other=%d\n", n["web1"], n["web2"], n["other"] }' "$1"
}
both() { [[ "$1" =~ ^web1=[1-9][0-9]*\ web2=[1-9][0-9]*\ other=0 ]]; }
svc_shows() {  # NODE SERVICE PORT-NAME USABLE/TOTAL: node's dataplane balances it with that many backends
  grep -qE "^default/$2 +$3 +cluster-ip .* $4 " <<< "$(dl_dpuctl "$1" services 2>&1)"
}

# --- named targetPort, multiport.
vip=$(lab service add multi --port tcp/80:http --port udp/53:dns --backends node1/web1,node2/web2) ||
  fail "dpu-lab service add multi"
# Before the pods name their ports the slice has none: nothing backs either port.
check "named ports unresolved: node1 balances multi's tcp-80 with no backend" dl_wait 15 svc_shows 1 multi tcp-80 0/0
lab service pod-ports node1/web1 http=8080,dns=5353/udp || fail "service pod-ports node1/web1"
lab service pod-ports node2/web2 http=8081,dns=5353/udp || fail "service pod-ports node2/web2"
slices=$(grep -cE "name: multi-lab(-2)?, service: multi" "$DL_DIR/cluster.yaml")
grep -qE "name: multi-lab, service: multi, .*name: web1\}\}\], ports: \[\{name: tcp-80, protocol: TCP, port: 8080\}, \{name: udp-53, protocol: UDP, port: 5353\}\]\}" "$DL_DIR/cluster.yaml" &&
  grep -qE "name: multi-lab-2, service: multi, .*name: web2\}\}\], ports: \[\{name: tcp-80, protocol: TCP, port: 8081\}, \{name: udp-53, protocol: UDP, port: 5353\}\]\}" "$DL_DIR/cluster.yaml" &&
  pass "named ports resolved per pod: $slices EndpointSlices, web1's tcp-80 = 8080, web2's = 8081" ||
  fail "the EndpointSlices of multi: $(grep multi-lab "$DL_DIR/cluster.yaml")"
for n in 1 2; do check "node$n balances multi's tcp-80 and udp-53 with 2/2 backends" \
  dl_wait 15 eval "svc_shows $n multi tcp-80 2/2 && svc_shows $n multi udp-53 2/2"; done
svc=$(dl_dpuctl 1 services 2>&1)
grep -qE "^default/multi +tcp-80 +$ip_1:8080 +ready +local " <<< "$svc" &&
  grep -qE "^default/multi +tcp-80 +$ip_2:8081 +ready +remote " <<< "$svc" &&
  pass "dpuctl services: tcp-80's backends $ip_1:8080 (local) and $ip_2:8081 (remote)" ||
  fail "dpuctl services on node1: $svc"
r=$(tcp_round "$vip:80" 16)
both "$r" && [[ "$r" == *"web1-saw=$ip_c web2-saw=$ip_c" ]] &&
  pass "TCP $vip:80 -> http: 16 connections, both backends on their own port ($r)" || fail "TCP through multi: $r"
dl_exec node1/client "$PY" "$DL_DIR/udp_ports.py" "$vip" 53 $(seq 30001 30016) > "$DL_DIR/multi-udp.out"
r=$(udp_count "$DL_DIR/multi-udp.out")
both "$r" && pass "UDP $vip:53 -> dns: 16 source ports, both backends ($r)" || fail "UDP through multi: $r"

# --- hairpin: web1 through its own service.
r=$(tcp_round "$vip:80" 16 node1/web1)
both "$r" && [[ "$r" == *"web1-saw=$HAIRPIN web2-saw=$ip_1" ]] &&
  pass "hairpin: web1 to $vip:80 lands on itself seeing $HAIRPIN, on web2 seeing $ip_1 ($r)" ||
  fail "hairpin from web1: $r (want both, web1 seeing $HAIRPIN, web2 seeing $ip_1)"
ct=$(dl_dpuctl 1 conntrack --address "$HAIRPIN" 2>&1)
grep -qE "^tcp +$ip_1:[0-9]+ -> $vip:80 +$ip_1:8080 -> $HAIRPIN:[0-9]+ .* dnat\+snat +default/multi " <<< "$ct" &&
  pass "dpuctl conntrack: web1's connections to itself, dnat+snat to $HAIRPIN" || fail "conntrack --address $HAIRPIN: $ct"
hp=$(dl_drop_count 1 ServiceHairpin)
[ "$hp" -ge 1 ] && pass "node1 counts $hp hairpin connections" || fail "ServiceHairpin on node1: $hp"

# --- session affinity (UDP), against what Maglev alone picks for each port.
aff=$(lab service add aff --port udp/53:5353 --backends node1/web1,node2/web2) || fail "service add aff"
check "node1 balances aff with 2/2 backends" dl_wait 15 svc_shows 1 aff udp-53 2/2
dl_exec node1/client "$PY" "$DL_DIR/udp_ports.py" "$aff" 53 $(seq 20001 20030) > "$DL_DIR/probe.out"
r=$(udp_count "$DL_DIR/probe.out")
both "$r" && pass "without affinity 30 source ports reach both backends ($r)" || fail "aff without affinity: $r"
# The flush of every UDP connection (no endpoint left): each probed port decides anew.
lab service backends aff "" || fail "service backends aff ''"
all_flushed() {  # every UDP connection of the client to $aff is a tombstone (state flushed)
  local l; l=$(grep -E "^udp +$ip_c:" <<< "$(dl_dpuctl 1 conntrack --address "$aff" 2>&1)")
  [ "$(wc -l <<< "$l")" = 30 ] && ! grep -qvE " flushed +dnat " <<< "$l"
}
check "endpoints removed: node1 flushed the client's 30 UDP connections to $aff" dl_wait 15 all_flushed
lab service add aff --port udp/53:5353 --affinity 2 --backends node1/web1,node2/web2 >/dev/null ||
  fail "service add aff --affinity 2"
check "node1 balances aff with affinity 2.0s, 2/2 backends" dl_wait 15 eval \
  "grep -qE '^default/aff +udp-53 +cluster-ip .* 2\.0s +2/2 ' <<< \"\$(dl_dpuctl 1 services 2>&1)\""
read -r first x _ <<< "$(head -1 "$DL_DIR/probe.out")"        # x: the backend Maglev gives the first port
[ "$x" = web1 ] && y=web2 || y=web1
mapfile -t yports < <(awk -v y="$y" '$2 == y { print $1 }' "$DL_DIR/probe.out")
mapfile -t xports < <(awk -v x="$x" 'NR > 1 && $2 == x { print $1 }' "$DL_DIR/probe.out")
reserve_y=${yports[-1]} reserve_x=${xports[-1]}
sticky=("$first" "${yports[@]:0:${#yports[@]}-1}")
sticky=("${sticky[@]:0:15}")
for (( p = 22001; ${#sticky[@]} < 15; p++ )); do sticky+=("$p"); done
aff_before=$(dl_drop_count 1 ServiceAffinity)
dl_exec node1/client "$PY" "$DL_DIR/udp_ports.py" "$aff" 53 "${sticky[@]}" > "$DL_DIR/sticky.out"
r=$(udp_count "$DL_DIR/sticky.out")
others=$(( ${#yports[@]} - 1 < 14 ? ${#yports[@]} - 1 : 14 ))
want="web1=15 web2=0 other=0"; [ "$x" = web2 ] && want="web1=0 web2=15 other=0"
[ "$r" = "$want" ] && [ "$others" -ge 1 ] &&
  pass "affinity: 15 queries from new ports all reached $x, $others of them from ports Maglev alone sends to $y ($r)" ||
  fail "affinity: 15 queries: $r (want all $x; $others from $y's ports)"
n=$(( $(dl_drop_count 1 ServiceAffinity) - aff_before ))
[ "$n" -ge 14 ] && pass "node1 counted $n connections sent by affinity" || fail "ServiceAffinity moved by $n"
# Expiry: the client's last new connection is older than the timeout once
# every one of its connections to the service is idle for longer.
quiet() {
  dl_dpuctl 1 --json conntrack --address "$aff" --protocol udp 2>/dev/null |
    jq -e --arg c "$ip_c:" '[.conntrack[] | select(.original | startswith($c)) | .idle_ms | tonumber]
                             | length > 0 and min > 2200' >/dev/null
}
check "affinity: no new connection from the client for over 2 s" dl_wait 15 quiet
dl_exec node1/client "$PY" "$DL_DIR/udp_ports.py" "$aff" 53 "$reserve_y" "$reserve_x" 22101 > "$DL_DIR/expired.out"
r=$(awk '{ printf "%s ", $2 }' "$DL_DIR/expired.out")
[ "$r" = "$y $y $y " ] &&
  pass "affinity expired: port $reserve_y reaches $y as Maglev picks, then the client sticks to $y (port $reserve_x, Maglev's $x, too)" ||
  fail "after expiry, ports $reserve_y ($y by Maglev), $reserve_x ($x by Maglev), 22101: $r (want $y $y $y)"
lab service add aff --port udp/53:5353 --backends node1/web1,node2/web2 >/dev/null || fail "service add aff (no affinity)"
check "affinity removed: node1's aff frontend has none" dl_wait 15 eval \
  "grep -qE '^default/aff +udp-53 +cluster-ip .* - +2/2 ' <<< \"\$(dl_dpuctl 1 services 2>&1)\""
dl_exec node1/client "$PY" "$DL_DIR/udp_ports.py" "$aff" 53 $(seq 23001 23016) > "$DL_DIR/spread.out"
r=$(udp_count "$DL_DIR/spread.out")
both "$r" && pass "affinity removed: 16 new ports reach both backends ($r)" || fail "affinity removed: $r"

# --- internalTrafficPolicy Local: web1 only, on node1.
loc=$(lab service add loc --port tcp/80:8080 --itp Local --backends node1/web1) || fail "service add loc --itp Local"
check "node1 reaches loc ($loc) with its local endpoint" dl_wait 15 answers "$loc:80" web1
local_frontend() { grep -qE "^default/loc +tcp-80 +cluster-ip +$loc:80 +tcp +local .* 0/1 " <<< "$(dl_dpuctl 2 services 2>&1)"; }
check "node2 balances loc under policy local with 0/1 usable backends" dl_wait 15 local_frontend
drops=$(dl_drop_count 2 ServiceNoLocalEndpoint)
out=$(dl_exec node2/client2 curl -s --max-time 2 "http://$loc/"); rc=$?
after=$(dl_drop_count 2 ServiceNoLocalEndpoint)
[ $rc != 0 ] && [ -z "$out" ] && [ "$after" -gt "$drops" ] &&
  pass "internalTrafficPolicy Local: node2/client2 gets no answer (curl exit $rc), node2 dropped $(( after - drops )) packets as ServiceNoLocalEndpoint" ||
  fail "loc from node2: curl exit $rc '$out', ServiceNoLocalEndpoint $drops -> $after"
r=$(tcp_round "$loc:80" 8)
[[ "$r" == "web1=8 web2=0 other=0 "* ]] && pass "and from node1 every connection works ($r)" || fail "loc from node1: $r"

# --- endpoints changing under traffic (multi's tcp-80, backends web1 and web2).
# For a failure's report: both nodes' counters before, and the handshakes
# (SYN, SYN-ACK, RST) as the client and web2 saw them.
for n in 1 2; do dl_dpuctl $n stats --all > "$DL_DIR/stats-before.$n" 2>&1; done
dl_capture_start node1/client 1000000 "$DL_DIR/syn-client.txt" -f 'tcp[tcpflags] & (tcp-syn|tcp-rst) != 0' ||
  fail "could not capture node1/client's handshakes"
cap_client=$DL_CAPTURE_PID
dl_capture_start node2/web2 1000000 "$DL_DIR/syn-web2.txt" -f 'tcp[tcpflags] & (tcp-syn|tcp-rst) != 0' ||
  fail "could not capture node2/web2's handshakes"
cap_web2=$DL_CAPTURE_PID
stop=$DL_DIR/tcp-loop.stop
dl_spawn "$DL_DIR/tcp-loop.pid" "$(dl_pod_ns 1 client)" "$DL_DIR/tcp-loop.log" "$PY" "$DL_DIR/loop.py" tcp "$vip" 80 "$stop" ||
  fail "could not start the TCP loop"
after_mark() {  # MARK-NS N [NAME]: N requests begun after MARK (answered by NAME, when given)
  [ "$(awk -v m="$1" -v w="${3:-}" '$1 > m && (w == "" || $2 == w)' "$DL_DIR/tcp-loop.log" | wc -l)" -ge "$2" ]
}
check "the TCP loop runs, both backends answer" dl_wait 15 eval "after_mark 0 10 web1 && after_mark 0 10 web2"
lab service backends multi node1/web1 || fail "service backends multi node1/web1"
check "node1 shows web2 gone from multi" dl_wait 15 svc_shows 1 multi tcp-80 1/1
t_gone=$(date +%s%N)
check "20 connections begun after that" dl_wait 15 after_mark "$t_gone" 20
# The window ends when web2 is given back, not when node1 is seen to have it:
# the dataplane takes it before the poll below sees it. A connection counts
# in the window by when its handshake completed (a SYN lost and sent again
# after the give-back rightly reaches web2).
t_readd=$(date +%s%N)
lab service backends multi node1/web1,node2/web2 || fail "service backends multi back"
check "node1 shows web2 back in multi" dl_wait 15 svc_shows 1 multi tcp-80 2/2
t_back=$(date +%s%N)
check "web2 answers connections begun after that" dl_wait 15 after_mark "$t_back" 1 web2
touch "$stop"
dl_wait 5 eval "! dl_proc_alive '$DL_DIR/tcp-loop.pid'"
total=$(wc -l < "$DL_DIR/tcp-loop.log")
bad=$(awk '$2 != "web1" && $2 != "web2"' "$DL_DIR/tcp-loop.log" | wc -l)
between=$(awk -v a="$t_gone" -v b="$t_readd" '$1 > a && $(NF - 1) == "connected" && $NF < b' "$DL_DIR/tcp-loop.log")
nb=$(wc -l <<< "$between") nb1=$(grep -c ' web1 ' <<< "$between")
[ "$bad" = 0 ] && pass "under traffic: all $total connections of the run answered" ||
  fail "under traffic: $bad of $total connections failed (web2 removed at $t_gone, back at $t_back): $(awk '$2 != "web1" && $2 != "web2"' "$DL_DIR/tcp-loop.log" | head -3)"
dl_capture_wait "$cap_client" 0; dl_capture_wait "$cap_web2" 0  # stopped, their output complete
failed_ports=$(awk '$2 != "web1" && $2 != "web2" && $NF ~ /^[0-9]+$/ { print $NF }' "$DL_DIR/tcp-loop.log")
for p in $failed_ports; do
  echo "--- node1: the connections of source port $p" >&2; dl_dpuctl 1 conntrack --port "$p" >&2
  for w in client web2; do
    echo "--- $w's capture: the handshake packets of source port $p" >&2
    grep -w -- "$p" "$DL_DIR/syn-$w.txt" >&2
  done
done
if [ -n "$failed_ports" ]; then
  for n in 1 2; do  # the counters that moved during the run
    echo "--- node$n: counters that moved since the TCP loop began" >&2
    dl_dpuctl $n stats --all 2>&1 | awk 'NR == FNR { was[$1] = $2; next } $2 ~ /^[0-9]+$/ && $2 != was[$1] { printf "%s +%d\n", $1, $2 - was[$1] }' "$DL_DIR/stats-before.$n" - >&2
  done
fi
for p in $(grep -v ' web1 ' <<< "$between" | awk '{ print $(NF - 2) }'); do  # for the failure's report
  echo "--- node1: the connections of source port $p" >&2; dl_dpuctl 1 conntrack --port "$p" >&2
  grep " from $p " "$DL_DIR/tcp-loop.log" >&2
done
[ "$nb" -ge 20 ] && [ "$nb" = "$nb1" ] &&
  pass "under traffic: the $nb connections made while node1 showed web2 gone were all answered by web1" ||
  fail "under traffic: $nb1 of $nb connections made while web2 was gone answered by web1 (web2 gone at $t_gone, given back at $t_readd; others: $(grep -v ' web1 ' <<< "$between" | tr '\n' ';'))"

# --- UDP stale conntrack: one source port, the only backend replaced.
st=$(lab service add st --port udp/53:5353 --backends node2/web2) || fail "service add st"
check "node1 balances st with 1/1 backend" dl_wait 15 svc_shows 1 st udp-53 1/1
stop=$DL_DIR/udp-loop.stop
dl_spawn "$DL_DIR/udp-loop.pid" "$(dl_pod_ns 1 client)" "$DL_DIR/udp-loop.log" "$PY" "$DL_DIR/loop.py" udp "$st" 53 "$stop" 40053 ||
  fail "could not start the UDP loop"
udp_lines() { awk -v w="$1" 'index($0, w)' "$DL_DIR/udp-loop.log" | wc -l; }
check "from port 40053, web2 answers" dl_wait 15 eval "[ \$(udp_lines 'web2 $ip_c:40053') -ge 5 ]"
flushed=$(dl_drop_count 1 ConntrackFlushed)
lab service backends st node1/web1 || fail "service backends st node1/web1"
check "web2 replaced by web1 (web2 still running): port 40053's datagrams reach web1" dl_wait 15 \
  eval "[ \$(udp_lines 'web1 $ip_c:40053') -ge 10 ]"
first_w1=$(grep -n ' web1 ' "$DL_DIR/udp-loop.log" | head -1 | cut -d: -f1)
late=$(tail -n +"$first_w1" "$DL_DIR/udp-loop.log" | grep -vc " web1 $ip_c:40053")
[ "$late" = 0 ] && pass "after the first datagram web1 answered, no later one reached web2 or went unanswered" ||
  fail "after the switch to web1: $late datagrams not answered by web1: $(tail -n +"$first_w1" "$DL_DIR/udp-loop.log" | grep -v ' web1 ' | head -3)"
n=$(( $(dl_drop_count 1 ConntrackFlushed) - flushed ))
ct=$(dl_dpuctl 1 conntrack --port 40053 2>&1)
[ "$n" -ge 1 ] && grep -qE "^udp +$ip_c:40053 -> $st:53 +$ip_1:5353 -> $ip_c:40053 " <<< "$ct" &&
  pass "node1 flushed $n UDP connection(s); port 40053's entry now points at $ip_1:5353" ||
  fail "ConntrackFlushed moved by $n; conntrack --port 40053: $ct"
lab service backends st "" || fail "service backends st ''"
check "no endpoints: port 40053's datagrams are refused (ICMP port unreachable)" dl_wait 15 \
  eval "[ \$(udp_lines REFUSED) -ge 3 ]"
lab service backends st node2/web2 || fail "service backends st node2/web2"
n2=$(udp_lines "web2 $ip_c:40053")
check "endpoints back: port 40053's datagrams reach web2 again" dl_wait 15 \
  eval "[ \$(udp_lines 'web2 $ip_c:40053') -ge $(( n2 + 5 )) ]"
touch "$stop"
if [ "$FAILURES" != 0 ]; then
  for n in 1 2; do
    echo "--- node$n: dpuctl services; conntrack" >&2
    { dl_dpuctl $n services; dl_dpuctl $n conntrack --port 40053; dl_dpuctl $n dump-flows | grep 40053; } >&2 2>&1
  done
  echo "--- the UDP loop (answers in a row)" >&2
  awk '{ print $2, $3 }' "$DL_DIR/udp-loop.log" | uniq -c >&2
fi
finish
