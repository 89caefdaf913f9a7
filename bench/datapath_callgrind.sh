#!/usr/bin/env bash
# Instructions per packet of the engine's fast path, counted by callgrind on
# datapath_engine_bench: a machine-independent figure beside the Mpps of
# bench/datapath.sh, which a shared machine makes noisy. Only the engine's
# lcore calls are collected (processBurst, flush, quiescent; the null PMD's
# tx_burst they call is included, as the dataplane pays it too); the bench's
# untimed packet copies and set-up are not. Each case runs twice with
# different packet counts and the difference is divided, so the warm-up
# (which installs every flow through the slow path) cancels out.
#   bash bench/datapath_callgrind.sh ["case substring" ...]
#   default cases: "uplink, 1000 flows" "uplink, 100000 flows" (Geneve encap, 64 B)
# Environment: DPU_BUILD (default build/release, must have datapath_engine_bench,
# i.e. -DDPU_BENCH=ON). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DPU_BUILD:-$PWD/build/release}
bench=$build/bench/datapath_engine_bench
if [ ! -x "$bench" ]; then
  echo "datapath_callgrind: $bench not found: build the target datapath_engine_bench (-DDPU_BENCH=ON)" >&2
  exit 1
fi
command -v valgrind >/dev/null || { echo "datapath_callgrind: valgrind not installed (apt-get install valgrind)" >&2; exit 1; }
[ $# -gt 0 ] || set -- "uplink, 1000 flows" "uplink, 100000 flows"
out=$(mktemp -d /tmp/dpu-callgrind.XXXXXX)
trap 'rm -rf "$out"' EXIT

instructions() {  # case packets → total Ir collected
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect='*EngineImpl::processBurst*' --toggle-collect='*EngineImpl::flush*' \
    --toggle-collect='*EngineImpl::quiescent*' "$bench" --packets "$2" --only "$1" 2>&1 >/dev/null |
    awk '/Collected :/ {print $4}'
}

small=64000 large=256000
for c in "$@"; do
  a=$(instructions "$c" $small)
  b=$(instructions "$c" $large)
  if [ -z "$a" ] || [ -z "$b" ]; then
    echo "datapath_callgrind: no count for \"$c\" (does a case name contain it?)" >&2
    exit 1
  fi
  awk -v c="$c" -v a="$a" -v b="$b" -v n=$((large - small)) \
    'BEGIN {printf "%-28s %7.1f instructions per packet (engine + null PMD tx)\n", c, (b - a) / n}'
done
