#!/usr/bin/env python3
"""Prints the datapath benchmark table (bench/datapath.sh).

RESULT <tool> <scenario> <flows> <size> <Mpps>     tool: testpmd | ours | ovs
SLOWPATH <tool> <flows set up per second>
Ratios: ours / OVS-DPDK and ours / testpmd io, per case; the targets are for
Geneve encap at 64 B with 1,000 and 100,000 flows (>= 2x OVS, >= 50 % of
testpmd) and for the slow path (>= 5x OVS).
"""
import statistics
import sys
from collections import defaultdict


def main():
    r = defaultdict(dict)
    slow = {}
    flow_bytes = None
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 6 and p[0] == "RESULT":
                try:
                    r[(p[2], int(p[3]), int(p[4]))].setdefault(p[1], []).append(float(p[5]))
                except ValueError:
                    pass
            elif len(p) == 2 and p[0] == "FLOWBYTES":
                flow_bytes = int(p[1])
            elif len(p) == 3 and p[0] == "SLOWPATH":
                try:
                    slow[p[1]] = float(p[2])
                except ValueError:
                    pass
    if not r and not slow:
        sys.exit("no RESULT lines: the benchmark did not run")
    runs = max((len(x) for v in r.values() for x in v.values()), default=0)
    print(f"Mpps per forwarding core (one core each), same input pcap, net_null output; median of {runs} run(s)")
    print(f"{'case':<10}{'flows':>8}{'bytes':>7}{'testpmd':>9}{'ours':>8}{'OVS':>8}{'ours/OVS':>10}{'ours/testpmd':>14}")
    failed = []
    for (scen, flows, size), v in sorted(r.items(), key=lambda kv: (["local", "encap", "decap"].index(kv[0][0]), kv[0][1], kv[0][2])):
        t, o, s = (statistics.median(v.get(tool, [0])) for tool in ("testpmd", "ours", "ovs"))
        vs_ovs = o / s if s else float("nan")
        vs_tp = o / t if t else float("nan")
        mark = ""
        if scen == "encap" and size == 64 and flows in (1000, 100000):
            ok = vs_ovs >= 2 and vs_tp >= 0.5
            mark = "  target met" if ok else "  TARGET MISSED (>= 2x OVS, >= 50% testpmd)"
            if not ok:
                failed.append(f"encap {flows} flows")
        print(f"{scen:<10}{flows:>8}{size:>7}{t:>9.2f}{o:>8.2f}{s:>8.2f}{vs_ovs:>10.2f}{vs_tp:>13.0%}{mark}")
    if slow:
        o, s = slow.get("ours", 0), slow.get("ovs", 0)
        ratio = o / s if s else float("nan")
        mark = "target met" if ratio >= 5 else "TARGET MISSED (>= 5x OVS)"
        print(f"\nslow path, flows set up per second: ours {o:,.0f}, OVS {s:,.0f}, ratio {ratio:.1f}  {mark}")
    if flow_bytes is not None:
        mark = "target met" if flow_bytes <= 256 else "TARGET MISSED (<= 256)"
        print(f"memory per cached flow: {flow_bytes} bytes  {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
