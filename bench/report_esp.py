#!/usr/bin/env python3
"""Prints the ESP benchmark's report and verdicts (bench/esp.sh).

Input lines:
  CEILING <buffer bytes> <Mops> <Gbit/s>   dpdk-test-crypto-perf, crypto_aesni_gcm, one per round
  CASE\\t<round>\\t<case name>\\t<Mpps>       datapath_engine_bench's median burst (tab-separated);
      the names end in ", <frame bytes> B"; "seal only" and "open only" are the AEAD alone
  SECGW <round> <in|out> <frame bytes> <Mpps per core-second> <Mpps per second> <core share>
Every round runs everything once, so a ratio is taken within its round (ours
over ipsec-secgw; ours over the seal-only case at 1400 B, the ceiling) and the
report gives the median of the rounds' ratios with their range: this machine
runs the crypto at two speeds, in spells of seconds, and a ratio of medians
taken from different rounds would mix them. Verdicts: each ESP case >= 1.5x
ipsec-secgw; the 1400 B ESP cases >= 80 % of the seal-only ceiling.
"""
import statistics
import sys

med = statistics.median


def size_of(name):
    return int(name.split(", ")[-1].split()[0])


def spread(values, fmt):
    text = fmt(med(values))
    return text if len(values) == 1 else f"{text} ({fmt(min(values))}-{fmt(max(values))})"


def main():
    ceil, cases, secgw = {}, {}, {}
    for line in open(sys.argv[1]):
        f = line.rstrip("\n").split("\t") if line.startswith("CASE") else line.split()
        if not f:
            continue
        if f[0] == "CEILING":
            ceil.setdefault(int(f[1]), []).append((float(f[2]), float(f[3])))  # Mops, Gbit/s
        elif f[0] == "SECGW":  # run dir size Mpps-per-core-second Mpps-per-second share
            secgw.setdefault((f[2], int(f[3])), {})[int(f[1])] = (float(f[4]), float(f[6]))
        elif f[0] == "CASE":
            cases.setdefault(f[2].strip(), {})[int(f[1])] = float(f[3])
    if not cases:
        sys.exit("no CASE lines: the benchmark did not run")

    if ceil:
        print("raw AES-128-GCM, dpdk-test-crypto-perf crypto_aesni_gcm, one lcore (median of %d):"
              % len(next(iter(ceil.values()))))
        for size in sorted(ceil):
            print("  %5d B  %6.2f Mops  %6.1f Gbit/s" % (size, med([m for m, _ in ceil[size]]),
                                                      med([g for _, g in ceil[size]])))
    seal, opened = {}, {}  # frame bytes -> round -> Mops
    for what, into in (("seal", seal), ("open", opened)):
        print("raw AES-128-GCM, datapath_engine_bench %s only (median burst; median of rounds):" % what)
        for name in sorted((n for n in cases if what + " only" in n), key=size_of):
            into[size_of(name)] = cases.pop(name)
            mops = med(into[size_of(name)].values())
            print("  %5d B  %6.2f Mops  %6.1f Gbit/s" % (size_of(name), mops, mops * size_of(name) * 8 / 1000))

    # ours beside ipsec-secgw, round by round: encap beside its outbound, decap beside its inbound.
    verdicts = []
    print("\nours (median burst) beside ipsec-secgw (per second of its core; its share of the core in brackets):")
    for name in sorted((n for n in cases if "ESP" in n), key=lambda n: ("decap" in n, size_of(n))):
        frame, dir = size_of(name), "in" if "decap" in name else "out"
        theirs = secgw.get((dir, frame), {})
        print("  %s vs ipsec-secgw %sbound, %d B" % (name.split(",")[0], dir, frame))
        ratios = []
        for run in sorted(cases[name]):
            ours = cases[name][run]
            if run in theirs and theirs[run][0] > 0:
                ratios.append(ours / theirs[run][0])
                print("    round %d: ours %6.2f Mpps %6.2f Gbit/s  secgw %6.2f Mpps %6.2f Gbit/s (%3.0f %%)  "
                      "ours/secgw %5.2fx" % (run, ours, ours * frame * 8 / 1000, theirs[run][0],
                                              theirs[run][0] * frame * 8 / 1000, 100 * theirs[run][1], ratios[-1]))
        if ratios:
            o, t = med(cases[name].values()), med(v for v, _ in theirs.values())
            print("    median: ours %6.2f Mpps %6.2f Gbit/s  secgw %6.2f Mpps %6.2f Gbit/s  ours/secgw %5.2fx (%.2f-%.2f)"
                  % (o, o * frame * 8 / 1000, t, t * frame * 8 / 1000, med(ratios), min(ratios), max(ratios)))
            verdicts.append("ESP %s %d B >= 1.5x ipsec-secgw %sbound: %s (%.2fx)"
                            % ("encap" if dir == "out" else "decap", frame, dir,
                               "met" if med(ratios) >= 1.5 else "NOT met", med(ratios)))

    print("\n%-48s %7s %8s  %s" % ("case (median of rounds)", "Mpps", "Gbit/s", "/ceiling, median of the rounds (range)"))
    for name in sorted(cases, key=lambda n: ("decap" in n, size_of(n), "ESP" in n)):
        frame = size_of(name)
        mpps = med(cases[name].values())
        row = "%-48s %7.2f %8.2f" % (name, mpps, mpps * frame * 8 / 1000)
        if "ESP" in name and frame == 1400 and 1400 in seal:
            ratios = [v / seal[1400][r] for r, v in cases[name].items() if seal[1400].get(r)]
            if ratios:
                row += "  " + spread(ratios, lambda x: "%.0f %%" % (100 * x))
                if "decap" in name and 1400 in opened:
                    of_open = [v / opened[1400][r] for r, v in cases[name].items() if opened[1400].get(r)]
                    if of_open:
                        row += "  (of open only: %s)" % spread(of_open, lambda x: "%.0f %%" % (100 * x))
                verdicts.append("%s 1400 B >= 80 %% of the seal-only ceiling: %s (%.1f %%)"
                                % ("ESP encap" if "encap" in name else "ESP decap",
                                   "met" if med(ratios) >= 0.8 else "NOT met", 100 * med(ratios)))
        print(row)
    print("\n/ceiling: in each round, the 1400 B frames' Gbit/s over the seal-only Gbit/s at 1400 B;")
    print("the decap's also over open only (the AES-GCM decrypt and tag check alone).")
    print("ipsec-secgw: one lcore, transport AES-128-GCM, crypto_aesni_gcm; Gbit/s of its input frames (FCS included).")
    print("verdicts:")
    for v in verdicts:
        print("  " + v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
