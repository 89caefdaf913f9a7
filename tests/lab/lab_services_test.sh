#!/usr/bin/env bash
# Lab e2e, Services: a ClusterIP Service and its EndpointSlice in the cluster
# file (dpu-lab service ...) reach both agents, which compile them into the
# dataplane; pods reach the service's backends through its cluster IP.
# Two nodes: a client and backend web1 on node1, backend web2 on node2. Each
# backend serves its own name over HTTP (TCP 8080) and a UDP echo (5353), so
# the client sees which one answered. Proves:
#  - TCP: curl from the client to the cluster IP (port 80) gets an answer on
#    every connection, from both the local and the remote backend;
#  - UDP: a query to the cluster IP (port 53) from new source ports gets
#    answered by both backends;
#  - the service's endpoints removed: curl is refused at once (a TCP reset,
#    not a timeout) and the UDP client gets ICMP port unreachable;
#  - endpoints back: both protocols work again, both backends answer;
#  - an unready endpoint is never used, a terminating one only when none is ready;
#  - `dpuctl services` shows each backend local on its own node, `dpuctl
#    conntrack` the translated connections, `dpuctl dump-flows` the translated
#    flows, `dpuctl stats` counts the connections and the refusals; the agents
#    count their services;
#  - a Service and EndpointSlice manifest as kubectl users write it (named
#    targetPort, an endpoint on each node) through `dpu-lab apply`: both
#    backends answer at its allocated cluster IP; `dpu-lab delete` takes it out
#    of both agents and its address answers no more.
source "$(dirname "$0")/common.bash" svc
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
DL_VFS=4 lab_test_up 2 0

ip_c=$(dl_pod_add 1 client) || fail "pod add node1/client"
ip_1=$(dl_pod_add 1 web1) || fail "pod add node1/web1"
ip_2=$(dl_pod_add 2 web2) || fail "pod add node2/web2"

# The backends: HTTP answering the pod's name, UDP echoing "name:payload".
cat > "$DL_DIR/backend.py" <<'PYEOF'
import http.server, socket, sys, threading
name = sys.argv[1]
class Name(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = name.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 5353))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(name.encode() + b":" + data, peer)
threading.Thread(target=udp, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), Name).serve_forever()
PYEOF
# The UDP client: one query from a new source port; prints the answer,
# REFUSED (ICMP port unreachable reached the socket) or TIMEOUT.
cat > "$DL_DIR/udp_query.py" <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(float(sys.argv[3]))
s.connect((sys.argv[1], int(sys.argv[2])))
try:
    s.send(b"q")
    print(s.recv(2048).decode())
except ConnectionRefusedError:
    print("REFUSED")
except socket.timeout:
    print("TIMEOUT")
PYEOF
for b in "1 web1" "2 web2"; do
  set -- $b
  dl_spawn "$DL_DIR/backend-$2.pid" "$(dl_pod_ns "$1" "$2")" "$DL_DIR/backend-$2.log" \
    "$PY" "$DL_DIR/backend.py" "$2" || fail "could not start the backend in node$1/$2"
done
http() { dl_exec node1/client curl -s --max-time "${2:-2}" "http://$1/"; }
# Polled with dl_wait: each call asks again.
answers() { [ "$(http "$1")" = "$2" ]; }          # ADDRESS:PORT NAME
answered() { [ -n "$(http "$1")" ]; }             # ADDRESS:PORT
udp_answered() { [[ "$(dl_exec node1/client "$PY" "$DL_DIR/udp_query.py" "$1" 53 1)" == web?:q ]]; }
check "web1 serves its name (direct)" dl_wait 10 answers "$ip_1:8080" web1
check "web2 serves its name (direct, across nodes)" dl_wait 10 answers "$ip_2:8080" web2

# --- the services: through the lab's verbs, as an operator writes them.
vip=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service add web --port tcp/80:8080 \
        --backends node1/web1,node2/web2) && [ "$vip" = 10.96.0.10 ] ||
  fail "dpu-lab service add web: got '$vip', expected the first free cluster IP 10.96.0.10"
dns=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service add dns --port udp/53:5353 \
        --backends node1/web1,node2/web2) && [ "$dns" = 10.96.0.11 ] ||
  fail "dpu-lab service add dns: got '$dns', expected 10.96.0.11"
list=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service list)
[ "$list" = "dns 10.96.0.11 udp/53:5353 node1/web1,node2/web2
web 10.96.0.10 tcp/80:8080 node1/web1,node2/web2" ] && pass "dpu-lab service list shows both" ||
  fail "dpu-lab service list: $list"
t0=$(date +%s%N)
check "the client reaches the web service's cluster IP $vip:80" dl_wait 15 answered "$vip:80"
pass "the service answers $(( ($(date +%s%N) - t0) / 1000000 )) ms after both services were written to the cluster file"

# Both backends over N connections, every connection answered.
tcp_round() {  # N: "web1=X web2=Y other=Z"
  local i out w1=0 w2=0 other=0
  for (( i = 0; i < $1; i++ )); do
    out=$(http "$vip:80")
    case $out in web1) w1=$(( w1 + 1 )) ;; web2) w2=$(( w2 + 1 )) ;; *) other=$(( other + 1 )) ;; esac
  done
  echo "web1=$w1 web2=$w2 other=$other"
}
udp_round() {
  local i out w1=0 w2=0 other=0
  for (( i = 0; i < $1; i++ )); do
    out=$(dl_exec node1/client "$PY" "$DL_DIR/udp_query.py" "$dns" 53 2)
    case $out in web1:q) w1=$(( w1 + 1 )) ;; web2:q) w2=$(( w2 + 1 )) ;; *) other=$(( other + 1 )) ;; esac
  done
  echo "web1=$w1 web2=$w2 other=$other"
}
both() { [[ "$1" =~ ^web1=[1-9][0-9]*\ web2=[1-9][0-9]*\ other=0$ ]]; }
r=$(tcp_round 24)
both "$r" && pass "TCP: 24 connections to $vip:80 all answered, by both backends ($r)" ||
  fail "TCP through $vip:80: $r (want both backends, no failure)"
check "UDP: the dns service answers" dl_wait 10 udp_answered "$dns"
r=$(udp_round 16)
both "$r" && pass "UDP: 16 queries to $dns:53 from new ports all answered, by both backends ($r)" ||
  fail "UDP through $dns:53: $r (want both backends, no failure)"

# --- what the dataplane shows for it.
flows=$(dl_dpuctl 1 dump-flows 2>&1)
# A client's flow to a cluster IP rewrites the destination to a backend
# (set_nw_dst, set_tp_dst); the reply's rewrites the source back.
nat=$(grep -E "nw_dst=($vip|$dns)," <<< "$flows" | grep -cE "set_nw_dst:($ip_1|$ip_2),set_tp_dst:(8080|5353)")
unnat=$(grep -E "nw_src=($ip_1|$ip_2),.*nw_dst=$ip_c," <<< "$flows" | grep -cE "set_nw_src:($vip|$dns),set_tp_src:(80|53)")
[ "${nat:-0}" -ge 1 ] && [ "${unnat:-0}" -ge 1 ] &&
  pass "node1's dump-flows holds $nat translated flows to the services and $unnat back, e.g.: $(grep -E "nw_dst=($vip|$dns)," <<< "$flows" | head -1)" ||
  fail "node1's dump-flows: $nat flows to $vip/$dns with DNAT, $unnat back with the source restored: $(head -20 <<< "$flows")"
# What each dataplane balances: the agents marked each backend local on its own node.
svc1=$(dl_dpuctl 1 services 2>&1) svc2=$(dl_dpuctl 2 services 2>&1)
grep -qE "^default/web +tcp-80 +cluster-ip +$vip:80 +tcp +cluster .* 2/2 " <<< "$svc1" &&
  grep -qE "^default/web +tcp-80 +$ip_1:8080 +ready +local " <<< "$svc1" &&
  grep -qE "^default/web +tcp-80 +$ip_2:8080 +ready +remote " <<< "$svc1" &&
  grep -qE "^default/web +tcp-80 +$ip_2:8080 +ready +local " <<< "$svc2" &&
  grep -qE "^default/dns +udp-53 +cluster-ip +$dns:53 +udp " <<< "$svc2" &&
  pass "dpuctl services: web at $vip:80 with 2/2 backends, web1 local on node1, web2 local on node2; dns at $dns:53" ||
  fail "dpuctl services: node1: $svc1; node2: $svc2"
ct=$(dl_dpuctl 1 conntrack --address "$vip" 2>&1)
grep -qE "^tcp +$ip_c:[0-9]+ -> $vip:80 +($ip_1|$ip_2):8080 -> $ip_c:[0-9]+ .* dnat +default/web " <<< "$ct" &&
  pass "dpuctl conntrack: the client's connections to $vip:80, translated to the backends ($(grep -c dnat <<< "$ct") listed)" ||
  fail "dpuctl conntrack --address $vip: $ct"
stats=$(dl_dpuctl 1 stats 2>&1)
new=$(awk 'tolower($0) ~ /conntrack_?new|conntracknew/ {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) {print $i; exit}}' <<< "$stats")
[ "${new:-0}" -ge 40 ] && pass "node1 tracked $new connections" || fail "node1's stats count ${new:-no} new connections: $stats"
svcs=$(dl_metrics 1 agent | awk '$1 == "dpu_agent_services" {print $2}')
[ "$svcs" = 2 ] && pass "node1's agent has 2 services in its model" || fail "dpu_agent_services on node1: '$svcs'"

# --- no endpoints: refused at once, both protocols.
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends web "" || fail "service backends web ''"
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends dns "" || fail "service backends dns ''"
refused() {  # curl's exit 7: connection refused
  dl_exec node1/client curl -s --max-time 3 -o /dev/null "http://$vip:80/"
  [ $? = 7 ]
}
check "without endpoints, TCP to $vip:80 is refused" dl_wait 15 refused
t0=$(date +%s%N)
refused; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 0 ] && [ $ms -lt 1500 ] && pass "refused at once: curl returned 'connection refused' after $ms ms (a reset, not its 3 s timeout)" ||
  fail "TCP without endpoints: refused=$((rc == 0)) after $ms ms"
# (Each agent reloads the file on its own poll: the second change may land later.)
udp_refused() { [ "$(dl_exec node1/client "$PY" "$DL_DIR/udp_query.py" "$dns" 53 3)" = REFUSED ]; }
check "without endpoints, UDP to $dns:53 is refused" dl_wait 15 udp_refused
t0=$(date +%s%N)
out=$(dl_exec node1/client "$PY" "$DL_DIR/udp_query.py" "$dns" 53 3)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$out" = REFUSED ] && [ $ms -lt 1500 ] &&
  pass "UDP to $dns:53 without endpoints: ICMP port unreachable refused the client's socket after $ms ms" ||
  fail "UDP without endpoints: '$out' after $ms ms (want REFUSED at once)"
rej=$(dl_dpuctl 1 stats 2>&1 | awk 'tolower($0) ~ /service_?rejected|servicerejected/ {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) {print $i; exit}}')
[ "${rej:-0}" -ge 2 ] && pass "node1 counts $rej refused service connections" || fail "node1's stats count ${rej:-no} refusals"

# --- endpoints back: works again, both backends.
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends web node1/web1,node2/web2 || fail "backends back (web)"
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends dns node1/web1,node2/web2 || fail "backends back (dns)"
check "endpoints back: TCP to $vip:80 answers again" dl_wait 15 answered "$vip:80"
r=$(tcp_round 16)
both "$r" && pass "TCP again: 16 connections, both backends ($r)" || fail "TCP after the endpoints came back: $r"
check "endpoints back: UDP to $dns:53 answers again" dl_wait 10 udp_answered "$dns"
r=$(udp_round 12)
both "$r" && pass "UDP again: 12 queries, both backends ($r)" || fail "UDP after the endpoints came back: $r"

# --- endpoint conditions: an unready endpoint is never used; a terminating
# (still serving) one only while no endpoint is ready.
only() {  # NAME: 8 connections in a row all answered by NAME
  local i
  for (( i = 0; i < 8; i++ )); do [ "$(http "$vip:80")" = "$1" ] || return 1; done
}
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends web node1/web1=unready,node2/web2 ||
  fail "service backends web node1/web1=unready,node2/web2"
check "web1 unready, web2 ready: only web2 answers" dl_wait 15 only web2
r=$(tcp_round 16)
[ "$r" = "web1=0 web2=16 other=0" ] && pass "and 16 more connections: $r" || fail "web1 unready, web2 ready: $r"
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service backends web node1/web1=terminating,node2/web2=unready ||
  fail "service backends web node1/web1=terminating,node2/web2=unready"
check "web1 terminating, web2 unready (none ready): only web1, serving while terminating, answers" dl_wait 15 only web1
r=$(tcp_round 16)
[ "$r" = "web1=16 web2=0 other=0" ] && pass "and 16 more connections: $r" || fail "web1 terminating, web2 unready: $r"
status=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" status)
grep -q "service default/web: cluster IP $vip, ports tcp/80:8080, backends node1/web1=terminating,node2/web2=unready" <<< "$status" &&
  pass "dpu-lab status shows the services" || fail "dpu-lab status: $(grep service <<< "$status")"

# --- the service deleted: out of both agents' models.
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service del web || fail "service del web"
gone() { [ "$(dl_metrics "$1" agent | awk '$1 == "dpu_agent_services" {print $2}')" = 1 ]; }
check "service del: node1's agent holds one service" dl_wait 10 gone 1
check "service del: node2's agent holds one service" dl_wait 10 gone 2

# --- the same from a manifest, as kubectl users write it (no namespace, no
# cluster IP, a named targetPort, one endpoint on each node): dpu-lab apply.
cat > "$DL_DIR/webapp.yaml" <<YAML
apiVersion: v1
kind: Service
metadata:
  name: webapp
spec:
  selector:
    app: webapp
  ports:
    - name: http
      port: 80
      targetPort: http
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: webapp-7xk2p
  labels:
    kubernetes.io/service-name: webapp
addressType: IPv4
ports:
  - name: http
    protocol: TCP
    port: 8080
endpoints:
  - addresses: ["$ip_1"]
    conditions:
      ready: true
    nodeName: node1
    targetRef:
      kind: Pod
      name: web1
  - addresses: ["$ip_2"]
    conditions:
      ready: true
    nodeName: node2
    targetRef:
      kind: Pod
      name: web2
YAML
out=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" apply "$DL_DIR/webapp.yaml" 2>&1)
app=$(sed -n 's/^service default\/webapp created, cluster IP \([0-9.]*\)$/\1/p' <<< "$out")
[ -n "$app" ] && grep -q "^endpointslice default/webapp-7xk2p created$" <<< "$out" &&
  pass "dpu-lab apply: $(tr '\n' ';' <<< "$out")" || fail "dpu-lab apply webapp.yaml: $out"
list=$(bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service list)
grep -qx "webapp $app tcp/80:http node1/web1,node2/web2" <<< "$list" &&
  pass "dpu-lab service list shows the applied service" || fail "dpu-lab service list: $list"
check "the applied service answers at $app:80" dl_wait 15 answered "$app:80"
# The dataplane balances it as applied: the named targetPort resolved to the slice's 8080 for both pods.
svc1=$(dl_dpuctl 1 services 2>&1)
grep -qE "^default/webapp +http +cluster-ip +$app:80 +tcp +cluster .* 2/2 " <<< "$svc1" &&
  grep -qE "^default/webapp +http +$ip_1:8080 +ready +local " <<< "$svc1" &&
  grep -qE "^default/webapp +http +$ip_2:8080 +ready +remote " <<< "$svc1" &&
  pass "dpuctl services: default/webapp at $app:80, web1:8080 local and web2:8080 remote" ||
  fail "dpuctl services after apply: $svc1"
vip=$app
r=$(tcp_round 16)
both "$r" && pass "TCP through the applied service: 16 connections, both backends on both nodes ($r)" ||
  fail "TCP through the applied service $app:80: $r"
bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" delete "$DL_DIR/webapp.yaml" || fail "dpu-lab delete webapp.yaml"
check "dpu-lab delete: node1's agent holds one service again" dl_wait 10 gone 1
check "dpu-lab delete: node2's agent holds one service again" dl_wait 10 gone 2
! dl_exec node1/client curl -s --max-time 2 -o /dev/null "http://$app:80/" &&
  ! bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" service list | grep -q "^webapp " &&
  pass "after delete, $app:80 answers no more and the service is not listed" ||
  fail "after dpu-lab delete, $app:80 still answers or is listed"
finish
