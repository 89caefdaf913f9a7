#!/usr/bin/env bash
# The benchmarks' numeric knobs (bench/knobs.bash): a value that is not a
# whole number in its range stops each script at once, with exit code 2 and
# the variable named, before anything is installed, built or started; unset
# or empty takes the default; a valid value is taken as it is.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

errors=$(mktemp)
trap 'rm -f "$errors"' EXIT

# script variable value → the message it must print. The script runs in a
# session of its own: one that does not refuse (and goes on to install, build
# or benchmark) is killed whole after 5 s.
refuse() {
  local script=$1 var=$2 value=$3 want=$4 out pid rc i
  (cd /tmp && exec setsid env "$var=$value" bash "$root/bench/$script" > /dev/null 2> "$errors") &
  pid=$!
  for (( i = 0; i < 50; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" || true
    fail "$script with $var=\"$value\": still running after 5 s, where it should have refused at once"
    return
  fi
  rc=0; wait "$pid" || rc=$?
  out=$(cat "$errors")
  [ "$rc" = 2 ] || fail "$script with $var=\"$value\": exit $rc, expected 2 (output: $out)"
  [[ $out == *"$want"* ]] || fail "$script with $var=\"$value\": printed \"$out\", expected \"$want\""
}

refuse datapath.sh DPU_BENCH_RUNS abc 'datapath.sh: DPU_BENCH_RUNS must be a whole number from 1 to 100, not "abc"'
refuse datapath.sh DPU_BENCH_SECONDS 08 'DPU_BENCH_SECONDS must be a whole number from 1 to 600, not "08"'
refuse datapath.sh DPU_BENCH_POLICIES 65537 'DPU_BENCH_POLICIES must be a whole number from 0 to 65536'
refuse esp.sh DPU_BENCH_RUNS 0 'esp.sh: DPU_BENCH_RUNS must be a whole number from 1 to 100, not "0"'
refuse esp.sh DPU_BENCH_PACKETS 10 'DPU_BENCH_PACKETS must be a whole number from 100000 to 1000000000'
refuse esp.sh DPU_BENCH_SECONDS 3s 'DPU_BENCH_SECONDS must be a whole number from 1 to 600, not "3s"'
refuse cni.sh DPU_BENCH_SEQ 300 'cni.sh: DPU_BENCH_SEQ must be a whole number from 1 to 250, not "300"'
refuse cni.sh DPU_BENCH_CONC -1 'DPU_BENCH_CONC must be a whole number from 1 to 250, not "-1"'
refuse cni.sh DPU_BENCH_ROUNDS 1.5 'DPU_BENCH_ROUNDS must be a whole number from 1 to 100, not "1.5"'
refuse control.sh DPU_BENCH_CHANGES 1e3 'control.sh: DPU_BENCH_CHANGES must be a whole number from 1 to 100000, not "1e3"'
refuse control.sh DPU_BENCH_RUNS 99999999999 'DPU_BENCH_RUNS must be a whole number from 1 to 100'
refuse overlay.sh DPU_BENCH_RUNS " 3" 'overlay.sh: DPU_BENCH_RUNS must be a whole number from 1 to 100, not " 3"'

# The helper itself: defaults, bounds, and the value passed through.
# shellcheck source=../../bench/knobs.bash
source "$root/bench/knobs.bash"
check() {  # want value-of-DPU_TEST_KNOB (or "unset") min max
  local want=$1 value=$2 got rc=0
  if [ "$value" = unset ]; then unset DPU_TEST_KNOB; else export DPU_TEST_KNOB=$value; fi
  got=$(bench_number DPU_TEST_KNOB 7 0 42 2>/dev/null) || rc=$?
  if [ "$want" = refused ]; then
    [ "$rc" = 2 ] || fail "DPU_TEST_KNOB=\"$value\": got \"$got\", expected a refusal"
  else
    [ "$rc" = 0 ] && [ "$got" = "$want" ] || fail "DPU_TEST_KNOB=\"$value\": got \"$got\" (status $rc), expected $want"
  fi
}
check 7 unset
check 7 ""
check 0 0
check 42 42
check 13 13
check refused 43
check refused 007
check refused +5
check refused "4 2"

if [ "$failures" != 0 ]; then echo "knobs: $failures failure(s)" >&2; exit 1; fi
echo "knobs: every bad value refused at once, defaults and valid values taken"
