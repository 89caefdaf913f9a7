#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   1. install the Debian packages the build and the tests need;
#   2. Release build, every ctest (unit, interop against scapy and tshark, system);
#   3. ASan+UBSan build, the unit tests (fuzz corpora replayed included);
#   4. clang libFuzzer build, each fuzz target for a bounded time.
# It ends with one line "N passed, N failed" over all stages and exits non-zero
# if any test failed. DPU_FUZZ_SECONDS (default 20) bounds each fuzz target;
# DPU_SKIP_STAGES="asan fuzz" skips stages for a quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
fuzz_seconds=${DPU_FUZZ_SECONDS:-20}
skip=" ${DPU_SKIP_STAGES:-} "

step() { printf '\n==> %s\n' "$*"; }

step "dependencies"
bash scripts/install-deps.sh

passed=0
failed=0
failed_stages=()
retried=()

# run_ctest STAGE BUILD_DIR [ctest args]: runs ctest, adds its counts to the totals.
run_ctest() {
  local stage=$1 dir=$2
  shift 2
  local log
  log=$(mktemp)
  set +e
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$jobs" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line total nfail
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  # Tests that failed once and passed when run again (--repeat until-pass).
  local t
  for t in $(sed -nE 's/.*Test +#[0-9]+: ([^ ]+) .*\*\*\*(Failed|Timeout|Exception).*/\1/p' "$log" | sort -u); do
    grep -qE "Test +#[0-9]+: $t \.+ +Passed" "$log" && retried+=("$stage/$t")
  done
  rm -f "$log"
  if [ -z "$line" ]; then
    echo "$stage: ctest ran no test (exit $rc)" >&2
    failed=$((failed + 1))
    failed_stages+=("$stage")
    return
  fi
  nfail=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
  if [ "$rc" -ne 0 ]; then failed_stages+=("$stage"); fi
}

step "release build"
cmake --preset release
cmake --build --preset release -j "$jobs"
step "release tests"
# A system test that fails is run once more, and both runs stay in the log:
# a broken feature fails twice; a test starved of CPU on a 2-core box (ten
# daemons, real packets) gets a second chance instead of sinking the run.
run_ctest release build/release --repeat until-pass:2

if [[ "$skip" != *" asan "* ]]; then
  step "ASan+UBSan build"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  step "ASan+UBSan unit tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest asan build/asan -L unit
fi

if [[ "$skip" != *" fuzz "* ]]; then
  step "libFuzzer build"
  cmake --preset fuzz -DDPU_FUZZ_SECONDS="$fuzz_seconds"
  cmake --build --preset fuzz -j "$jobs" --target fuzz_targets
  step "fuzzing, ${fuzz_seconds}s per target"
  # One target at a time: each fuzzer wants a whole core and the box has two.
  run_ctest fuzz build/fuzz -L fuzz -j 1
fi

echo
if [ ${#failed_stages[@]} -gt 0 ]; then
  echo "failing stages: ${failed_stages[*]}"
fi
if [ ${#retried[@]} -gt 0 ]; then
  echo "passed only when run again: ${retried[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failed_stages[@]} -eq 0 ]
