#!/usr/bin/env python3
"""Turns cnidriver bench reports into the CNI latency table of bench/cni.sh.

Input: the JSON lines of `cnidriver bench` (plugin, mode, round, op, count,
wall_ms, latencies_ms). Prints p50/p99 per plugin, mode and op (latencies pooled
over rounds), the median round's "all done" time, and the ratios the targets are
stated in: dpu-cni / host-device for the sequential p50 and for the concurrent
"all done" time, ADD and DEL, each against 0.8.
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
    for line in sys.stdin:
        line = line.strip()
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
    if errors:
        print(f"{errors} operations failed (see stderr)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
