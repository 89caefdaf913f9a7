#!/usr/bin/env bash
# Lab e2e, interop: an Open vSwitch userspace node (Debian
# openvswitch-switch, datapath_type=netdev, lab/lib/ovs_node.bash) joins a lab
# of 2 DPU nodes (real host-shim, dpu-agent, dpu-dataplane; one pod each) as a
# third node with Geneve tunnels to our DPUs. Proves:
#   1. the OVS node's namespace and the pods on both our nodes ping each other,
#      both directions, and the host management port reaches it; a TCP transfer
#      (iperf3) from a pod to it passes;
#   2. tshark on the fabric sees every direction (OVS -> node1, node1 -> OVS,
#      OVS -> node2, node2 -> OVS) as Geneve with the OVN option, and the framing
#      is the same both ways: version, flags (C bit), protocol, option class
#      0x0102 / type 0x80 / 4 data bytes, UDP checksum, DF; VNI = the
#      destination subnet's datapath key; egress key = the destination port's
#      key as its node publishes it, as OVN sends it (never OVN's flood group
#      0x8000: the OVS node drops that); ingress key = the sender's logical
#      port (101 from OVS);
#   3. ovs_node_down removes the node (processes, netns, fabric port, state,
#      publish file) and our agents drop their tunnel to it; then the lab goes
#      (common.bash checks that nothing of it is left) and the system's own
#      Open vSwitch run directory is as it was.
source "$(dirname "$0")/common.bash" ovs
for _tool in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl tshark; do
  command -v "$_tool" >/dev/null || skip_test "$_tool is not installed (openvswitch-switch, tshark)"
done
source "$DL_SOURCE_DIR/lab/lib/ovs_node.bash"
[ -r "$OVS_NODE_SCHEMA" ] || skip_test "no $OVS_NODE_SCHEMA (openvswitch-switch)"

work=$(mktemp -d /tmp/ovs-interop.XXXXXX)
system_ovs_before=$(ls -A /run/openvswitch 2>/dev/null | sort | tr '\n' ' ')
# On exit: the OVS node's logs when something failed, then ovs_node_down, then
# common.bash's handler (lab logs, dl_down, dl_assert_gone) with our exit status.
_interop_exit() {
  local rc=$?
  if [ "$rc" != 0 ] || [ "$FAILURES" != 0 ]; then
    local f
    for f in "$DL_DIR"/ovs/log/*.log "$DL_DIR"/ovs/log/*.stderr; do
      [ -s "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
    done
    [ -f "$DL_DIR/ovs/node.env" ] && { echo "--- br-int flows" >&2; ovs_node_ctl ofctl dump-flows >&2 2>&1; }
  fi
  ovs_node_down "$DL_NAME"
  rm -rf "$work"
  (exit "$rc")
  _lab_test_exit
}
trap _interop_exit EXIT

lab_test_up 2 1
ovs_node_up "$DL_NAME" || { echo "FAIL: the OVS node did not come up" >&2; exit 1; }
n_ovs=$(ovs_node_number)
pass "OVS node ovs$n_ovs up: tunnel $(ovs_node_tunnel_ip), namespace $(ovs_node_ip 1), VNI $(ovs_node_vni); every agent has its tunnel ($(elapsed))"

ovs_ip=$(ovs_node_ip 1) ip1=$(dl_pod_ip 1 pod1) ip2=$(dl_pod_ip 2 pod1)
pcap=$work/fabric.pcap
dl_capture_start fabric 2000 "$work/capture.txt" -f "udp port 6081" -w "$pcap" || exit 1
cap_pid=$DL_CAPTURE_PID

# --- 1. ping both ways (the first packets of a direction may wait for ARP on the underlay).
ovs_ping() {  # DST: OVS namespace -> DST
  local i
  for (( i = 0; i < 10; i++ )); do ovs_node_exec 1 ping -c 1 -W 1 "$1" >/dev/null 2>&1 && break; done
  ovs_node_exec 1 ping -n -q -c 3 -i 0.2 -W 1 "$1" 2>&1 | grep -q ' 0% packet loss'
}
lab_ping() {  # TARGET DST
  dl_reachable "$1" "$2" && [ "$(dl_ping "$1" "$2" 3 0.2 | cut -d' ' -f1)" = 0 ]
}
check "ping OVS namespace $ovs_ip -> node1/pod1 $ip1" ovs_ping "$ip1"
check "ping OVS namespace $ovs_ip -> node2/pod1 $ip2" ovs_ping "$ip2"
check "ping node1/pod1 -> OVS namespace" lab_ping node1/pod1 "$ovs_ip"
check "ping node2/pod1 -> OVS namespace" lab_ping node2/pod1 "$ovs_ip"
check "ping node1/host (management port $(dl_mgmt_ip 1)) -> OVS namespace" lab_ping node1/host "$ovs_ip"

# --- 2. the framing on the fabric, per direction. The capture stops once it has caught up with the pings
# (dumpcap writes its file every half second): it holds the replies of the last one, from the OVS namespace
# to node1's management port (one for dl_reachable, three for dl_ping).
mgmt1=$(dl_mgmt_ip 1)
_replies_on_file() {
  [ "$(tshark -r "$pcap" -n -Y "icmp.type == 0 && ip.src == $ovs_ip && ip.dst == $mgmt1" 2>/dev/null | wc -l)" -ge 4 ]
}
dl_wait 10 _replies_on_file ||
  fail "fabric: the capture does not hold 4 echo replies $ovs_ip -> $mgmt1 (node1's host) 10 s after the pings"
dl_capture_wait "$cap_pid" 0
# dumpcap writes the file and may outlive tshark: what follows reads the final capture.
dl_capture_written "$pcap" || fail "the capture's dumpcap did not stop"
fields=(ip.src ip.dst geneve.version geneve.flags geneve.proto_type geneve.vni geneve.option.class geneve.option.type
        geneve.option.length geneve.option.unknown.data udp.checksum ip.flags.df)
field_args=()
for f in "${fields[@]}"; do field_args+=(-e "$f"); done
tshark -r "$pcap" -n -T fields -E separator=/t "${field_args[@]}" > "$work/geneve.tsv" 2>/dev/null
ovs_tip=$(ovs_node_tunnel_ip) ovs_vni=$(ovs_node_vni)
printf '  %-36s %7s %8s %-10s %s\n' "direction (outer, inner)" packets VNI "OVN opt" "framing"
for m in 1 2; do
  tip=$(dl_tunnel_ip "$m"); vni=$(ovs_node_datapath_key "$(dl_pod_cidr "$m")")
  for dir in "$ovs_tip $tip $vni OVS->node$m 101" "$tip $ovs_tip $ovs_vni node$m->OVS any"; do
    read -r src dst want_vni name want_ingress <<< "$dir"
    # Outer addresses are the first of each comma list (the inner IPv4 follows).
    rows=$(awk -F'\t' -v s="$src" -v d="$dst" '{split($1, a, ","); split($2, b, ","); if (a[1] == s && b[1] == d) print}' "$work/geneve.tsv")
    count=$(grep -c . <<< "$rows")
    [ "$count" -gt 0 ] || { fail "fabric: no Geneve packet $name ($src -> $dst)"; continue; }
    # One framing per direction: everything but addresses, VNI and option data.
    framing=$(awk -F'\t' '{split($12, df, ","); printf "ver=%s flags=%s proto=%s class=%s type=%s len=%s csum=%s df=%s\n", $3, $4, $5, $7, $8, $9, $11, df[1]}' <<< "$rows" | sort -u)
    vnis=$(cut -f6 <<< "$rows" | sort -u | tr '\n' ' ')
    opts=$(cut -f10 <<< "$rows" | sort -u | tr '\n' ' ')
    printf '  %-36s %7s %8s %-10s %s\n' "$name ($src -> $dst)" "$count" "$vnis" "$opts" "$framing"
    # The egress key names the inner destination's port: OVS namespace 1 (its
    # key 101) towards OVS, the key node m publishes for the address towards m.
    while read -r inner opt; do
      egress=$(( 0x${opt:4:4} )); egress_checked=$(( ${egress_checked:-0} + 1 ))
      if [ "$want_ingress" = any ]; then want_egress=101; else want_egress=$(ovs_node_port_key "$m" "$inner"); fi
      [ -n "$want_egress" ] || { fail "fabric: $name to $inner, which node$m publishes no port key for"; continue; }
      [ "$egress" = "$want_egress" ] || { fail "fabric: $name to $inner has egress key $egress, expected its port's key $want_egress"; egress_bad=1; }
    done < <(awk -F'\t' '{split($2, b, ","); print b[2], $10}' <<< "$rows" | sort -u)
    echo "$framing" >> "$work/framings"
    [ "$(grep -c . <<< "$framing")" = 1 ] || fail "fabric: $name uses more than one framing: $framing"
    [ "$(printf '0x%06x ' "$want_vni")" = "$vnis" ] || fail "fabric: $name VNI $vnis, expected $(printf '0x%06x' "$want_vni") (the destination subnet's datapath key)"
    for opt in $opts; do
      ingress=$(( 0x${opt:0:4} & 0x7fff ))
      if [ "$want_ingress" = any ]; then
        [ "$ingress" -ge 1 ] || fail "fabric: $name ingress key 0 (no logical port)"
      else
        [ "$ingress" = "$want_ingress" ] || fail "fabric: $name ingress key $ingress, expected $want_ingress"
      fi
    done
  done
done
[ "${egress_checked:-0}" -gt 0 ] && [ -z "${egress_bad:-}" ] &&
  pass "fabric: the egress key names the destination's port in every direction ($egress_checked destinations), never 0x8000"
framings=$(sort -u "$work/framings" 2>/dev/null)
if [ "$(grep -c . <<< "$framings")" = 1 ] &&
   matches -x 'ver=0 flags=0x40 proto=0x6558 class=0x0102 type=0x80 len=8,8 csum=0x0000 df=1' <<< "$framings"; then
  pass "fabric: the same Geneve framing both ways: $framings (C bit, OVN option 0x0102/0x80, 4 data bytes)"
else
  fail "fabric: the framing differs between directions or from OVN's: $(tr '\n' ';' <<< "$framings")"
fi
# One packet from the OVS node, dissected (its Geneve header and option).
tshark -r "$pcap" -n -Y "ip.src == $ovs_tip" -O geneve 2>/dev/null |
  awk '/^Generic Network/ {p = 1} p && /^Ethernet/ {exit} p {print "    " $0}'

# A TCP transfer from a pod to the OVS namespace (checksums and MSS across both datapaths).
ovs_node_exec 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
srv=$!
ovs_listening() { ovs_node_exec 1 ss -Hltn "sport = :5201" | grep -q LISTEN; }
dl_wait 5 ovs_listening
tcp=$(dl_exec node1/pod1 timeout 20 iperf3 -c "$ovs_ip" -p 5201 -n 4M -J --connect-timeout 3000 2>/dev/null |
  jq -r 'select(.error == null and .end.sum_received.bytes > 0) | .end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10')
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
if [ -n "$tcp" ]; then pass "TCP node1/pod1 -> OVS namespace: 4 MB at $tcp Mbit/s"; else fail "TCP node1/pod1 -> OVS namespace failed"; fi

# --- 3. the OVS node leaves: its tunnels go, nothing of it is left.
agent_has_remote_nodes() { [ "$(ovs_node_remote_nodes "$1")" = "$2" ]; }
ovs_node_down "$DL_NAME"
check "ovs_node_down left nothing of the OVS node" ovs_node_assert_gone
for m in 1 2; do
  check "node$m's agent dropped its tunnel to ovs$n_ovs" dl_wait 10 agent_has_remote_nodes "$m" 1
done
check "node1/pod1 -> node2/pod1 still works without the OVS node" lab_ping node1/pod1 "$ip2"
if [ "$(ls -A /run/openvswitch 2>/dev/null | sort | tr '\n' ' ')" = "$system_ovs_before" ]; then
  pass "the system's /run/openvswitch is untouched"
else
  fail "/run/openvswitch changed during the test"
fi
finish
