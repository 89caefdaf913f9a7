#!/usr/bin/env bash
# Instructions per packet of the engine's fast path, counted by callgrind on
# datapath_engine_bench: a machine-independent figure beside the Mpps of
# bench/datapath.sh, which a shared machine makes noisy. Only the engine's
# lcore calls are collected (processBurst, flush, quiescent; the null PMD's
# tx_burst they call is included, as the dataplane pays it too); the bench's
# untimed packet copies and set-up are not. Each case runs twice with
# different packet counts and the difference is divided, so the warm-up
# (which installs every flow through the slow path) cancels out. One round,
# and a service case without the plain encap turns it is otherwise measured
# beside (--alone): callgrind counts every engine's instructions.
#   bash bench/datapath_callgrind.sh ["case substring" ...]
#   default cases: "VF->uplink, 1000 flows$" "VF->uplink, 100000 flows$" (Geneve encap, 64 B)
# A case substring matches every case whose name contains it; one that ends
# in '$' only the case whose name ends with it ("decap uplink->VF, 1000 flows$"
# without its ", 64 B" and ESP relatives).
# With DPU_CALLGRIND_CACHE=1, callgrind also simulates the caches and prints
# the data cache misses per packet, first level and last: the lines a packet's
# loads and stores touch that the caches do not hold (callgrind ignores
# prefetches, so this counts what the hit path waits on unless it prefetches
# it). DPU_CALLGRIND_LL=size,ways,line sets the simulated last level (default:
# the host's; "1048576,16,64" is one core's L2, as when other work has the L3).
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
[ $# -gt 0 ] || set -- "VF->uplink, 1000 flows$" "VF->uplink, 100000 flows$"
out=$(mktemp -d /tmp/dpu-callgrind.XXXXXX)
trap 'rm -rf "$out"' EXIT

cache=()
if [ "${DPU_CALLGRIND_CACHE:-0}" = 1 ]; then
  cache=(--cache-sim=yes)
  [ -n "${DPU_CALLGRIND_LL:-}" ] && cache+=(--LL="$DPU_CALLGRIND_LL")
fi

counts() {  # case packets → the events collected: Ir (and Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw with the caches)
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "${cache[@]}" \
    --toggle-collect='*EngineImpl::processBurst*' --toggle-collect='*EngineImpl::flush*' \
    --toggle-collect='*EngineImpl::quiescent*' "$bench" --packets "$2" --only "$1" --rounds 1 --alone 2>&1 >/dev/null |
    awk '/Collected :/ {$1 = $2 = $3 = ""; print}'
}

small=64000 large=256000
for c in "$@"; do
  a=$(counts "$c" $small)
  b=$(counts "$c" $large)
  if [ -z "$a" ] || [ -z "$b" ]; then
    echo "datapath_callgrind: no count for \"$c\" (does a case name contain it?)" >&2
    exit 1
  fi
  echo "$a $b" | awk -v c="${c%\$}" -v n=$((large - small)) '{
    k = NF / 2
    printf "%-28s %7.1f instructions per packet (engine + null PMD tx)", c, ($(k + 1) - $1) / n
    if (k == 9) printf "; data cache misses per packet: %.2f first level, %.2f last level",
                       ($(k + 5) + $(k + 6) - $5 - $6) / n, ($(k + 8) + $(k + 9) - $8 - $9) / n
    printf "\n"}'
done
