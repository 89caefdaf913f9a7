#!/usr/bin/env bash
# ESP in the dataplane, one core: Geneve+ESP encap (VF->uplink) and ESP+Geneve
# decap (uplink->VF), AES-128-GCM, 1,000 flows, 64 B and 1400 B frames, from
# datapath_engine_bench, next to the CPU's raw AES-GCM ceiling measured in the
# same run, twice: dpdk-test-crypto-perf (crypto_aesni_gcm) and the bench's own
# "seal only" case (the AEAD alone, timed as the ESP cases are: median burst),
# at 1400 B and at the bytes ESP encrypts for each frame; round after round,
# medians printed. On a machine other work shares, crypto-perf's wall-clock
# rate includes that work's time and the median burst does not: the ratio to
# the ceiling is taken against the seal-only case.
#   bash bench/esp.sh            # after: cmake --build --preset release --target datapath_engine_bench
# DPU_BENCH_RUNS rounds (3 by default), DPU_BENCH_PACKETS packets per case (2,000,000).
# DPDK's ipsec-secgw is not run here: its figures (issue 16: 7.89 Mpps at 64 B,
# 4.39 Mpps at 1400 B, one lcore) are printed as the reference the targets use.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${DPU_BENCH_RUNS:-3}
packets=${DPU_BENCH_PACKETS:-2000000}
bench=build/release/bench/datapath_engine_bench
[[ -x $bench ]] || { echo "build $bench first (cmake --build --preset release --target datapath_engine_bench)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# What ESP encrypts for a pod frame of F bytes (with the FCS): the Geneve UDP
# packet after the outer IP header (UDP 8 + Geneve 8 + OVN option 8 + the
# frame without its FCS), padded to 4 with the 2-byte trailer.
esp_bytes() { local n=$(( 8 + 16 + $1 - 4 + 2 )); echo $(( (n + 3) / 4 * 4 )); }

for run in $(seq "$runs"); do
  echo "== round $run/$runs" >&2
  dpdk-test-crypto-perf -l 0,1 --no-huge --no-pci -m 1024 --file-prefix="dpu-esp-bench-$$" \
    --vdev crypto_aesni_gcm0 --log-level=lib.eal:error -- \
    --devtype crypto_aesni_gcm --optype aead --aead-algo aes-gcm --aead-op encrypt \
    --aead-key-sz 16 --aead-iv-sz 12 --aead-aad-sz 12 --digest-sz 16 \
    --ptest throughput --total-ops 2000000 --burst-sz 32 --pool-sz 8192 \
    --buffer-sz "$(esp_bytes 64),1400,$(esp_bytes 1400)" 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 10 { print "CEILING", $2, $8, $9 }' >> "$out/results"
  "$bench" --packets "$packets" --only "encap VF->uplink, 1000 flows, " --only "decap uplink->VF, 1000 flows, " \
    --only "seal only" |
    awk -F'  +' '/ESP|Geneve (en|de)cap .*, (64|1400) B|seal only/ { print "CASE\t" $1 "\t" $2 }' >> "$out/results"
done

/usr/bin/python3 - "$out/results" "$(esp_bytes 64)" "$(esp_bytes 1400)" <<'EOF'
import statistics, sys
ceil, cases = {}, {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t") if line.startswith("CASE") else line.split()
    if f[0] == "CEILING":
        ceil.setdefault(int(f[1]), []).append((float(f[2]), float(f[3])))  # Mops, Gbit/s
    else:
        cases.setdefault(f[1].strip(), []).append(float(f[2]))
med = lambda xs: statistics.median(xs)
print("raw AES-128-GCM, dpdk-test-crypto-perf crypto_aesni_gcm, one lcore (median of %d):" % len(next(iter(ceil.values()))))
for size in sorted(ceil):
    print("  %5d B  %6.2f Mops  %6.1f Gbit/s" % (size, med([m for m, _ in ceil[size]]), med([g for _, g in ceil[size]])))
seal = {}
print("raw AES-128-GCM, datapath_engine_bench seal only (median burst; median of rounds):")
for name in sorted((n for n in cases if "seal only" in n), key=lambda n: int(n.split(", ")[-1].split()[0])):
    size = int(name.split(", ")[-1].split()[0])
    seal[size] = med(cases.pop(name))
    print("  %5d B  %6.2f Mops  %6.1f Gbit/s" % (size, seal[size], seal[size] * size * 8 / 1000))
secgw = {64: 7.89, 1400: 4.39}
print("\n%-48s %7s %8s %9s %9s" % ("case (median of rounds)", "Mpps", "Gbit/s", "/secgw", "/ceiling"))
for name in sorted(cases, key=lambda n: ("decap" in n, int(n.split(", ")[-1].split()[0]), "ESP" in n)):
    frame = int(name.split(", ")[-1].split()[0])
    mpps = med(cases[name])
    gbit = mpps * frame * 8 / 1000
    row = "%-48s %7.2f %8.2f" % (name, mpps, gbit)
    if "ESP" in name:
        row += " %8.2fx" % (mpps / secgw[frame])
        if frame == 1400 and 1400 in seal:
            row += " %8.0f%%" % (100 * mpps / seal[1400])
    print(row)
print("\nipsec-secgw reference (issue 16, not measured here): 7.89 Mpps at 64 B, 4.39 Mpps at 1400 B.")
print("/ceiling: Gbit/s of the 1400 B frames over the seal-only Gbit/s at 1400 B, same round set.")
print("targets: ESP at 1400 B >= 80 % of the raw ceiling at 1400 B; >= 1.5x ipsec-secgw at 64 B and 1400 B.")
EOF
