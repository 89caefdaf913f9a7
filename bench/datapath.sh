#!/usr/bin/env bash
# The datapath benchmark, side by side in one run on the same input pcaps
# (net_pcap rx_pcap=...,infinite_rx=1) and net_null output, one forwarding core each:
#   1. dpdk-testpmd io forwarding: the I/O ceiling;
#   2. dpu-dataplane (one worker lcore): VF→VF local, VF→Geneve encap,
#      Geneve decap→VF; 1, 1,000 and 100,000 flows; 64 B and 1400 B;
#   3. Open vSwitch 3.1 with DPDK (Debian's ovs-vswitchd-dpdk, run privately in
#      its own network namespace and run directory, one PMD core) with the
#      equivalent OpenFlow rules: dec_ttl + MAC rewrite + output; the same +
#      Geneve tunnel push (VNI, OVN option via tun_metadata); Geneve tunnel pop;
#   4. the slow path: every packet a new flow; flows set up per second, ours
#      (flow cache far smaller than the 50,000 flows, so every packet misses)
#      and OVS's (flow limit lifted, megaflows exact on the UDP ports).
#   bash bench/datapath.sh                 # everything (about 10 minutes)
#   DPU_BENCH_QUICK=1 bash bench/datapath.sh   # Geneve encap, 64 B, 1,000 and 100,000 flows, and the slow path
# Environment: DPU_BUILD (default build/release), DPU_BENCH_SECONDS (measurement
# interval, default 3), DPU_BENCH_RUNS (runs per case, the report takes the
# median; default 1), DPU_BENCH_RESULTS (keep the raw results in this file).
# As root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${DPU_BUILD:-$src/build/release}
seconds=${DPU_BENCH_SECONDS:-3}
runs=${DPU_BENCH_RUNS:-1}
py=/usr/bin/python3
out=$(mktemp -d /tmp/dpu-bench.XXXXXX)
ovs_ns=dpu-bench-ovs-$$
cleanup() {
  set +e
  [ -n "${dp_pid:-}" ] && kill -TERM "$dp_pid" 2>/dev/null && wait "$dp_pid" 2>/dev/null
  ovs_stop
  rm -rf "$out"
}
trap cleanup EXIT

if [ ! -x "$build/dpu-agent/datapath/dpu-dataplane" ] || [ -z "${DPU_BUILD:-}" ]; then
  [ -d "$build" ] || cmake --preset release >/dev/null
  cmake --build "$build" --target datapath_bench_tools >/dev/null
fi
dataplane=$build/dpu-agent/datapath/dpu-dataplane
dpuctl=$build/dpu-agent/dpuctl/dpuctl
export DPU_PROTO_PY=$out/py

if [ -n "${DPU_BENCH_QUICK:-}" ]; then
  cases="encap:1000:64 encap:100000:64"
else
  cases=""
  for s in local encap decap; do for n in 1 1000 100000; do for b in 64 1400; do cases+=" $s:$n:$b"; done; done; done
fi
echo "== input pcaps" >&2
$py bench/datapath_pcaps.py "$out/pcap" $cases 2>/dev/null

pool_for() {  # flows → mbufs (2^n - 1): the pcap PMD preloads every packet of the file
  local need=$(($1 + 16384)) n=16383
  while [ $n -lt $need ]; do n=$((n * 2 + 1)); done
  echo $n
}

# --- 1. testpmd io -----------------------------------------------------------
testpmd_case() {  # scenario flows size
  local pcap=$out/pcap/$1-$2-$3.pcap mbufs
  mbufs=$(($(pool_for "$2") + 1))
  timeout $((seconds + 15)) dpdk-testpmd -l 0,1 --no-huge --no-pci -m 2048 --file-prefix="dpu-bench-tp-$$" \
    --log-level='*:error' --vdev "net_pcap_in,rx_pcap=$pcap,infinite_rx=1" --vdev "net_null_out,no-rx=1" -- \
    --total-num-mbufs="$mbufs" --forward-mode=io --auto-start --stats-period=1 --nb-cores=1 2>/dev/null |
    awk -v s="$seconds" '/NIC statistics for port 1/ {p=1} p && /Tx-pps:/ {n++; if (n > 1 && n <= s + 1) {sum += $2; k++}; p=0}
                         n > s + 1 {exit} END {if (k) printf "%.3f\n", sum / k / 1e6; else print "0"}' || true
}

# --- 2. dpu-dataplane --------------------------------------------------------
ours_case() {  # scenario flows size → Mpps on the output port
  local scen=$1 flows=$2 size=$3 pcap=$out/pcap/$1-$2-$3.pcap dir=$out/dp in_up out_port
  mkdir -p "$dir"
  local up="net_null_up,no-rx=1" vf1="net_null_vf1,no-rx=1" vf2="net_null_vf2,no-rx=1"
  case $scen in
    local) vf1="net_pcap_vf1,rx_pcap=$pcap,infinite_rx=1"; out_port=pf0vf2 ;;
    encap) vf1="net_pcap_vf1,rx_pcap=$pcap,infinite_rx=1"; out_port=uplink ;;
    decap) up="net_pcap_up,rx_pcap=$pcap,infinite_rx=1"; out_port=pf0vf1 ;;
  esac
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
  "$dataplane" --config "$dir/dp.yaml" > "$dir/dp.log" 2>&1 &
  dp_pid=$!
  for _ in $(seq 200); do [ -S "$dir/program.sock" ] && break; sleep 0.05; done
  $py tests/dpu-agent/datapath/dataplane_client.py --socket "$dir/program.sock" --model "$out/pcap/model.json" >/dev/null
  sleep 1.5  # warm: every flow cached (or, for the slow path, steady misses)
  if [ "${4:-}" = slow ]; then
    local a b
    a=$("$dpuctl" --socket "$dir/operator.sock" --json stats | $py -c "import json,sys,time; d=json.load(sys.stdin); print(time.time(), next((int(c['value']) for c in d['counters'] if c['name']=='FlowInstalled'), 0))")
    sleep "$seconds"
    b=$("$dpuctl" --socket "$dir/operator.sock" --json stats | $py -c "import json,sys,time; d=json.load(sys.stdin); print(time.time(), next((int(c['value']) for c in d['counters'] if c['name']=='FlowInstalled'), 0))")
    echo "$a $b" | awk '{printf "%.0f\n", ($4 - $2) / ($3 - $1)}'
  else
    local a b
    a=$("$dpuctl" --socket "$dir/operator.sock" --json ports | $py -c "import json,sys,time; d=json.load(sys.stdin); print(time.time(), next(int(p.get('tx_packets', 0)) for p in d['ports'] if p['name']=='$out_port'))")
    sleep "$seconds"
    b=$("$dpuctl" --socket "$dir/operator.sock" --json ports | $py -c "import json,sys,time; d=json.load(sys.stdin); print(time.time(), next(int(p.get('tx_packets', 0)) for p in d['ports'] if p['name']=='$out_port'))")
    echo "$a $b" | awk '{printf "%.3f\n", ($4 - $2) / ($3 - $1) / 1e6}'
  fi
  "$dpuctl" --socket "$dir/operator.sock" stats --all > "$dir/stats.txt" 2>&1 || true
  awk '$1 == "flow_bytes" {print "FLOWBYTES", $2}' "$dir/stats.txt" >> "$out/flowbytes"
  kill -TERM "$dp_pid"; wait "$dp_pid" || true; dp_pid=
}

# --- 3. Open vSwitch with DPDK -------------------------------------------------
source bench/ovs_dpdk.bash

# One tool at a time: OVS's PMD thread spins on its core even without traffic,
# so it runs only in its own phase.
results=$out/results
: > "$results"
echo "== testpmd io and dpu-dataplane: $seconds s per case, one forwarding core each" >&2
for run in $(seq "$runs"); do
  for c in $cases; do
    IFS=: read -r scen flows size <<< "$c"
    echo "RESULT testpmd $scen $flows $size $(testpmd_case "$scen" "$flows" "$size")" | tee -a "$results" >&2
    echo "RESULT ours $scen $flows $size $(ours_case "$scen" "$flows" "$size")" | tee -a "$results" >&2
  done
done
echo "== slow path: 50,000 new flows, flow setups per second" >&2
cp "$out/pcap/newflows.pcap" "$out/pcap/local-50000-64.pcap"
echo "SLOWPATH ours $(ours_case local 50000 64 slow)" | tee -a "$results" >&2

echo "== Open vSwitch with DPDK, one PMD core" >&2
ovs_start "$out/ovs" "$ovs_ns" > "$out/ovs-start.log" 2>&1 || { cat "$out/ovs-start.log" >&2; exit 1; }
for run in $(seq "$runs"); do
  for c in $cases; do
    IFS=: read -r scen flows size <<< "$c"
    echo "RESULT ovs $scen $flows $size $(ovs_case "$scen" "$out/pcap/$scen-$flows-$size.pcap" "$seconds")" | tee -a "$results" >&2
  done
done
echo "SLOWPATH ovs $(ovs_slowpath "$out/pcap/newflows.pcap" "$seconds")" | tee -a "$results" >&2
ovs_stop
sort -u "$out/flowbytes" >> "$results" 2>/dev/null || true
cp "$results" "${DPU_BENCH_RESULTS:-/dev/null}" 2>/dev/null || true
$py bench/report_datapath.py "$results"
