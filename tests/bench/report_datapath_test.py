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

RESULTS = """\
LOAD 1 decap 1000 64 0.5
RESULT 1 testpmd decap 1000 64 40.000 39.000 0.98
RESULT 1 ours decap 1000 64 20.000 19.500 0.99
RESULT 1 ovs decap 1000 64 5.000 4.900 0.99
PROFILE 1 ours decap 1000 64 dpu-dataplane 60.00
PROFILE 1 ours decap 1000 64 librte_net_pcap.so.23.0 30.00
PROFILE 1 ours decap 1000 64 librte_net_null.so.23.0 8.00
PROFILE 1 ours decap 1000 64 ld-linux-x86-64.so.2 1.50
PROFILE 1 ours decap 1000 64 [kernel.kallsyms] 0.50
PROFILE 1 testpmd decap 1000 64 librte_net_pcap.so.23.0 80.00
PROFILE 1 testpmd decap 1000 64 librte_net_null.so.23.0 15.00
PROFILE 1 testpmd decap 1000 64 dpdk-testpmd 5.00
LOAD 2 decap 1000 64 0.7
RESULT 2 testpmd decap 1000 64 50.000 49.000 0.98
RESULT 2 ours decap 1000 64 25.000 24.500 0.99
RESULT 2 ovs decap 1000 64 5.000 4.900 0.99
PROFILE 2 ours decap 1000 64 dpu-dataplane 35.00
PROFILE 2 ours decap 1000 64 librte_net_pcap.so.23.0 10.00
PROFILE 2 ours decap 1000 64 librte_net_null.so.23.0 5.00
PROFILE 2 testpmd decap 1000 64 librte_net_pcap.so.23.0 90.00
PROFILE 2 testpmd decap 1000 64 librte_net_null.so.23.0 10.00
PROFILE 3 ours decap 1000 64 dpu-dataplane 100.00
LOADEND 0.6
"""


def row(text, tool):
    m = re.search(r"^decap\s+1000\s+64\s+" + tool + r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", text, re.M)
    if m is None:
        sys.exit(f"no profile row for {tool} in:\n{text}")
    return [float(v) for v in m.groups()]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "results")
        with open(path, "w") as f:
            f.write(RESULTS)
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
