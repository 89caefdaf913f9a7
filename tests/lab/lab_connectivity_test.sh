#!/usr/bin/env bash
# Lab e2e: the connectivity matrix. A lab of 2 nodes with 2 pods each (real
# host-shim, dpu-agent, dpu-dataplane per node; pods plumbed by dpu-cni).
# Proves, for every ordered pair of endpoints among the 4 pods and the 2 hosts
# (through their management ports) — within a node and across nodes (Geneve
# on the fabric), both directions — that ICMP (ping, no loss), TCP (an iperf3
# transfer) and UDP (an iperf3 stream) pass. Also that the fabric carries the
# cross-node traffic as Geneve (UDP 6081) and never the pods' plain packets.
# And that the host<->DPU link is mutual TLS: host-shim got the pods attached
# over it, node1's agent refuses node2's certificate (same CA, another node),
# no certificate at all, and plain HTTP.
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

# --- the host<->DPU link: mutual TLS, and only this host's certificate.
t1=$DL_DIR/n1/tls t2=$DL_DIR/n2/tls
agent1() { ip netns exec "$(dl_node_ns 1 dpu)" curl -s --max-time 3 -o /dev/null -w '%{http_code}' "$@"; }
check "node1's agent answers node1's host certificate" [ "$(dl_agent_curl 1 /readyz -s -o /dev/null -w '%{http_code}')" = 200 ]
code=$(agent1 --cacert "$t1/ca.pem" --cert "$t2/node2.pem" --key "$t2/node2.key" "https://$DL_LINK_DPU_IP:$DL_API_PORT/readyz")
[ "$code" = 000 ] && pass "node1's agent refuses node2's certificate (the handshake fails)" ||
  fail "node1's agent answered $code to node2's certificate"
grep -q "refused a client certificate: expected one naming the host node 'node1'" "$DL_DIR/n1/agent.log" &&
  pass "and says why in its log" || fail "node1's agent log does not say why it refused node2's certificate"
code=$(agent1 --cacert "$t1/ca.pem" "https://$DL_LINK_DPU_IP:$DL_API_PORT/readyz")
[ "$code" = 000 ] && pass "node1's agent refuses a client without a certificate" || fail "no certificate: answered $code"
code=$(agent1 "http://$DL_LINK_DPU_IP:$DL_API_PORT/readyz")
[ "$code" != 200 ] && pass "node1's agent does not speak plain HTTP (got $code)" || fail "plain HTTP answered 200"
finish
