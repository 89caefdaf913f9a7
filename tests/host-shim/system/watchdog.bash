# A system test that hangs is ended by its watchdog (support/shell.bash) before ctest's
# timeout would SIGKILL it: the watchdog prints the threads of what the test
# started, ends the step that blocks, and the test's trap tears the
# environment down (no netns left), with the test failed.
set -u
source "$(dirname "$0")/../../support/shell.bash"
[ "$(id -u)" = 0 ] || skip_test "host-shim system tests need root (network namespaces)"
: "${DPU_BUILD_DIR:?set DPU_BUILD_DIR to the build directory}"
dir=$(mktemp -d /tmp/hostshim-watchdog.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }

marker=watchdog-marker-$$
trap 'pkill -f -- "$marker"; rm -rf "$dir"' EXIT
cat > "$dir/hangs.bash" <<INNER
source "$(cd "$(dirname "$0")" && pwd)/lib.bash"
echo "env \$HOSTSHIM_ENV_ID"
# A daemon started detached (not a descendant of the test, as the lab's are):
# its threads are printed too when its command line holds the pattern given.
( exec -a $marker /usr/bin/python3 -c 'import time; time.sleep(600)' </dev/null >/dev/null 2>&1 & )
watchdog_stop
watchdog_start $marker
# The watchdog runs, and is not one of the shell's jobs (a bare wait would wait for it).
kill -0 "\$_WATCHDOG_PID" && echo "watchdog running"
jobs -p | grep -qx "\$_WATCHDOG_PID" && echo "watchdog is a job"
step "a step that never ends"
sleep 600
echo "not reached"
INNER
t0=$(date +%s)
# Its watchdog fires 15 s before DPU_TEST_TIMEOUT: 8 s after the env is up.
DPU_TEST_TIMEOUT=23 timeout 90 bash "$dir/hangs.bash" > "$dir/out" 2>&1
rc=$?
took=$(( $(date +%s) - t0 ))
cat "$dir/out"
echo "the hung test ended with $rc after $took s"
[ $rc = 1 ] || fail "expected the hung test to fail with 1 (124: the watchdog never fired)"
grep -q "still running after 8 s" "$dir/out" || fail "the watchdog said nothing"
grep -q -- "---- host-shim (pid" "$dir/out" || fail "no threads of host-shim printed"
grep -q -- "---- python3 (pid [0-9]*): $marker" "$dir/out" || fail "no threads of the detached process printed"
if command -v gdb > /dev/null; then grep -q "^Threads\? [0-9]" "$dir/out" || fail "gdb printed no thread"; fi
grep -q "failed (rc 1); host-shim log tail" "$dir/out" || fail "the test's trap did not report"
! grep -q "not reached" "$dir/out" || fail "the blocked step went on"
grep -q "^watchdog running" "$dir/out" || fail "no watchdog ran"
! grep -q "^watchdog is a job" "$dir/out" || fail "the watchdog is a job of the test's shell: a bare wait would wait for it"
id=$(sed -n 's/^env //p' "$dir/out" | head -1)
[ -n "$id" ] || fail "the hung test never brought its env up"
left=$(ip netns list | grep -c -- "$id" || true)
[ "$left" = 0 ] || fail "$left network namespaces of $id left behind"
echo PASS
