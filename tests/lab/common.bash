# tests/lab/common.bash — shared start of the lab end-to-end tests: skip
# (visibly, with the skip code) unless root, source the lab library (lab/lib/lab.bash), give the test
# a lab of its own (name from the test and the pid, so tests run in parallel),
# and tear it down on exit, failing the test if anything of the lab is left.
#
#   source "$(dirname "$0")/common.bash" conn     # short tag: [a-z]{1,5}
#   lab_test_up NODES PODS_PER_NODE               # dl_up, or fail with the logs
#   check "what" CMD...   /   fail "what"         # counted failures; finish exits 1 if any
set -uo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/support/shell.bash"

[ "$(id -u)" = 0 ] || skip_test "needs root (network namespaces, XDP, the real daemons)"
for _tool in ip ethtool curl jq iperf3 ping ss; do
  command -v "$_tool" >/dev/null || skip_test "$_tool is not installed (scripts/install-deps.sh)"
done
: "${DPU_BUILD_DIR:?set DPU_BUILD_DIR to the build directory}"
export DPU_BUILD_DIR
DL_QUIET=${DL_QUIET:-1}
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/lab/lib/lab.bash"
dl_init "${1:-t}$$" || exit 1
FAILURES=0
T0=$(date +%s%N)
# The lab tests' own helpers (who_server.py), copied into the lab's directory:
# a helper runs inside a pod's netns from wherever the test was started, and
# the lab's teardown stops only processes whose command line names that
# directory (never another's, whatever a pid became).
# (lab_test_up copies them, once the lab and its directory exist.)
LAB_TESTS=$DL_DIR/tests
_LAB_TESTS_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
elapsed() { echo "$(( ($(date +%s%N) - T0) / 1000000 )) ms"; }

_lab_test_exit() {
  local rc=$?
  trap - EXIT
  watchdog_stop
  # Background pings, transfers and captures end with the test, however it ends.
  local left
  left=$(jobs -p)
  [ -n "$left" ] && kill $left 2>/dev/null
  if [ "$rc" != 0 ] || [ "$FAILURES" != 0 ]; then
    local f n
    for f in "$DL_DIR"/n*/*.log "$DL_DIR"/n*/*.stderr; do
      [ -s "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
    done
    for n in $(dl_nodes); do
      echo "--- node$n: dpuctl ports; stats" >&2
      dl_dpuctl "$n" ports >&2 2>&1; dl_dpuctl "$n" stats >&2 2>&1
    done
  fi
  dl_down
  if ! dl_assert_gone; then echo "FAIL: the lab left something behind" >&2; rc=1; fi
  [ "$FAILURES" != 0 ] && rc=1
  exit "$rc"
}
trap _lab_test_exit EXIT
trap 'exit 130' INT TERM
# A hang is reported and torn down before ctest's timeout (support/shell.bash),
# with the threads of the lab's daemons (their command lines name its directory).
watchdog_start "$DL_DIR"

lab_test_up() {
  dl_up "$@" || { echo "FAIL: the lab did not come up" >&2; exit 1; }
  mkdir -p "$LAB_TESTS" && cp "$_LAB_TESTS_SRC/who_server.py" "$_LAB_TESTS_SRC/netpol_probe.py" "$_LAB_TESTS_SRC/sctp_raw.py" "$LAB_TESTS/" ||
    { echo "FAIL: could not copy the lab tests' helpers into $LAB_TESTS" >&2; exit 1; }
  pass "lab up: $1 node(s), $2 pod(s) each ($(elapsed))"
}

finish() {
  if [ "$FAILURES" != 0 ]; then echo "$FAILURES failure(s) ($(elapsed))" >&2; exit 1; fi
  echo "PASS ($(elapsed))"
}
