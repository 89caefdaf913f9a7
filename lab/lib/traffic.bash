# lab/lib/traffic.bash — traffic between lab endpoints and what it measures:
# ping (loss, RTT), a TCP transfer and a UDP stream with iperf3, the
# connectivity matrix over a list of endpoints, and packet captures with
# tshark. Endpoints are exec targets (nodeN/POD, nodeN/host = the host through
# its management port). Sourced by lab/lib/lab.bash.
#
# Functions (public):
#   dl_target_ip TARGET              the IPv4 address others reach TARGET at (pod eth0, dpu-mgmt for nodeN/host,
#                                    203.0.113.1 for external: off the node network, through its gateway)
#   dl_reachable SRC IP [TRIES]      true once one ping answers (the first may wait for ARP)
#   dl_ping SRC IP [COUNT] [INTERVAL]  prints "LOSS% AVG_RTT_MS" (RTT "-" when nothing came back)
#   dl_tcp SRC DST [BYTES]           iperf3 TCP SRC -> DST, prints "MBIT_S" (fails when the transfer fails)
#   dl_udp SRC DST [MBIT] [BYTES]    iperf3 UDP SRC -> DST at MBIT Mbit/s (50), BYTES (3M), prints "LOSS% MBIT_S"
#   dl_matrix TARGET...              every ordered pair: ping, TCP, UDP; a table on stdout;
#                                    returns the number of pairs that failed (after DL_MATRIX_RETRIES=1 retry);
#                                    DL_TCP_BYTES (20M), DL_UDP_MBIT (50), DL_UDP_BYTES (3M) size the transfers
#   dl_capture TARGET COUNT [TSHARK ARGS...]   tshark -c COUNT on fabric (the bridge), nodeN/POD (eth0),
#                                    nodeN/host (dpu-mgmt) or nodeN/dpu (uplink0)
#   dl_capture_start TARGET COUNT OUTFILE [ARGS...]  the same in the background, returns once capturing
#                                    (pid in DL_CAPTURE_PID);  dl_capture_wait PID [SECONDS]
#   dl_capture_written PCAP          true once no dumpcap writes PCAP (within 10 s): read a file capture after it
#   dl_pcap_frames PCAP [TSHARK ARGS...]  how many frames of PCAP the args (-Y FILTER, -o ...) select
#   dl_pcap_frame_numbers PCAP [TSHARK ARGS...]  their frame numbers, one a line
# (The fabric bridge is promiscuous while tshark runs on it, so it sees every frame it forwards.)

dl_target_ip() {
  local t=$1 n
  if [ "$t" = external ]; then dl_external_ip; return; fi
  if [[ "$t" == */host ]]; then
    n=$(dl_node_ref "${t%%/*}") || return 1
    dl_mgmt_ip "$n"
  else
    dl_target_ns "$t" >/dev/null || return 1
    n=$(dl_node_ref "${t%%/*}")
    dl_pod_ip "$n" "${t#*/}"
  fi
}

dl_reachable() {
  local src=$1 ip=$2 tries=${3:-10} i
  for (( i = 0; i < tries; i++ )); do
    dl_exec "$src" ping -c 1 -W 1 "$ip" >/dev/null 2>&1 && return 0
  done
  return 1
}

dl_ping() {
  local src=$1 ip=$2 count=${3:-5} interval=${4:-0.2} out loss rtt
  out=$(dl_exec "$src" ping -n -q -c "$count" -i "$interval" -W 1 "$ip" 2>&1)
  loss=$(sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p' <<< "$out")
  rtt=$(sed -n 's|^rtt [^=]*= [0-9.]*/\([0-9.]*\)/.*|\1|p' <<< "$out")
  echo "${loss:-100} ${rtt:--}"
}

# An iperf3 server for one test in DST's netns; the client runs in SRC's.
_dl_iperf() {
  local src=$1 dst=$2; shift 2
  local ip dns port=5201 spid out
  ip=$(dl_target_ip "$dst") || return 1
  dns=$(dl_target_ns "$dst") || return 1
  ip netns exec "$dns" iperf3 -s -1 -p $port >/dev/null 2>&1 &
  spid=$!
  if ! dl_wait 5 _dl_listening "$dns" $port; then kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; return 1; fi
  out=$(dl_exec "$src" timeout 20 iperf3 -c "$ip" -p $port -J --connect-timeout 3000 "$@" 2>/dev/null)
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
  echo "$out"
}

_dl_listening() { [ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2")" ]; }

dl_tcp() {
  local src=$1 dst=$2 bytes=${3:-20M} out
  out=$(_dl_iperf "$src" "$dst" -n "$bytes") || return 1
  jq -e '.error == null and .end.sum_received.bytes > 0' <<< "$out" >/dev/null 2>&1 || return 1
  jq -r '.end.sum_received.bits_per_second / 1e6 | . * 10 | round / 10' <<< "$out"
}

dl_udp() {
  local src=$1 dst=$2 mbit=${3:-50} bytes=${4:-3M} out
  out=$(_dl_iperf "$src" "$dst" -u -b "${mbit}M" -n "$bytes" -l 1200) || return 1
  jq -e '.error == null and .end.sum.packets > 0' <<< "$out" >/dev/null 2>&1 || return 1
  jq -r '"\(.end.sum.lost_percent | . * 10 | round / 10) \(.end.sum.bits_per_second / 1e6 | . * 10 | round / 10)"' <<< "$out"
}

# One pair: prints the table row, true when it passed.
_dl_matrix_pair() {
  local src=$1 dst=$2 note=$3 ip ping loss rtt tcp udp uloss ok=ok
  ip=$(dl_target_ip "$dst")
  if [ -z "$ip" ] || ! dl_reachable "$src" "$ip" 5; then
    printf '%-26s %9s %9s %12s %9s  %s\n' "$src -> $dst" 100% - - - "FAIL (unreachable)$note"
    return 1
  fi
  ping=$(dl_ping "$src" "$ip" 5 0.05); loss=${ping% *}; rtt=${ping#* }
  tcp=$(dl_tcp "$src" "$dst" "${DL_TCP_BYTES:-20M}") || { tcp=FAIL; ok="FAIL (tcp)"; }
  udp=$(dl_udp "$src" "$dst" "${DL_UDP_MBIT:-50}" "${DL_UDP_BYTES:-3M}") || { udp="FAIL -"; ok="FAIL (udp)"; }
  uloss=${udp% *}
  [ "$loss" = 0 ] || ok="FAIL (ping loss)"
  printf '%-26s %8s%% %9s %12s %8s%%  %s\n' "$src -> $dst" "$loss" "$rtt" "$tcp" "$uloss" "$ok$note"
  [ "$ok" = ok ]
}

dl_matrix() {
  local bad=0 src dst try
  printf '%-26s %9s %9s %12s %9s  %s\n' "pair" "ping loss" "RTT ms" "TCP Mbit/s" "UDP loss" "result"
  for src in "$@"; do
    for dst in "$@"; do
      [ "$src" = "$dst" ] && continue
      # A failed pair is measured again (DL_MATRIX_RETRIES, default 1) and shows both rows.
      for (( try = 0; ; try++ )); do
        _dl_matrix_pair "$src" "$dst" "$([ $try -gt 0 ] && echo " (retry $try)")" && break
        [ $try -ge "${DL_MATRIX_RETRIES:-1}" ] && { bad=$(( bad + 1 )); break; }
      done
    done
  done
  return $bad
}

_dl_capture_if() {
  case $1 in
    fabric) echo fabric ;;
    */host) echo dpu-mgmt ;;
    */dpu) echo uplink0 ;;
    *) echo eth0 ;;
  esac
}

dl_capture() {
  local t=$1 count=${2:-10} ns; shift 2 2>/dev/null || shift $#
  ns=$(dl_target_ns "$t") || return 1
  command -v tshark >/dev/null || { dl_die "tshark is not installed (scripts/install-deps.sh)"; return 1; }
  # tshark's banner and "Capturing on ..." go to stderr; keep only real errors.
  ip netns exec "$ns" tshark -i "$(_dl_capture_if "$t")" -c "$count" -n -l "$@" \
    2> >(grep -v -e '^Capturing on' -e 'captured$' -e 'Running as user' -e 'Main MESSAGE' -e '^tshark: $' >&2)
}

# dl_capture_start TARGET COUNT OUTFILE [TSHARK ARGS...] — a capture in the
# background that is already capturing when this returns (tshark needs a
# second or more to start); its pid in DL_CAPTURE_PID, stderr in OUTFILE.err.
dl_capture_start() {
  local t=$1 count=$2 out=$3 ns; shift 3
  ns=$(dl_target_ns "$t") || return 1
  : > "$out.err"
  ip netns exec "$ns" tshark -i "$(_dl_capture_if "$t")" -c "$count" -n -l "$@" > "$out" 2> "$out.err" &
  DL_CAPTURE_PID=$!
  dl_wait 20 grep -q '^Capturing on' "$out.err" || { dl_die "tshark on $t did not start: $(cat "$out.err")"; return 1; }
}

# dl_capture_written PCAP — tshark's capture child (dumpcap) writes a file
# capture and may outlive tshark by a few packets: true once it has let go of
# PCAP (within 10 s), so every read after it sees the same, final file.
_dl_no_dumpcap() { ! pgrep -f "dumpcap .*-w $1" >/dev/null; }
dl_capture_written() { dl_wait 10 _dl_no_dumpcap "$1"; }

# dl_pcap_frames PCAP [TSHARK ARGS...] — the number of frames the args select,
# read as one frame number per line: `wc -l` of tshark's summary lines counts
# lines, and a summary's Info column shows whatever the payload decodes to.
dl_pcap_frame_numbers() {
  local pcap=$1
  shift
  tshark -r "$pcap" -n "$@" -T fields -e frame.number 2>/dev/null
}
dl_pcap_frames() { dl_pcap_frame_numbers "$@" | wc -l; }

# dl_capture_wait PID [SECONDS] — wait for a background capture to finish (default 5 s), then stop it.
dl_capture_wait() {
  local pid=$1 secs=${2:-5} i
  for (( i = 0; i < secs * 10; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  return 0
}
