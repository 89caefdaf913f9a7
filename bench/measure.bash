# Measuring a busy-polling forwarder; sourced by bench/datapath.sh and bench/esp.sh.
# Every forwarder busy-polls its core, so the packets it forwarded per second
# it had the core (its forwarding thread's on-CPU time, from schedstat) is
# its rate per core whatever else this shared machine runs: the figure the
# ratios use. Next to it, packets per wall-clock second and the share of the
# core the thread had (on-CPU / wall), which shows how loaded the machine was.
thread_ns() {  # pid name-regex → on-CPU ns of the process's threads so named
  local t name ns sum=0
  for t in /proc/"$1"/task/*; do
    { read -r name < "$t/comm"; } 2>/dev/null || continue
    [[ $name =~ $2 ]] || continue
    { read -r ns _ < "$t/schedstat"; } 2>/dev/null || continue
    sum=$((sum + ns))
  done
  echo "$sum"
}

# Wall time and on-CPU ns around a command (its output to `file`), each the
# midpoint of before and after: where the command read its counter.
sample() {  # pid name-regex file command...
  local t0 n0 t1 n1 pid=$1 re=$2 file=$3
  shift 3
  t0=$EPOCHREALTIME; n0=$(thread_ns "$pid" "$re")
  "$@" > "$file"
  n1=$(thread_ns "$pid" "$re"); t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" -v m="$n0" -v n="$n1" 'BEGIN {printf "%.6f %.0f\n", (a + b) / 2, (m + n) / 2}'
}

rate() {  # "t0 ns0 count0" "t1 ns1 count1" → Mpps per on-CPU second, Mpps per wall second, core share
  echo "$1 $2" | awk '{dt = $4 - $1; dn = $5 - $2; dc = $6 - $3
    if (dt <= 0 || dn <= 0 || dc <= 0) {print "0 0 0"; exit}
    printf "%.3f %.3f %.2f\n", dc / dn * 1e3, dc / dt / 1e6, dn / dt / 1e9}'
}

# DPDK 22.11 names its worker lcores' threads rte-worker-N (lcore-worker-N before).
dpdk_worker='^(rte|lcore)-worker-'

# Where a forwarder's core time goes (DPU_BENCH_PROFILE=1): perf samples its
# forwarding thread (cpu-clock, 499 a second: too few to slow it) while its
# rate is measured, and each shared object's share of the samples says how
# the thread's time per packet splits between the input PMD (net_pcap), the
# forwarder's own code, the output PMD (net_null) and the rest (mbuf and
# mempool code inlined into the PMDs counts as theirs; ld.so's TLS lookups,
# libc and the kernel as the rest). Without perf, or without the setting,
# these do nothing.
profile_on() { [ "${DPU_BENCH_PROFILE:-0}" = 1 ] && command -v perf >/dev/null 2>&1; }

profile_start() {  # pid name-regex seconds file: perf on the process's first thread so named, in the background
  profile_on || return 0
  local t name tid=
  for t in /proc/"$1"/task/*; do
    { read -r name < "$t/comm"; } 2>/dev/null || continue
    [[ $name =~ $2 ]] && { tid=${t##*/}; break; }
  done
  rm -f "$4"
  [ -n "$tid" ] || return 0
  perf record -q -e cpu-clock -F 499 -t "$tid" -o "$4" -- sleep "$3" > /dev/null 2>&1 &
  profile_pid=$!
}

profile_stop() {  # file → "object share-%" lines, the largest first (nothing if nothing was sampled)
  profile_on || return 0
  [ -n "${profile_pid:-}" ] && { wait "$profile_pid" 2> /dev/null || true; }
  profile_pid=
  [ -s "$1" ] || return 0
  perf report -i "$1" --no-children --sort dso --stdio -q 2> /dev/null |
    awk 'NF >= 2 && $1 ~ /%$/ {sub(/%$/, "", $1); print $2, $1}'
}
