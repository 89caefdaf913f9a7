#!/usr/bin/env python3
"""bench/report_datapath.py turns PROFILE lines into ns per packet per part.

A results file with two rounds of testpmd and ours on one case, and the
shared objects perf would name: the split must be each round's shares of its
own ns per packet (1000 / Mpps per core-second), the parts summed by object,
shares that do not add up to 100 % scaled to it, and the medians over the
rounds printed; a round whose rate is missing does not count.
"""
import os
import re
import subprocess
import sys
import tempfile

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "report_datapath.py")

# round: (load, {tool: Mpps per core-second}, {tool: {shared object: % of samples}}); round 3
# has a profile but no rate.
ROUNDS = {
    1: (0.5, {"testpmd": 40.0, "ours": 20.0, "ovs": 5.0},
        {"ours": {"dpu-dataplane": 60.0, "librte_net_pcap.so.23.0": 30.0, "librte_net_null.so.23.0": 8.0,
                  "ld-linux-x86-64.so.2": 1.5, "[kernel.kallsyms]": 0.5},
         "testpmd": {"librte_net_pcap.so.23.0": 80.0, "librte_net_null.so.23.0": 15.0, "dpdk-testpmd": 5.0}}),
    2: (0.7, {"testpmd": 50.0, "ours": 25.0, "ovs": 5.0},
        {"ours": {"dpu-dataplane": 35.0, "librte_net_pcap.so.23.0": 10.0, "librte_net_null.so.23.0": 5.0},
         "testpmd": {"librte_net_pcap.so.23.0": 90.0, "librte_net_null.so.23.0": 10.0}}),
    3: (None, {}, {"ours": {"dpu-dataplane": 100.0}}),
}


def results():
    lines = []
    for rnd, (load, rates, profiles) in ROUNDS.items():
        if load is not None:
            lines.append(f"LOAD {rnd} decap 1000 64 {load}")
        for tool, mpps in rates.items():
            lines.append(f"RESULT {rnd} {tool} decap 1000 64 {mpps:.3f} {mpps * 0.98:.3f} 0.98")
        for tool, shares in profiles.items():
            lines += [f"PROFILE {rnd} {tool} decap 1000 64 {obj} {pct:.2f}" for obj, pct in shares.items()]
    return "\n".join(lines + ["LOADEND 0.6"]) + "\n"


def row(text, tool):
    m = re.search(r"^decap\s+1000\s+64\s+" + tool + r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", text, re.M)
    if m is None:
        sys.exit(f"no profile row for {tool} in:\n{text}")
    return [float(v) for v in m.groups()]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "results")
        with open(path, "w") as f:
            f.write(results())
        out = subprocess.run([sys.executable, REPORT, path], capture_output=True, text=True, check=True).stdout
    # ours: round 1 50 ns = 15 input, 30 forwarder, 4 output, 1 rest; round 2
    # 40 ns, its shares (70/20/10 of 50 %) scaled: 8 input, 28 forwarder, 4
    # output, 0 rest; round 3 has no rate. testpmd: 25 ns (20, 1.25, 3.75) and
    # 20 ns (18, 0, 2). Medians of two: the means.
    want = {"ours": [45.0, 11.5, 29.0, 4.0, 0.5], "testpmd": [22.5, 19.0, 0.625, 2.875, 0.0]}
    for tool, expected in want.items():
        got = row(out, tool)
        for name, g, e in zip(("total", "input PMD", "forwarder", "output PMD", "rest"), got, expected):
            if abs(g - e) > 0.06:
                sys.exit(f"{tool} {name}: {g} ns per packet, want {e}\n{out}")
    print("report_datapath: PROFILE lines split as expected")


if __name__ == "__main__":
    main()
