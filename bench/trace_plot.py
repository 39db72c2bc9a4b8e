#!/usr/bin/python3
"""Draws a paro-bench --trace file as a timeline PNG: one panel per traced call whose name contains one of
the --match strings, one row per rank and link level (intra / inter), one bar per message while it holds
its link. Overlap shows as intra and inter bars of the same rank side by side in time.

    python3 bench/trace_plot.py results/trace.json -o results/trace.png \\
        --match "all_gather paro_seq 67108864" --match "all_gather paro_cc 67108864"
"""
import argparse
import collections
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="paro-bench --trace file (Chrome trace JSON)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--match", action="append", required=True, help="part of a traced call's name; repeatable")
    args = parser.parse_args()

    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    bars = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            bars[e["pid"]].append(e)
    panels = []
    for wanted in args.match:
        found = [pid for pid, name in names.items() if wanted in name]
        if not found:
            raise SystemExit(f"trace_plot.py: no traced call matches '{wanted}'; calls: {sorted(set(names.values()))}")
        panels.append(found[0])

    end = max((e["ts"] + e["dur"]) / 1e3 for pid in panels for e in bars[pid])
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.2 + 0.28 * len(rows) / max(1, len(names))),
                             squeeze=False, sharex=True)
    for ax, pid in zip(axes[:, 0], panels):
        tids = sorted({tid for (p, tid) in rows if p == pid})
        for e in bars[pid]:
            color = "tab:red" if e["args"]["level"] == "inter" else "tab:blue"
            ax.barh(tids.index(e["tid"]), e["dur"] / 1e3, left=e["ts"] / 1e3, height=0.8, color=color, linewidth=0)
        ax.set_yticks(range(len(tids)))
        ax.set_yticklabels([rows[(pid, t)] for t in tids], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, end * 1.02)
        span = max((e["ts"] + e["dur"]) / 1e3 for e in bars[pid])
        ax.set_title(f"{names[pid]}: last message done at {span:.1f} ms (blue: intra-node links, red: NIC)", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time since the call started (ms)")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"trace_plot.py: wrote {args.output}")


if __name__ == "__main__":
    main()
