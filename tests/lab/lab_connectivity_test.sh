#!/usr/bin/env bash
# Lab e2e: the connectivity matrix. A lab of 2 nodes with 2 pods each (real
# host-shim, dpu-agent, dpu-dataplane per node; pods plumbed by dpu-cni).
# Proves, for every ordered pair of endpoints among the 4 pods and the 2 hosts
# (through their management ports) — within a node and across nodes (Geneve
# on the fabric), both directions — that ICMP (ping, no loss), TCP (an iperf3
# transfer) and UDP (an iperf3 stream) pass. Also that the fabric carries the
# cross-node traffic as Geneve (UDP 6081) and never the pods' plain packets.
source "$(dirname "$0")/common.bash" conn
DL_TCP_BYTES=${DL_TCP_BYTES:-4M} DL_UDP_BYTES=${DL_UDP_BYTES:-600K} DL_UDP_MBIT=${DL_UDP_MBIT:-20}
export DL_TCP_BYTES DL_UDP_BYTES DL_UDP_MBIT
lab_test_up 2 2

targets=(node1/pod1 node1/pod2 node2/pod1 node2/pod2 node1/host node2/host)
out=$(dl_matrix "${targets[@]}"); bad=$?
echo "$out"
[ "$bad" = 0 ] && pass "matrix: all $(( ${#targets[@]} * (${#targets[@]} - 1) )) pairs pass ICMP, TCP and UDP" ||
  fail "matrix: $bad pair(s) failed"

# The fabric sees the cross-node pod traffic only inside Geneve.
dst=$(dl_pod_ip 2 pod1)
cap=$DL_DIR/fabric.txt
# (dl_capture_start returns once tshark says it is capturing.)
dl_capture_start fabric 6 "$cap" -f "udp port 6081 or icmp" -T fields -e udp.dstport -e ip.src -e ip.dst ||
  fail "tshark did not start on the fabric"
dl_exec node1/pod1 ping -c 3 -i 0.2 -W 1 "$dst" >/dev/null
dl_capture_wait "$DL_CAPTURE_PID" 8
if grep -q '^6081' "$cap" && [ -z "$(grep -v '^6081' "$cap")" ]; then
  pass "fabric: pod1 -> node2/pod1 travels as Geneve only ($(grep -c '^6081' "$cap") packets; src -> dst (outer,inner): $(head -1 "$cap" | awk -F'\t' '{print $2 " -> " $3}'))"
else
  fail "fabric: expected Geneve (UDP 6081) only, captured: $(tr '\n' ';' < "$cap")"
fi
finish
