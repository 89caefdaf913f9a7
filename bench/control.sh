#!/usr/bin/env bash
# Control-plane scale: the Kubernetes ClusterSource syncing a large cluster from
# the fake API server (tests/fakes/fake_kube_apiserver, its own process).
#   bash bench/control.sh                 # as root on Debian 12
#   DPU_BUILD_DIR=/path/to/build bash bench/control.sh   # use an existing build
# Cluster: 5,000 nodes, 150,000 pods (30 a node), 10,000 services with one
# EndpointSlice of 10 endpoints each (100,000 endpoints), 100 namespaces; the
# source watches every kind the agent reads (NetworkPolicies too, none here).
# Figures (median of DPU_BENCH_RUNS runs, default 3): initial sync time (start()
# to synced(), every object decoded and stored in maps as the agent keeps them),
# resident memory of that process once synced, and the p50/p99 latency from one
# EndpointSlice change at the fake server (its clock when it applied it) to the
# listener callback (500 changes, one at a time; "incl. sending it" starts the
# clock in the bench before the change is sent). Targets: sync <= 3 s,
# RSS <= 300 MB, p99 <= 5 ms. The machine's load average is printed with them:
# on 2 shared cores, other work shows up in the sync time and the p99.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${DPU_BENCH_RUNS:-3}
changes=${DPU_BENCH_CHANGES:-500}
build=${DPU_BUILD_DIR:-}
if [[ -z "$build" ]]; then
  bash scripts/install-deps.sh >/dev/null
  cmake --preset release >/dev/null
  build=build/release
fi
cmake --build "$build" --target fake_kube_apiserver control_bench >/dev/null

out=$(mktemp -d)
fake_pid=
cleanup() {
  [[ -n "$fake_pid" ]] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

"$build/tests/fakes/fake_kube_apiserver" --port 0 --scale 5000,30,10000,10 --bookmark-ms 1000 > "$out/fake.out" &
fake_pid=$!
for _ in $(seq 200); do
  grep -q '^listening ' "$out/fake.out" 2>/dev/null && break
  sleep 0.05
done
url=$(awk '/^listening /{print $2}' "$out/fake.out")
[[ -n "$url" ]] || { echo "control.sh: the fake API server did not start" >&2; exit 1; }
echo "== fake API server at $url (5,000 nodes, 150,000 pods, 10,000 services, 100,000 endpoints)" >&2

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for run in $(seq "$runs"); do
  "$build/bench/control_bench" --server "$url" --changes "$changes" > "$out/run$run"
  echo "== run $run: $(tr '\n' ' ' < "$out/run$run")" >&2
done

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
