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

