#!/usr/bin/env python3
"""Prints the datapath benchmark's table and verdicts (bench/datapath.sh).

Input lines:
  RESULT <round> <tool> <scenario> <flows> <size> <Mpps per on-CPU second> <Mpps per second> <core share>
      tool: testpmd | ours | ovs | ours-policies; the first figure is packets per second that the
      tool's forwarding thread had its core (every tool busy-polls), which the
      machine's other load does not change; the share is on-CPU time / wall time
  LOAD <round> <scenario> <flows> <size> <1-minute load average when the case began>
  LOADEND <1-minute load average at the end>
  CALLGRIND <scenario> <flows> <size> <instructions per packet>
  SLOWPATH <tool> <flows set up per second>
  NEWCONN <round> <tool> <tcp|udp> <connections per on-CPU second> <per second> <connections counted>
      tool: ours | ovs; every packet of a pcap read once a new connection to a ClusterIP
  FLOWBYTES <bytes per cached flow>
  PROFILE <round> <tool> <scenario> <flows> <size> <shared object> <share of samples, %>
      (DPU_BENCH_PROFILE=1) where the tool's forwarding thread spent its core time while its rate
      was measured (perf, cpu-clock); the report turns each round's shares into nanoseconds per
      packet with that round's rate: input PMD (net_pcap), the forwarder's own code, output PMD
      (net_null), the rest (DPDK's other libraries, ld.so's TLS lookups, libc, the kernel)
  POLICIES <n>: the run has the tool ours-policies (dpu-dataplane with pods A and B isolated
      by n NetworkPolicies) in RESULT, NEWCONN and SLOWPATH lines
The three tools ran back to back on each case in each round, so a ratio is
taken within its round (ours / testpmd, ours / OVS, on the per-core-second
rates) and the report gives the median of the rounds' ratios and their range;
the Mpps columns are each tool's median; the wall-clock ratios are shown too. Verdicts: Geneve encap at 64 B with 1,000 and 100,000 flows
>= 50 % of testpmd and >= 2x OVS; every case >= 1.5x OVS; Geneve decap at
64 B >= 50 % of testpmd; the service case (pod -> ClusterIP, remote backend) at 64 B with 1,000 and
100,000 connections >= 40 % of testpmd and >= 5x OVS; the slow path >= 5x OVS; new connections per
second >= 10x OVS (TCP SYN and UDP); <= 256 bytes per cached flow. With policies: every case's rate
with them the same as without (median ratio within the round >= 95 %: the rounds' noise), and new
connections and flow setups per second with them >= 50 % of the rate without.
"""
import statistics
import sys
from collections import defaultdict

ORDER = ["local", "encap", "decap", "service"]
PARTS = ["input PMD", "forwarder", "output PMD", "rest"]


def part_of(shared_object):
    """The component a profile's shared object stands for (PROFILE lines)."""
    if shared_object.startswith("librte_net_pcap"):
        return "input PMD"
    if shared_object.startswith("librte_net_null"):
        return "output PMD"
    if shared_object in ("dpu-dataplane", "dpdk-testpmd"):
        return "forwarder"
    return "rest"


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def spread(values, fmt):
    """median [min-max] of the rounds' values, or n/a."""
    if not values:
        return "n/a"
    med = fmt(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} [{fmt(min(values))}-{fmt(max(values))}]"


def main():
    mpps = defaultdict(lambda: defaultdict(dict))  # case -> round -> tool -> Mpps per on-CPU second
    wall = defaultdict(lambda: defaultdict(dict))  # case -> round -> tool -> Mpps per wall second
    share = defaultdict(list)                      # case -> core shares
    load = defaultdict(list)                      # case -> load averages
    callgrind = {}
    slow = {}
    newconn = defaultdict(lambda: defaultdict(dict))  # proto -> round -> tool -> (per CPU s, per s, count)
    flow_bytes = None
    profile = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))  # (case, tool) -> round -> part -> %
    load_end = None
    policies = 0
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 9 and p[0] == "RESULT":
                case, rnd, tool = (p[3], int(p[4]), int(p[5])), int(p[1]), p[2]
                v, w, c = number(p[6]), number(p[7]), number(p[8])
                if v is not None and v > 0:
                    mpps[case][rnd][tool] = v
                    wall[case][rnd][tool] = w
                    share[case].append(c)
            elif len(p) == 6 and p[0] == "LOAD":
                v = number(p[5])
                if v is not None:
                    load[(p[2], int(p[3]), int(p[4]))].append(v)
            elif len(p) == 2 and p[0] == "LOADEND":
                load_end = number(p[1])
            elif len(p) == 5 and p[0] == "CALLGRIND":
                callgrind[(p[1], int(p[2]), int(p[3]))] = number(p[4])
            elif len(p) == 2 and p[0] == "POLICIES":
                policies = int(p[1])
            elif len(p) == 2 and p[0] == "FLOWBYTES":
                flow_bytes = int(p[1])
            elif len(p) == 7 and p[0] == "NEWCONN":
                v = number(p[4])
                if v is not None and v > 0:
                    newconn[p[3]][int(p[1])][p[2]] = (v, number(p[5]), int(p[6]))
            elif len(p) == 8 and p[0] == "PROFILE":
                v = number(p[7])
                if v is not None:
                    profile[((p[3], int(p[4]), int(p[5])), p[2])][int(p[1])][part_of(p[6])] += v
            elif len(p) == 3 and p[0] == "SLOWPATH":
                v = number(p[2])
                if v is not None:
                    slow[p[1]] = v
    if not mpps and not slow and not newconn:
        sys.exit("no RESULT lines: the benchmark did not run")

    table = {}
    if mpps:
        rounds = max((len(r) for r in mpps.values()), default=0)
        loads = [v for vs in load.values() for v in vs] + ([load_end] if load_end is not None else [])
        print(f"Mpps per forwarding core (one core each), same input pcap, net_null output; {rounds} round(s), "
              "testpmd io, ours and OVS back to back per case and round")
        shares = [c for cs in share.values() for c in cs]
        if loads:
            print(f"machine load: 1-minute load average (2 CPUs) median {statistics.median(loads):.1f}, "
                  f"{min(loads):.1f}-{max(loads):.1f}" +
                  (f"; the forwarding threads had their core {statistics.median(shares):.0%} of the time "
                   f"(median; {min(shares):.0%}-{max(shares):.0%})" if shares else ""))
        print("Mpps: per second on the core (packets / the forwarding thread's on-CPU time), median of the rounds;\n"
              "ratios: of those rates within each round, median [min-max]; wall: the same ratios of packets per\n"
              "wall-clock second (medians); share: of the core the three had; Ir/pkt: callgrind, engine + null PMD tx (64 B)")
        print(f"{'case':<7}{'flows':>7}{'bytes':>6}{'testpmd':>9}{'ours':>7}{'OVS':>7}"
              f"  {'ours/testpmd':<18}{'ours/OVS':<21}{'wall':<12}{'share':>6}{'Ir/pkt':>7}")
        for case in sorted(mpps, key=lambda c: (ORDER.index(c[0]), c[1], c[2])):
            scen, flows, size = case
            by_round = mpps[case]
            med = {t: statistics.median([r[t] for r in by_round.values() if t in r] or [0.0])
                   for t in ("testpmd", "ours", "ovs")}
            vs_tp = [r["ours"] / r["testpmd"] for r in by_round.values() if "ours" in r and "testpmd" in r]
            vs_ovs = [r["ours"] / r["ovs"] for r in by_round.values() if "ours" in r and "ovs" in r]
            table[case] = (vs_tp, vs_ovs)
            w = wall[case]
            w_tp = [r["ours"] / r["testpmd"] for r in w.values() if r.get("ours") and r.get("testpmd")]
            w_ovs = [r["ours"] / r["ovs"] for r in w.values() if r.get("ours") and r.get("ovs")]
            wall_text = (f"{statistics.median(w_tp):.0%}" if w_tp else "n/a") + " " + \
                        (f"{statistics.median(w_ovs):.2f}x" if w_ovs else "n/a")
            ir = callgrind.get(case)
            print(f"{scen:<7}{flows:>7}{size:>6}{med['testpmd']:>9.2f}{med['ours']:>7.2f}{med['ovs']:>7.2f}"
                  f"  {spread(vs_tp, lambda x: f'{x:.0%}'):<18}{spread(vs_ovs, lambda x: f'{x:.2f}x'):<21}"
                  f"{wall_text:<12}{statistics.median(share[case]):>6.0%}{(f'{ir:.0f}' if ir else '-'):>7}")

    if profile:
        print("\nwhere each forwarding thread's core time per packet goes (perf samples while the rate was "
              "measured):\nns per packet, median of the rounds (each round's shares times its ns per packet)")
        print(f"{'case':<7}{'flows':>7}{'bytes':>6}  {'tool':<9}{'total':>7}" + "".join(f"{p:>12}" for p in PARTS))
        for (case, tool) in sorted(profile, key=lambda k: (ORDER.index(k[0][0]), k[0][1], k[0][2], k[1])):
            rows = []
            for rnd, parts in profile[(case, tool)].items():
                rate = mpps.get(case, {}).get(rnd, {}).get(tool)
                total = sum(parts.values())
                if rate and total > 0:
                    ns = 1000.0 / rate  # ns of the core per packet
                    rows.append((ns, {p: ns * parts.get(p, 0.0) / total for p in PARTS}))
            if not rows:
                continue
            print(f"{case[0]:<7}{case[1]:>7}{case[2]:>6}  {tool:<9}{statistics.median(r[0] for r in rows):>7.1f}" +
                  "".join(f"{statistics.median(r[1][p] for r in rows):>12.1f}" for p in PARTS))

    newconn_ratio = {}
    if newconn:
        print("\nnew connections per second, one core each, every packet of a pcap read once a new connection "
              "(pod -> ClusterIP, DNAT + Geneve encap; OVS: ct(commit,nat)); per second the forwarding thread had "
              "its core, median of the rounds [min-max]; ratio within each round")
        print(f"{'proto':<7}{'ours':>30}{'OVS':>26}  {'ours/OVS':<20}{'connections ours / OVS'}")
        for proto in sorted(newconn):
            by_round = newconn[proto]
            ours = [r["ours"][0] for r in by_round.values() if "ours" in r]
            ovs = [r["ovs"][0] for r in by_round.values() if "ovs" in r]
            ratio = [r["ours"][0] / r["ovs"][0] for r in by_round.values() if "ours" in r and "ovs" in r]
            newconn_ratio[proto] = ratio
            counts = " / ".join(f"{statistics.median([r[t][2] for r in by_round.values() if t in r] or [0]):,.0f}"
                                for t in ("ours", "ovs"))
            print(f"{proto:<7}{spread(ours, lambda x: f'{x:,.0f}'):>30}{spread(ovs, lambda x: f'{x:,.0f}'):>26}"
                  f"  {spread(ratio, lambda x: f'{x:.1f}x'):<20}{counts}")

    policy_hit, policy_new = {}, {}
    if policies:
        print(f"\nwith {policies:,} NetworkPolicies isolating pods A and B (ours-policies), against ours without, "
              "within each round: median [min-max]")
        for case in sorted(mpps, key=lambda c: (ORDER.index(c[0]), c[1], c[2])):
            by_round = mpps[case]
            ratio = [r["ours-policies"] / r["ours"] for r in by_round.values() if "ours" in r and "ours-policies" in r]
            if not ratio:
                continue
            policy_hit[case] = ratio
            med = statistics.median([r["ours-policies"] for r in by_round.values() if "ours-policies" in r])
            print(f"  {case[0]:<7}{case[1]:>7} flows{case[2]:>6} B  {med:6.2f} Mpps  {spread(ratio, lambda x: f'{x:.1%}')}")
        for proto in sorted(newconn):
            by_round = newconn[proto]
            ratio = [r["ours-policies"][0] / r["ours"][0] for r in by_round.values()
                     if "ours" in r and "ours-policies" in r]
            if ratio:
                policy_new[f"new {proto.upper()} connections per second"] = ratio
                med = statistics.median([r["ours-policies"][0] for r in by_round.values() if "ours-policies" in r])
                print(f"  new {proto.upper()} connections: {med:,.0f} per second  {spread(ratio, lambda x: f'{x:.1%}')}")
        if slow.get("ours") and "ours-policies" in slow:
            policy_new["flow setups per second (slow path)"] = [slow["ours-policies"] / slow["ours"]]
            print(f"  slow path: {slow['ours-policies']:,.0f} flow setups per second, "
                  f"{slow['ours-policies'] / slow['ours']:.1%} of {slow['ours']:,.0f}")

    print("\nverdicts (on the median of the rounds' ratios):")
    missed = 0

    def verdict(text, ok, figures):
        nonlocal missed
        missed += 0 if ok else 1
        print(f"  {'met    ' if ok else 'NOT MET'}  {text}: {figures}")

    def median_of(values):
        return statistics.median(values) if values else float("nan")

    for flows in (1000, 100000):
        case = ("encap", flows, 64)
        if case not in table:
            print(f"  -        Geneve encap 64 B, {flows:,} flows: not measured in this run")
        else:
            tp, ovs = (median_of(v) for v in table[case])
            verdict(f"Geneve encap 64 B, {flows:,} flows >= 50 % of testpmd and >= 2x OVS",
                    tp >= 0.5 and ovs >= 2, f"{tp:.1%} of testpmd, {ovs:.2f}x OVS")
    for flows in (1000, 100000):
        case = ("service", flows, 64)
        if case not in table:
            print(f"  -        service 64 B, {flows:,} connections: not measured in this run")
        else:
            tp, ovs = (median_of(v) for v in table[case])
            verdict(f"service 64 B, {flows:,} connections >= 40 % of testpmd and >= 5x OVS",
                    tp >= 0.4 and ovs >= 5, f"{tp:.1%} of testpmd, {ovs:.2f}x OVS")
    if table:
        worst = min(table, key=lambda c: median_of(table[c][1]) if table[c][1] else -1)
        below = [c for c in table if not median_of(table[c][1]) >= 1.5]
        figures = f"lowest {median_of(table[worst][1]):.2f}x ({worst[0]}, {worst[1]:,} flows, {worst[2]} B)"
        if below:
            figures += "; below: " + ", ".join(f"{c[0]} {c[1]:,} flows {c[2]} B {median_of(table[c][1]):.2f}x"
                                               for c in below)
        verdict(f"every case >= 1.5x OVS ({len(table)} cases)", not below, figures)
    decap = [c for c in table if c[0] == "decap" and c[2] == 64]
    if not decap:
        print("  -        Geneve decap 64 B: not measured in this run")
    else:
        figures = ", ".join(f"{c[1]:,} flows {median_of(table[c][0]):.1%}" for c in sorted(decap))
        verdict("Geneve decap 64 B >= 50 % of testpmd", all(median_of(table[c][0]) >= 0.5 for c in decap), figures)
    if slow:
        o, s = slow.get("ours", 0), slow.get("ovs", 0)
        ratio = o / s if s else float("nan")
        verdict("slow path >= 5x OVS (flows set up per second)", ratio >= 5,
                f"ours {o:,.0f}, OVS {s:,.0f}, {ratio:.1f}x")
    for proto, ratio in sorted(newconn_ratio.items()):
        if ratio:
            verdict(f"new {proto.upper()} connections per second >= 10x OVS", median_of(ratio) >= 10,
                    f"{median_of(ratio):.1f}x")
    if policy_hit:
        worst = min(policy_hit, key=lambda c: median_of(policy_hit[c]))
        verdict(f"with {policies:,} policies every case's rate as without (>= 95 %, {len(policy_hit)} cases)",
                all(median_of(v) >= 0.95 for v in policy_hit.values()),
                f"lowest {median_of(policy_hit[worst]):.1%} ({worst[0]}, {worst[1]:,} flows, {worst[2]} B)")
    for what, ratio in sorted(policy_new.items()):
        verdict(f"{what} with {policies:,} policies >= 50 % of without", median_of(ratio) >= 0.5,
                f"{median_of(ratio):.1%}")
    if flow_bytes is not None:
        verdict("memory per cached flow <= 256 bytes", flow_bytes <= 256, f"{flow_bytes} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
