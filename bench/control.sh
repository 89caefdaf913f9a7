#!/usr/bin/env bash
# Control-plane scale, in three parts (DPU_BENCH_PARTS="kube dataplane policy",
# all by default).
#   bash bench/control.sh                 # as root on Debian 12
#   DPU_BUILD_DIR=/path/to/build bash bench/control.sh   # use an existing build
#   DPU_BENCH_PARTS=dataplane DPU_BENCH_CHANGES=100 bash bench/control.sh
#   DPU_BENCH_PARTS=policy DPU_BUILD_DIR=build/release bash bench/control.sh
#
# kube: the Kubernetes ClusterSource syncing a large cluster from the fake API
# server (tests/fakes/fake_kube_apiserver, its own process).
# Cluster: 5,000 nodes, 150,000 pods (30 a node), 10,000 services with one
# EndpointSlice of 10 endpoints each (100,000 endpoints), 100 namespaces; the
# source watches every kind the agent reads (NetworkPolicies too, none here).
# Figures (median of DPU_BENCH_RUNS runs, default 3): initial sync time (start()
# to synced(), every object decoded and stored in maps as the agent keeps them),
# resident memory of that process once synced, and the p50/p99 latency from one
# EndpointSlice change at the fake server (its clock when it applied it) to the
# listener callback (500 changes, one at a time; "incl. sending it" starts the
# clock in the bench before the change is sent). Targets: sync <= 3 s,
# RSS <= 300 MB, p99 <= 5 ms.
#
# dataplane: the same 10,000 services and 100,000 endpoints (one EndpointSlice
# of 10 each, a named targetPort) through the agent's own code — Agent
# (ServiceCatalog, compileService), ModelState, DataplaneClient — into a real
# dpu-dataplane (net_null uplink, --no-huge, one worker; a fresh process per
# run) by bench/service_program_bench. Figures: the time to compile them, the
# time from the client's start to the dataplane's acknowledgement of the full
# sync carrying them (and the sum: the initial program, target <= 2 s), the
# dataplane's resident memory before and after, and the p50/p99 latency from
# one EndpointSlice change handed to the Agent to the dataplane's
# acknowledgement of the Delta carrying it (the dataplane acknowledges once the
# new model is installed and the changed service's flows invalidated; 500
# changes, one at a time; target p99 <= 10 ms). Each run checks with `dpuctl
# services` that the dataplane balances every service and the last change.
# A run takes about 10 seconds on 2 shared cores, most of it the initial
# program (a services-only Delta costs the dataplane that service: README).
#
# policy: NetworkPolicy at issue 18's scale — 10,000 pods, 1,000 namespaces,
# 5,000 policies (bench/control_policy_cluster.h: five upstream shapes per
# namespace, namespaceSelectors across the cluster, named ports, ipBlock with
# except). bench/control_policy_bench gives them to one node's PolicyCompiler
# (100 local pods): the compile time, the process's resident memory, and the
# compiler's latency for one policy change and one label change of a local pod.
# bench/control_policy_program_bench gives them to the Agent with 16 local pods
# attached, into a real dpu-dataplane as above: the compile (every event through
# the Agent), the agent's resident memory, and the p50/p99 latency from one
# policy or label change handed to the Agent to the dataplane's acknowledgement
# of the Delta with the changed PortPolicies, and of that the Delta's part
# (from the change entering the agent's model: client, socket, the
# dataplane's install and reply; a histogram bucket's bound). Targets:
# compile <= 1 s, RSS <= 150 MB, change p99 <= 10 ms.
#
# The machine's load average is printed with the figures: on 2 shared cores,
# other work shows up in the sync time and the p99.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/knobs.bash
runs=$(bench_number DPU_BENCH_RUNS 3 1 100)
changes=$(bench_number DPU_BENCH_CHANGES 500 1 100000)
parts=${DPU_BENCH_PARTS:-kube dataplane policy}
build=${DPU_BUILD_DIR:-}
for part in $parts; do
  [[ $part == kube || $part == dataplane || $part == policy ]] ||
    { echo "control.sh: DPU_BENCH_PARTS: \"$part\" is not kube, dataplane or policy" >&2; exit 2; }
done
if [[ -z "$build" ]]; then
  bash scripts/install-deps.sh >/dev/null
  cmake --preset release >/dev/null
  build=build/release
fi
targets=()
[[ " $parts " == *" kube "* ]] && targets+=(fake_kube_apiserver control_bench)
[[ " $parts " == *" dataplane "* ]] && targets+=(service_program_bench dpu-dataplane dpuctl)
[[ " $parts " == *" policy "* ]] && targets+=(control_policy_bench control_policy_program_bench dpu-dataplane)
cmake --build "$build" --target "${targets[@]}" >/dev/null

out=$(mktemp -d)
fake_pid=
dp_pid=
cleanup() {
  [[ -n "$fake_pid" ]] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  [[ -n "$dp_pid" ]] && kill "$dp_pid" 2>/dev/null && wait "$dp_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

kube_part() {
  "$build/tests/fakes/fake_kube_apiserver" --port 0 --scale 5000,30,10000,10 --bookmark-ms 1000 > "$out/fake.out" &
  fake_pid=$!
  for _ in $(seq 200); do
    grep -q '^listening ' "$out/fake.out" 2>/dev/null && break
    sleep 0.05
  done
  local url
  url=$(awk '/^listening /{print $2}' "$out/fake.out")
  [[ -n "$url" ]] || { echo "control.sh: the fake API server did not start" >&2; exit 1; }
  echo "== fake API server at $url (5,000 nodes, 150,000 pods, 10,000 services, 100,000 endpoints)" >&2

  local load_before run
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  for run in $(seq "$runs"); do
    "$build/bench/control_bench" --server "$url" --changes "$changes" > "$out/run$run"
    echo "== run $run: $(tr '\n' ' ' < "$out/run$run")" >&2
  done
  kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  fake_pid=

  echo "load average before the runs: $load_before" >&2
  /usr/bin/python3 - "$out"/run* <<'PY'
import statistics, sys
runs = []
for path in sys.argv[1:]:
    d = {}
    for line in open(path):
        k, v = line.split()
        d[k] = float(v)
    runs.append(d)
def med(k): return statistics.median(r[k] for r in runs)
r0 = runs[0]
print(f"objects: {int(r0['nodes'])} nodes, {int(r0['pods'])} pods, {int(r0['services'])} services, "
      f"{int(r0['endpointslices'])} EndpointSlices, {int(r0['endpoints'])} endpoints, "
      f"{int(r0.get('namespaces', 0))} namespaces")
print(f"{'figure':<34}{'median':>10}{'target':>10}")
for key, label, target, unit in [
    ("sync_s", "initial sync (s)", 3.0, "s"),
    ("sync_cpu_s", "  CPU used by the sync (s)", None, "s"),
    ("rss_mb", "resident memory when synced (MB)", 300.0, "MB"),
    ("p50_ms", "EndpointSlice change p50 (ms)", None, "ms"),
    ("p99_ms", "EndpointSlice change p99 (ms)", 5.0, "ms"),
    ("e2e_p99_ms", "  p99 incl. sending it (ms)", None, "ms"),
]:
    v = med(key)
    t = f"{target:g}" if target else "-"
    flag = "" if target is None or v <= target else "  (over target)"
    print(f"{label:<34}{v:>10.3f}{t:>10}{flag}")
PY
}

# A fresh dpu-dataplane on net_null ports for run $1 (dp_pid; its sockets in $out/dp$1).
start_dataplane() {  # run
  local dir=$out/dp$1
  mkdir -p "$dir"
  cat > "$dir/dp.yaml" <<YAML
eal: {memory_mb: 512, no_huge: true, no_pci: true, file_prefix: dpu-ctlbench-$$-$1, log_level: "*:error"}
workers: 1
mbuf_pool_size: 4095
mbuf_cache_size: 128
uplink: {devargs: "net_null_ctlup$1,no-rx=1"}
representors: {mode: template, devargs: "net_null_{name}$1,no-rx=1"}
tunnel_ip: 192.168.100.1
sockets: {programming: $dir/program.sock, operator: $dir/operator.sock}
log: {level: warn}
YAML
  "$build/dpu-agent/datapath/dpu-dataplane" --config "$dir/dp.yaml" > "$dir/dp.log" 2>&1 &
  dp_pid=$!
  for _ in $(seq 600); do
    [[ -S $dir/program.sock ]] && break
    kill -0 "$dp_pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ -S $dir/program.sock ]] || { echo "control.sh: dpu-dataplane did not start:" >&2; cat "$dir/dp.log" >&2; exit 1; }
}

# One run: a fresh dpu-dataplane, programmed by the bench, then asked (dpuctl
# services) what it balances.
dataplane_run() {  # run
  local dir=$out/dp$1
  start_dataplane "$1"
  if ! "$build/bench/service_program_bench" --socket "$dir/program.sock" --dataplane-pid "$dp_pid" \
      --changes "$changes" > "$out/dprun$1"; then
    echo "control.sh: service_program_bench failed (dataplane log below)" >&2
    cat "$dir/dp.log" >&2
    exit 1
  fi
  "$build/dpu-agent/dpuctl/dpuctl" --socket "$dir/operator.sock" --json services > "$dir/services.json"
  /usr/bin/python3 - "$out/dprun$1" "$dir/services.json" <<'PY' >> "$out/dprun$1"
import json, sys
d = dict(line.split() for line in open(sys.argv[1]))
frontends = json.load(open(sys.argv[2])).get("services", [])
names = {f["service"] for f in frontends}
last = [b.get("ip") for f in frontends if f["service"] == d.get("last_service") for b in f.get("backends", [])]
ok = len(names) == int(d["services"]) and (d.get("last_service") is None or d["last_backend"] in last)
print(f"dataplane_services {len(names)}")
print(f"checked {1 if ok else 0}")
PY
  kill "$dp_pid" && wait "$dp_pid" 2>/dev/null || true
  dp_pid=
}

dataplane_part() {
  echo "== services into a real dpu-dataplane: 10,000 services, 100,000 endpoints, $changes changes; $runs run(s)" >&2
  local load_before run
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  for run in $(seq "$runs"); do
    dataplane_run "$run"
    echo "== run $run: $(tr '\n' ' ' < "$out/dprun$run")" >&2
  done
  echo "load average before the runs: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  /usr/bin/python3 - "$out"/dprun* <<'PY'
import statistics, sys
runs = [dict(line.split() for line in open(p)) for p in sys.argv[1:]]
def med(k): return statistics.median(float(r[k]) for r in runs)
r0 = runs[0]
print(f"services into dpu-dataplane: {r0['services']} services, {r0['endpoints']} endpoints; "
      f"{r0.get('changes', 0)} changes; median of {len(runs)} runs")
bad = [i + 1 for i, r in enumerate(runs) if r.get("checked") != "1" or r.get("problems") != "0"]
if bad:
    print(f"  runs {bad}: the dataplane did not balance every service or the last change (dpuctl services)")
print(f"{'figure':<44}{'median':>10}{'target':>10}")
for key, label, target in [
    ("compile_s", "compile (Agent: catalog + compileService) (s)", None),
    ("full_sync_s", "full sync acknowledged (s)", None),
    ("initial_s", "initial program: both (s)", 2.0),
    ("dp_rss_before_mb", "dataplane RSS before programming (MB)", None),
    ("dp_rss_mb", "dataplane RSS programmed (MB)", None),
    ("p50_ms", "EndpointSlice change -> Delta acked p50 (ms)", None),
    ("p99_ms", "EndpointSlice change -> Delta acked p99 (ms)", 10.0),
]:
    if key not in r0:
        continue
    v = med(key)
    t = f"{target:g}" if target else "-"
    flag = "" if target is None or v <= target else "  (over target)"
    print(f"{label:<44}{v:>10.3f}{t:>10}{flag}")
PY
}

policy_part() {
  echo "== NetworkPolicy: 10,000 pods, 1,000 namespaces, 5,000 policies, $changes changes; $runs run(s)" >&2
  local load_before run dir
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  for run in $(seq "$runs"); do
    "$build/bench/control_policy_bench" --changes "$changes" > "$out/polrun$run"
    echo "== compiler run $run: $(tr '\n' ' ' < "$out/polrun$run")" >&2
    start_dataplane "p$run"
    dir=$out/dpp$run
    if ! "$build/bench/control_policy_program_bench" --socket "$dir/program.sock" --dataplane-pid "$dp_pid" \
        --changes "$changes" > "$out/polprog$run"; then
      echo "control.sh: control_policy_program_bench failed (dataplane log below)" >&2
      cat "$dir/dp.log" >&2
      exit 1
    fi
    kill "$dp_pid" && wait "$dp_pid" 2>/dev/null || true
    dp_pid=
    echo "== dataplane run $run: $(tr '\n' ' ' < "$out/polprog$run")" >&2
  done
  echo "load average before the runs: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  /usr/bin/python3 - "$out" "$runs" <<'PY'
import statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
comp = [dict(line.split() for line in open(f"{out}/polrun{i}")) for i in range(1, n + 1)]
prog = [dict(line.split() for line in open(f"{out}/polprog{i}")) for i in range(1, n + 1)]
def med(runs, k): return statistics.median(float(r[k]) for r in runs if k in r)
c0, p0 = comp[0], prog[0]
print(f"NetworkPolicy: {c0['pods']} pods, {c0['namespaces']} namespaces, {c0['policies']} policies; median of {n} runs")
print(f"{'figure':<58}{'median':>10}{'target':>10}")
for runs, key, label, target in [
    (comp, "compile_s", f"compiler: compile ({c0['local_pods']} local pods) (s)", 1.0),
    (comp, "rss_mb", "compiler: resident memory compiled (MB)", 150.0),
    (comp, "policy_change_p99_ms", "compiler: policy change p99 (ms)", None),
    (comp, "label_change_p99_ms", "compiler: label change p99 (ms)", None),
    (prog, "compile_s", "agent: every event handed to the Agent (s)", 1.0),
    (prog, "agent_rss_mb", "agent: resident memory (MB)", 150.0),
    (prog, "full_sync_s", f"agent: full sync ({p0['local_pods']} ports) acknowledged (s)", None),
    (prog, "dp_rss_mb", "dataplane RSS programmed (MB)", None),
    (prog, "policy_p50_ms", "policy change -> Delta acked p50 (ms)", None),
    (prog, "policy_p99_ms", "policy change -> Delta acked p99 (ms)", 10.0),
    (prog, "label_p50_ms", "label change -> Delta acked p50 (ms)", None),
    (prog, "label_p99_ms", "label change -> Delta acked p99 (ms)", 10.0),
    (prog, "delta_p99_le_ms", "  of which model -> Delta acked, p99 at most (ms)", None),
]:
    if key not in runs[0]:
        continue
    v = med(runs, key)
    t = f"{target:g}" if target else "-"
    flag = "" if target is None or v <= target else "  (over target)"
    print(f"{label:<58}{v:>10.3f}{t:>10}{flag}")
bad = [i + 1 for i, r in enumerate(prog) if r.get("refused") != "0" or r.get("problems") != "0"]
if bad:
    print(f"  runs {bad}: the dataplane refused a Delta or reported problems")
PY
}

for part in $parts; do
  "${part}_part"
done
