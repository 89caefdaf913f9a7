#!/usr/bin/env bash
# Lab e2e, north–south: each node's host has its node IP on its host PF
# (hostpf0, 172.18.0.N/24), whose representor pf0hpf the DPU's dataplane
# bridges with the uplink; the external namespace on the fabric is the node
# network's gateway (172.18.0.254) and "the internet" behind it (203.0.113.1).
# Proves:
#  - a host reaches the gateway on-link and 203.0.113.1 through it, and the
#    other node's host by its node IP, by ping, through both DPUs;
#  - the external side reaches a node IP (its ARP for it goes to the host);
#  - a DHCP server's broadcast answers reach the host whose MAC they name
#    (dnsmasq on the gateway, busybox udhcpc on node1's host PF);
#  - TCP (iperf3) runs through the bridging: host -> external as fast as it
#    goes, then host -> external and external -> host at once, paced, while
#    two pods on different nodes keep pinging every 20 ms without a loss;
#  - the DPU's own traffic on the uplink (its tunnel IP) still reaches the
#    DPU's kernel, beside the host's (the XDP program's counters say which is which);
#  - the bridged flows are in `dpuctl dump-flows` (one output each way), the
#    host's MAC and the gateway (learned from ARP) in `dpuctl neighbours`,
#    the metrics count them.
source "$(dirname "$0")/common.bash" ns
DL_VFS=4 lab_test_up 2 0

node1=$(dl_node_ip 1) node2=$(dl_node_ip 2) gw=$DL_NODE_GATEWAY ext=$(dl_external_ip)
ip_a=$(dl_pod_add 1 a) || fail "pod add node1/a"
ip_b=$(dl_pod_add 2 b) || fail "pod add node2/b"
check "node1/a reaches node2/b (pods, before)" dl_reachable node1/a "$ip_b" 10

# --- ping, both ways, on-link and through the gateway.
check "node1's host reaches the gateway $gw on the node network" dl_reachable node1/host "$gw" 10
check "node1's host reaches $ext through the gateway" dl_reachable node1/host "$ext" 10
check "node2's host reaches $ext through the gateway" dl_reachable node2/host "$ext" 10
check "node1's host reaches node2's host at $node2" dl_reachable node1/host "$node2" 10
check "the external side reaches node1's node IP $node1" dl_reachable external "$node1" 10
check "the external side reaches node2's node IP $node2" dl_reachable external "$node2" 10

# --- DHCP through the DPU: a client that has no address yet asks for broadcast
# answers (udhcpc -B), and a DHCP server on the node network (dnsmasq on the
# gateway, which answers broadcast) sends them to all the fabric: node1's DPU
# gives node1's host the answers whose client MAC is its own. (The client's
# script changes nothing: the node IP stays.)
leases=$DL_DIR/dhcp.leases dhcp_log=$DL_DIR/dnsmasq-dhcp.log
ip netns exec "$(dl_external_ns)" /usr/sbin/dnsmasq --keep-in-foreground --port=0 --interface=ext0 \
  --bind-interfaces --dhcp-range=172.18.0.100,172.18.0.109,255.255.255.0,1h --dhcp-broadcast --log-dhcp \
  --dhcp-leasefile="$leases" --pid-file="$DL_DIR/dnsmasq-dhcp.pid" --log-facility="$dhcp_log" &
dhcp_srv=$!
dl_wait 10 grep -q 'DHCP, IP range' "$dhcp_log" || fail "dnsmasq did not start serving DHCP: $(cat "$dhcp_log" 2>/dev/null)"
host_mac1=$(ip -n "$(dl_node_ns 1 host)" -o link show "$DL_HOST_PF" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
out=$(dl_exec node1/host timeout 20 busybox udhcpc -i "$DL_HOST_PF" -B -n -q -f -t 5 -T 2 -s /bin/true 2>&1)
grep -q 'lease of 172\.18\.0\.10[0-9] obtained' <<< "$out" &&
  pass "node1's host got a DHCP lease through its DPU: $(grep -o 'lease of [0-9.]*' <<< "$out")" ||
  fail "node1's host got no DHCP lease through its DPU: $(tr '\n' ' ' <<< "$out")"
grep -q "DHCPOFFER(ext0) 172\.18\.0\.10[0-9] $host_mac1" "$dhcp_log" && grep -q 'broadcast response' "$dhcp_log" &&
  pass "dnsmasq answered node1's host ($host_mac1) by broadcast" ||
  fail "dnsmasq's log shows no broadcast offer to $host_mac1: $(tail -n 20 "$dhcp_log" | tr '\n' ' ')"
kill "$dhcp_srv" 2>/dev/null; wait "$dhcp_srv" 2>/dev/null

# --- TCP through the bridging: as fast as it goes, then (paced below what the
# lab's veths carry, so that a ping is not lost to a full queue, as the fault
# tests do) both ways at once while two pods ping every 20 ms.
mbit=$(dl_tcp node1/host external 20M) && pass "TCP node1's host -> $ext: 20 MB at $mbit Mbit/s" ||
  fail "TCP from node1's host to $ext failed"
pings=$DL_DIR/ping-pods
dl_ping_start node1/a "$ip_b" 300 0.02 "$pings"; ppid=$DL_PING_PID
out=$DL_DIR/tcp-out
dl_tcp_start node1/host external 4 "$out" 5201 150 || fail "no transfer from node1's host"
# The other way: the external side's client connects to node2's node IP.
back=$DL_DIR/tcp-in
ip netns exec "$(dl_node_ns 2 host)" timeout 40 iperf3 -s -1 -p 5202 >/dev/null 2>&1 &
srv=$!
dl_wait 5 _dl_listening "$(dl_node_ns 2 host)" 5202 || fail "no iperf3 server on node2's host"
ip netns exec "$(dl_external_ns)" timeout 30 iperf3 -c "$node2" -p 5202 -t 4 -b 150M -J --connect-timeout 3000 \
  > "$back" 2>/dev/null
wait "$srv" 2>/dev/null
res=$(dl_tcp_wait "$out") && pass "TCP node1's host -> $ext beside the pods: ${res% *} Mbit/s, ${res#* } retransmits" ||
  fail "the paced transfer from node1's host failed"
if jq -e '.error == null and .end.sum_received.bytes > 10000000' "$back" >/dev/null 2>&1; then
  pass "TCP $ext -> node2's host ($node2) beside the pods: $(jq -r '.end.sum_received.bits_per_second / 1e6 | round' "$back") Mbit/s"
else
  fail "TCP from the external side to node2's host failed: $(jq -r '.error // "no result"' "$back" 2>/dev/null)"
fi
dl_ping_stop "$ppid" 30
res=$(dl_ping_result "$pings")
[ -n "$res" ] && [ "${res% *}" -gt 100 ] && [ "${res% *}" = "${res#* }" ] &&
  pass "node1/a -> node2/b kept every reply during the transfers ($res sent/received)" ||
  fail "pods lost pings during the north-south transfers: '$res' sent/received; missing: $(dl_ping_missing "$pings" | head -c 200)"

# A handful of flows in tables of 65,536: each packet of a flow hits the flow
# it installed, none is installed again and pushes others out.
for n in 1 2; do
  evicted=$(dl_drop_count "$n" FlowEvicted)
  [ "$evicted" = 0 ] && pass "node$n: no flow evicted (each flow installed once)" ||
    fail "node$n evicted $evicted flows: packets missed the flows they installed"
done

# --- the DPU's own traffic on the uplink still reaches the DPU's kernel.
xdp() { dl_dpuctl "$1" stats --all 2>/dev/null | awk -v n="$2" '$1 == n { print $2 }'; }
to_kernel=$(xdp 1 xdp_to_kernel) host_before=$(xdp 1 xdp_host)
check "node1's DPU kernel pings node2's DPU by tunnel IP beside the host's traffic" \
  ip netns exec "$(dl_node_ns 1 dpu)" ping -c 3 -i 0.2 -W 2 "$(dl_tunnel_ip 2)"
[ "$(xdp 1 xdp_to_kernel)" -gt "$to_kernel" ] && pass "node1's uplink XDP passed the replies to the kernel" ||
  fail "xdp_to_kernel did not move ($to_kernel -> $(xdp 1 xdp_to_kernel))"
[ -n "$host_before" ] && [ "$host_before" -gt 1000 ] && pass "node1's uplink XDP steered $host_before frames for the host" ||
  fail "xdp_host is '$host_before' after 20 MB for the host"

# --- what the operator sees (flows idle for 10 s are gone: traffic first).
check "node1's host pings $ext again" dl_exec node1/host ping -c 3 -i 0.2 -W 2 "$ext"
host_port=$(dl_dpuctl 1 --json ports | jq -r '.ports[] | select(.role == "host_pf") | .dpdk_port')
uplink_port=$(dl_dpuctl 1 --json ports | jq -r '.ports[] | select(.role == "uplink") | .dpdk_port')
[ -n "$host_port" ] && [ -n "$uplink_port" ] && pass "dpuctl ports: host_pf is DPDK port $host_port, uplink $uplink_port" ||
  fail "dpuctl ports lists no host_pf or uplink port: $(dl_dpuctl 1 ports)"
flows=$(dl_dpuctl 1 dump-flows)
grep -q "in_port=$host_port,.*nw_src=$node1,nw_dst=$ext.*actions:output:$uplink_port" <<< "$flows" &&
  pass "dump-flows: node1's host -> $ext is one output to the uplink" ||
  fail "dump-flows has no bridged flow from the host PF: $flows"
grep -q "in_port=$uplink_port,.*nw_src=$ext,nw_dst=$node1.*actions:output:$host_port" <<< "$flows" &&
  pass "dump-flows: $ext -> node1's host is one output to the host PF" ||
  fail "dump-flows has no bridged flow to the host PF: $flows"
host_mac=$(ip -n "$(dl_node_ns 1 host)" -o link show "$DL_HOST_PF" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
ns=$(dl_dpuctl 1 --json neighbours)
jq -e --arg m "$host_mac" --arg ip "$node1" '.north_south.host_macs[] | select(.mac == $m and (.node_ips | index($ip)))' \
  <<< "$ns" >/dev/null && pass "dpuctl neighbours: the host's MAC $host_mac, holding $node1" ||
  fail "dpuctl neighbours has not learned the host's MAC $host_mac: $ns"
gw_mac=$(ip -n "$(dl_external_ns)" -o link show ext0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
jq -e --arg m "$gw_mac" --arg ip "$gw" '.north_south.neighbours[] | select(.ip == $ip and .mac == $m and .state == "reachable")' \
  <<< "$ns" >/dev/null && pass "dpuctl neighbours: the gateway $gw at $gw_mac, learned from ARP" ||
  fail "dpuctl neighbours does not know the gateway $gw at $gw_mac: $ns"
text=$(dl_dpuctl 1 neighbours)
grep -q "node IPs: $node1/24; gateways: $gw" <<< "$text" && pass "dpuctl neighbours prints the node addresses" ||
  fail "dpuctl neighbours: $text"
metrics=$(dl_metrics 1 dataplane)
grep -q '^dpu_dataplane_host_macs 1$' <<< "$metrics" && pass "metrics: dpu_dataplane_host_macs 1" ||
  fail "metrics: $(grep host_macs <<< "$metrics")"
grep -q '^dpu_dataplane_north_south_neighbours{state="reachable"} [1-9]' <<< "$metrics" &&
  pass "metrics: the node network's neighbours" || fail "metrics: $(grep north_south <<< "$metrics")"
status=$(dl_status)
grep -q "node1: .*node IP $node1/24" <<< "$status" && grep -q "node2: .*node IP $node2/24" <<< "$status" &&
  pass "dpu-lab status shows the node IPs" || fail "dpu-lab status: $status"

# --- pods still work after it all.
check "node2/b reaches node1/a (pods, after)" dl_reachable node2/b "$ip_a" 10
finish
