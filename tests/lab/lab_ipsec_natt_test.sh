#!/usr/bin/env bash
# Lab e2e: IPsec through a real NAT (docs/ipsec.md "NAT traversal"). 2 nodes, one pod each; node2's
# uplink behind a NAT netns running nftables (lab/lib/nat.bash), every agent with natTraversal and a
# 1 s keepalive, node2 with natAddress = the NAT's public address. DL_NAT_MODE picks the NAT:
# masquerade (default here: node2's source ports remapped to 14500-14599, nothing forwarded in) or
# static (1:1, ports kept).
# Proves: node2 publishes its NAT address and node1 sends to it; pods ping both ways and move TCP both
# ways; a capture on the fabric (the NAT's public side) sees only UDP 4500-style ESP in UDP between the
# NAT's address and node1 — no bare ESP, no plaintext Geneve — and tshark decrypts every ESP packet to the
# pods' Geneve with keys computed independently from the key files and the PSK
# (tests/dpu-agent/ipsec/ipsec_keys.py), scapy authenticating each ICV (esp_udp_verify.py); node1 sends to the port the NAT chose, learned from node2's
# authenticated packets and shown by dpuctl ipsec; keepalives (one 0xff byte) cross the NAT both ways,
# counted by the senders and by the receivers apart from other drops; after node1's dataplane is killed
# and started again, node2 authenticates its packets at once (no lock-out) and it sends to the learned
# port at once, kept across the restart.
source "$(dirname "$0")/common.bash" nt
command -v tshark >/dev/null || skip_test "tshark is not installed (scripts/install-deps.sh)"
command -v nft >/dev/null || skip_test "nft is not installed (scripts/install-deps.sh: nftables)"
/usr/bin/python3 -c 'import cryptography' 2>/dev/null || skip_test "python3-cryptography is not installed"
export DL_IPSEC=true DL_IPSEC_PSK=1 DL_NAT=2 DL_NAT_MODE=${DL_NAT_MODE:-masquerade} DL_NAT_KEEPALIVE=1
lab_test_up 2 1

a=node1/pod1 b=node2/pod1
ip_a=$(dl_pod_ip 1 pod1) ip_b=$(dl_pod_ip 2 pod1)
t1=$(dl_tunnel_ip 1) t2=$(dl_tunnel_ip 2) pub=$(dl_nat_address 2)
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$t2" != "$pub" ] && [[ "$t2" == 10.200.* ]] && pass "node2 is behind a $DL_NAT_MODE NAT: tunnel IP $t2, public $pub" ||
  fail "node2's addresses: tunnel $t2, NAT $pub"

# node2 publishes where it is reached; node1's dataplane resolves and sends to that, not to its tunnel IP.
published=$(jq -r '.ipsecNatAddress // ""' "$DL_DIR/cluster.yaml.d/node2.json" 2>/dev/null)
[ "$published" = "$pub" ] && pass "node2 publishes ipsecNatAddress $pub with its key" ||
  fail "node2's publish file has ipsecNatAddress '$published'"
_outbound() {
  dl_dpuctl "$1" --json ipsec 2>/dev/null |
    jq -e '[.ipsec.sas[]? | select(.state.direction == "OUTBOUND")] | length == 1' >/dev/null
}
check "node1 holds an outbound SA to node2" dl_wait 30 _outbound 1
check "node2 holds an outbound SA to node1" dl_wait 30 _outbound 2

pcap=$DL_DIR/fabric.pcap
rm -f "$pcap"
ip netns exec "$(dl_fabric_ns)" tshark -q -i fabric -w "$pcap" -f "host $t1 and host $pub" >/dev/null 2>&1 &
cap=$!
# dumpcap writes the file's header once the interface is open with its filter: it captures from then on.
_capturing() { [ -s "$pcap" ]; }
dl_wait 10 _capturing || fail "tshark did not start capturing on the fabric"
# Behind a masquerading NAT the NATed node speaks first: nothing reaches it before it sent.
dl_reachable $b "$ip_a" 20 || fail "node2/pod1 (behind the NAT) cannot reach node1/pod1"
out=$(dl_exec $a ping -n -c 5 -i 0.2 -W 2 "$ip_b" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "node1/pod1 pings node2/pod1 through the NAT" ||
  fail "ping node1/pod1 -> node2/pod1: $(tail -n 2 <<< "$out" | tr '\n' ' ')"
out=$(dl_exec $b ping -n -c 5 -i 0.2 -W 2 "$ip_a" 2>&1)
grep -q ' 0% packet loss' <<< "$out" && pass "node2/pod1 pings node1/pod1 through the NAT" ||
  fail "ping node2/pod1 -> node1/pod1: $(tail -n 2 <<< "$out" | tr '\n' ' ')"
mbit=$(dl_tcp $a $b 2M) && pass "TCP node1/pod1 -> node2/pod1 through the NAT: 2 MB at $mbit Mbit/s" ||
  fail "TCP node1/pod1 -> node2/pod1 failed"
mbit=$(dl_tcp $b $a 2M) && pass "TCP node2/pod1 -> node1/pod1 through the NAT: 2 MB at $mbit Mbit/s" ||
  fail "TCP node2/pod1 -> node1/pod1 failed"
# With nothing else to send, each node sends a keepalive every second (natKeepaliveSeconds: 1). The capture
# runs until it holds the last ESP packet each node sent and two keepalives each way, and both nodes have
# sent three and counted two received (bounded: the checks below then say what is missing).
ts() { tshark -r "$pcap" "$@" 2>/dev/null; }
stat() { dl_dpuctl "$1" stats --all 2>/dev/null | awk -v r="$2" '$1 == r { print $2; exit }'; }
_keepalives() {
  local n seen
  for n in 1 2; do
    [ "$(stat $n ipsec_nat_keepalives_sent)" -ge 3 ] && [ "$(dl_drop_count $n IpsecNatKeepalive)" -ge 2 ] || return 1
  done
  seen=$(ts -Y "udpencap.nat_keepalive && udp.length == 9" -T fields -e ip.src)
  [ "$(grep -cx "$t1" <<< "$seen")" -ge 2 ] && [ "$(grep -cx "$pub" <<< "$seen")" -ge 2 ]
}
dl_ipsec_caught_up "$pcap" || fail "the fabric capture did not catch up with the traffic in 10 s"
dl_wait 15 _keepalives || fail "15 s after the traffic: not two NAT keepalives each way on the fabric, or too few counted by the nodes (below)"
kill -INT $cap 2>/dev/null
wait $cap 2>/dev/null
# tshark's capture child (dumpcap) writes the file and may outlive it by a few
# packets: every count below must read the same, final capture.
dl_capture_written "$pcap" || fail "the capture's dumpcap did not stop"

# The fabric carries ESP in UDP between node1 and the NAT's public address only.
esp=$(dl_pcap_frames "$pcap" -Y "udp && esp && ip.src == $t1 && ip.dst == $pub")
esp_back=$(dl_pcap_frames "$pcap" -Y "udp && esp && ip.src == $pub && ip.dst == $t1")
bare=$(dl_pcap_frames "$pcap" -Y "esp && !udp")
plain=$(dl_pcap_frames "$pcap" -Y "udp.port == 6081 || geneve")
private=$(dl_pcap_frames "$pcap" -Y "ip.addr == $t2")
[ "$esp" -gt 100 ] && [ "$esp_back" -gt 100 ] &&
  pass "ESP in UDP both ways between node1 and the NAT ($esp and $esp_back packets)" ||
  fail "ESP in UDP on the fabric: $esp to the NAT, $esp_back from it"
[ "$bare" = 0 ] && [ "$plain" = 0 ] && [ "$private" = 0 ] &&
  pass "no bare ESP, no plaintext Geneve, no private address on the public side" ||
  fail "on the fabric: $bare bare ESP, $plain plaintext Geneve, $private with node2's private address"
nat_ports=$(ts -Y "udp && esp && ip.src == $pub" -T fields -e udp.srcport | sort -u | tr '\n' ' ')
to_ports=$(ts -Y "udp && esp && ip.dst == $pub" -T fields -e udp.dstport | sort -u | tr '\n' ' ')
from_4500=$(ts -Y "udp && esp && ip.src == $t1" -T fields -e udp.srcport | sort -u | tr '\n' ' ')
[ "$from_4500" = "4500 " ] && pass "node1 sends from port 4500" || fail "node1's ESP in UDP source ports: $from_4500"
if [ "$DL_NAT_MODE" = masquerade ]; then
  port=${nat_ports% }
  [[ "$port" =~ ^145[0-9][0-9]$ ]] && [ "$to_ports" = "$nat_ports" ] &&
    pass "the NAT moved node2's port 4500 to $port and node1 sends there (learned)" ||
    fail "ports: node2 appears as $nat_ports, node1 sends to $to_ports"
else
  port=4500
  [ "$nat_ports" = "4500 " ] && [ "$to_ports" = "4500 " ] && pass "a static NAT keeps port 4500 both ways" ||
    fail "ports: node2 appears as $nat_ports, node1 sends to $to_ports"
fi
shown=$(dl_dpuctl 1 ipsec | sed -n 's/^  node2 at //p')
[ "$shown" = "$pub:$port" ] && pass "dpuctl ipsec on node1: node2 at $shown" || fail "dpuctl ipsec on node1 shows node2 at '$shown'"

# The SA keys from the key files (and the lab's PSK) decrypt every ESP packet; on the fabric node2 is the
# NAT's public address. tshark decrypts; Debian's tshark (Wireshark 4.0) has no ESN in its SA table, so it
# cannot check an ICV of ours (esp.icv_good) and scapy checks every one (esp_udp_verify.py).
keys=$(/usr/bin/python3 "$src/tests/dpu-agent/ipsec/ipsec_keys.py" --psk "$DL_DIR/ipsec.psk" \
  node1="$DL_DIR/n1/agent-state/ipsec/keys.json" node2="$DL_DIR/n2/agent-state/ipsec/keys.json") ||
  fail "ipsec_keys.py could not compute the SAs from the key files"
seen() { [ "$1" = node1 ] && echo "$t1" || echo "$pub"; }
uat=()
while read -r line; do
  [ -n "$line" ] || continue
  s=$(seen "$(jq -r .from <<< "$line")") d=$(seen "$(jq -r .to <<< "$line")")
  uat+=(-o "uat:esp_sa:\"IPv4\",\"$s\",\"$d\",\"0x$(jq -r .spi <<< "$line")\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x$(jq -r .key <<< "$line")$(jq -r .salt <<< "$line")\",\"NULL\",\"\"")
done <<< "$keys"
decode=(-o esp.enable_encryption_decode:TRUE "${uat[@]}")
opened=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "udp && esp && geneve")
closed=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "udp && esp && !geneve")
icmp=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "geneve && icmp && ip.src == $ip_a && ip.dst == $ip_b")
tcp=$(dl_pcap_frames "$pcap" "${decode[@]}" -Y "geneve && tcp && ip.src == $ip_b && ip.dst == $ip_a")
[ "$opened" = $(( esp + esp_back )) ] && [ "$closed" = 0 ] &&
  pass "tshark decrypted all $opened ESP in UDP packets to Geneve with the independently derived keys" ||
  fail "tshark decrypted $opened of $(( esp + esp_back )) ESP packets ($closed not)"
[ "$icmp" -ge 5 ] && [ "$tcp" -gt 50 ] && pass "inside: the pods' ICMP ($icmp) and TCP ($tcp)" ||
  fail "inside the decrypted Geneve: $icmp ICMP $ip_a -> $ip_b, $tcp TCP $ip_b -> $ip_a"
echo "$keys" > "$DL_DIR/sas.jsonl"
verified=$(/usr/bin/python3 "$_LAB_TESTS_SRC/esp_udp_verify.py" "$pcap" "$DL_DIR/sas.jsonl") &&
  [ "$verified" = "authenticated $(( esp + esp_back )) failed 0 unknown-spi 0 geneve $(( esp + esp_back ))" ] &&
  pass "scapy authenticated every ICV (ESN) with the same keys: $verified" || fail "scapy: $verified"

# Keepalives: one 0xff byte in UDP 4500, through the NAT both ways, counted at both ends.
ka_out=$(dl_pcap_frames "$pcap" -Y "udpencap.nat_keepalive && udp.length == 9 && ip.src == $t1")
ka_in=$(dl_pcap_frames "$pcap" -Y "udpencap.nat_keepalive && udp.length == 9 && ip.src == $pub")
[ "$ka_out" -ge 2 ] && [ "$ka_in" -ge 2 ] && pass "NAT keepalives on the fabric: $ka_out from node1, $ka_in from node2" ||
  fail "NAT keepalives on the fabric: $ka_out from node1, $ka_in from node2"
for n in 1 2; do
  sent=$(stat $n ipsec_nat_keepalives_sent) got=$(dl_drop_count $n IpsecNatKeepalive) other=$(dl_drop_count $n IpsecNatTNonEsp)
  [ "${sent:-0}" -ge 3 ] && [ "${got:-0}" -ge 2 ] && [ "${other:-0}" = 0 ] &&
    pass "node$n sent $sent keepalives and counted $got received (IpsecNatKeepalive), no other non-ESP" ||
    fail "node$n: keepalives sent ${sent:-?}, received ${got:-?}, other non-ESP ${other:-?}"
done

# node1's dataplane killed and started again (IPsec on): its outbound SA starts above its sequence mark,
# less than 2^32 ahead of what node2 saw, so node2's ESN receiver follows (no lock-out, no ICV failure);
# it sends to the port it had learned, kept in its file, before node2 sends it anything (a masquerading
# NAT drops what arrives for its port 4500).
icv0=$(dl_drop_count 2 EspAuthFailed)
dl_daemon_stop 1 dataplane -9
dl_daemon_start 1 dataplane || fail "dpu-dataplane of node1 did not start again"
check "node1's new dataplane holds an outbound SA to node2" dl_wait 30 _outbound 1
shown=$(dl_dpuctl 1 ipsec | sed -n 's/^  node2 at //p')
[ "$shown" = "$pub:$port" ] && pass "after a dataplane restart node1 sends to node2 at $shown at once (kept)" ||
  fail "after a dataplane restart dpuctl ipsec on node1 shows node2 at '$shown' (want $pub:$port)"
# node2 sends nothing on its own that could teach node1 a port (its keepalives are not authenticated),
# so a reply means the port kept and an SA node2 authenticates.
_pings() { dl_exec $a ping -c 1 -W 1 "$ip_b" >/dev/null 2>&1; }
t0=$EPOCHREALTIME
check "node1/pod1 pings node2/pod1 through the NAT after the restart" dl_wait 15 _pings
echo "FIGURE: IPsec through a $DL_NAT_MODE NAT: node2 reached $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }') ms after node1's restarted dataplane held its SAs"
icv=$(( $(dl_drop_count 2 EspAuthFailed) - icv0 ))
[ "$icv" = 0 ] && pass "node2 authenticated every packet of node1's restarted dataplane (EspAuthFailed +0)" ||
  fail "node2 counted $icv ICV failures from node1's restarted dataplane (a sequence jump its receiver cannot follow)"
finish
