#!/usr/bin/env python3
"""Turns cnidriver bench reports into the CNI latency table of bench/cni.sh.

Input: the JSON lines of `cnidriver bench` (plugin, mode, round, op, count,
wall_ms, latencies_ms), plus bench/cni.sh's own lines "FLOOR <in_us> <back_us>"
(the kernel moving N veths into a netns and back, back to back, no exec) and
"DRAIN <mode> <us>" (how long after dpu-cni's DEL phase host-shim's background
returns took to finish). Prints p50/p99 per plugin, mode and op (latencies
pooled over rounds), the median round's "all done" time, and the ratios the
targets are stated in: dpu-cni / host-device for the sequential p50 and for the
concurrent "all done" time, ADD and DEL, each against 0.8; the concurrent ADD
ratio with its floor (N moves back to back: no plugin can finish N ADDs sooner).
Usage: report_cni.py [N] < reports   (N: pods per concurrent phase, for the text)
"""
import json
import sys


def pct(values, p):
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def median(values):
    s = sorted(values)
    return s[len(s) // 2] if s else float("nan")


def main():
    # (plugin, mode, op) -> pooled latencies, wall times per round, count
    rows = {}
    errors = 0
    floors_in, floors_back, drains = [], [], {}
    conc_n = sys.argv[1] if len(sys.argv) > 1 else "N"
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("FLOOR "):
            _, t_in, t_back = line.split()
            floors_in.append(int(t_in) / 1000.0)
            floors_back.append(int(t_back) / 1000.0)
            continue
        if line.startswith("DRAIN "):
            _, mode, us = line.split()
            drains.setdefault(mode, []).append(int(us) / 1000.0)
            continue
        if not line.startswith("{"):
            continue
        rep = json.loads(line)
        for e in (rep.get("errors") or [])[:3]:
            print(f"ERROR {rep['plugin']} {rep['mode']}: {e}", file=sys.stderr)
        errors += len(rep.get("errors") or [])
        row = rows.setdefault((rep["plugin"], rep["mode"], rep["op"]), {"lat": [], "wall": [], "n": rep["count"]})
        row["lat"] += rep["latencies_ms"]
        row["wall"].append(rep["wall_ms"])
    print(f"{'plugin':<12} {'mode':<11} {'op':<4} {'n':>4} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'all done ms (median round)':>27}")
    for (plugin, mode, op), row in sorted(rows.items(), key=lambda kv: (kv[0][1] != "sequential", kv[0][2], kv[0][0])):
        print(f"{plugin:<12} {mode:<11} {op:<4} {row['n']:>4} {len(row['wall']):>6} {pct(row['lat'], 50):>8.2f} "
              f"{pct(row['lat'], 99):>8.2f} {median(row['wall']):>27.1f}")
    print()
    for op in ("ADD", "DEL"):
        ours, peer = rows.get(("dpu-cni", "sequential", op)), rows.get(("host-device", "sequential", op))
        if ours and peer:
            r = pct(ours["lat"], 50) / pct(peer["lat"], 50)
            print(f"RATIO {op} sequential p50 dpu-cni/host-device = {r:.2f} (target <= 0.80) "
                  f"{'MET' if r <= 0.8 else 'MISSED'}")
        ours, peer = rows.get(("dpu-cni", "concurrent", op)), rows.get(("host-device", "concurrent", op))
        if ours and peer:
            r = median(ours["wall"]) / median(peer["wall"])
            print(f"RATIO {op} concurrent all-done dpu-cni/host-device = {r:.2f} (target <= 0.80) "
                  f"{'MET' if r <= 0.8 else 'MISSED'}")
            if op == "ADD" and floors_in:
                f = median(floors_in)
                print(f"      floor: {conc_n} moves into a netns back to back (one netlink socket, no exec) "
                      f"{f:.1f} ms (median of {len(floors_in)}, one per round); dpu-cni all-done = "
                      f"{median(ours['wall']) / f:.2f}x floor, host-device = {median(peer['wall']) / f:.2f}x floor; "
                      f"best ratio the kernel allows = floor/host-device = {f / median(peer['wall']):.2f}")
    if floors_back:
        print(f"kernel: {conc_n} moves back to the host netns back to back {median(floors_back):.1f} ms (median); "
              "host-device's DEL pays them, dpu-cni's DEL leaves them to host-shim's background worker")
    for mode, values in sorted(drains.items()):
        print(f"dpu-cni {mode} DELs: host-shim's background returns were all home {median(values):.1f} ms "
              f"(median of {len(values)}) after the DEL phase ended; the peer's phase started after that")
    if errors:
        print(f"{errors} operations failed (see stderr)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
