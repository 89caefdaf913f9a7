#!/usr/bin/env python3
"""Prints the overlay benchmark table from the ceilings and results files.

CEILING <tool> <key bits> <size> <Gbit/s>      (one line per run; the median is used)
RESULT <op> <backend> <key bits> <size> <ns/packet> <Gbit/s>
"""
import statistics
import sys
from collections import defaultdict


def main():
    ceilings = defaultdict(list)
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 5 and p[0] == "CEILING":
                ceilings[(p[1], int(p[2]), int(p[3]))].append(float(p[4]))
    ceil = {k: statistics.median(v) for k, v in ceilings.items()}
    results = []
    with open(sys.argv[2]) as f:
        for line in f:
            p = line.split()
            if len(p) == 7 and p[0] == "RESULT":
                results.append((p[1], p[2], int(p[3]), int(p[4]), float(p[5]), float(p[6])))
    if not results:
        sys.exit("no RESULT lines: the benchmark did not run")

    print(f"{'transform':<22}{'backend':<10}{'key':>5}{'bytes':>7}{'ns/pkt':>10}{'Gbit/s':>9}"
          f"{'Mpps':>8}{'vs crypto-perf':>16}{'vs openssl':>12}")
    for op, backend, bits, size, ns, gbps in results:
        ref_cp = ceil.get(("crypto-perf", bits, size)) if op.startswith("esp") else None
        ref_os = ceil.get(("openssl", bits, size)) if op.startswith("esp") else None
        cp = f"{gbps / ref_cp * 100:6.1f} %" if ref_cp else ""
        os_ = f"{gbps / ref_os * 100:6.1f} %" if ref_os else ""
        print(f"{op:<22}{backend:<10}{bits if bits else '-':>5}{size:>7}{ns:>10.1f}{gbps:>9.2f}"
              f"{1e3 / ns:>8.2f}{cp:>16}{os_:>12}")

    print()
    print("ceilings (median Gbit/s per core):")
    for (tool, bits, size), v in sorted(ceil.items()):
        print(f"  {tool:<12} AES-{bits}-GCM {size:>5} B  {v:7.2f}")

    print()
    print("targets:")
    esp = [r for r in results if r[0] == "esp-encrypt" and r[2] == 128 and r[3] == 1400]
    ref = ceil.get(("crypto-perf", 128, 1400))
    for i, (op, backend, bits, size, ns, gbps) in enumerate(esp):
        if not ref:
            continue
        share = f"{gbps:.2f} Gbit/s = {gbps / ref * 100:.1f} % of the crypto-perf ceiling {ref:.2f}"
        if i == 0:
            # The first backend listed is the default, the one the target is about.
            verdict = "met" if gbps >= 0.7 * ref else "NOT met"
            print(f"  ESP encrypt AES-128-GCM 1400 B ({backend}, default): {share} (target >= 70 %: {verdict})")
        else:
            print(f"  ESP encrypt AES-128-GCM 1400 B ({backend}, portable fallback): {share}; "
                  f"openssl speed -evp here: {ceil.get(('openssl', 128, 1400), 0):.2f}")
    enc = {r[3]: r[4] for r in results if r[0] == "geneve-encap"}
    dec = {r[3]: r[4] for r in results if r[0] == "geneve-decap"}
    if 64 in enc and 64 in dec:
        total = enc[64] + dec[64]
        verdict = "met" if total < 25 else "NOT met"
        print(f"  Geneve encap + decap at 64 B: {enc[64]:.1f} + {dec[64]:.1f} = {total:.1f} ns "
              f"(target < 25 ns: {verdict})")


if __name__ == "__main__":
    main()
