#!/usr/bin/env bash
# Lab e2e, cluster DNS through a Service: Debian's dnsmasq serves a zone in a
# pod on node2, behind a ClusterIP with port 53 over UDP and over TCP (as
# kube-dns is); a pod on node1 resolves through the cluster IP with Debian's
# dig. Proves, with a real DNS server and client on both sides:
#  - UDP: an A query through the cluster IP gets the zone's address, and a
#    name outside it NXDOMAIN (the answers are dnsmasq's, not an echo);
#  - TCP: the same query over TCP (dig +tcp) gets the same answer;
#  - the TC fallback: an answer too large for a 512-byte UDP datagram comes
#    back truncated over UDP and whole over TCP, which dig retries on its own,
#    both through the cluster IP;
#  - dnsmasq saw the querying pod's own address (DNAT only, no masquerade);
#  - `dpuctl conntrack` on node1 lists the UDP and TCP connections to the
#    cluster IP translated to the DNS pod's port 53, and `dpuctl services` the
#    two frontends.
source "$(dirname "$0")/common.bash" dns
DNSMASQ=/usr/sbin/dnsmasq
[ -x "$DNSMASQ" ] || skip_test "dnsmasq is not installed (dnsmasq-base, scripts/install-deps.sh)"
command -v dig >/dev/null || skip_test "dig is not installed (bind9-dnsutils, scripts/install-deps.sh)"
DL_VFS=4 lab_test_up 2 0
lab() { bash "$DL_SOURCE_DIR/lab/dpu-lab" --name "$DL_NAME" "$@"; }

ip_c=$(dl_pod_add 1 client) || fail "pod add node1/client"
ip_d=$(dl_pod_add 2 dns) || fail "pod add node2/dns"

# The zone lab.test: an A record, and 20 TXT strings of 100 bytes (over 2 KB:
# too large for a 512-byte UDP answer). --local makes the zone dnsmasq's own,
# so a name it does not hold is NXDOMAIN; --no-resolv: no upstream at all.
txt=""
for (( i = 0; i < 20; i++ )); do txt+=",$(printf 'record-%02d-%091d' "$i" 0)"; done
dl_spawn "$DL_DIR/dnsmasq.pid" "$(dl_pod_ns 2 dns)" "$DL_DIR/dnsmasq.log" \
  "$DNSMASQ" --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --pid-file= \
  --listen-address="$ip_d" --bind-interfaces --port=53 --local=/lab.test/ \
  --host-record=web.lab.test,10.1.2.3 --txt-record="big.lab.test$txt" \
  --log-queries --log-facility="$DL_DIR/dnsmasq-queries.log" || fail "could not start dnsmasq in node2/dns"
# Its command line names the lab's directory (the log file): the lab's
# teardown stops only processes whose command line does.
check "dnsmasq runs, as the lab's process" dl_wait 5 dl_proc_alive "$DL_DIR/dnsmasq.pid"

q() {  # SERVER NAME TYPE [DIG OPTIONS]: dig's short answer
  dl_exec node1/client dig +short +time=2 +tries=1 "@$1" "$2" "$3" "${@:4}"
}
resolves() { [ "$(q "$1" web.lab.test A "${@:2}")" = 10.1.2.3 ]; }
check "dnsmasq answers node1/client directly at $ip_d (UDP)" dl_wait 10 resolves "$ip_d"

vip=$(lab service add dns --port udp/53 --port tcp/53 --backends node2/dns) || fail "dpu-lab service add dns"
t0=$(date +%s%N)
check "UDP: web.lab.test resolves through the cluster IP $vip" dl_wait 15 resolves "$vip"
pass "the service resolves $(( ($(date +%s%N) - t0) / 1000000 )) ms after it was written"
check "TCP: web.lab.test resolves through $vip over TCP (dig +tcp)" dl_wait 10 resolves "$vip" +tcp
out=$(dl_exec node1/client dig +time=2 +tries=1 "@$vip" missing.lab.test A)
grep -q 'status: NXDOMAIN' <<< "$out" && pass "a name outside the zone is NXDOMAIN through $vip" ||
  fail "missing.lab.test through $vip: $(grep -E 'status|timed out' <<< "$out")"

# 512-byte UDP (no EDNS): truncated, dig's retry over TCP gets it all.
trunc=$(dl_exec node1/client dig +time=2 +tries=1 +noedns +ignore "@$vip" big.lab.test TXT)
grep -qE 'flags:[a-z ]* tc[ ;]' <<< "$trunc" && pass "UDP: the 2 KB TXT answer comes back truncated (TC) through $vip" ||
  fail "UDP without EDNS: no TC flag: $(grep -E 'flags|timed out' <<< "$trunc")"
full=$(dl_exec node1/client dig +time=2 +tries=1 +noedns "@$vip" big.lab.test TXT)
n=$(grep -A2 'ANSWER SECTION' <<< "$full" | grep -oE '"record-[0-9]{2}-0{91}"' | sort -u | wc -l)
grep -q 'Truncated, retrying in TCP mode' <<< "$full" && [ "$n" = 20 ] &&
  pass "dig retried over TCP through $vip and got all 20 TXT strings" ||
  fail "TC fallback through $vip: retried=$(grep -c 'retrying in TCP' <<< "$full"), $n of 20 strings"

# What dnsmasq saw: the client pod's own address, over both protocols.
from=$(grep -oE 'query\[(A|TXT)\] [a-z.]+ from [0-9.]+' "$DL_DIR/dnsmasq-queries.log" | awk '{print $4}' | sort -u | tr '\n' ' ')
[ "$from" = "$ip_c " ] && pass "dnsmasq logged every query from node1/client's own address $ip_c" ||
  fail "dnsmasq saw queries from: $from (want only $ip_c)"

ct=$(dl_dpuctl 1 conntrack --address "$vip" 2>&1)
grep -qE "^udp +$ip_c:[0-9]+ -> $vip:53 +$ip_d:53 -> $ip_c:[0-9]+ .* dnat +default/dns " <<< "$ct" &&
  grep -qE "^tcp +$ip_c:[0-9]+ -> $vip:53 +$ip_d:53 -> $ip_c:[0-9]+ .* dnat +default/dns " <<< "$ct" &&
  pass "dpuctl conntrack: node1/client's UDP and TCP queries to $vip:53, translated to $ip_d:53" ||
  fail "dpuctl conntrack --address $vip on node1: $ct"
svc=$(dl_dpuctl 1 services 2>&1)
grep -qE "^default/dns +udp-53 +cluster-ip +$vip:53 +udp .* 1/1 " <<< "$svc" &&
  grep -qE "^default/dns +tcp-53 +cluster-ip +$vip:53 +tcp .* 1/1 " <<< "$svc" &&
  grep -qE "^default/dns +udp-53 +$ip_d:53 +ready +remote " <<< "$svc" &&
  pass "dpuctl services on node1: $vip:53 over UDP and TCP, one remote backend $ip_d:53" ||
  fail "dpuctl services on node1: $svc"
finish
