#!/usr/bin/env bash
# Lab e2e, dual stack: one lab up with --dual-stack (lab/lib/topology.bash has
# its addresses: pod CIDRs 10.244.N.0/24 and fd00:10:244:N::/64, service CIDRs
# 10.96.0.0/12 and fd00:10:96::/112, node IPs 172.18.0.N and fd00:18::N, the
# external side 172.18.0.254 / fd00:18::fe and, behind it, 203.0.113.1 /
# 2001:db8:1::1). Two nodes: pods a and b on node1, c on node2. Every server
# here answers "NAME PEER-IP:PEER-PORT" (who_server.py, dual stack), so each
# side sees who answered and from where it was reached. Proves:
#  - every pod has an address of each family from its node's pod CIDRs, its
#    IPv6 one usable at once (not tentative: host-shim adds it without DAD);
#  - pod <-> pod over IPv6 on one node and across nodes: ping -6 and TCP, the
#    server seeing the client's own IPv6 address; IPv4 beside it unchanged;
#  - a dual-stack ClusterIP service (dpu-lab service add: a cluster IP per
#    family, an EndpointSlice per family) with both backends on node1, reached
#    from node2 over IPv6 by TCP and UDP: every connection and query answered,
#    by both backends, which see the client's IPv6 address; its IPv4 cluster IP
#    still works; `dpu-lab service list` and `dpuctl services` show the IPv6 VIP
#    and backends;
#  - the host's own IPv6: node1's node IP fd00:18::1 reaches the gateway
#    fd00:18::fe on-link and 2001:db8:1::1 behind it (ping and TCP, bridged by
#    the DPU), the external side reaches the node IP, and `dpuctl neighbours`
#    shows the IPv6 node IP and gateway;
#  - egress SNAT over IPv6 through the gateway's link-local address fe80::fe
#    (the routes and northSouth.gateways name it, as a router advertisement
#    would; docs/services.md "North–south", which the
#    dataplane's neighbour discovery on the node network makes possible): a
#    pod's TCP, UDP and ping -6 to 2001:db8:1::1 arrive from its node's
#    fd00:18::N on a port (echo identifier) in 61000-65535, and the replies
#    come back;
#  - an IPv6 node port: the external side reaches a NodePort service on
#    [fd00:18::N]:30080 of each node, under externalTrafficPolicy Cluster (both
#    backends; the client masqueraded to the ingress node's IPv6 pod gateway
#    fd00:10:244:N::1, as IPv4's is to 10.244.N.1) and Local (only the node's own
#    backend, which sees the client's address fd00:18::fe).
source "$(dirname "$0")/common.bash" ds
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
DL_DUAL_STACK=1 DL_VFS=4 lab_test_up 2 0
lab() { bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" "$@"; }

node1=$(dl_node_ip6 1) node2=$(dl_node_ip6 2) gw6=$DL_NODE_GATEWAY6 ext6=$(dl_external_ip6) ext=$(dl_external_ip)
[ "$(sed -n 's/^DL_DUAL_STACK=//p' "$DL_DIR/lab.env")" = 1 ] && pass "lab.env records the dual-stack lab" ||
  fail "lab.env: $(cat "$DL_DIR/lab.env")"
st=$(lab status)
grep -qF "node IPs 172.18.0.1/24 $node1/64" <<< "$st" && grep -qF "pod CIDRs 10.244.2.0/24, fd00:10:244:2::/64" <<< "$st" &&
  pass "dpu-lab status (a later verb) knows the lab is dual stack: both node IPs and pod CIDRs" ||
  fail "dpu-lab status: $st"

ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 1 b) || fail "pod add node1/b"
ip_c=$(dl_pod_add 2 c) || fail "pod add node2/c"
a6=$(dl_pod_ip6 1 a) b6=$(dl_pod_ip6 1 b) c6=$(dl_pod_ip6 2 c)
[[ "$a6" == fd00:10:244:1::* && "$b6" == fd00:10:244:1::* && "$c6" == fd00:10:244:2::* ]] &&
  [[ "$ip_a" == 10.244.1.* && "$ip_c" == 10.244.2.* ]] &&
  pass "each pod has both families from its node's pod CIDRs: a $ip_a $a6, b $ip_b $b6, c $ip_c $c6" ||
  fail "pod addresses: a '$ip_a' '$a6', b '$ip_b' '$b6', c '$ip_c' '$c6'"
# (The kernel's own link-local address does DAD as usual; nothing of the pod network uses it.)
tentative=$(for p in "1 a" "1 b" "2 c"; do set -- $p; ip -n "$(dl_pod_ns "$1" "$2")" -6 -o addr show dev eth0 scope global tentative; done)
[ -z "$tentative" ] && pass "no pod's IPv6 address is tentative (host-shim adds it without DAD)" ||
  fail "tentative pod addresses: $tentative"
grep -q 'default via fd00:10:244:1::1 ' <<< "$(dl_exec node1/a ip -6 route)" &&
  pass "node1/a's IPv6 default route is via its gateway fd00:10:244:1::1" || fail "node1/a's IPv6 routes: $(dl_exec node1/a ip -6 route)"

serve() {  # TAG NETNS NAME PORT UDP-ADDRESSES
  dl_spawn "$DL_DIR/server-$1.pid" "$2" "$DL_DIR/server-$1.log" "$PY" "$LAB_TESTS/who_server.py" "$3" "$4" "$4" "$5" ||
    fail "could not start the server $3"
}
for p in "1 a" "1 b" "2 c"; do
  set -- $p
  serve "$2" "$(dl_pod_ns "$1" "$2")" "$2" 8080 "0.0.0.0,::"
done
serve ext "$(dl_external_ns)" ext 9000 "$ext,$ext6,$gw6"

# "NAME PEER:PORT" -> NAME / PEER (an IPv6 peer has no brackets: the port follows the last colon).
who() { echo "${1%% *}"; }
peer() { local p=${1#* }; echo "${p%:*}"; }
http() {  # TARGET URL-HOST:PORT
  dl_exec "$1" curl -s --max-time 2 "http://$2/"
}
sees() {  # TARGET URL-HOST:PORT NAME PEER: NAME answers, seeing PEER
  local out; out=$(http "$1" "$2")
  [ "$(who "$out")" = "$3" ] && [ "$(peer "$out")" = "$4" ]
}
ping6() { dl_exec "$1" ping -6 -n -c 1 -W 1 "$2" >/dev/null 2>&1; }

# --- pod <-> pod over IPv6, IPv4 beside it.
check "ping -6 node1/a -> node1/b ($b6, one node)" dl_wait 10 ping6 node1/a "$b6"
check "ping -6 node1/a -> node2/c ($c6, across nodes)" dl_wait 10 ping6 node1/a "$c6"
check "ping -6 node2/c -> node1/b ($b6, across nodes)" dl_wait 10 ping6 node2/c "$b6"
check "TCP over IPv6 node1/a -> node1/b: b answers, seeing $a6" dl_wait 10 sees node1/a "[$b6]:8080" b "$a6"
check "TCP over IPv6 node1/a -> node2/c: c answers, seeing $a6" dl_wait 10 sees node1/a "[$c6]:8080" c "$a6"
check "TCP over IPv6 node2/c -> node1/a: a answers, seeing $c6" dl_wait 10 sees node2/c "[$a6]:8080" a "$c6"
check "IPv4 beside it: ping node1/a -> node2/c ($ip_c)" dl_reachable node1/a "$ip_c" 10
check "IPv4 beside it: TCP node2/c -> node1/b: b answers, seeing $ip_c" dl_wait 10 sees node2/c "$ip_b:8080" b "$ip_c"

# --- a dual-stack ClusterIP service, both backends on node1, the client on node2.
vips=$(lab service add web --port tcp/80:8080 --port udp/53:8080 --backends node1/a,node1/b) ||
  fail "dpu-lab service add web"
vip=${vips%%,*} vip6=${vips#*,}
[ "$vips" = "10.96.0.10,fd00:10:96::a" ] && pass "dpu-lab service add web: cluster IPs $vips (one per family)" ||
  fail "dpu-lab service add web printed '$vips', expected 10.96.0.10,fd00:10:96::a"
list=$(lab service list)
[ "$list" = "web $vips tcp/80:8080,udp/53:8080 node1/a,node1/b" ] && pass "dpu-lab service list: $list" ||
  fail "dpu-lab service list: $list"
grep -qF "service default/web: cluster IP $vips," <<< "$(lab status)" && pass "dpu-lab status shows both cluster IPs" ||
  fail "dpu-lab status: $(lab status | grep service)"
svc=$(grep -F 'name: web,' "$DL_DIR/cluster.yaml")
grep -qF "clusterIPs: [$vip, \"$vip6\"], ipFamilies: [IPv4, IPv6], ipFamilyPolicy: PreferDualStack" <<< "$svc" &&
  grep -qF "name: web-lab, service: web, addressType: IPv4, endpoints: [{addresses: [$ip_a]" "$DL_DIR/cluster.yaml" &&
  grep -qF "name: web-lab-v6, service: web, addressType: IPv6, endpoints: [{addresses: [\"$a6\"]" "$DL_DIR/cluster.yaml" &&
  pass "the cluster file: the Service with clusterIPs, ipFamilies and ipFamilyPolicy; an EndpointSlice per family" ||
  fail "the cluster file's web: $(grep -F 'web' "$DL_DIR/cluster.yaml")"

t0=$(date +%s%N)
check "node2/c reaches the service over IPv6 at [$vip6]:80" dl_wait 15 sees node2/c "[$vip6]:80" a "$c6"
pass "the IPv6 cluster IP answers $(( ($(date +%s%N) - t0) / 1000000 )) ms after the service was written"
cat > "$DL_DIR/udp_query.py" <<'PYEOF'
import socket, sys
address = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((address, int(sys.argv[2])))
try:
    s.send(b"q")
    print(s.recv(2048).decode())
except (OSError, socket.timeout) as e:
    print("ERROR %s" % e)
PYEOF
udp() { dl_exec "$1" "$PY" "$DL_DIR/udp_query.py" "$2" "$3"; }  # TARGET ADDRESS PORT
# N CMD...: CMD run N times, each answer "NAME PEER:PORT" counted as
# "a=X b=Y c=Z other=W peers=P,Q" (the backends of this test, what else came
# back, and the peers the backends saw).
tally() {
  local n=$1 i out w p other=0 peers=" "; shift
  local -A count=([a]=0 [b]=0 [c]=0)
  for (( i = 0; i < n; i++ )); do
    out=$("$@")
    w=$(who "$out")
    if [ -n "${count[$w]+x}" ]; then count[$w]=$(( count[$w] + 1 )); else other=$(( other + 1 )); fi
    p=$(peer "$out")
    [[ -n "$p" && "$peers" != *" $p "* ]] && peers+="$p "
  done
  peers=${peers# }; peers=${peers% }
  echo "a=${count[a]} b=${count[b]} c=${count[c]} other=$other peers=${peers// /,}"
}
r=$(tally 12 http node2/c "[$vip6]:80")
[[ "$r" =~ ^a=[1-9][0-9]*\ b=[1-9][0-9]*\ c=0\ other=0\ peers=$c6$ ]] &&
  pass "TCP over IPv6: 12 connections node2/c -> [$vip6]:80 all answered, by both backends, seeing $c6 ($r)" ||
  fail "TCP over IPv6 through [$vip6]:80: $r (want both backends, no failure, peer $c6)"
r=$(tally 12 udp node2/c "$vip6" 53)
[[ "$r" =~ ^a=[1-9][0-9]*\ b=[1-9][0-9]*\ c=0\ other=0\ peers=$c6$ ]] &&
  pass "UDP over IPv6: 12 queries node2/c -> [$vip6]:53 from new ports all answered, by both backends ($r)" ||
  fail "UDP over IPv6 through [$vip6]:53: $r (want both backends, no failure, peer $c6)"
out=$(http node2/c "$vip:80")
[[ "$(who "$out")" =~ ^[ab]$ && "$(peer "$out")" = "$ip_c" ]] &&
  pass "the service's IPv4 cluster IP $vip:80 answers beside it ($out)" || fail "TCP to $vip:80: '$out'"
for n in 1 2; do
  svcs=$(dl_dpuctl $n services 2>&1)
  grep -qE "^default/web +tcp-80 +cluster-ip +\[$vip6\]:80 +tcp +cluster .* 2/2 " <<< "$svcs" &&
    grep -qE "^default/web +udp-53 +cluster-ip +\[$vip6\]:53 +udp " <<< "$svcs" &&
    grep -qE "^default/web +tcp-80 +cluster-ip +$vip:80 +tcp " <<< "$svcs" &&
    grep -qE "^default/web +tcp-80 +\[$a6\]:8080 +ready +$([ $n = 1 ] && echo local || echo remote) " <<< "$svcs" &&
    pass "dpuctl services on node$n: the IPv6 VIP [$vip6]:80 and :53 beside $vip:80, backend [$a6]:8080" ||
    fail "dpuctl services on node$n: $svcs"
done
ct=$(dl_dpuctl 2 conntrack --address "$vip6" 2>&1)
grep -qE "^tcp +\[$c6\]:[0-9]+ -> \[$vip6\]:80 +\[($a6|$b6)\]:8080 -> \[$c6\]:[0-9]+ .* dnat +default/web " <<< "$ct" &&
  pass "dpuctl conntrack on node2: node2/c's IPv6 connections to [$vip6]:80, translated to a backend" ||
  fail "dpuctl conntrack --address $vip6 on node2: $ct"

# --- the host's own IPv6, bridged north–south by the DPU.
check "node1's host ($node1) pings the gateway $gw6 on the node network" dl_wait 10 ping6 node1/host "$gw6"
check "node1's host pings $ext6 through the gateway" dl_wait 10 ping6 node1/host "$ext6"
check "TCP node1's host -> [$gw6]:9000: the external side sees $node1" dl_wait 10 sees node1/host "[$gw6]:9000" ext "$node1"
check "TCP node2's host -> [$ext6]:9000: the external side sees $node2" dl_wait 10 sees node2/host "[$ext6]:9000" ext "$node2"
check "the external side pings node2's node IP $node2" dl_wait 10 ping6 external "$node2"
nb=$(dl_dpuctl 1 neighbours 2>&1)
grep -qF "node IPs: 172.18.0.1/24, $node1/64; gateways: 172.18.0.254, $DL_NODE_ROUTER6" <<< "$nb" &&
  pass "dpuctl neighbours on node1: the IPv6 node IP and the link-local gateway from the agent's northSouth" ||
  fail "dpuctl neighbours on node1: $nb"

# --- egress SNAT over IPv6.
# The external side's view of echo requests: a raw ICMPv6 socket prints "SOURCE ID" per request.
cat > "$DL_DIR/echo_seen.py" <<'PYEOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.settimeout(float(sys.argv[1]))
print("ready", flush=True)
try:
    while True:
        data, peer = s.recvfrom(2048)
        if data[0] == 128:  # echo request
            print("%s %d" % (peer[0], struct.unpack("!H", data[4:6])[0]), flush=True)
except socket.timeout:
    pass
PYEOF
snat_before=$(dl_drop_count 1 SnatNew)
egress() {  # TARGET NODE-IP N: every one of N TCP connections seen from NODE-IP on a port in 61000-65535
  local i out port bad=0
  for (( i = 0; i < $3; i++ )); do
    out=$(http "$1" "[$ext6]:9000")
    port=${out##*:}
    [ "$(peer "$out")" = "$2" ] && [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 61000 ] && [ "$port" -le 65535 ] ||
      { bad=$(( bad + 1 )); echo "  TCP $1 -> [$ext6]:9000 answered '$out'" >&2; }
  done
  [ $bad = 0 ]
}
check "TCP over IPv6 node1/a -> [$ext6]:9000: 6 connections, each from $node1 on a port in 61000-65535" egress node1/a "$node1" 6
check "TCP over IPv6 node2/c -> [$ext6]:9000: 3 connections, each from $node2 on a port in 61000-65535" egress node2/c "$node2" 3
out=$(udp node1/a "$ext6" 9000)
port=${out##*:}
[ "$(peer "$out")" = "$node1" ] && [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 61000 ] && [ "$port" -le 65535 ] &&
  pass "UDP over IPv6 node1/a -> [$ext6]:9000: answered, the server saw $node1:$port" ||
  fail "UDP over IPv6 egress node1/a -> [$ext6]:9000: '$out' (want ext $node1:61000-65535)"
seen=$DL_DIR/echo-seen
ip netns exec "$(dl_external_ns)" "$PY" "$DL_DIR/echo_seen.py" 8 > "$seen" 2>&1 &
dl_wait 5 grep -q '^ready' "$seen" || fail "the external side's ICMPv6 listener did not start: $(cat "$seen")"
out=$(dl_exec node1/a ping -6 -n -c 3 -i 0.2 -W 1 "$ext6" 2>&1)
got=$(grep -c ' bytes from ' <<< "$out")
req=$(grep -v '^ready' "$seen" | head -1)
id=${req#* }
[ "$got" -ge 1 ] && [ "${req% *}" = "$node1" ] && [[ "$id" =~ ^[0-9]+$ ]] && [ "$id" -ge 61000 ] && [ "$id" -le 65535 ] &&
  pass "ping -6 node1/a -> $ext6: $got/3 replies, the requests arrived from $node1 with echo id $id" ||
  fail "ping -6 node1/a -> $ext6: $got/3 replies; the external side saw echo requests (source id): '$(grep -v '^ready' "$seen" | tr '\n' ';')'; ping: $(tail -2 <<< "$out" | tr '\n' ' ')"
ct=$(dl_dpuctl 1 conntrack --address "$ext6" 2>&1)
grep -qE "^tcp +\[$a6\]:[0-9]+ -> \[$ext6\]:9000 +\[$ext6\]:9000 -> \[$node1\]:6[1-5][0-9]{3} .* snat " <<< "$ct" &&
  grep -qE "^udp +\[$a6\]:[0-9]+ -> \[$ext6\]:9000 +\[$ext6\]:9000 -> \[$node1\]:6[1-5][0-9]{3} .* snat " <<< "$ct" &&
  pass "dpuctl conntrack on node1: node1/a's TCP and UDP to $ext6, masqueraded to $node1" ||
  fail "dpuctl conntrack --address $ext6 on node1: $ct"
# The pods' IPv6 egress left through the gateway's link-local address, which node1's dataplane solicited.
grep -qE "^$DL_NODE_ROUTER6 +[0-9a-f:]{17} +(reachable|stale) " <<< "$(dl_dpuctl 1 neighbours 2>&1)" &&
  pass "dpuctl neighbours on node1: the link-local gateway $DL_NODE_ROUTER6 resolved by neighbour discovery" ||
  fail "dpuctl neighbours on node1 (the link-local gateway): $(dl_dpuctl 1 neighbours 2>&1)"
snat=$(( $(dl_drop_count 1 SnatNew) - snat_before ))
[ "$snat" -ge 7 ] && pass "node1's stats: SnatNew counted $snat new IPv6 egress connections" ||
  fail "node1's SnatNew moved by $snat after IPv6 egress: $(dl_dpuctl 1 stats 2>&1 | grep -iE 'snat|noroute|neigh' | tr -s ' ' | tr '\n' ';')"

# --- an IPv6 node port, a backend on each node.
np=30080
lab service add np --port tcp/80:8080 --node-port $np --backends node1/a,node2/c >/dev/null ||
  fail "dpu-lab service add np --node-port $np"
ext_http() { dl_exec external curl -s --max-time 2 "http://[$1]:$np/"; }  # from fd00:18::fe, the on-link address
ext_backend() { [[ "$(who "$(ext_http "$1")")" =~ ^[ac]$ ]]; }
check "$gw6 reaches the node port on node1 ([$node1]:$np)" dl_wait 10 ext_backend "$node1"
check "$gw6 reaches the node port on node2 ([$node2]:$np)" dl_wait 10 ext_backend "$node2"
for n in 1 2; do
  r=$(tally 12 ext_http "$(dl_node_ip6 $n)")
  [[ "$r" =~ ^a=[1-9][0-9]*\ b=0\ c=[1-9][0-9]*\ other=0\ peers=fd00:10:244:$n::1$ ]] &&
    pass "Cluster: 12 connections from $gw6 to [$(dl_node_ip6 $n)]:$np, both backends, client masqueraded to fd00:10:244:$n::1 ($r)" ||
    fail "Cluster: $gw6 to [$(dl_node_ip6 $n)]:$np: $r (want both backends, no failure, peer fd00:10:244:$n::1)"
done
grep -qE "^default/np +tcp-80 +node-port +\[$node1\]:$np +tcp +cluster " <<< "$(dl_dpuctl 1 services 2>&1)" &&
  pass "dpuctl services on node1: the IPv6 node-port frontend [$node1]:$np" ||
  fail "dpuctl services on node1 (node port): $(dl_dpuctl 1 services 2>&1 | grep -F default/np)"
lab service add np --port tcp/80:8080 --node-port $np --etp Local >/dev/null || fail "service add np --etp Local"
only() {  # NODE-IP NAME: 4 connections in a row answered by NAME, which sees $gw6
  local i out
  for (( i = 0; i < 4; i++ )); do
    out=$(ext_http "$1")
    [ "$(who "$out")" = "$2" ] && [ "$(peer "$out")" = "$gw6" ] || return 1
  done
}
check "Local: node1's IPv6 node port reaches only a, which sees $gw6" dl_wait 10 only "$node1" a
check "Local: node2's IPv6 node port reaches only c, which sees $gw6" dl_wait 10 only "$node2" c

if [ "$FAILURES" != 0 ]; then  # what the dataplanes decided, for the failure's report
  for n in 1 2; do
    echo "--- node$n: dpuctl dump-flows; neighbours; conntrack; stats" >&2
    { dl_dpuctl $n dump-flows; dl_dpuctl $n neighbours; dl_dpuctl $n conntrack --limit 40; dl_dpuctl $n stats; } >&2 2>&1
  done
fi
finish
