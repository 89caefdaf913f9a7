# tests/support/shell.bash — small shell helpers shared by the system tests.

# matches GREP-ARGS... — `grep -q` that reads its whole input. Under
# `set -o pipefail`, `cmd | matches X` fails at random: grep exits at the first
# match and cmd dies of SIGPIPE on its next write (ip(8) flushes per line).
matches() { grep "$@" >/dev/null; }

# wait_for SECONDS CMD... — polls CMD every 50 ms until it succeeds; false when
# it has not within SECONDS. A test waits for the condition, never for a time.
wait_for() {
  local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ $(( $(date +%s%N) / 1000000 )) -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

# The exit code of a test that cannot run here (no root, a tool missing):
# ctest reports it as skipped, not passed (SKIP_RETURN_CODE, tests/CMakeLists.txt).
DPU_TEST_SKIP_CODE=77
# skip_test WHY... — says why on a "SKIP:" line and exits with the skip code.
skip_test() { echo "SKIP: $(basename "$0"): $*"; exit "$DPU_TEST_SKIP_CODE"; }

# EMULATOR: the words that run a binary of this build, empty natively and the
# emulator when the build is a cross build (DPU_TEST_EMULATOR, set by
# tests/CMakeLists.txt). A daemon started in the background runs as
# `"${EMULATOR[@]}" "$bin" ARGS &`, so that $! is its own pid (qemu-user runs
# the guest in its own process and hands it the signals a test sends).
read -ra EMULATOR <<< "${DPU_TEST_EMULATOR:-}"
# run_built BINARY ARGS...: a binary of this build, in the foreground.
run_built() { "${EMULATOR[@]}" "$@"; }

# watchdog_start [PATTERN] — a test that hangs must not run into ctest's
# timeout: its SIGKILL prints nothing and leaves the test's netns, veths and
# daemons behind for the tests after it. Before that timeout (DPU_TEST_TIMEOUT,
# which tests/CMakeLists.txt sets to the test's TIMEOUT: 30 s before it, 15 s
# for a timeout under two minutes) the watchdog prints the threads of every
# process the test started, and of those whose command line holds PATTERN
# (daemons started detached: the lab's directory), with gdb, threads of the
# same stack once, for at most half that lead. Then it sends the test TERM, so
# that its EXIT trap reports and tears down. A shell blocked in a foreground
# command runs no trap until that command ends: if the test has not ended 5 s
# later, the watchdog ends the processes the test started. Call it once the
# test's EXIT trap is set; call watchdog_stop in that trap.
# tests/host-shim/system/watchdog.bash proves it.
watchdog_start() {
  local timeout=${DPU_TEST_TIMEOUT:-0}
  [ "$timeout" -gt 20 ] 2>/dev/null || return 0
  local lead=15
  [ "$timeout" -ge 120 ] && lead=30
  # Started from a subshell that exits at once: not a job of the test's
  # shell, so a bare `wait` there does not wait for it.
  _WATCHDOG_PID=$( { _watchdog "$$" $(( timeout - lead )) "$(basename "$0")" "${1:-}" >&2 & } ; echo $! )
}
watchdog_stop() {
  [ -n "${_WATCHDOG_PID:-}" ] && kill -KILL "$_WATCHDOG_PID" 2>/dev/null
  _WATCHDOG_PID=
  return 0
}
_descendants() {  # pid → its descendants, parents first
  local c
  for c in $(pgrep -P "$1"); do echo "$c"; _descendants "$c"; done
}
_dump_threads() {  # pid
  local comm; comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 0
  case $comm in bash|sleep|cat|tail|timeout|gdb) return 0 ;; esac
  echo "---- $comm (pid $1): $(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | cut -c1-200)" >&2
  if ! command -v gdb >/dev/null; then
    local t
    for t in /proc/"$1"/task/*; do echo "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null): $(cat "$t/wchan" 2>/dev/null)" >&2; done
    return 0
  fi
  timeout 10 gdb -batch -nx -p "$1" -ex 'thread apply all bt 12' 2>/dev/null | /usr/bin/python3 -c '
import re, sys
groups, order = {}, []
def close(cur):
    if cur and cur[1]:
        key = tuple(cur[1])
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(cur[0])
cur = None
for line in sys.stdin:
    t = re.match(r"Thread \d+ \(.*LWP (\d+)\)", line)
    if t:
        close(cur)
        cur = [t.group(1), []]
        continue
    f = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", line)
    if f and cur is not None:
        cur[1].append(f.group(1)[:160])
close(cur)
for key in order:
    ids = groups[key]
    print("Thread%s %s:" % ("s" if len(ids) > 1 else "", ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")))
    for i, fn in enumerate(key):
        print("  #%d %s" % (i, fn))
' >&2
}
_watchdog() {  # main-pid seconds name pattern
  local main=$1 wait_s=$2 name=$3 pattern=$4 p all stop_at
  sleep "$wait_s" </dev/null >/dev/null 2>&1
  # The test may have ended without its trap (SIGKILL): its pid is not ours then.
  [ "$(cat "/proc/$main/comm" 2>/dev/null)" = bash ] || return 0
  echo "---- $name: still running after ${wait_s} s; the threads of what it started:" >&2
  stop_at=$(( SECONDS + (DPU_TEST_TIMEOUT - wait_s) / 2 ))
  all=$(_descendants "$main"; [ -z "$pattern" ] || pgrep -f -- "$pattern")
  for p in $(echo "$all" | awk '!seen[$0]++'); do
    [ $SECONDS -ge $stop_at ] && { echo "---- (no time left for more threads)" >&2; break; }
    _dump_threads "$p"
  done
  kill -TERM "$main" 2>/dev/null
  for (( p = 0; p < 50; p++ )); do kill -0 "$main" 2>/dev/null || return 0; sleep 0.1; done
  echo "---- $name: blocked in a command; ending what it started" >&2
  for p in $(_descendants "$main"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" != bash ] && kill -TERM "$p" 2>/dev/null
  done
}
