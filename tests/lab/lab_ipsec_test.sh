#!/usr/bin/env bash
# Lab e2e: IPsec between DPUs (docs/ipsec.md). 2 nodes, one pod each, every agent with `ipsec: true`.
# Proves: the agents make and publish their keys and the dataplanes install the SAs; pods ping and
# move TCP across the nodes; a capture on the fabric sees only ESP between the two tunnel IPs, no
# plaintext Geneve; tshark decrypts every ESP packet of it into the Geneve packet carrying the pods'
# traffic with keys computed independently (tests/dpu-agent/ipsec/ipsec_keys.py, python3-cryptography)
# from the two nodes' private key files and docs/ipsec.md "Derivation"; dpuctl ipsec shows the SAs
# with traffic on them, and no key appears in dpuctl's output or the daemons' logs.
source "$(dirname "$0")/common.bash" ipsec
command -v tshark >/dev/null || skip_test "tshark is not installed (scripts/install-deps.sh)"
/usr/bin/python3 -c 'import cryptography' 2>/dev/null || skip_test "python3-cryptography is not installed"
export DL_IPSEC=true
lab_test_up 2 1

a=node1/pod1 b=node2/pod1
ip_a=$(dl_pod_ip 1 pod1) ip_b=$(dl_pod_ip 2 pod1)
t1=$(dl_tunnel_ip 1) t2=$(dl_tunnel_ip 2)
src=$(cd "$(dirname "$0")/../.." && pwd)

# Each node sends under an outbound SA once it learned the peer's published key.
_outbound() {
  dl_dpuctl "$1" --json ipsec 2>/dev/null |
    jq -e '[.ipsec.sas[]? | select(.state.direction == "OUTBOUND")] | length == 1' >/dev/null
}
check "node1 holds an outbound SA to node2" dl_wait 30 _outbound 1
check "node2 holds an outbound SA to node1" dl_wait 30 _outbound 2
dl_reachable $a "$ip_b" 20 || fail "node1/pod1 cannot reach node2/pod1 with IPsec on"

_drops() { local n r; for n in 1 2; do for r in IpsecNoSa IpsecPlaintext IpsecUnknownSpi EspAuthFailed EspReplay; do
  echo "node$n $r $(dl_drop_count $n $r)"; done; done; }
drops_before=$(_drops)
pcap=$DL_DIR/fabric.pcap
rm -f "$pcap"
ip netns exec "$(dl_fabric_ns)" tshark -q -i fabric -w "$pcap" -f "host $t1 and host $t2" >/dev/null 2>&1 &
cap=$!
# dumpcap writes the file's header once the interface is open with its filter: it captures from then on.
_capturing() { [ -s "$pcap" ]; }
dl_wait 10 _capturing || fail "tshark did not start capturing on the fabric"
out=$(dl_exec $a ping -n -c 5 -i 0.2 -W 2 "$ip_b" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "node1/pod1 pings node2/pod1 over ESP" ||
  fail "ping node1/pod1 -> node2/pod1: $(tail -n 2 <<< "$out" | tr '\n' ' ')"
mbit=$(dl_tcp $a $b 5M) && pass "TCP node1/pod1 -> node2/pod1 over ESP: 5 MB at $mbit Mbit/s" ||
  fail "TCP node1/pod1 -> node2/pod1 failed"
mbit=$(dl_tcp $b $a 5M) && pass "TCP node2/pod1 -> node1/pod1 over ESP: $mbit Mbit/s" ||
  fail "TCP node2/pod1 -> node1/pod1 failed"
# The capture has caught up with the traffic once it holds the last ESP packet each node sent.
dl_ipsec_caught_up "$pcap" || fail "the fabric capture did not catch up with the traffic in 10 s"
kill -INT $cap 2>/dev/null
wait $cap 2>/dev/null
# tshark's capture child (dumpcap) writes the file and may outlive it by a few
# packets: every count below must read the same, final capture.
dl_capture_written "$pcap" || fail "the capture's dumpcap did not stop"

# On the fabric: ESP only, both ways, no plaintext Geneve between the tunnel IPs.
esp=$(dl_pcap_frames "$pcap" -Y "esp && ip.src == $t1 && ip.dst == $t2")
esp_back=$(dl_pcap_frames "$pcap" -Y "esp && ip.src == $t2 && ip.dst == $t1")
plain=$(dl_pcap_frames "$pcap" -Y "udp.port == 6081 || geneve")
[ "$esp" -gt 100 ] && [ "$esp_back" -gt 100 ] && pass "the fabric carried ESP both ways ($esp and $esp_back packets)" ||
  fail "ESP on the fabric: $esp from node1, $esp_back from node2"
[ "$plain" = 0 ] && pass "no plaintext Geneve on the fabric" || fail "$plain plaintext Geneve packets on the fabric"

# The SA keys, computed from the nodes' key files as docs/ipsec.md says, decrypt the capture.
keys=$(/usr/bin/python3 "$src/tests/dpu-agent/ipsec/ipsec_keys.py" \
  node1="$DL_DIR/n1/agent-state/ipsec/keys.json" node2="$DL_DIR/n2/agent-state/ipsec/keys.json") ||
  fail "ipsec_keys.py could not compute the SAs from the key files"
uat=()
while read -r line; do
  [ -n "$line" ] || continue
  from=$(jq -r .from <<< "$line") to=$(jq -r .to <<< "$line")
  s=$(dl_tunnel_ip "${from#node}") d=$(dl_tunnel_ip "${to#node}")
  uat+=(-o "uat:esp_sa:\"IPv4\",\"$s\",\"$d\",\"0x$(jq -r .spi <<< "$line")\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x$(jq -r .key <<< "$line")$(jq -r .salt <<< "$line")\",\"NULL\",\"\"")
done <<< "$keys"
[ ${#uat[@]} -ge 4 ] && pass "ipsec_keys.py derived $(( ${#uat[@]} / 2 )) SAs from the key files" || fail "no SA derived: $keys"
decode=(-o esp.enable_encryption_decode:TRUE "${uat[@]}")
opened=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "esp && geneve")
closed=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "esp && !geneve")
icmp=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "geneve && icmp && ip.src == $ip_a && ip.dst == $ip_b")
tcp=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "geneve && tcp && ip.src == $ip_b && ip.dst == $ip_a")
# The frames a mismatch is about, each with its summary, so a failure shows them.
_esp_mismatch() {
  local frames
  frames=$(comm -3 <(dl_pcap_frame_numbers "$pcap" -Y "esp && ip.addr == $t1 && ip.addr == $t2" | sort) \
    <(dl_pcap_frame_numbers "$pcap" "${decode[@]}" -Y "esp && geneve" | sort) |
    tr -d '\t' | sort -n | head -5 | paste -sd ,)
  [ -n "$frames" ] && tshark -r "$pcap" -n "${decode[@]}" -Y "frame.number in {${frames//,/ }}" 2>/dev/null
}
if [ "$opened" = $(( esp + esp_back )) ] && [ "$closed" = 0 ]; then
  pass "tshark decrypted all $opened ESP packets to Geneve with the independently derived keys"
else
  fail "decrypted $opened of $(( esp + esp_back )) ESP packets ($closed not); the first frames that differ: $(_esp_mismatch)"
fi
[ "$icmp" -ge 5 ] && [ "$tcp" -gt 50 ] && pass "inside: the pods' ICMP ($icmp) and TCP ($tcp) between $ip_a and $ip_b" ||
  fail "inside the decrypted Geneve: $icmp ICMP $ip_a -> $ip_b, $tcp TCP $ip_b -> $ip_a"

# dpuctl ipsec shows the SAs with traffic on them; no key in it or any log.
view=$(dl_dpuctl 1 ipsec)
grep -q 'encryption: on' <<< "$view" && pass "dpuctl ipsec on node1: encryption on" || fail "dpuctl ipsec: $view"
sent=$(dl_dpuctl 1 --json ipsec | jq '[.ipsec.sas[] | select(.state.direction == "OUTBOUND") | .state.packets | tonumber] | add')
used=$(dl_dpuctl 1 --json ipsec | jq '[.ipsec.sas[] | select(.state.direction == "INBOUND" and .state.first_packet_received)] | length')
[ "${sent:-0}" -ge "$esp" ] && [ "${used:-0}" -ge 1 ] &&
  pass "node1's outbound SA sent $sent packets; $used inbound SA(s) received" ||
  fail "node1's SAs: sent ${sent:-?} (captured $esp), inbound in use ${used:-?}"
leaks=0
while read -r key; do
  [ -n "$key" ] || continue
  for f in "$DL_DIR"/n*/*.log; do grep -qi "$key" "$f" && { fail "a key appears in $f"; leaks=1; }; done
  grep -qi "$key" <<< "$view$(dl_dpuctl 2 --json ipsec)" && { fail "a key appears in dpuctl ipsec"; leaks=1; }
done < <(jq -r .key <<< "$keys")
[ $leaks = 0 ] && pass "no key in dpuctl ipsec or the daemons' logs"
# Nothing was dropped for IPsec while the traffic above ran.
drops_after=$(_drops)
[ "$drops_after" = "$drops_before" ] && pass "no IPsec drop during the traffic (no SA, plaintext, unknown SPI, ICV, replay)" ||
  fail "IPsec drops during the traffic: $(diff <(echo "$drops_before") <(echo "$drops_after") | grep '^>' | tr '\n' ' ')"
finish
