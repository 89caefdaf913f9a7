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
  watchdog_stop
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

# A hang is reported and torn down before ctest's timeout (support/shell.bash).
watchdog_start

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
