# Shared prologue of host-shim's system tests: skip (skip_test) without root, bring up the
# env (../env.bash) in a fresh directory, tear everything down on any exit, and
# small assertion helpers. A test sets HOSTSHIM_NUM_VFS etc. before sourcing.
set -u
: "${DPU_BUILD_DIR:?set DPU_BUILD_DIR to the build directory}"
source "$(dirname "${BASH_SOURCE[0]}")/../env.bash"
[ "$(id -u)" = 0 ] || skip_test "host-shim system tests need root (network namespaces)"
# A test that needs a test control the real dpu-agent cannot mimic sets this first.
if [ -n "${HOSTSHIM_NEEDS_FAKE:-}" ]; then hostshim_skip_unless_fake "$HOSTSHIM_NEEDS_FAKE"; fi

TEST_NAME=$(basename "$0" .bash)
TEST_DIR=$(mktemp -d "/tmp/hostshim-$TEST_NAME.XXXXXX")

_test_exit() {
  local rc=$?
  [ -n "${_WATCHDOG_PID:-}" ] && kill -KILL "$_WATCHDOG_PID" 2>/dev/null
  if [ $rc != 0 ]; then
    echo "---- $TEST_NAME failed (rc $rc); host-shim log tail:" >&2
    tail -n 40 "$TEST_DIR/host-shim.log" "$TEST_DIR/host-shim.stderr" >&2 2>/dev/null
    echo "---- host netns addresses:" >&2
    ip -n "$HOST_NETNS" -br addr >&2 2>/dev/null
  fi
  hostshim_env_down
  # Under ASan/UBSan the daemons report memory errors on stderr: any is a failure.
  if grep -q "ERROR: AddressSanitizer\|runtime error:" "$TEST_DIR/host-shim.stderr" "$TEST_DIR/fake_dpu_api.log" "$TEST_DIR/dpu-agent.stderr" 2>/dev/null; then
    echo "---- $TEST_NAME: sanitizer reports:" >&2
    grep -A20 "ERROR: AddressSanitizer\|runtime error:" "$TEST_DIR/host-shim.stderr" "$TEST_DIR/fake_dpu_api.log" \
      "$TEST_DIR/dpu-agent.stderr" >&2 2>/dev/null
    rc=1
  fi
  rm -rf "$TEST_DIR"
  exit $rc
}
trap _test_exit EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

hostshim_env_up "$TEST_DIR" || fail "hostshim_env_up"

# A hang must not run into ctest's timeout: its SIGKILL prints nothing and
# leaves the netns, veths and daemons behind for the tests after. Ten seconds
# before it (DPU_TEST_TIMEOUT, the test's ctest TIMEOUT), print the threads of
# every process this test started and end them, so the trap above reports
# and tears down (system/watchdog.bash proves it).
_descendants() {  # pid → its descendants, parents first
  local c
  for c in $(pgrep -P "$1"); do echo "$c"; _descendants "$c"; done
}
_dump_threads() {  # pid
  local comm; comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 0
  case $comm in bash|sleep|cat|tail) return 0 ;; esac
  echo "---- $comm (pid $1): $(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | cut -c1-200)" >&2
  if command -v gdb >/dev/null; then
    # Threads with the same stack (a pool's idle workers) printed once, counted.
    timeout 20 gdb -batch -nx -p "$1" -ex 'thread apply all bt 12' 2>/dev/null | /usr/bin/python3 -c '
import re, sys
groups, order, cur = {}, [], None
for line in sys.stdin:
    t = re.match(r"Thread \d+ \(.*LWP (\d+)\)", line)
    if t:
        cur = [t.group(1), []]
        continue
    f = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", line)
    if f and cur is not None:
        cur[1].append(f.group(1))
        key = tuple(cur[1])
    if line.strip() == "" and cur is not None and cur[1]:
        key = tuple(cur[1])
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(cur[0])
        cur = None
if cur is not None and cur[1]:
    key = tuple(cur[1]); order.append(key) if key not in groups else None; groups.setdefault(key, []).append(cur[0])
for key in order:
    print("Thread%s %s:" % ("s" if len(groups[key]) > 1 else "", ", ".join(groups[key][:8]) + (" ..." if len(groups[key]) > 8 else "")))
    for i, fn in enumerate(key):
        print("  #%d %s" % (i, fn[:160]))
' >&2
  else
    local t
    for t in /proc/"$1"/task/*; do echo "  thread ${t##*/} $(cat "$t/comm" 2>/dev/null): $(cat "$t/wchan" 2>/dev/null)" >&2; done
  fi
}
_watchdog() {
  local main=$1 wait_s=$(( ${DPU_TEST_TIMEOUT:-120} - 10 ))
  sleep "$wait_s" </dev/null >/dev/null 2>&1
  echo "---- $TEST_NAME: still running after ${wait_s} s; the threads of what it started:" >&2
  local p all
  all=$(_descendants "$main")
  for p in $all; do [ "$p" = "$BASHPID" ] || _dump_threads "$p"; done
  # What a step waits on (clients, daemons: a foreground command would hold
  # back the shell's trap), then the test itself: its EXIT trap tears down.
  for p in $all; do
    [ "$p" != "$BASHPID" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" != bash ] && kill -TERM "$p" 2>/dev/null
  done
  kill -TERM "$main" 2>/dev/null
}
_watchdog $$ &
_WATCHDOG_PID=$!

# Runs hostshim-client and stores the JSON answer in $OUT and its exit code in $RC.
call() {
  OUT=$(hostshim_client "$@" 2>"$TEST_DIR/client.err"); RC=$?
  if [ $RC = 2 ]; then fail "no answer from host-shim: $(cat "$TEST_DIR/client.err")"; fi
}
expect_ok() { call "$@"; [ $RC = 0 ] || fail "expected success from '$*', got $OUT"; }
expect_code() {
  local code=$1; shift
  call "$@"
  [ $RC = 1 ] || fail "expected error $code from '$*', got $OUT"
  local got
  got=$(jq -r .error.code <<<"$OUT")
  [ "$got" = "$code" ] || fail "expected error $code from '$*', got $OUT"
}
# Millisecond wall clock.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
pod_ns() { basename "$1"; }
