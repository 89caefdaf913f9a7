#!/usr/bin/env bash
# Lab e2e, faults: a node removed from the cluster. 3 nodes, one pod each;
# node2 is taken out of the cluster file (and its publish file, which would
# keep it in: lab/lib/faults.bash dl_cluster_remove_node). Proves:
#  - node1's and node3's dataplanes drop everything towards node2 within a few
#    seconds: `dpuctl dump-flows` mentions neither node2's tunnel IP nor its
#    pod CIDR any more;
#  - traffic to node2's pod stops in both directions, and nothing leaves
#    node1's DPU for node2's tunnel IP (capture on the fabric);
#  - node1 <-> node3 is untouched;
#  - listed again, node2 is reachable again (the removal left nothing stale).
source "$(dirname "$0")/common.bash" fnode
DL_VFS=3 lab_test_up 3 0

ip1=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip2=$(dl_pod_add 2 b) || fail "pod add node2/b"
ip3=$(dl_pod_add 3 c) || fail "pod add node3/c"
tun2=$(dl_tunnel_ip 2)
cidr2=$(dl_pod_cidr 2); net2=${cidr2%.*/*}.
check "node1/a reaches node2/b" dl_reachable node1/a "$ip2" 10
check "node3/c reaches node2/b" dl_reachable node3/c "$ip2" 10
check "node1/a reaches node3/c" dl_reachable node1/a "$ip3" 10
# mentions2 NODE: the lines of node NODE's flows that mention node2; fails
# (saying why) when dpuctl does, so that an unanswered dump never reads as
# "no flow mentions node2".
mentions2() {
  local out
  out=$(dl_dpuctl "$1" dump-flows 2>&1) || { echo "dpuctl dump-flows on node$1 failed: $out" >&2; return 1; }
  grep -F -e "$tun2" -e "$net2" <<< "$out" || true
}
# Fresh flows to node2, a ping and then the dump, until the dump has them: the
# checks above may have taken longer than their idle timeout, and a model
# change between a ping and the dump (another node's pod coming up) retires
# the flows it cached until the next packet.
_fresh_to_node2() { dl_exec node1/a ping -n -c 1 -W 1 "$ip2" >/dev/null 2>&1 && m=$(mentions2 1) && [ -n "$m" ]; }
dl_wait 10 _fresh_to_node2 && pass "node1's flows mention node2 ($tun2 / $cidr2) before the removal" ||
  fail "node1's flows never mentioned node2 ($tun2 / $cidr2): the check below would prove nothing; its flows: $(dl_dpuctl 1 dump-flows 2>&1 | head -n 8 | tr '\n' ';')"

t=$(date +%s%N)
dl_cluster_remove_node 2
gone() { local a b; a=$(mentions2 1) && b=$(mentions2 3) && [ -z "$a$b" ]; }
if dl_wait 10 gone; then
  pass "node1's and node3's flows no longer mention node2 ($(( ($(date +%s%N) - t) / 1000000 )) ms after the removal)"
else
  fail "flows still mention node2 10 s after its removal: node1: $(mentions2 1 | head -n 3 | tr '\n' ';') node3: $(mentions2 3 | head -n 3 | tr '\n' ';')"
fi

cap=$DL_DIR/fabric.cap
dl_capture_start fabric 1000 "$cap" -f "udp port 6081" -a duration:60 -T fields -e ip.src -e ip.dst ||
  fail "capture on the fabric"
cpid=$DL_CAPTURE_PID
out=$(dl_exec node1/a ping -n -c 5 -i 0.1 -W 1 "$ip2" 2>&1)
grep -q ' 100% packet loss' <<< "$out" && pass "node1/a -> node2/b: no answer after the removal" || fail "node1/a still reaches node2/b: $out"
out=$(dl_exec node2/b ping -n -c 5 -i 0.1 -W 1 "$ip1" 2>&1)
grep -q ' 100% packet loss' <<< "$out" && pass "node2/b -> node1/a: no answer after the removal" || fail "node2/b still reaches node1/a: $out"
# node1's traffic to node3 is the capture's barrier: once node3's reply to node1/a is on file, so is everything
# node1 sent before it (tshark writes in order, its input every half second).
t3=$(dl_tunnel_ip 3)
check "node1/a still reaches node3/c" dl_reachable node1/a "$ip3" 10
_reply_from3() { awk -F'\t' -v s="$t3,$ip3" -v d="$(dl_tunnel_ip 1),$ip1" '$1 == s && $2 == d { f = 1 } END { exit !f }' "$cap"; }
dl_wait 10 _reply_from3 || fail "the fabric capture does not hold node3/c's reply to node1/a 10 s after it"
dl_capture_wait "$cpid" 0
# Outer addresses come first (ip.src is "outer,inner").
outer() { awk -F'\t' -v s="$1" -v d="$2" '{ split($1, a, ","); split($2, b, ","); if (a[1] == s && b[1] == d) n++ } END { print n + 0 }' "$cap"; }
from1=$(outer "$(dl_tunnel_ip 1)" "$tun2"); from2=$(outer "$tun2" "$(dl_tunnel_ip 1)")
# node2 still lists node1 (and sends to it): that the capture sees those proves it would see node1's.
[ "$from2" -ge 1 ] && pass "the capture works: it saw node2's $from2 packets to node1 (node1 drops them)" ||
  fail "the fabric capture saw nothing from node2 to node1: the next check would prove nothing"
[ "$from1" = 0 ] && pass "the fabric carried no Geneve packet from node1's DPU to $tun2" ||
  fail "the fabric carried $from1 Geneve packets from node1's DPU to $tun2"
echo "  node1's counters: $(dl_dpuctl 1 stats 2>/dev/null | awk 'NR > 1 && $1 !~ /^(Flow|xdp|flow_bytes|Arp|Nd|Icmpv6|Multicast)/ {printf "%s=%s ", $1, $2}')"
check "node3/c still reaches node1/a" dl_reachable node3/c "$ip1" 10

dl_write_cluster_file 1 2 3
check "listed again, node2/b is reachable from node1/a" dl_reachable node1/a "$ip2" 20
check "and node2/b reaches node3/c" dl_reachable node2/b "$ip3" 10
finish
