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
