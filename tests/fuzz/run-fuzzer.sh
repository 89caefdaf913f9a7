#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its committed seed corpus.
# New inputs go to a scratch folder, never into the repository; a crash leaves
# its input in $DPU_FUZZ_ARTIFACTS (default: the build tree) to be committed to
# the corpus as a regression input once fixed.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=${3:-20}
name=$(basename "$fuzzer")
artifacts=${DPU_FUZZ_ARTIFACTS:-$(dirname "$fuzzer")/fuzz-artifacts/$name}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"
"$fuzzer" -error_exitcode=1 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$scratch" "$corpus"
