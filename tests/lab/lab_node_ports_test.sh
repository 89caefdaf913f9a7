#!/usr/bin/env bash
# Lab e2e, node ports and egress SNAT: the north–south path of Services
# (docs/services.md "North–south: node ports and egress SNAT") with the real
# daemons. Two nodes, a TCP HTTP service (`dpu-lab service add --node-port`)
# with backend web1 on node1 and web2 on node2; the client outside the
# cluster is the external namespace, from 203.0.113.1 (behind the node
# network's gateway). Every server here answers "NAME PEER-IP:PEER-PORT", so
# each side sees who answered and from where it was reached. Proves:
#  - externalTrafficPolicy Cluster: each node's IP and the node port reach
#    both backends, every connection answered, the client masqueraded to the
#    node's pod gateway address;
#  - externalTrafficPolicy Local: a node's node port reaches only its own
#    backend, which sees the client's real address 203.0.113.1;
#  - egress SNAT: pods' TCP, UDP and ping to 203.0.113.1 leave from their
#    node's IP, source ports in 61000-65535, and the replies come back;
#  - the host's own server on its node IP is still reached from outside
#    beside the node port, with the client's address;
#  - `dpuctl services` shows the node-port frontends on each node IP,
#    `dpuctl conntrack` the translated connections, `dpuctl stats` SnatNew;
#  - a SYN flood to a node port from spoofed addresses fills node2's
#    connection table (restarted at 256 entries) and new connections still
#    get in, each in a flood entry's place (early drop), none refused.
source "$(dirname "$0")/common.bash" np
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
DL_VFS=4 lab_test_up 2 0
lab() { bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" "$@"; }

node1=$(dl_node_ip 1) node2=$(dl_node_ip 2) ext=$(dl_external_ip) np=30080
ip_c=$(dl_pod_add 1 client) || fail "pod add node1/client"
ip_1=$(dl_pod_add 1 web1) || fail "pod add node1/web1"
ip_2=$(dl_pod_add 2 web2) || fail "pod add node2/web2"

cat > "$DL_DIR/udp_query.py" <<'PYEOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((sys.argv[1], int(sys.argv[2])))
try:
    s.send(b"q")
    print(s.recv(2048).decode())
except (OSError, socket.timeout) as e:
    print("ERROR %s" % e)
PYEOF
# HTTP and a UDP echo on one port, both answering "NAME PEER-IP:PEER-PORT"
# (who_server.py); the external server's UDP socket is bound to its address.
serve() {  # TAG NETNS NAME PORT [UDP-ADDRESS]
  dl_spawn "$DL_DIR/server-$1.pid" "$2" "$DL_DIR/server-$1.log" "$PY" "$LAB_TESTS/who_server.py" "$3" "$4" "$4" "${@:5}" ||
    fail "could not start the server $3"
}
serve web1 "$(dl_pod_ns 1 web1)" web1 8080
serve web2 "$(dl_pod_ns 2 web2)" web2 8080
serve ext "$(dl_external_ns)" ext 9000 "$ext"
serve host1 "$(dl_node_ns 1 host)" host1 8000

# From outside the cluster: curl from 203.0.113.1, the address behind the gateway.
ext_http() { dl_exec external curl -s --max-time 2 --interface "$ext" "http://$1/"; }
ext_answers() { [[ "$(ext_http "$1")" == "$2 $ext:"* ]]; }  # ADDRESS:PORT NAME: NAME answers, seeing $ext
ext_backend() { [[ "$(ext_http "$1")" == web[12]" "* ]]; }  # ADDRESS:PORT: a backend answers
pod_sees() {  # ADDRESS:PORT NAME: node1/client reaches NAME there, which sees the client's own address
  [[ "$(dl_exec node1/client curl -s --max-time 2 "http://$1/")" == "$2 $ip_c:"* ]]
}
check "web1 serves (direct, from node1/client)" dl_wait 10 pod_sees "$ip_1:8080" web1
check "web2 serves (direct, from node1/client)" dl_wait 10 pod_sees "$ip_2:8080" web2
check "node1's host serves on $node1:8000, reached from $ext" dl_wait 10 ext_answers "$node1:8000" host1

# --- the node port, externalTrafficPolicy Cluster.
vip=$(lab service add web --port tcp/80:8080 --node-port $np --backends node1/web1,node2/web2) ||
  fail "dpu-lab service add web --node-port $np"
list=$(lab service list)
[ "$list" = "web $vip tcp/80:8080@$np node1/web1,node2/web2" ] && pass "dpu-lab service list: $list" ||
  fail "dpu-lab service list: $list"
t0=$(date +%s%N)
check "$ext reaches the node port on node1 ($node1:$np)" dl_wait 15 ext_backend "$node1:$np"
pass "node1's node port answers $(( ($(date +%s%N) - t0) / 1000000 )) ms after the service was written"
check "$ext reaches the node port on node2 ($node2:$np)" dl_wait 15 ext_backend "$node2:$np"

round() {  # ADDRESS:PORT N: "web1=X web2=Y other=Z peers=P,Q" (the backends' peer addresses)
  local i out w1=0 w2=0 other=0 peers=" "
  for (( i = 0; i < $2; i++ )); do
    out=$(ext_http "$1")
    case ${out%% *} in web1) w1=$(( w1 + 1 )) ;; web2) w2=$(( w2 + 1 )) ;; *) other=$(( other + 1 )) ;; esac
    out=${out#* }; out=${out%:*}
    [[ -n "$out" && "$peers" != *" $out "* ]] && peers+="$out "
  done
  peers=${peers# }; peers=${peers% }
  echo "web1=$w1 web2=$w2 other=$other peers=${peers// /,}"
}
# Under Cluster the client is masqueraded to the ingress node's pod gateway
# address (its pod subnet's .1), whichever node the backend is on.
for n in 1 2; do
  r=$(round "$(dl_node_ip $n):$np" 16)
  [[ "$r" =~ ^web1=[1-9][0-9]*\ web2=[1-9][0-9]*\ other=0\ peers=10\.244\.$n\.1$ ]] &&
    pass "Cluster: 16 connections from $ext to $(dl_node_ip $n):$np, both backends, client masqueraded to 10.244.$n.1 ($r)" ||
    fail "Cluster: $ext to $(dl_node_ip $n):$np: $r (want both backends, no failure, peer 10.244.$n.1)"
done
check "beside the node port, $ext still reaches node1's host at $node1:8000 as itself" ext_answers "$node1:8000" host1

svc1=$(dl_dpuctl 1 services 2>&1) svc2=$(dl_dpuctl 2 services 2>&1)
grep -qE "^default/web +tcp-80 +node-port +$node1:$np +tcp +cluster .* 2/2 " <<< "$svc1" &&
  grep -qE "^default/web +tcp-80 +cluster-ip +$vip:80 +tcp " <<< "$svc1" &&
  grep -qE "^default/web +tcp-80 +node-port +$node2:$np +tcp +cluster .* 2/2 " <<< "$svc2" &&
  pass "dpuctl services: the node-port frontend $node1:$np on node1, $node2:$np on node2, beside the cluster IP" ||
  fail "dpuctl services: node1: $svc1; node2: $svc2"
ct=$(dl_dpuctl 1 conntrack --port $np 2>&1)
grep -qE "^tcp +$ext:[0-9]+ -> $node1:$np +($ip_1|$ip_2):8080 -> 10\.244\.1\.1:[0-9]+ .* dnat\+snat +default/web " <<< "$ct" &&
  pass "dpuctl conntrack: $ext's connections to $node1:$np, translated to a backend and masqueraded ($(grep -c 'dnat+snat' <<< "$ct") listed)" ||
  fail "dpuctl conntrack --port $np on node1: $ct"

# --- externalTrafficPolicy Local: each node's own backend, the client's address kept.
lab service add web --port tcp/80:8080 --node-port $np --etp Local >/dev/null || fail "service add web --etp Local"
only() {  # ADDRESS:PORT NAME: 6 connections in a row answered by NAME, which sees $ext
  local i
  for (( i = 0; i < 6; i++ )); do ext_answers "$1" "$2" || return 1; done
}
check "Local: node1's node port reaches only web1, which sees $ext" dl_wait 15 only "$node1:$np" web1
check "Local: node2's node port reaches only web2, which sees $ext" dl_wait 15 only "$node2:$np" web2
for n in 1 2; do
  r=$(round "$(dl_node_ip $n):$np" 12)
  [ "$r" = "web1=$(( n == 1 ? 12 : 0 )) web2=$(( n == 2 ? 12 : 0 )) other=0 peers=$ext" ] &&
    pass "Local: 12 more connections to $(dl_node_ip $n):$np: $r" || fail "Local: $(dl_node_ip $n):$np: $r"
done
grep -qE "^default/web +tcp-80 +node-port +$node1:$np +tcp +local .* 1/2 " <<< "$(dl_dpuctl 1 services 2>&1)" &&
  pass "dpuctl services: node1's node-port frontend under policy local, 1/2 backends usable" ||
  fail "dpuctl services under Local: $(dl_dpuctl 1 services 2>&1)"
ct=$(dl_dpuctl 1 conntrack --port $np 2>&1)
grep -qE "^tcp +$ext:[0-9]+ -> $node1:$np +$ip_1:8080 -> $ext:[0-9]+ .* dnat +default/web " <<< "$ct" &&
  pass "dpuctl conntrack: under Local the connections are only DNATed (the reply goes to $ext itself)" ||
  fail "dpuctl conntrack --port $np under Local: $ct"

# --- egress SNAT: pods reaching 203.0.113.1 appear as their node's IP.
snat_before=$(dl_drop_count 1 SnatNew)
egress() {  # TARGET NODE-IP N: every one of N connections seen from NODE-IP on a port in 61000-65535
  local i out port bad=0
  for (( i = 0; i < $3; i++ )); do
    out=$(dl_exec "$1" curl -s --max-time 2 "http://$ext:9000/")
    port=${out##*:}
    [[ "$out" == "ext $2:"* ]] && [ "$port" -ge 61000 ] && [ "$port" -le 65535 ] || { bad=$(( bad + 1 )); echo "$out" >&2; }
  done
  [ $bad = 0 ]
}
check "TCP node1/client -> $ext:9000: 8 connections, each from $node1 on a port in 61000-65535" egress node1/client "$node1" 8
check "TCP node2/web2 -> $ext:9000: 4 connections, each from $node2 on a port in 61000-65535" egress node2/web2 "$node2" 4
out=$(dl_exec node1/client "$PY" "$DL_DIR/udp_query.py" "$ext" 9000)
port=${out##*:}
[[ "$out" == "ext $node1:"* ]] && [ "$port" -ge 61000 ] && [ "$port" -le 65535 ] &&
  pass "UDP node1/client -> $ext:9000: answered, the server saw $node1:$port" || fail "UDP egress: '$out'"
check "ping node1/client -> $ext (ICMP echo, SNATed)" dl_reachable node1/client "$ext" 5
ct=$(dl_dpuctl 1 conntrack --address "$ext" 2>&1)
grep -qE "^tcp +$ip_c:[0-9]+ -> $ext:9000 +$ext:9000 -> $node1:6[1-5][0-9]{3} .* snat " <<< "$ct" &&
  grep -qE "^udp +$ip_c:[0-9]+ -> $ext:9000 +$ext:9000 -> $node1:6[1-5][0-9]{3} .* snat " <<< "$ct" &&
  grep -qE "^icmp +$ip_c.* -> $ext.* snat " <<< "$ct" &&
  pass "dpuctl conntrack: node1/client's TCP, UDP and ICMP to $ext, masqueraded to $node1" ||
  fail "dpuctl conntrack --address $ext on node1: $ct"
snat=$(( $(dl_drop_count 1 SnatNew) - snat_before ))
[ "$snat" -ge 10 ] && pass "node1's stats: SnatNew counted $snat new egress connections (8 TCP, 1 UDP, pings)" ||
  fail "node1's SnatNew moved by $snat: $(dl_dpuctl 1 stats --all | grep -i snat)"
check "after it all, node1's host still serves $ext on $node1:8000" ext_answers "$node1:8000" host1

# --- a SYN flood: 1,000 SYNs to node2's node port from addresses of
# 203.0.113.0/24 that nobody answers for (web2 answers each; its SYN-ACK
# finds no client), into a table of 256 connections. Each would hold its
# entry for a minute or two (syn-received, syn-sent); a full table gives a
# new connection the place of such an entry (docs/services.md "A full
# table, and SYN floods"), so $ext's connections still get in.
cat > "$DL_DIR/syn_flood.py" <<'PYEOF'
import sys
from scapy.all import IP, TCP, conf, send
conf.verb = 0
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
send([IP(src="203.0.113.%d" % (100 + i % 150), dst=dst) / TCP(sport=20000 + i, dport=port, flags="S", seq=i)
      for i in range(n)])
PYEOF
dl_daemon_stop 2 dataplane
grep -q '^conntrack:' "$DL_DIR/n2/dataplane.yaml" && fail "node2's dataplane config sets conntrack already"
echo "conntrack: {max_entries: 256}" >> "$DL_DIR/n2/dataplane.yaml"
dl_daemon_start 2 dataplane || fail "dpu-dataplane of node2 did not start with a table of 256 connections"
check "node2's dataplane restarted with 256 connections at most: $ext reaches web2 at $node2:$np" \
  dl_wait 20 only "$node2:$np" web2
full0=$(dl_drop_count 2 ConntrackFull) early0=$(dl_drop_count 2 conntrack_early_dropped)
dl_exec external "$PY" "$DL_DIR/syn_flood.py" "$node2" $np 1000 || fail "the SYN flood (scapy) did not run"
node2_full() { dl_dpuctl 2 conntrack --port $np --limit 1 2>&1 | grep -q 'tracked 256 of at most 256'; }
dl_wait 10 node2_full || true  # the flood's last SYNs may still be on their way
ct=$(dl_dpuctl 2 conntrack --port $np --limit 1 2>&1)
tracked=$(grep -o 'tracked [0-9]* of at most [0-9]*' <<< "$ct")
[ "$tracked" = "tracked 256 of at most 256" ] && pass "node2's table is full after the flood: $tracked" ||
  fail "node2's connection table after 1,000 SYNs: '$tracked' (want full: 256 of at most 256)"
said=$(grep '^full since start: [1-9][0-9]* unanswered connections gave their places to new ones, 0 new' <<< "$ct")
[ -n "$said" ] && pass "dpuctl conntrack on node2: $said" ||
  fail "dpuctl conntrack on node2 does not say what the full table did: $ct"
check "during the flood's aftermath, 6 connections in a row from $ext to $node2:$np answered by web2" \
  only "$node2:$np" web2
early=$(( $(dl_drop_count 2 conntrack_early_dropped) - early0 )) full=$(( $(dl_drop_count 2 ConntrackFull) - full0 ))
[ "$early" -ge 500 ] && [ "$full" = 0 ] &&
  pass "node2's stats: $early unanswered connections gave their places up, no new connection refused (ConntrackFull $full)" ||
  fail "node2's stats after the flood: conntrack_early_dropped moved by $early (want >= 500), ConntrackFull by $full (want 0)"
if [ "$FAILURES" != 0 ]; then  # what the dataplanes decided, for the failure's report
  for n in 1 2; do
    echo "--- node$n: dpuctl dump-flows; neighbours; conntrack" >&2
    { dl_dpuctl $n dump-flows; dl_dpuctl $n neighbours; dl_dpuctl $n conntrack --limit 40; } >&2 2>&1
  done
fi
finish
