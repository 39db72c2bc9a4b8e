#!/usr/bin/python3
"""Turns paro-bench JSON records into a PNG: bus bandwidth against size, one panel per collective, one line
per algorithm (out-of-place rows; in-place with --inplace).

    python3 bench/plot.py results/*.json -o results/busbw.png --title "threads backend, 8 ranks"
"""
import argparse
import collections
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(nbytes):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return str(nbytes)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="paro-bench --json files")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--title", default="", help="figure title")
    parser.add_argument("--inplace", action="store_true", help="plot the in-place rows instead")
    args = parser.parse_args()

    series = collections.defaultdict(lambda: collections.defaultdict(list))  # coll -> algo -> [(bytes, busbw)]
    meta = set()
    for path in args.json:
        with open(path) as f:
            for rec in json.load(f):
                if rec["inplace"] != args.inplace:
                    continue
                series[rec["coll"]][rec["algo"]].append((rec["bytes"], rec["busbw_gbps"]))
                meta.add((rec["backend"], rec["ranks"], rec["dtype"]))
    if not series:
        raise SystemExit("plot.py: no records to plot")

    colls = sorted(series)
    fig, axes = plt.subplots(1, len(colls), figsize=(5.2 * len(colls), 4.2), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for algo, points in sorted(series[coll].items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=algo)
        ax.set_xscale("log", base=2)
        sizes = sorted({p[0] for pts in series[coll].values() for p in pts})
        ax.set_xticks(sizes[:: max(1, len(sizes) // 6)])
        ax.set_xticklabels([human(s) for s in sizes[:: max(1, len(sizes) // 6)]])
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(coll + (" (in-place)" if args.inplace else ""))
        ax.grid(True, alpha=0.3)
        ax.legend()
    subtitle = ", ".join(f"{b} backend, {r} ranks, {d}" for b, r, d in sorted(meta))
    fig.suptitle(f"{args.title}\n{subtitle}" if args.title else subtitle)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"plot.py: wrote {args.output}")


if __name__ == "__main__":
    main()
