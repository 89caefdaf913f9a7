#!/usr/bin/env bash
# The datapath benchmark: three forwarders on the same input pcaps
# (net_pcap rx_pcap=...,infinite_rx=1) and net_null output, one forwarding
# core each (CPU 1):
#   testpmd  dpdk-testpmd io forwarding: the I/O ceiling;
#   ours     dpu-dataplane (one worker lcore): VF→VF local, VF→Geneve encap,
#            Geneve decap→VF; 1, 1,000 and 100,000 flows; 64 B and 1400 B;
#            service: TCP ACKs of 1,000 and 100,000 established connections
#            from a pod to a ClusterIP whose backend is on another node (DNAT
#            + Geneve encap);
#   ovs      Open vSwitch 3.1 with DPDK (Debian's ovs-vswitchd-dpdk, run
#            privately in its own network namespace and run directory, one PMD
#            core) with the equivalent OpenFlow rules: dec_ttl + MAC rewrite +
#            output; the same + Geneve tunnel push (VNI, OVN option via
#            tun_metadata); Geneve tunnel pop; for service, OVN's load
#            balancer pipeline: ct(nat) in zone 1, ct(commit,nat(dst=backend))
#            of a new connection, then the Geneve push (ovs_dpdk.bash).
# This machine is shared and its load moves within minutes, so the three run
# back to back on each case, in every round (the order rotating from round to
# round), and the ratios ours/testpmd and ours/OVS are taken within a round.
# Each rate is packets per second that the tool's forwarding thread had its
# core (on-CPU time from schedstat; every tool busy-polls): the time other
# load takes from it does not count, what it does to the caches does; the
# packets per wall-clock second and the share of the core are kept beside it.
# The report gives per case the median of the rounds' ratios with their
# min–max, the median Mpps of each tool, the load the rounds saw, and the
# engine's instructions per packet on that case from callgrind
# (bench/datapath_callgrind.sh: deterministic, once per case; 64 B cases,
# which datapath_engine_bench has). Then the slow path: every packet a new
# flow; flows set up per second, ours (flow cache far smaller than the 50,000
# flows, so every packet misses) and OVS's (flow limit lifted, megaflows
# exact on the UDP ports), back to back. Last, a verdict per target.
# New connections (cases newconn:tcp and newconn:udp, part of the full run;
# about half a minute a round): 600,000 connections from pod A to a ClusterIP
# (ten service ports, backend on node 2: DNAT + Geneve encap), every packet a
# new one (a TCP SYN, or a UDP datagram), the pcap read once (no infinite_rx);
# ours (conntrack and flow cache of 1,048,576 entries, so none is evicted) and
# OVS running ct(commit,nat(dst=BACKEND:PORT)) in OVN's load balancer pipeline
# (flow limit and max-idle lifted in ovs_start), one core each, back to back
# (order rotating). Connections per second the forwarding thread had its core,
# over the samples taken while the count was rising (connections counted:
# ours ConntrackNew, OVS dpctl/ct-get-nconns); target >= 10x OVS.
#   bash bench/datapath.sh                       # every case, 3 rounds (about 40 minutes)
#   DPU_BENCH_QUICK=1 bash bench/datapath.sh     # Geneve encap, 64 B, 1,000 and 100,000 flows, and the slow path
#   DPU_BENCH_CASES="decap:1:64 encap:100000:64" bash bench/datapath.sh   # these cases only
#   DPU_BENCH_CASES="service:1000:64 service:100000:64" bash bench/datapath.sh   # the service cases
#   DPU_BENCH_CASES="newconn:tcp newconn:udp" bash bench/datapath.sh   # new connections per second
# NetworkPolicy (DPU_BENCH_POLICIES=N, e.g. 1000): every case, the slow path
# and the new connections run a fourth tool, "ours-policies": dpu-dataplane
# with pods A and B isolated both ways by N policies, the traffic allowed by
# the last one's rule (bench/datapath_pcaps.py, policy_rules); the report
# gives its rate against ours without policies, within each round.
#   DPU_BENCH_POLICIES=1000 DPU_BENCH_CASES="encap:1000:64 local:1000:64 newconn:tcp" bash bench/datapath.sh
# Where the time goes (DPU_BENCH_PROFILE=1, needs perf): testpmd's and ours'
# forwarding threads are sampled while their rates are measured, and the
# report splits each one's core time per packet between the input PMD, the
# forwarder's own code, the output PMD and the rest (bench/measure.bash).
#   DPU_BENCH_PROFILE=1 DPU_BENCH_CASES="decap:1000:64 decap:100000:64" bash bench/datapath.sh
# Environment: DPU_BUILD (default build/release), DPU_BENCH_SECONDS (measurement
# interval, default 3), DPU_BENCH_RUNS (rounds, default 3), DPU_BENCH_CALLGRIND=0
# (skip callgrind), DPU_BENCH_PROFILE=1 (the split above), DPU_BENCH_RESULTS
# (keep the raw results in this file).
# As root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${DPU_BUILD:-$src/build/release}
source bench/knobs.bash
seconds=$(bench_number DPU_BENCH_SECONDS 3 1 600)
runs=$(bench_number DPU_BENCH_RUNS 3 1 100)
policies=$(bench_number DPU_BENCH_POLICIES 0 0 65536)  # datapath_pcaps.py: one peer address per policy in 172.16.0.0/16
py=/usr/bin/python3
out=$(mktemp -d /tmp/dpu-bench.XXXXXX)
# dpu-dataplane's directory (its sockets, and beside them the connection
# tables' files) on a tmpfs, as /run is on a node: a table file on a disk
# filesystem is written back under traffic, and the worker stalls on it.
dp_home=$(mktemp -d /dev/shm/dpu-bench.XXXXXX)
ovs_ns=dpu-bench-ovs-$$
cleanup() {
  set +e
  # The cases run in command substitutions: their forwarders' pids are in files.
  for f in "$out"/*.pid; do
    [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  ! declare -F ovs_stop > /dev/null || ovs_stop  # sourced only once the cases start
  rm -rf "$out" "$dp_home"
}
trap cleanup EXIT

if [ ! -x "$build/dpu-agent/datapath/dpu-dataplane" ] || [ -z "${DPU_BUILD:-}" ]; then
  [ -d "$build" ] || cmake --preset release >/dev/null
  cmake --build "$build" --target datapath_bench_tools >/dev/null
fi
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
export DPU_PROTO_PY=$out/py

if [ -n "${DPU_BENCH_CASES:-}" ]; then
  cases=$DPU_BENCH_CASES
  # The generator's checks, before any case runs.
  if ! $py bench/datapath_pcaps.py --check "$out/pcap" $cases 2> "$out/check"; then
    sed -n 's/^datapath_pcaps.py: error: /datapath.sh: DPU_BENCH_CASES: /p' "$out/check" >&2
    exit 2
  fi
elif [ -n "${DPU_BENCH_QUICK:-}" ]; then
  cases="encap:1000:64 encap:100000:64"
else
  cases=""
  for s in local encap decap; do for n in 1 1000 100000; do for b in 64 1400; do cases+=" $s:$n:$b"; done; done; done
  for n in 1000 100000; do for b in 64 1400; do cases+=" service:$n:$b"; done; done
  cases+=" newconn:tcp newconn:udp"
fi
echo "== input pcaps" >&2
# Its output only on failure (scapy warns on import).
$py bench/datapath_pcaps.py "$out/pcap" --policies "$policies" $cases 2> "$out/pcaps.log" ||
  { cat "$out/pcaps.log" >&2; echo "datapath.sh: the input pcaps could not be written" >&2; exit 1; }

pool_for() {  # flows → mbufs (2^n - 1): the pcap PMD preloads every packet of the file
  local need=$(($1 + 16384)) n=16383
  while [ $n -lt $need ]; do n=$((n * 2 + 1)); done
  echo $n
}

# --- measuring: thread_ns, sample, rate, dpdk_worker --------------------------
source bench/measure.bash

# --- 1. testpmd io -----------------------------------------------------------
testpmd_case() {  # scenario flows size → rate
  local pcap=$out/pcap/$1-$2-$3.pcap mbufs fifo=$out/testpmd.fifo fd line port= n=0 first= last=
  mbufs=$(($(pool_for "$2") + 1))
  rm -f "$fifo"; mkfifo "$fifo"
  # Line-buffered, so that each statistics block arrives when it is printed.
  stdbuf -oL dpdk-testpmd -l 0,1 --no-huge --no-pci -m 2048 --file-prefix="dpu-bench-tp-$$" \
    --log-level='*:error' --vdev "net_pcap_in,rx_pcap=$pcap,infinite_rx=1" --vdev "net_null_out,no-rx=1" -- \
    --total-num-mbufs="$mbufs" --forward-mode=io --auto-start --stats-period=1 --nb-cores=1 > "$fifo" 2>/dev/null &
  tp_pid=$!
  echo "$tp_pid" > "$out/testpmd.pid"
  exec {fd}< "$fifo"
  # A block per second; its first is the start (forwarding has run for about a second), the last `seconds` later.
  while IFS= read -r -t $((seconds + 60)) -u "$fd" line; do
    case $line in
      *"NIC statistics for port 1 "*) port=1 ;;
      *"NIC statistics for port"*) port= ;;
      *TX-packets:*)
        [ "$port" = 1 ] || continue
        port=
        n=$((n + 1))
        set -- $line
        if [ $n = 1 ]; then
          first="$EPOCHREALTIME $(thread_ns "$tp_pid" "$dpdk_worker") $2"
          profile_start "$tp_pid" "$dpdk_worker" "$seconds" "$out/perf.data"
        elif [ $n = $((seconds + 1)) ]; then
          last="$EPOCHREALTIME $(thread_ns "$tp_pid" "$dpdk_worker") $2"
          break
        fi ;;
    esac
  done
  kill -INT "$tp_pid" 2>/dev/null
  cat <&"$fd" > /dev/null  # its closing output, so that it never writes into a closed pipe
  exec {fd}<&-
  wait "$tp_pid" || true
  rm -f "$out/testpmd.pid"
  profile_stop "$out/perf.data" > "$out/profile"
  if [ -n "$last" ]; then rate "$first" "$last"; else echo "0 0 0"; fi
}

# --- 2. dpu-dataplane --------------------------------------------------------
dp_counter() {  # file ports|stats name: a port's tx_packets or a counter, from dpuctl --json ports|stats
  $py -c "import json,sys; d=json.load(open(sys.argv[1]))
if sys.argv[2] == 'ports': print(next(int(p.get('tx_packets', 0)) for p in d['ports'] if p['name'] == sys.argv[3]))
else: print(next((int(c['value']) for c in d['counters'] if c['name'] == sys.argv[3]), 0))" "$@"
}

# start_dataplane DIR MODEL: dpu-dataplane on DIR/dp.yaml (its pid in
# $dp_pid and $out/dataplane.pid), programmed with MODEL by a full sync.
start_dataplane() {
  local dir=$1 model=$2
  # A fresh dataplane: the connection tables an earlier run left beside the
  # socket would be taken over (a restart keeps its connections), and their
  # connections would count as neither new nor free room.
  rm -f "$dir"/program.sock.conntrack "$dir"/program.sock.affinity "$dir"/program.sock.natt-ports
  "$dataplane" --config "$dir/dp.yaml" > "$dir/dp.log" 2>&1 &
  dp_pid=$!
  echo "$dp_pid" > "$out/dataplane.pid"
  for _ in $(seq 600); do [ -S "$dir/program.sock" ] && break; sleep 0.05; done
  $py tests/dpu-agent/datapath/dataplane_client.py --socket "$dir/program.sock" --model "$model" >/dev/null
}

# ours_case scenario flows size [slow] [policies] → rate (slow: flows set up
# per wall second; policies: the model with DPU_BENCH_POLICIES policies)
ours_case() {
  local scen=$1 flows=$2 size=$3 pcap=$out/pcap/$1-$2-$3.pcap dir=$dp_home/dp in_up out_port model=$out/pcap/model.json
  mkdir -p "$dir"
  local up="net_null_up,no-rx=1" vf1="net_null_vf1,no-rx=1" vf2="net_null_vf2,no-rx=1"
  case $scen in
    local) vf1="net_pcap_vf1,rx_pcap=$pcap,infinite_rx=1"; out_port=pf0vf2 ;;
    encap) vf1="net_pcap_vf1,rx_pcap=$pcap,infinite_rx=1"; out_port=uplink ;;
    # Each connection is picked up by its first ACK (established at once, as after a restart) and cached.
    service) vf1="net_pcap_vf1,rx_pcap=$pcap,infinite_rx=1"; out_port=uplink; model=$out/pcap/model-service.json ;;
    decap) up="net_pcap_up,rx_pcap=$pcap,infinite_rx=1"; out_port=pf0vf1 ;;
  esac
  [ "${5:-}" = policies ] && model=${model%.json}-policies.json
  local cache=$((flows * 2 > 4096 ? flows * 2 : 4096))
  [ "${4:-}" = slow ] && cache=1024
  cat > "$dir/dp.yaml" <<YAML
eal: {memory_mb: 2048, file_prefix: dpu-bench-dp-$$, log_level: "*:error"}
workers: 1
mbuf_pool_size: $(pool_for "$flows")
mbuf_cache_size: 256
uplink: {devargs: "$up"}
representors: {mode: template, ports: [{name: pf0vf1, devargs: "$vf1"}, {name: pf0vf2, devargs: "$vf2"}]}
tunnel_ip: 192.168.100.1
uplink_mac: "02:00:00:00:01:00"
next_hops: [{peer: 192.168.100.2, mac: "02:00:00:00:02:00"}]
flow_cache: {entries: $cache, idle_timeout_ms: 60000}
sockets: {programming: $dir/program.sock, operator: $dir/operator.sock}
log: {level: warn}
YAML
  start_dataplane "$dir" "$model"
  local op=("$dpuctl" --socket "$dir/operator.sock" --json) a b
  if [ "${4:-}" = slow ]; then
    sleep 1.5  # steady misses
    a="$EPOCHREALTIME 0 $("${op[@]}" stats > "$dir/a.json"; dp_counter "$dir/a.json" stats FlowInstalled)"
    sleep "$seconds"
    b="$EPOCHREALTIME 0 $("${op[@]}" stats > "$dir/b.json"; dp_counter "$dir/b.json" stats FlowInstalled)"
    echo "$a $b" | awk '{printf "%.0f\n", ($6 - $3) / ($4 - $1)}'
  else
    # Warm: every flow of the pcap cached (however slowly a loaded machine gets there), then half a second.
    for _ in $(seq 600); do
      "${op[@]}" stats > "$dir/a.json"
      [ "$(dp_counter "$dir/a.json" stats FlowInstalled)" -ge "$flows" ] && break
      sleep 0.1
    done
    sleep 0.5
    a="$(sample "$dp_pid" "$dpdk_worker" "$dir/a.json" "${op[@]}" ports) $(dp_counter "$dir/a.json" ports "$out_port")"
    profile_start "$dp_pid" "$dpdk_worker" "$seconds" "$out/perf.data"
    sleep "$seconds"
    b="$(sample "$dp_pid" "$dpdk_worker" "$dir/b.json" "${op[@]}" ports) $(dp_counter "$dir/b.json" ports "$out_port")"
    profile_stop "$out/perf.data" > "$out/profile"
    rate "$a" "$b"
  fi
  "$dpuctl" --socket "$dir/operator.sock" stats --all > "$dir/stats.txt" 2>&1 || true
  awk '$1 == "flow_bytes" {print "FLOWBYTES", $2}' "$dir/stats.txt" >> "$out/flowbytes"
  kill -TERM "$dp_pid"; wait "$dp_pid" || true
  rm -f "$out/dataplane.pid"
}

# --- new connections: sampled while the count rises ---------------------------
# Every 0.1 s until the count has not moved for three samples (at most about
# two minutes): "wall-time on-CPU-ns connections" of the forwarding thread(s)
# `re` of `pid`, the count printed by the command.
newconn_sample() {  # pid re samples command...
  local pid=$1 re=$2 file=$3 c prev=-1 still=0 ts
  shift 3
  : > "$file"
  for _ in $(seq 1200); do
    ts=$(sample "$pid" "$re" "$file.count" "$@")
    c=$(tr -dc 0-9 < "$file.count")
    c=${c:-0}
    echo "$ts $c" >> "$file"
    if [ "$c" -gt 0 ] && [ "$c" = "$prev" ]; then
      still=$((still + 1))
      [ $still -ge 3 ] && break
    else
      still=0
    fi
    prev=$c
    sleep 0.1
  done
}

# Connections per on-CPU second and per wall second between the first sample
# with a connection and the last one before the final count (both taken while
# the forwarder was working through the pcap), and the final count.
newconn_rate() {  # samples → "per-cpu-s per-wall-s count"
  awk '{t[NR] = $1; n[NR] = $2; c[NR] = $3} END {
    final = c[NR]; a = 0; b = 0
    for (i = 1; i <= NR; i++) { if (!a && c[i] > 0) a = i; if (c[i] < final) b = i }
    if (!a || b <= a || n[b] <= n[a]) {printf "0 0 %d\n", final; exit}
    printf "%.0f %.0f %d\n", (c[b] - c[a]) / (n[b] - n[a]) * 1e9, (c[b] - c[a]) / (t[b] - t[a]), final}' "$1"
}

ours_newconn() {  # proto [policies] → "per-cpu-s per-wall-s count"
  local proto=$1 pcap=$out/pcap/newconn-$1.pcap dir=$dp_home/dpnc model=$out/pcap/model-newconn-$1.json
  [ "${2:-}" = policies ] && model=${model%.json}-policies.json
  mkdir -p "$dir"
  cat > "$dir/dp.yaml" <<YAML
eal: {memory_mb: 2048, file_prefix: dpu-bench-nc-$$, log_level: "*:error"}
workers: 1
mbuf_pool_size: 16383
mbuf_cache_size: 256
uplink: {devargs: "net_null_up,no-rx=1"}
representors: {mode: template, ports: [{name: pf0vf1, devargs: "net_pcap_vf1,rx_pcap=$pcap"}, {name: pf0vf2, devargs: "net_null_vf2,no-rx=1"}]}
tunnel_ip: 192.168.100.1
uplink_mac: "02:00:00:00:01:00"
next_hops: [{peer: 192.168.100.2, mac: "02:00:00:00:02:00"}]
flow_cache: {entries: 1048576, idle_timeout_ms: 60000}
conntrack: {max_entries: 1048576}
sockets: {programming: $dir/program.sock, operator: $dir/operator.sock}
log: {level: warn}
YAML
  # The worker polls the pcap port from this full sync on: every packet meets the service.
  start_dataplane "$dir" "$model"
  ours_conns() {
    "$dpuctl" --socket "$dir/operator.sock" --json stats |
      jq '[.counters[] | select(.name == "ConntrackNew") | .value | tonumber] | add // 0'
  }
  newconn_sample "$dp_pid" "$dpdk_worker" "$dir/samples" ours_conns
  "$dpuctl" --socket "$dir/operator.sock" --json ports > "$dir/ports.json"
  echo "ours newconn:$proto: $(tail -1 "$dir/samples" | cut -d' ' -f3) connections," \
    "$(dp_counter "$dir/ports.json" ports uplink) packets to the uplink" >&2
  kill -TERM "$dp_pid"; wait "$dp_pid" || true
  rm -f "$out/dataplane.pid"
  newconn_rate "$dir/samples"
}

# --- 3. Open vSwitch with DPDK -------------------------------------------------
source bench/ovs_dpdk.bash

# --- 4. the engine's instructions per packet (callgrind) -----------------------
engine_case_name() {  # scenario flows → the datapath_engine_bench case
  case $1 in
    local) echo "local VF->VF, $2 flows" ;;
    encap) echo "Geneve encap VF->uplink, $2 flows" ;;
    decap) echo "Geneve decap uplink->VF, $2 flows" ;;
    service) echo "service TCP ACK, $2 conns" ;;
  esac
}

results=$out/results
: > "$results"
# OVS runs throughout, its PMD idle between its turns (no port to poll: it
# sleeps; ovs_case removes its ports when it is done).
echo "== Open vSwitch with DPDK, one PMD core" >&2
ovs_start "$out/ovs" "$ovs_ns" > "$out/ovs-start.log" 2>&1 || { cat "$out/ovs-start.log" >&2; exit 1; }
ovs_idle_check >&2
tools=(testpmd ours ovs)
newconn_tools=(ours ovs)
if [ "$policies" -gt 0 ]; then
  tools+=(ours-policies) newconn_tools+=(ours-policies)
  echo "POLICIES $policies" >> "$results"
fi
echo "== $runs round(s); per case testpmd io, dpu-dataplane and OVS back to back, $seconds s each, one forwarding core each" >&2
for run in $(seq "$runs"); do
  for c in $cases; do
    if [[ $c == newconn:* ]]; then
      proto=${c#newconn:}
      echo "LOAD $run newconn-$proto 0 0 $(cut -d' ' -f1 /proc/loadavg)" >> "$results"
      for k in $(seq 0 $((${#newconn_tools[@]} - 1))); do
        tool=${newconn_tools[$(((k + run) % ${#newconn_tools[@]}))]}
        case $tool in
          ours) rates=$(ours_newconn "$proto") ;;
          ours-policies) rates=$(ours_newconn "$proto" policies) ;;
          ovs)
            ovs_newconn "$proto" "$out/pcap/newconn-$proto.pcap" "$out/ovs-newconn.samples"
            rates=$(newconn_rate "$out/ovs-newconn.samples") ;;
        esac
        echo "NEWCONN $run $tool $proto $rates" | tee -a "$results" >&2  # conns/s per core-second, per second, count
      done
      continue
    fi
    IFS=: read -r scen flows size <<< "$c"
    echo "LOAD $run $scen $flows $size $(cut -d' ' -f1 /proc/loadavg)" >> "$results"
    for k in $(seq 0 $((${#tools[@]} - 1))); do
      tool=${tools[$(((k + run - 1) % ${#tools[@]}))]}
      rm -f "$out/profile"
      case $tool in
        testpmd) mpps=$(testpmd_case "$scen" "$flows" "$size") ;;
        ours) mpps=$(ours_case "$scen" "$flows" "$size") ;;
        ours-policies) mpps=$(ours_case "$scen" "$flows" "$size" "" policies) ;;
        ovs) mpps=$(ovs_case "$scen" "$out/pcap/$scen-$flows-$size.pcap" "$seconds") ;;
      esac
      echo "RESULT $run $tool $scen $flows $size $mpps" | tee -a "$results" >&2  # Mpps per core-second, per second, share
      if [ -s "$out/profile" ]; then
        while read -r object pct; do
          echo "PROFILE $run $tool $scen $flows $size $object $pct"
        done < "$out/profile" >> "$results"
      fi
    done
  done
done
echo "== slow path: 50,000 new flows, flow setups per second" >&2
cp "$out/pcap/newflows.pcap" "$out/pcap/local-50000-64.pcap"
echo "SLOWPATH ours $(ours_case local 50000 64 slow)" | tee -a "$results" >&2
[ "$policies" = 0 ] || echo "SLOWPATH ours-policies $(ours_case local 50000 64 slow policies)" | tee -a "$results" >&2
echo "SLOWPATH ovs $(ovs_slowpath "$out/pcap/newflows.pcap" "$seconds")" | tee -a "$results" >&2
ovs_stop
echo "LOADEND $(cut -d' ' -f1 /proc/loadavg)" >> "$results"

if [ "${DPU_BENCH_CALLGRIND:-1}" != 0 ]; then
  echo "== callgrind: the engine's instructions per packet (datapath_engine_bench, 64 B cases)" >&2
  names=()
  for c in $cases; do
    [[ $c == newconn:* ]] && continue
    IFS=: read -r scen flows size <<< "$c"
    # Anchored ('$'): "..., 1000 flows" alone, not its ", 64 B" or ESP relatives.
    [ "$size" = 64 ] && names+=("$(engine_case_name "$scen" "$flows")\$")
  done
  if [ ${#names[@]} -gt 0 ]; then
    DPU_BUILD=$build bash bench/datapath_callgrind.sh "${names[@]}" | tee "$out/callgrind" >&2
    for c in $cases; do
      [[ $c == newconn:* ]] && continue
      IFS=: read -r scen flows size <<< "$c"
      [ "$size" = 64 ] || continue
      name=$(engine_case_name "$scen" "$flows")
      ir=$(awk -v n="$name" 'index($0, n) == 1 {split(substr($0, length(n) + 1), f, " "); print f[1]; exit}' "$out/callgrind")
      echo "CALLGRIND $scen $flows $size ${ir:-?}" >> "$results"
    done
  fi
fi
sort -u "$out/flowbytes" >> "$results" 2>/dev/null || true
cp "$results" "${DPU_BENCH_RESULTS:-/dev/null}" 2>/dev/null || true
$py bench/report_datapath.py "$results"
