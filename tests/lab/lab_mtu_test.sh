#!/usr/bin/env bash
# Lab e2e: MTU. 2 nodes, one pod each, underlay MTU 1500 (the fabric's).
# Proves: the pod MTU the agent computed (1500 - Geneve with the OVN option)
# is what the pod's eth0 has; the largest ping with DF set that this MTU allows
# passes across the nodes (so it fits the fabric once encapsulated); one byte
# more — sent by a pod whose eth0 MTU was raised so the packet leaves it — is
# answered by the DPU with ICMP "fragmentation needed" carrying the pod MTU; a
# TCP transfer with the default MSS works, also from the management port.
source "$(dirname "$0")/common.bash" mtu
lab_test_up 2 1

a=node1/pod1 b=node2/pod1
ip_b=$(dl_pod_ip 2 pod1)
mtu=$(dl_exec $a cat /sys/class/net/eth0/mtu)
# 14 Ethernet + 20 IPv4 + 8 UDP + 8 Geneve + 8 OVN option = 58 (ARCHITECTURE.md: Geneve + OVN option).
[ "$mtu" = 1442 ] && pass "pod MTU is 1442 (underlay 1500 minus Geneve with the OVN option)" ||
  fail "pod MTU is $mtu, expected 1442"
check "node2/pod1 MTU is the same" [ "$(dl_exec $b cat /sys/class/net/eth0/mtu)" = "$mtu" ]
dl_reachable $a "$ip_b" 10 || fail "node1/pod1 cannot reach node2/pod1 at all"

big=$(( mtu - 28 ))
out=$(dl_exec $a ping -M do -c 3 -i 0.2 -W 2 -s $big "$ip_b" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "DF ping of $big bytes ($mtu-byte packets) passes across nodes" ||
  fail "DF ping of $big bytes across nodes: $(tail -n 2 <<< "$out" | tr '\n' ' ')"
out=$(dl_exec $b ping -M do -c 3 -i 0.2 -W 2 -s $big "$(dl_pod_ip 1 pod1)" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "DF ping of $big bytes passes the other way" ||
  fail "DF ping of $big bytes, node2 -> node1: $(tail -n 2 <<< "$out" | tr '\n' ' ')"

# One byte more: raise the pod's MTU so the packet reaches the DPU, which must refuse it.
dl_exec $a ip link set eth0 mtu 1500
out=$(dl_exec $a ping -M do -c 2 -i 0.3 -W 2 -s $(( big + 1 )) "$ip_b" 2>&1)
dl_exec $a ip link set eth0 mtu "$mtu"
dl_exec $a ip route flush cache
if grep -q "Frag needed and DF set (mtu = $mtu)" <<< "$out"; then
  pass "DF ping of $(( big + 1 )) bytes gets ICMP fragmentation needed, mtu = $mtu ($(grep -m1 'Frag needed' <<< "$out" | cut -d' ' -f1-2))"
elif grep -q "message too long, mtu=$mtu" <<< "$out"; then
  # The first reply set the route's PMTU: later packets fail locally with the learned MTU.
  pass "DF ping of $(( big + 1 )) bytes: the pod learned PMTU $mtu from the DPU's ICMP"
else
  fail "DF ping of $(( big + 1 )) bytes: no ICMP fragmentation needed: $(tr '\n' ' ' <<< "$out")"
fi
out=$(dl_exec $a ping -M do -c 2 -i 0.2 -W 2 -s $big "$ip_b" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "after restoring the MTU the $big-byte DF ping passes again" ||
  fail "after restoring the MTU: $(tail -n 2 <<< "$out" | tr '\n' ' ')"
# The packets that got the ICMP were dropped for their size: both counters say so.
too_big=$(dl_drop_count 1 MtuExceeded) frag=$(dl_drop_count 1 IcmpFragNeeded)
[ "$frag" -ge 1 ] && [ "$too_big" -ge "$frag" ] && pass "node1's DPU counted them: MtuExceeded $too_big, IcmpFragNeeded $frag" ||
  fail "dpuctl stats on node1: MtuExceeded $too_big, IcmpFragNeeded $frag; expected a reply sent and every answered packet counted as dropped"

mbit=$(dl_tcp $a $b 20M) && pass "TCP with the default MSS, node1/pod1 -> node2/pod1: 20 MB at $mbit Mbit/s" ||
  fail "TCP with the default MSS from node1/pod1 to node2/pod1 failed"
mbit=$(dl_tcp $b $a 20M) && pass "TCP node2/pod1 -> node1/pod1: $mbit Mbit/s" || fail "TCP node2/pod1 -> node1/pod1 failed"
mbit=$(dl_tcp node1/host $b 20M) && pass "TCP from node1's management port to node2/pod1: $mbit Mbit/s" ||
  fail "TCP from node1's management port to node2/pod1 failed"
finish
