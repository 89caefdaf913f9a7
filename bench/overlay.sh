#!/usr/bin/env bash
# Overlay transform benchmarks with the CPU's AES-GCM ceiling measured in the same run.
#   bash bench/overlay.sh            # as root on Debian 12; installs and builds what it needs
# Prints a table: ns/packet and Gbit/s per core for each transform and size, the
# ceilings from dpdk-test-crypto-perf (crypto_aesni_gcm) and `openssl speed -evp`,
# and the ratios the targets are stated in. Figures are medians of several runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/knobs.bash
runs=$(bench_number DPU_BENCH_RUNS 5 1 100)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

bash scripts/install-deps.sh >/dev/null
cmake --preset release >/dev/null
cmake --build --preset release --target overlay_bench >/dev/null

echo "== ceiling: dpdk-test-crypto-perf, crypto_aesni_gcm, one lcore ($runs runs)" >&2
for key in 16 32; do
  for run in $(seq "$runs"); do
    dpdk-test-crypto-perf -l 0,1 --no-huge --no-pci -m 1024 --file-prefix="dpu-bench-$$" \
      --vdev crypto_aesni_gcm0 --log-level=lib.eal:error -- \
      --devtype crypto_aesni_gcm --optype aead --aead-algo aes-gcm --aead-op encrypt \
      --aead-key-sz "$key" --aead-iv-sz 12 --aead-aad-sz 8 --digest-sz 16 \
      --ptest throughput --total-ops 2000000 --burst-sz 32 --buffer-sz 64,512,1400 --pool-sz 8192 2>/dev/null |
      awk -v bits=$((key * 8)) '$1 ~ /^[0-9]+$/ && NF >= 10 { print "CEILING crypto-perf", bits, $2, $9 }'
  done
done > "$out/ceilings"

echo "== ceiling: openssl speed -evp ($runs runs)" >&2
for bits in 128 256; do
  for size in 64 512 1400; do
    for run in $(seq "$runs"); do
      # openssl prints thousands of bytes per second for the size.
      openssl speed -evp "aes-$bits-gcm" -bytes "$size" -seconds 1 2>/dev/null |
        awk -v bits="$bits" -v size="$size" '/^AES-[0-9]+-GCM/ { sub(/k$/, "", $2); print "CEILING openssl", bits, size, $2 * 8 / 1e6 }'
    done
  done
done >> "$out/ceilings"

echo "== overlay transforms ($runs runs each)" >&2
build/release/bench/overlay_bench --runs "$runs" > "$out/results"

/usr/bin/python3 bench/report_overlay.py "$out/ceilings" "$out/results"
