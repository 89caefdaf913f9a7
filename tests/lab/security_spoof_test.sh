#!/usr/bin/env bash
# Lab e2e, security: port security on the representors. 2 nodes; attacker
# node1/x, victim node1/v on the same DPU, target node2/t across the fabric.
# The attacker sends hand-made frames with scapy (/usr/bin/python3 in its
# netns) while tshark captures on the victim's and the target's eth0, on the
# attacker's eth0 and on the fabric. Proves:
#  - legitimate frames of the same script (own MAC and IP) do arrive: the
#    captures would see a spoofed one that got through;
#  - a packet with the victim's (or the remote target's) IP as source, a frame
#    with the victim's MAC as source, and ARP claiming the victim's address
#    (request to the gateway, gratuitous reply) reach no one: nothing on the
#    victim, the target or the fabric, no ARP answer to the attacker;
#  - node1's `dpuctl stats` counts each: PortSecurityIp, PortSecurityMac and
#    PortSecurityArp grow by at least the number of frames sent;
#  - afterwards the attacker's own traffic still works and the victim is
#    reachable at its address (no poisoned state anywhere).
source "$(dirname "$0")/common.bash" sec
/usr/bin/python3 -c 'import scapy.all' 2>/dev/null || skip_test "scapy is not installed for /usr/bin/python3 (python3-scapy)"
command -v tshark >/dev/null || skip_test "tshark is not installed"
DL_VFS=4 lab_test_up 2 0

ip_x=$(dl_pod_add 1 x) || fail "pod add node1/x"
ip_v=$(dl_pod_add 1 v) || fail "pod add node1/v"
ip_t=$(dl_pod_add 2 t) || fail "pod add node2/t"
check "node1/x reaches node2/t" dl_reachable node1/x "$ip_t" 10
check "node1/x reaches node1/v" dl_reachable node1/x "$ip_v" 10
mac_of() { ip -n "$(dl_pod_ns "$1" "$2")" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2; }
mac_x=$(mac_of 1 x); mac_v=$(mac_of 1 v)
gw=$(ip -n "$(dl_pod_ns 1 x)" -4 route show default | awk '{print $3; exit}')
gw_mac=$(ip -n "$(dl_pod_ns 1 x)" neigh show "$gw" | grep -o 'lladdr [0-9a-f:]*' | cut -d' ' -f2)
[ -n "$mac_x" ] && [ -n "$mac_v" ] && [ -n "$gw" ] && [ -n "$gw_mac" ] ||
  { fail "attacker MAC '$mac_x', victim MAC '$mac_v', gateway '$gw' at '$gw_mac': cannot build the frames"; finish; }
echo "  attacker x $ip_x $mac_x, victim v $ip_v $mac_v, target t $ip_t, gateway $gw $gw_mac"

# The frames; ICMP ids tell the kinds apart in the captures.
py=$DL_DIR/spoof.py
cat > "$py" <<'PY'
import sys
from scapy.all import ARP, Ether, ICMP, IP, Raw, sendp
kinds, mac_x, ip_x, mac_v, ip_v, ip_t, gw, gw_mac = sys.argv[1:9]
def frames_of(kind):
    def echo(src_mac, src_ip, dst_ip, ident):
        return [Ether(src=src_mac, dst=gw_mac) / IP(src=src_ip, dst=dst_ip) / ICMP(id=ident, seq=i) / Raw(b"flt9-" + kind.encode())
                for i in range(10)]
    return {
        # Legitimate: own MAC and IP, to the target across the fabric and to the victim.
        # And an ARP request for the gateway from its own address (answered: the attacker's capture sees answers).
        "legit": echo(mac_x, ip_x, ip_t, 0x1001) + echo(mac_x, ip_x, ip_v, 0x1001)
               + [Ether(src=mac_x, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=mac_x, psrc=ip_x, pdst=gw) for _ in range(5)],
        # The victim's IP towards the target, the target's IP towards the victim.
        "ip": echo(mac_x, ip_v, ip_t, 0x2002) + echo(mac_x, ip_t, ip_v, 0x2002),
        # The victim's MAC, with the attacker's IP and with the victim's.
        "mac": echo(mac_v, ip_x, ip_t, 0x3003) + echo(mac_v, ip_v, ip_t, 0x3003),
        # ARP for the victim's address: who-has gateway tell victim; gratuitous reply; victim's MAC inside.
        "arp": [Ether(src=mac_x, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=mac_x, psrc=ip_v, pdst=gw) for _ in range(10)]
             + [Ether(src=mac_x, dst="ff:ff:ff:ff:ff:ff") / ARP(op=2, hwsrc=mac_x, psrc=ip_v, hwdst="ff:ff:ff:ff:ff:ff", pdst=ip_v)
                for _ in range(10)]
             + [Ether(src=mac_x, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=mac_v, psrc=ip_x, pdst=gw) for _ in range(10)],
        # Sent last, legitimate again: they take the same port and the same path as
        # the spoofed frames, after them, so once they arrived everywhere (and the
        # ARP one is answered), any spoofed frame that got through has too.
        "mark": echo(mac_x, ip_x, ip_t, 0x4004) + echo(mac_x, ip_x, ip_v, 0x4004)
              + [Ether(src=mac_x, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=mac_x, psrc=ip_x, pdst=gw)],
    }[kind]
# One scapy start for all the kinds, in order: each start takes seconds on a loaded machine.
for kind in kinds.split(","):
    frames = frames_of(kind)
    sendp(frames, iface="eth0", inter=0.005, verbose=False)
    print(kind, len(frames), flush=True)
PY
send() { dl_exec node1/x /usr/bin/python3 "$py" "$1" "$mac_x" "$ip_x" "$mac_v" "$ip_v" "$ip_t" "$gw" "$gw_mac"; }

# Captures: ICMP ids and ARP on the pods, Geneve on the fabric (the inner packet's fields); each
# stops by itself after 170 s (ctest's timeout for the test is 180) should the test die before
# stopping it, and not before: a capture that ended early would make the checks below vacuous.
fields=(-a duration:170 -T fields -E separator=' ' -e eth.src -e ip.src -e ip.dst -e icmp.ident -e arp.opcode -e arp.src.proto_ipv4 -e arp.dst.proto_ipv4)
dl_capture_start node1/v 100000 "$DL_DIR/cap-v" -f "icmp or arp" "${fields[@]}" || fail "capture on node1/v"; cap_v=$DL_CAPTURE_PID
dl_capture_start node2/t 100000 "$DL_DIR/cap-t" -f "icmp or arp" "${fields[@]}" || fail "capture on node2/t"; cap_t=$DL_CAPTURE_PID
dl_capture_start node1/x 100000 "$DL_DIR/cap-x" -f "arp" "${fields[@]}" || fail "capture on node1/x"; cap_x=$DL_CAPTURE_PID
dl_capture_start fabric 100000 "$DL_DIR/cap-f" -f "udp port 6081" "${fields[@]}" || fail "capture on the fabric"; cap_f=$DL_CAPTURE_PID

reasons=(PortSecurityIp PortSecurityMac PortSecurityArp)
declare -A before
for r in "${reasons[@]}"; do before[$r]=$(dl_drop_count 1 "$r"); done
sent=$(send legit,ip,mac,arp,mark) || fail "scapy could not send the frames (it sent: $(tr '\n' ' ' <<< "$sent"))"
while read -r k n; do echo "  sent $n '$k' frames from node1/x"; done <<< "$sent"
[ "$(wc -l <<< "$sent")" = 5 ] || fail "scapy sent $(wc -l <<< "$sent") of the 5 kinds of frames"
count() { grep -cw -- "$2" "$DL_DIR/cap-$1"; }   # lines of capture $1 with the word $2
# ARP replies to the attacker's own address (its capture also holds what it sent: an answer comes from another MAC).
answers_to_x() { awk -v ip="$ip_x" -v m="$mac_x" '$1 != m && $NF == ip && $(NF-2) == 2' "$DL_DIR/cap-x" | grep -c .; }
# The marks (ICMP id 0x4004 = 16388) on the victim, the target and the fabric, and the gateway's answer
# to the marking ARP request after those to the 5 legitimate ones.
marked() { [ "$(count v 16388)" -ge 1 ] && [ "$(count t 16388)" -ge 1 ] && [ "$(count f 16388)" -ge 1 ] && [ "$(answers_to_x)" -ge 6 ]; }
dl_wait 30 marked || fail "the marking frames sent last did not all arrive (victim $(count v 16388), target $(count t 16388), fabric $(count f 16388), ARP answers $(answers_to_x) of 6): the captures may be incomplete"
for p in $cap_v $cap_t $cap_x $cap_f; do dl_capture_wait "$p" 0; done
# Positive control: the legitimate frames arrive where they were sent (ICMP id 0x1001 = 4097).
[ "$(count t 4097)" -ge 10 ] && pass "the target saw the 10 legitimate echo requests (the capture works)" ||
  fail "the target saw $(count t 4097) of 10 legitimate echo requests: the negative checks below would prove nothing"
[ "$(count v 4097)" -ge 10 ] && pass "the victim saw the 10 legitimate echo requests" ||
  fail "the victim saw $(count v 4097) of 10 legitimate echo requests"
[ "$(count f 4097)" -ge 10 ] && pass "the fabric carried the legitimate echo requests (Geneve)" ||
  fail "the fabric carried $(count f 4097) legitimate echo requests, expected 10 or more"

# IP spoofing: id 0x2002 = 8194.
for c in v t f; do
  n=$(count $c 8194)
  [ "$n" = 0 ] && pass "IP-spoofed packets: none on $c" || fail "IP-spoofed packets reached $c: $n ($(grep -w 8194 "$DL_DIR/cap-$c" | head -n 2 | tr '\n' ';'))"
done
# MAC spoofing: id 0x3003 = 12291.
for c in v t f; do
  n=$(count $c 12291)
  [ "$n" = 0 ] && pass "MAC-spoofed frames: none on $c" || fail "MAC-spoofed frames reached $c: $n"
done
# ARP: nothing claiming the victim's address anywhere, no answer to a spoofed request.
for c in v t f; do
  n=$(awk -v ip="$ip_v" -v m="$mac_x" 'index($1, m) && $0 ~ ip' "$DL_DIR/cap-$c" | grep -c .)
  [ "$n" = 0 ] && pass "spoofed ARP: none on $c" || fail "spoofed ARP reached $c: $n"
done
n=$(awk -v ip="$ip_v" -v m="$mac_x" '$1 != m && $NF == ip && $(NF-2) == 2' "$DL_DIR/cap-x" | grep -c .)
k=$(answers_to_x)
[ "$k" -ge 5 ] && pass "the gateway answered the attacker's 5 legitimate ARP requests ($k answers)" ||
  fail "the attacker's capture shows $k answers to its 5 legitimate ARP requests: the next check would prove nothing"
[ "$n" = 0 ] && pass "the attacker got no ARP answer addressed to the victim's IP" ||
  fail "the gateway answered the spoofed ARP: $n replies to $ip_v"

declare -A want=([PortSecurityIp]=20 [PortSecurityMac]=20 [PortSecurityArp]=30)
for r in "${reasons[@]}"; do
  after=$(dl_drop_count 1 "$r")
  d=$(( after - before[$r] ))
  [ "$d" -ge "${want[$r]}" ] && pass "dpuctl stats on node1: $r +$d (${want[$r]} frames sent)" ||
    fail "dpuctl stats on node1: $r +$d, expected at least +${want[$r]} ($(dl_dpuctl 1 stats 2>&1 | grep -i secur | tr -s ' ' | tr '\n' ';'))"
done

check "node1/x still reaches node2/t with its own address" dl_reachable node1/x "$ip_t" 5
check "node2/t reaches the victim node1/v" dl_reachable node2/t "$ip_v" 5
check "node1/v reaches node2/t" dl_reachable node1/v "$ip_t" 5
finish
