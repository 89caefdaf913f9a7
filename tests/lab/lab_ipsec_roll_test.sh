#!/usr/bin/env bash
# Lab e2e: IPsec turned on, rotated and turned off on a running 2-node lab (docs/ipsec.md, "Rollout").
# Proves, with a 10 ms ping between the nodes' pods running throughout and every lost reply counted:
#  - `dpu-lab ipsec enable` (off -> keys -> on with rollout -> on, node by node, each agent restarted with
#    its new config) loses no ping, and the fabric carries only ESP after it;
#  - a key rotation on node1 (`dpu-lab ipsec rotate`: dpuctl ipsec rotate) under the ping and an iperf3 TCP transfer
#    loses no ping, leaks no plaintext Geneve onto the fabric (tshark), and ends with every SA of the
#    pair on node1's new epoch (FIGURE: time from the rotation to that); the transfer's retransmits are
#    printed (its path MTU is learned by a short transfer before);
#  - an ESP packet replayed from the capture and one tampered with are dropped by node1 and counted
#    (EspReplay, EspAuthFailed);
#  - `dpu-lab ipsec disable` (rollout, on -> keys, each node encrypting until its peers have seen it
#    advertise keys, -> off) loses no ping, and the fabric carries plaintext Geneve again.
source "$(dirname "$0")/common.bash" iroll
command -v tshark >/dev/null || skip_test "tshark is not installed (scripts/install-deps.sh)"
command -v iperf3 >/dev/null || skip_test "iperf3 is not installed (scripts/install-deps.sh)"
export DL_IPSEC=false DL_IPSEC_GRACE=3
lab_test_up 2 1

a=node1/pod1 b=node2/pod1
ip_b=$(dl_pod_ip 2 pod1)
t1=$(dl_tunnel_ip 1) t2=$(dl_tunnel_ip 2)
dl_reachable $a "$ip_b" 20 || fail "node1/pod1 cannot reach node2/pod1 before IPsec"

# A 10 ms ping across the nodes; its missing replies are the packets lost either way.
ping_out=$DL_DIR/ping.out
ping_begin() { ping_t0=$(date +%s%N); : > "$ping_out"; dl_ping_start $a "$ip_b" 1000000 0.01 "$ping_out"; ping_pid=$DL_PING_PID
  dl_ping_await "$ping_out" 1 || fail "the ping did not start"; }
ping_end() {  # WHAT
  # The ping runs on a little after the operation, then stops; a request still on its way at that moment
  # (after the last reply) is not a loss, every gap before the last reply is.
  dl_ping_await "$ping_out" $(( $(dl_ping_replies "$ping_out") + 50 ))
  dl_ping_stop "$ping_pid"
  local r missing
  r=$(dl_ping_result "$ping_out")
  missing=$(awk '/icmp_seq=/ { s = $0; sub(/.*icmp_seq=/, "", s); sub(/ .*/, "", s); got[s + 0] = 1; if (s + 0 > max) max = s + 0 }
                 END { for (i = 1; i <= max; i++) if (!(i in got)) printf "%d ", i }' "$ping_out")
  [ -n "$r" ] && [ -z "$missing" ] &&
    pass "$1: 0 of ${r%% *} pings (10 ms) lost over $(( ($(date +%s%N) - ping_t0) / 1000000 )) ms" ||
    fail "$1: pings lost (transmitted received: ${r:-none}; missing icmp_seq: ${missing:-?})"
}
_published() { [ "$(dl_ipsec_published_mode "$1")" = "$2" ]; }
# The fabric between the two tunnel IPs, into a libpcap file (the replay below reads it raw).
# dumpcap writes the file's header once the interface is open with its filter: it captures from then on.
cap_begin() { cap_file=$1; rm -f "$cap_file"; ip netns exec "$(dl_fabric_ns)" tshark -q -i fabric -F pcap -w "$cap_file" \
  -f "host $t1 and host $t2" >/dev/null 2>&1 & cap_pid=$!
  _capturing() { [ -s "$cap_file" ]; }; dl_wait 10 _capturing || fail "tshark did not start on the fabric"; }
# cap_end esp | cap_end geneve N: stops the capture once it has caught up with the traffic before it (dumpcap
# writes its file every half second): it holds the last ESP packet each node sent, or N plaintext Geneve
# packets; then waits for dumpcap, which writes the file and may outlive tshark, to be done with it.
_geneve_on_file() { [ "$(count "$cap_file" "udp.port == 6081")" -ge "$1" ]; }
cap_end() {
  if [ "$1" = esp ]; then
    dl_ipsec_caught_up "$cap_file" || fail "${cap_file##*/} did not catch up with the traffic in 10 s"
  else
    dl_wait 10 _geneve_on_file "$2" || fail "${cap_file##*/} holds fewer than $2 plaintext Geneve packets after 10 s"
  fi
  kill -INT "$cap_pid" 2>/dev/null; wait "$cap_pid" 2>/dev/null
  dl_capture_written "$cap_file" || fail "the capture's dumpcap did not stop writing ${cap_file##*/}"
}
count() { dl_pcap_frames "$1" -Y "$2"; }

# --- enable ---------------------------------------------------------------------------------------------
ping_begin
out=$(dl_ipsec_enable 2>&1) || fail "dpu-lab ipsec enable: $(tail -n 3 <<< "$out" | tr '\n' ' ')"
check "node1 publishes mode on" dl_wait 30 _published 1 on
check "node2 publishes mode on" dl_wait 30 _published 2 on
ping_end "ipsec enable (off -> keys -> on, node by node)"
grep -q 'rollout: true' "$DL_DIR/n1/agent.yaml" && fail "node1 still runs with rollout: true after enable" ||
  pass "after enable the nodes run mode on without rollout (fail closed)"
plain_drops=$(( $(dl_drop_count 1 IpsecPlaintext) + $(dl_drop_count 2 IpsecPlaintext) ))
[ "$plain_drops" = 0 ] && pass "no plaintext dropped during the rollout" || fail "$plain_drops plaintext packets dropped"

# --- rotation under traffic -------------------------------------------------------------------------------
_epoch() { dl_ipsec_epochs "$1" | awk '{ print $1 }'; }
old=$(_epoch 1)
[[ "$old" =~ ^[0-9]+$ ]] && [ "$old" -ge 1 ] || fail "node1's current epoch: '$old'"
new=$(( old + 1 ))
# The pods were made while IPsec was off, with the plaintext MTU: their first large segments to each other
# are answered "fragmentation needed" with the ESP MTU and sent again (docs/ipsec.md, "Rollout"). A short
# transfer learns that path MTU first, so the retransmits counted across the rotation are the rotation's.
dl_tcp_start $b $a 1 "$DL_DIR/warm.json" 5211 100 || fail "iperf3 (path MTU) did not start"
wait "$DL_TCP_PID" 2>/dev/null
warm=$(dl_tcp_wait "$DL_DIR/warm.json") && echo "path MTU learned by a 1 s transfer: ${warm#* } retransmits" ||
  fail "iperf3 before the rotation failed"
cap_begin "$DL_DIR/rotate.pcap"
ping_begin
dl_tcp_start $b $a 12 "$DL_DIR/tcp.json" 5212 100 || fail "iperf3 did not start"
tcp_pid=$DL_TCP_PID
t0=$(date +%s%N)
dl_ipsec_rotate 1 || fail "dpu-lab ipsec rotate node1"
# Every SA of the pair on node1's new epoch: node1 sends with it, node2 sends to it, and node1 no longer
# accepts the old one (retired after the grace period). On the way, the rotation's phases as node1's
# dpuctl ipsec shows them (the agent reports them on its status polls).
phases=""
_rotated() {
  local s1 s2
  s1=$(dl_dpuctl 1 --json ipsec 2>/dev/null) && s2=$(dl_dpuctl 2 --json ipsec 2>/dev/null) || return 1
  phases+=" $(jq -r '.ipsec.rotation | "\(.phase // "none")/\(.current_epoch // 0)/\(.previous_epoch // 0)"' <<< "$s1")"
  jq -e --argjson e "$new" '[.ipsec.sas[]] | length > 0 and all(.local_epoch == $e)' <<< "$s1" >/dev/null &&
    jq -e --argjson e "$new" '[.ipsec.sas[]] | length > 0 and all(.remote_epoch == $e)' <<< "$s2" >/dev/null
}
if dl_wait 60 _rotated; then
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  pass "every SA of node1 and node2 on node1's epoch $new after the rotation"
  # The request went through node1's dataplane, and node1's agent acknowledged taking it.
  dl_dpuctl 1 --json ipsec | jq -e '(.ipsec.rotation_requests // 0 | tonumber) == 1 and
      (.ipsec.rotations_taken // 0 | tonumber) == 1' >/dev/null &&
    pass "dpuctl ipsec on node1: 1 rotation request, taken by the agent" ||
    fail "node1's dataplane rotation counts: $(dl_dpuctl 1 --json ipsec | jq -c '.ipsec | {rotation_requests, rotations_taken}')"
  echo "FIGURE ipsec_rotation_all_sas_new_epoch_ms=$ms (grace period ${DL_IPSEC_GRACE} s)"
  # The phases seen, each once, in order: the grace period with the old epoch still accepted came.
  seen=$(tr ' ' '\n' <<< "$phases" | grep -v '^$' | uniq | tr '\n' ' ')
  grep -q "grace/$new/$old" <<< "$seen" &&
    pass "dpuctl ipsec on node1 showed the grace period: epoch $new in use, $old still accepted ($seen)" ||
    fail "dpuctl ipsec on node1 never showed grace/$new/$old: $seen"
  _idle() { dl_dpuctl 1 --json ipsec 2>/dev/null |
    jq -e --argjson e "$new" '.ipsec.rotation | .phase == "idle" and .current_epoch == $e' >/dev/null; }
  dl_wait 5 _idle && pass "dpuctl ipsec on node1: rotation idle on epoch $new" ||
    fail "node1's rotation after it ended: $(dl_dpuctl 1 --json ipsec | jq -c '.ipsec.rotation')"
else
  fail "not every SA on epoch $new 60 s after the rotation: node1 $(dl_dpuctl 1 --json ipsec | jq -c '[.ipsec.sas[] | [.state.direction, .local_epoch, .remote_epoch]]')"
fi
# The client is this shell's child: waited for here (dl_tcp_wait runs in a subshell, which cannot).
wait "$tcp_pid" 2>/dev/null
tcp=$(dl_tcp_wait "$DL_DIR/tcp.json") && pass "iperf3 node2/pod1 -> node1/pod1 across the rotation: ${tcp% *} Mbit/s, ${tcp#* } retransmits" ||
  fail "iperf3 across the rotation failed (server: $(tail -n 3 "$DL_DIR/tcp.json.server" | tr '\n' ' '))"
ping_end "key rotation on node1 under a ping and iperf3"
cap_end esp
esp=$(count "$DL_DIR/rotate.pcap" esp)
plain=$(count "$DL_DIR/rotate.pcap" "udp.port == 6081")
[ "$esp" -gt 500 ] && [ "$plain" = 0 ] && pass "the fabric carried $esp ESP packets and no plaintext Geneve during the rotation" ||
  fail "fabric during the rotation: $esp ESP, $plain plaintext Geneve"
spis=$(tshark -r "$DL_DIR/rotate.pcap" -Y "esp && ip.dst == $t1" -T fields -e esp.spi 2>/dev/null | sort -u | wc -l)
[ "$spis" -ge 2 ] && pass "node2 -> node1 moved to a new SPI ($spis SPIs seen)" || fail "node2 -> node1 used $spis SPI(s)"

# --- replay and tamper -----------------------------------------------------------------------------------
cap_begin "$DL_DIR/replay.pcap"
dl_exec $a ping -n -c 5 -i 0.2 -W 2 "$ip_b" >/dev/null 2>&1 || fail "ping before the replay"
cap_end esp
replay_before=$(dl_drop_count 1 EspReplay) icv_before=$(dl_drop_count 1 EspAuthFailed)
# The last ESP packet node2 sent to node1, sent again as it was, and again with its sequence number moved
# ahead (a forged header the ICV no longer covers): raw frames on the fabric bridge.
sent=$(ip netns exec "$(dl_fabric_ns)" /usr/bin/python3 - "$DL_DIR/replay.pcap" "$t2" "$t1" <<'PY'
import socket, struct, sys
path, src, dst = sys.argv[1], socket.inet_aton(sys.argv[2]), socket.inet_aton(sys.argv[3])
data = open(path, "rb").read()
off, last = 24, None
while off + 16 <= len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    frame = data[off + 16:off + 16 + incl]
    off += 16 + incl
    if len(frame) > 42 and frame[12:14] == b"\x08\x00" and frame[23] == 50 and frame[26:30] == src and frame[30:34] == dst:
        last = frame
if last is None:
    sys.exit("no ESP packet from %s in the capture" % sys.argv[2])
esp = 14 + (last[14] & 0x0F) * 4
seq = struct.unpack_from("!I", last, esp + 4)[0]
forged = bytearray(last)
struct.pack_into("!I", forged, esp + 4, seq + 100)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("fabric", 0))
s.send(last)
s.send(bytes(forged))
print("seq", seq)
PY
) || fail "could not replay from the capture: $sent"
_counted() { [ "$(dl_drop_count 1 EspReplay)" -gt "$replay_before" ] && [ "$(dl_drop_count 1 EspAuthFailed)" -gt "$icv_before" ]; }
dl_wait 10 _counted && pass "node1 dropped and counted the replayed ESP packet ($sent) and the tampered one" ||
  fail "node1 EspReplay $replay_before -> $(dl_drop_count 1 EspReplay), EspAuthFailed $icv_before -> $(dl_drop_count 1 EspAuthFailed)"
per_sa=$(dl_dpuctl 1 --json ipsec | jq '[.ipsec.sas[].state | ((.replay_drops // 0 | tonumber) + (.icv_failures // 0 | tonumber))] | add')
[ "${per_sa:-0}" -ge 2 ] && pass "node1's inbound SA counts them ($per_sa replay and ICV drops)" ||
  fail "node1's SAs count ${per_sa:-?} replay and ICV drops"

# --- disable ---------------------------------------------------------------------------------------------
ping_begin
out=$(dl_ipsec_disable 2>&1) || fail "dpu-lab ipsec disable: $(tail -n 3 <<< "$out" | tr '\n' ' ')"
ping_end "ipsec disable (on -> keys -> off, node by node)"
cap_begin "$DL_DIR/off.pcap"
dl_exec $a ping -n -c 5 -i 0.2 -W 2 "$ip_b" >/dev/null 2>&1 || fail "ping after disable"
cap_end geneve 10  # the ping's 5 requests and 5 replies
esp=$(count "$DL_DIR/off.pcap" esp) plain=$(count "$DL_DIR/off.pcap" "udp.port == 6081")
[ "$esp" = 0 ] && [ "$plain" -ge 10 ] && pass "after disable the fabric carries plaintext Geneve ($plain), no ESP" ||
  fail "after disable: $esp ESP, $plain plaintext Geneve"
finish
