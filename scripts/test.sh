#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   1. install the Debian packages the build and the tests need;
#   2. Release build, every ctest (unit, interop against scapy and tshark, system);
#   3. ASan+UBSan build, the unit tests (fuzz corpora replayed included);
#   4. clang libFuzzer build, each fuzz target for a bounded time;
#   5. arm64 cross build of the DPU side, its unit tests under qemu-aarch64-static;
#   6. the container images built with buildah and run with podman (ctest -L images),
#      in the background: the host and amd64 DPU images from the end of stage 2 (they
#      wait on the mirror and the disk), the arm64 DPU image (images_run_arm64, run
#      under qemu) once stage 5 has cross-built its binaries, beside its unit tests.
# It ends with one line "N passed, N failed" over all stages (", N skipped"
# is added when tests skipped) and exits non-zero if any test failed. The line
# before it lists the tests that passed only on a rerun ("none" if none).
#
# Reruns: a failed test labelled `system` (root, ten daemons, real packets on
# a 2-core box) runs once more, alone, and counts by that second run; both runs
# stay in the log. Any other failure counts as it is: a unit test that fails
# once has a bug.
#
# Skips: a test that cannot run here (no root, a tool missing) prints a
# "SKIP:" line and exits with the skip code (tests/CMakeLists.txt), and ctest
# reports it skipped. The rule: run as root, as CI runs it, step 1 installed
# every package, so a skip means a broken environment and counts as a failure;
# run as another user (a local run without the root tiers), skips are counted
# as skipped and do not fail the run. A test that exits with the skip code
# without a "SKIP:" line did not mean to skip: it counts as failed.
#
# DPU_FUZZ_SECONDS (default 20) bounds each fuzz target; DPU_SKIP_STAGES="asan
# fuzz arm64 images" leaves stages out for a quick local run (without arm64 the
# arm64 DPU image is not built either).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${DPU_FUZZ_SECONDS:-20}
skip=" ${DPU_SKIP_STAGES:-} "
strict=0
[ "$(id -u)" = 0 ] && strict=1

# step NAME: a stage begins; the time each took is listed at the end.
stage_times=()
stage_name="" stage_start=$SECONDS suite_start=$SECONDS
end_step() {
  [ -n "$stage_name" ] && stage_times+=("$stage_name $((SECONDS - stage_start))s")
  stage_name=""
}
step() {
  end_step
  stage_name=$*; stage_start=$SECONDS
  printf '\n==> %s\n' "$*"
}

step "dependencies"
bash scripts/install-deps.sh

passed=0
failed=0
skipped=0
failed_stages=()
rerun_passed=()     # STAGE/TEST that passed only when run again
skips=()            # STAGE/TEST skipped (not as root)
strict_skips=()     # STAGE/TEST skipped as root: counted as failed
silent_skips=()     # STAGE/TEST that exited with the skip code without saying why
unbuilt=()          # STAGE/TEST whose executable the stage did not build (ctest: "Not Run")
work=$(mktemp -d)
# (Under set -e a failing kill in the trap, of a run already waited for,
# would become the script's exit status: it must not.)
# A background run's pid may be a subshell: its children are ended with it.
trap 'for pid in ${arm64_deps_pid:-} ${images_pid:-} ${images_arm64_pid:-}; do pkill -P "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# The arm64 stage's cross toolchain and sysroot are mostly downloads (a fresh
# machine fetches a few hundred MB): fetched in the background from here, while
# the release build and tests use the CPU, and waited for by that stage.
arm64_deps_pid=""
if [[ "$skip" != *" arm64 "* ]]; then
  # Its exit status goes to a file: bash forgets a finished background job's
  # status once a later child of this shell is given the same pid, and by the
  # arm64 stage thousands of processes have come and gone (pids wrap).
  { status=0; bash scripts/install-arm64-deps.sh > "$work/arm64-deps.log" 2>&1 || status=$?
    echo "$status" > "$work/arm64-deps.status"; } &
  arm64_deps_pid=$!
fi

# junit_results FILE: one line "passed|failed|skipped|silent NAME" per test of
# ctest's JUnit report; "silent" is a skip without a "SKIP:" line in its output,
# "unbuilt" a test ctest could not run because its executable is missing.
junit_results() {
  /usr/bin/python3 - "$1" <<'PY'
import re, sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name, status = case.get("name"), case.get("status")
    if status == "run":
        print("passed", name)
    elif case.find("skipped") is not None:
        out = case.findtext("system-out") or ""
        if re.search(r"^SKIP:", out, re.M):
            print("skipped", name)
        elif re.search(r"(Could not|Unable to) find executable", out):
            print("unbuilt", name)
        else:
            print("silent", name)
    else:
        print("failed", name)
PY
}

# system_tests BUILD_DIR: the names of the tests labelled `system`.
system_tests() {
  ctest --test-dir "$1" --show-only=json-v1 | /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    for p in t.get("properties", []):
        if p["name"] == "LABELS" and "system" in p["value"]:
            print(t["name"])'
}

# run_ctest STAGE BUILD_DIR [ctest args]: runs ctest, reruns its failed system
# tests once, adds the counts to the totals.
run_ctest() {
  local stage=$1 dir=$2
  shift 2
  local report=$work/$stage.xml rerun_report=$work/$stage-rerun.xml failed_before=$failed
  rm -f "$rerun_report"
  if [ "${1:-}" = --from-report ]; then
    # A run that already happened (in the background): count its report,
    # which must be another file than $report.
    cp "$2" "$report" 2>/dev/null || rm -f "$report"
  else
    rm -f "$report"
    ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$jobs" --output-junit "$report" "$@" || true
  fi
  if [ ! -s "$report" ] || ! junit_results "$report" > "$work/$stage.results" || [ ! -s "$work/$stage.results" ]; then
    echo "$stage: ctest ran no test" >&2
    failed=$((failed + 1))
    failed_stages+=("$stage")
    return
  fi
  local system=" $(system_tests "$dir" | tr '\n' ' ') "
  local status name again=()
  while read -r status name; do
    case $status in
      passed) passed=$((passed + 1)) ;;
      failed)
        if [[ "$system" == *" $name "* ]]; then again+=("$name"); else failed=$((failed + 1)); fi ;;
      skipped)
        if [ "$strict" = 1 ]; then strict_skips+=("$stage/$name"); failed=$((failed + 1))
        else skips+=("$stage/$name"); skipped=$((skipped + 1)); fi ;;
      silent) silent_skips+=("$stage/$name"); failed=$((failed + 1)) ;;
      unbuilt) unbuilt+=("$stage/$name"); failed=$((failed + 1)) ;;
    esac
  done < "$work/$stage.results"
  if [ ${#again[@]} -gt 0 ]; then
    step "$stage: running the failed system tests once more: ${again[*]}"
    local regex
    regex="^($(printf '%s\n' "${again[@]}" | sed 's/[][\.*^$+?(){}|]/\\&/g' | paste -sd '|'))\$"
    ctest --test-dir "$dir" --output-on-failure --timeout 900 -j 1 --output-junit "$rerun_report" -R "$regex" || true
    local seen=()
    if [ -s "$rerun_report" ] && junit_results "$rerun_report" > "$work/$stage-rerun.results"; then
      while read -r status name; do
        seen+=("$name")
        if [ "$status" = passed ]; then passed=$((passed + 1)); rerun_passed+=("$stage/$name")
        else failed=$((failed + 1)); fi
      done < "$work/$stage-rerun.results"
    fi
    # A rerun that did not report a test (ctest died) leaves it failed.
    for name in "${again[@]}"; do
      [[ " ${seen[*]} " == *" $name "* ]] || failed=$((failed + 1))
    done
  fi
  [ "$failed" -gt "$failed_before" ] && failed_stages+=("$stage")
  return 0
}

step "release build"
cmake --preset release
cmake --build --preset release -j "$jobs"
step "release tests"
run_ctest release build/release -LE images

# The images stage mostly waits on debootstrap and apt (the mirror, the disk),
# so it runs beside the CPU-bound stages that follow; its output and counts
# come after them.
images_pid=""
if [[ "$skip" != *" images "* ]]; then
  step "container images (buildah, podman), in the background"
  # The amd64 images; the arm64 DPU image waits for the arm64 stage's binaries.
  ctest --test-dir build/release -L images -E '^images_run_arm64$' -j 1 --timeout 2400 --output-on-failure \
    --output-junit "$work/images-background.xml" > "$work/images.log" 2>&1 &
  images_pid=$!
fi
images_arm64_pid=""

if [[ "$skip" != *" asan "* ]]; then
  step "ASan+UBSan build"
  cmake --preset asan
  # Only what the unit tests run (tests/CMakeLists.txt): the system tests are not run under ASan.
  cmake --build --preset asan -j "$jobs" --target unit_test_targets
  step "ASan+UBSan unit tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest asan build/asan -L unit
fi

if [[ "$skip" != *" fuzz "* ]]; then
  step "libFuzzer build"
  cmake --preset fuzz -DDPU_FUZZ_SECONDS="$fuzz_seconds"
  cmake --build --preset fuzz -j "$jobs" --target fuzz_targets
  step "fuzzing, ${fuzz_seconds}s per target"
  # Two targets at a time: a fuzzer is one process on one core.
  run_ctest fuzz build/fuzz -L fuzz -j 2
fi

if [[ "$skip" != *" arm64 "* ]]; then
  step "arm64 cross build of the DPU side"
  # Still running: wait for it. Already reaped (bash may not know it any more): its status file.
  wait "$arm64_deps_pid" 2>/dev/null || true
  arm64_deps_pid=""
  arm64_deps_status=$(cat "$work/arm64-deps.status" 2>/dev/null || echo "none (it was killed)")
  cat "$work/arm64-deps.log"
  if [ "$arm64_deps_status" != 0 ]; then
    echo "arm64: scripts/install-arm64-deps.sh failed (exit $arm64_deps_status), its output above" >&2
    exit 1
  fi
  cmake --preset arm64
  # The daemons the DPU image ships and what the unit tests run.
  cmake --build --preset arm64 -j "$jobs" --target dpu-dataplane dpu-agent dpuctl dpu-offload-hw-check unit_test_targets
  if [[ "$skip" != *" images "* ]]; then
    # The arm64 DPU image of these binaries, built without emulation (its
    # rootfs is extracted) and run under qemu, beside the unit tests; it has a
    # directory of its own, so it may overlap the amd64 images' run.
    ctest --test-dir build/release -R '^images_run_arm64$' -j 1 --timeout 2400 --output-on-failure \
      --output-junit "$work/images-arm64-background.xml" > "$work/images-arm64.log" 2>&1 &
    images_arm64_pid=$!
  fi
  step "arm64 unit tests under qemu-aarch64-static"
  # Every unit test; a shell test runs the Arm binaries under the emulator
  # (EMULATOR, tests/support/shell.bash), daemons included.
  run_ctest arm64 build/arm64 -L unit
fi

if [ -n "$images_pid" ]; then
  step "container images: the background run's output"
  wait "$images_pid" || true
  images_pid=""
  cat "$work/images.log"
  run_ctest images build/release --from-report "$work/images-background.xml"
fi
if [ -n "$images_arm64_pid" ]; then
  step "the arm64 DPU image: the background run's output"
  wait "$images_arm64_pid" || true
  images_arm64_pid=""
  cat "$work/images-arm64.log"
  run_ctest images-arm64 build/release --from-report "$work/images-arm64-background.xml"
fi

end_step
echo
echo "stage times: $(IFS=,; echo "${stage_times[*]}" | sed 's/,/, /g'); total $((SECONDS - suite_start))s"
if [ ${#failed_stages[@]} -gt 0 ]; then
  echo "failing stages: ${failed_stages[*]}"
fi
if [ ${#silent_skips[@]} -gt 0 ]; then
  echo "exited with the skip code without a SKIP: line (counted as failed): ${silent_skips[*]}"
fi
if [ ${#unbuilt[@]} -gt 0 ]; then
  echo "not run, their executables were not built (counted as failed): ${unbuilt[*]}"
fi
if [ ${#strict_skips[@]} -gt 0 ]; then
  echo "skipped although run as root, where everything must run (counted as failed): ${strict_skips[*]}"
fi
if [ ${#skips[@]} -gt 0 ]; then
  echo "skipped (not run as root): ${skips[*]}"
fi
echo "passed only on a rerun: ${rerun_passed[*]:-none}"
summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ] && [ ${#failed_stages[@]} -eq 0 ]
