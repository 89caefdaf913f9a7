#!/usr/bin/env bash
# CNI ADD/DEL latency through the real runtime library (libcni 1.1.2, via
# tests/tools/cnidriver): dpu-cni → host-shim → fake DPU, side by side in the
# same run with Debian's reference `host-device` plugin (static IPAM) moving a
# veth into a netns — the closest peer doing the same kernel work.
#   sudo bash bench/cni.sh                    # builds build/release with the preset
#   sudo DPU_BUILD_DIR=/path/to/build bash bench/cni.sh
# Knobs: DPU_BENCH_SEQ (100 sequential pods), DPU_BENCH_CONC (20 concurrent pods),
# DPU_BENCH_ROUNDS (3 rounds of the concurrent phase; the median "all done" counts).
# Prints p50/p99 per plugin, mode and op, the ratios the targets are stated in
# (≤ 0.8× host-device), and where the time goes: dpu-cni's own exec overhead,
# host-shim's answer time (no runtime, no plugin exec), an HTTP round trip to the
# DPU API, and the kernel's move of a netdev into a netns.
# dpu-cni's DEL answers before the kernel's move home, which host-shim does in
# the background: each dpu-cni phase is followed by a wait until those returns
# are done (reported as "returns drained"), so they never overlap — and slow —
# the peer's phase or the next one. The plugins therefore run phase by phase
# in turn (a cnidriver run each), not pod by pod. The concurrent ADD ratio is
# printed next to its floor: $conc_n moves of veths back to back through one
# netlink socket (no exec), measured in the same run.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/bench/knobs.bash"
# Each pod has its own static address for host-device, 10.98.0.(index + 2).
seq_n=$(bench_number DPU_BENCH_SEQ 100 1 250)
conc_n=$(bench_number DPU_BENCH_CONC 20 1 250)
rounds=$(bench_number DPU_BENCH_ROUNDS 3 1 100)
[ "$(id -u)" = 0 ] || { echo "bench/cni.sh: run as root (network namespaces)" >&2; exit 1; }

if [ -z "${DPU_BUILD_DIR:-}" ]; then
  bash "$src/scripts/install-deps.sh" >/dev/null
  (cd "$src" && cmake --preset release >/dev/null &&
     cmake --build --preset release --target dpu-cni host-shim fake_dpu_api hostshim-client cnidriver_build \
       cni_overhead_bench >/dev/null)
  export DPU_BUILD_DIR=$src/build/release
fi
DRIVER=$DPU_BUILD_DIR/tests/tools/cnidriver

# shellcheck source=../tests/host-shim/env.bash
source "$src/tests/host-shim/env.bash"
work=$(mktemp -d /tmp/dpu-cni-bench.XXXXXX)
cleanup() { local rc=$?; set +e; hostshim_env_down; rm -rf "$work"; exit "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap: nothing is left behind
# One pool VF per pod of the larger phase (at least 20), plus the management port's.
pool=$(( seq_n > conc_n ? seq_n : conc_n ))
export HOSTSHIM_NUM_VFS=$(( (pool > 20 ? pool : 20) + 2 ))
hostshim_env_up "$work" >/dev/null || { echo "bench/cni.sh: the host-shim environment did not come up" >&2; exit 1; }
mkdir -p "$work/plugins" "$work/cache"
ln -s "$(readlink -f "$DPU_BUILD_DIR/cni/dpu-cni")" "$work/plugins/dpu-cni"
path="$work/plugins:/usr/lib/cni"

cat > "$work/dpu.conflist" <<JSON
{"cniVersion":"1.0.0","name":"dpubench","plugins":[{"type":"dpu-cni","socket":"$HOSTSHIM_SOCKET"}]}
JSON
# host-device moves veth hd<i> into the pod netns; static IPAM, a default route as dpu-cni installs.
cat > "$work/hd.conflist" <<'JSON'
{"cniVersion":"1.0.0","name":"hdbench","plugins":[{"type":"host-device","device":"hd@I@",
 "ipam":{"type":"static","addresses":[{"address":"10.98.0.@IP@/24","gateway":"10.98.0.1"}],
         "routes":[{"dst":"0.0.0.0/0","gw":"10.98.0.1"}]}}]}
JSON

max=$(( seq_n > conc_n ? seq_n : conc_n ))
echo "== setup: $max pod netns per plugin, $max veths for host-device, $HOSTSHIM_NUM_VFS fake VFs" >&2
for (( i = 0; i < max; i++ )); do
  echo "netns add $HOSTSHIM_ENV_ID-d$i"; echo "netns add $HOSTSHIM_ENV_ID-h$i"
done | ip -batch -
for (( i = 0; i < max; i++ )); do echo "link add hd$i type veth peer name hdp$i"; echo "link set hdp$i up"; done |
  ip -n "$HOST_NETNS" -batch -

log_mark() { wc -l < "$HOSTSHIM_LOG"; }
# The kernel's floor for $conc_n pods: $conc_n veths moved into a netns back to
# back through one netlink socket (ip -batch: one process, no exec per move),
# and back. Prints "in_ms back_ms".
ip netns add "$HOSTSHIM_ENV_ID-k"
for (( i = 0; i < conc_n; i++ )); do echo "link add km$i type veth peer name kmp$i"; done | ip -n "$HOST_NETNS" -batch -
move_floor() {
  local t0 t1 t2 i
  t0=$(date +%s%N)
  for (( i = 0; i < conc_n; i++ )); do echo "link set km$i netns $HOSTSHIM_ENV_ID-k"; done | ip -n "$HOST_NETNS" -batch -
  t1=$(date +%s%N)
  for (( i = 0; i < conc_n; i++ )); do echo "link set km$i netns $HOST_NETNS"; done | ip -n "$HOSTSHIM_ENV_ID-k" -batch -
  t2=$(date +%s%N)
  echo "FLOOR $(( (t1 - t0) / 1000 )) $(( (t2 - t1) / 1000 ))"
}
bench_one() {  # bench_one dpu|hd N CONCURRENCY: one plugin, one round, one JSON report per op
  local label=dpu-cni conf=$work/dpu.conflist prefix=d
  if [ "$1" = hd ]; then label=host-device conf=$work/hd.conflist prefix=h; fi
  hostshim_exec "$DRIVER" bench -path "$path" -cachedir "$work/cache" -n "$2" -concurrency "$3" -rounds 1 \
    -label "$label" -conf "$conf" -netns-prefix "/run/netns/$HOSTSHIM_ENV_ID-$prefix"
}
drain() {  # after dpu-cni's DELs: until every VF is home; prints "DRAIN mode us"
  local t0
  t0=$(date +%s%N)
  hostshim_wait_returns 60 || echo "bench/cni.sh: host-shim still returning VFs after 60 s" >&2
  echo "DRAIN $1 $(( ($(date +%s%N) - t0) / 1000 ))"
}
{
  echo "== sequential: $seq_n ADDs then $seq_n DELs, one at a time; dpu-cni, then host-device" >&2
  m0=$(log_mark)
  bench_one dpu "$seq_n" 1
  drain sequential
  m1=$(log_mark)
  bench_one hd "$seq_n" 1
  echo "== concurrent: $conc_n ADDs in flight, then $conc_n DELs; $rounds rounds, plugins in turn," \
    "each round next to the kernel's floor" >&2
  for (( r = 0; r < rounds; r++ )); do
    bench_one dpu "$conc_n" "$conc_n"
    drain concurrent
    bench_one hd "$conc_n" "$conc_n"
    move_floor
  done
  m2=$(log_mark)
} > "$work/reports"
if ! hostshim_assert_clean; then echo "bench/cni.sh: dpu-cni left state behind after the run" >&2; fi

echo
echo "CNI latency through libcni 1.1.2 (cnidriver), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "host-shim state on $(df --output=fstype "$HOSTSHIM_STATE_DIR" | tail -n 1)"
python3 "$src/bench/report_cni.py" "$conc_n" < "$work/reports"

# --- where the time goes
echo
echo "== where the time goes (p50)"
"$DPU_BUILD_DIR/bench/cni_overhead_bench" "$DPU_BUILD_DIR/cni/dpu-cni" 100 2>&1 | sed 's/^/  /' || true
pct() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.2f", a[int((NR+1)/2)]; else print "nan"}'; }
# host-shim alone: a CniRequest straight to its socket (no runtime, no plugin exec);
# only answers that succeeded count.
hs_time() {  # hs_time OUTFILE ARGS... — appends elapsed ms when host-shim said yes
  local err
  if err=$(hostshim_client --time "${@:2}" 2>&1 >/dev/null); then
    echo "$err" | awk '/elapsed_ms/ {print $2}' >> "$1"
  fi
}
: > "$work/hs_add"; : > "$work/hs_del"
ip netns add "$HOSTSHIM_ENV_ID-s"
for (( i = 0; i < 30; i++ )); do  # one pod at a time, as in the sequential run
  hs_time "$work/hs_add" add --container "hsb-$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-s"
  hs_time "$work/hs_del" del --container "hsb-$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-s"
done
echo "  host-shim ADD alone (socket to answer, DPU + netlink inside)   p50 $(pct < "$work/hs_add") ms ($(wc -l < "$work/hs_add") ok)"
echo "  host-shim DEL alone                                            p50 $(pct < "$work/hs_del") ms ($(wc -l < "$work/hs_del") ok)"
# host-shim writes its records and checkpoint crash-safely (write, fsync, rename,
# fsync the directory): the cost of one such write where its state lives, and how
# many fsyncs one ADD makes (strace on host-shim for a few ADDs).
python3 - "$HOSTSHIM_STATE_DIR" > "$work/fsync_ms" <<'PY'
import os, sys, time
d = sys.argv[1]
for i in range(20):
    t = time.perf_counter()
    tmp, dst = os.path.join(d, ".bench.tmp"), os.path.join(d, ".bench")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * 300); os.fsync(fd); os.close(fd)
    os.rename(tmp, dst)
    dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
    print((time.perf_counter() - t) * 1000)
os.unlink(os.path.join(d, ".bench"))
PY
fsyncs="n/a (no strace)"
if command -v strace >/dev/null; then
  strace -f -c -e trace=fsync,fdatasync -o "$work/strace" -p "$HOSTSHIM_PID" 2>/dev/null & st=$!
  sleep 0.5
  for (( i = 0; i < 5; i++ )); do
    hostshim_client add --container "hsf-$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-s" >/dev/null 2>&1
    hostshim_client del --container "hsf-$i" --netns "/run/netns/$HOSTSHIM_ENV_ID-s" >/dev/null 2>&1
  done
  kill -INT "$st" 2>/dev/null; wait "$st" 2>/dev/null || true
  fsyncs=$(awk '$NF == "fsync" || $NF == "fdatasync" {n += $4} END {printf "%.1f", n / 5}' "$work/strace")
fi
echo "  one crash-safe state write (write+fsync+rename+dir fsync)      p50 $(pct < "$work/fsync_ms") ms;" \
  "fsyncs per ADD+DEL: $fsyncs"
for (( i = 0; i < 20; i++ )); do
  hostshim_exec curl -s -o /dev/null -w '%{time_total}\n' "$FAKE_DPU_URL/v1/health" | awk '{print $1 * 1000}'
done > "$work/dpu_rtt"
# host-shim's own per-phase timings (its debug log) for dpu-cni's sequential and
# concurrent phases; RETURN is the background move home after a DEL.
python3 - "$HOSTSHIM_LOG" "$m0" "$m1" "$m2" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
m0, m1, m2 = (int(x) for x in sys.argv[2:5])
for mode, part in (("sequential", lines[m0:m1]), ("concurrent", lines[m1:m2])):
    phases = {}
    for line in part:
        m = re.search(r" (ADD|DEL|RETURN) \S+ timings: (.*)$", line)
        if not m:
            continue
        per_line = {}
        for key, ms in re.findall(r"([a-z_]+)=([0-9.]+)ms", m.group(2)):
            per_line[key] = per_line.get(key, 0.0) + float(ms)
        for key, ms in per_line.items():
            phases.setdefault(m.group(1), {}).setdefault(key, []).append(ms)
    for verb in ("ADD", "DEL", "RETURN"):
        table = phases.get(verb)
        if not table:
            continue
        parts = []
        for key, values in table.items():
            values.sort()
            parts.append(f"{key} {values[len(values) // 2]:.2f}")
        n = max(len(v) for v in table.values())
        print(f"  host-shim {verb:<6} phases, {mode:<10} p50 ms over {n:>3}: " + ", ".join(parts))
    if not phases:
        print(f"  host-shim logged no per-phase timings ({mode})")
PY
echo "  HTTP round trip to the fake DPU API (curl GET /v1/health)      p50 $(pct < "$work/dpu_rtt") ms"
# The kernel's move of a netdev into a netns, batched to leave out ip's own start.
floor=$(move_floor)
echo "  kernel: move one netdev into a netns / back                    $(awk '{printf "%d / %d", $2 / n, $3 / n}' n="$conc_n" <<<"$floor") us"
echo "  (runtime + plugin exec ≈ the libcni ADD p50 above minus host-shim ADD alone)"
