#!/usr/bin/python3
"""Checks paro-bench --json records of an --algo all sweep: for every collective and size, the algorithm
automatic picked (auto_pick) against the fastest measured one (out-of-place rows). Prints a markdown table
and the sizes where the pick was more than --tolerance slower. Exit status 1 if any was.

    python3 bench/auto_check.py results/emulated-small.json results/emulated-medium.json results/emulated-large.json
"""
import argparse
import collections
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="paro-bench --json files")
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed slowdown of the pick (default 0.10)")
    args = parser.parse_args()

    rows = collections.defaultdict(dict)  # (coll, bytes) -> algo -> record
    for path in args.json:
        with open(path) as f:
            for rec in json.load(f):
                if not rec["inplace"]:
                    rows[(rec["coll"], rec["bytes"])][rec["algo"]] = rec
    print("| collective | size (B) | fastest | time (us) | automatic picks | its time (us) | slower by | bound (us) |")
    print("|---|---:|---|---:|---|---:|---:|---:|")
    misses = []
    for (coll, size), algos in sorted(rows.items()):
        measured = {a: r for a, r in algos.items() if a not in ("automatic", "native")}
        if not measured:
            continue
        best = min(measured, key=lambda a: measured[a]["time_us"])
        pick = next(iter(algos.values()))["auto_pick"]
        if pick not in measured:
            raise SystemExit(f"auto_check.py: {coll} {size}: the pick {pick} was not measured (run with --algo all)")
        slower = measured[pick]["time_us"] / measured[best]["time_us"] - 1
        flag = "" if slower <= args.tolerance else " **over**"
        if flag:
            misses.append(f"{coll} {size}")
        print(f"| {coll} | {size} | {best} | {measured[best]['time_us']:.0f} | {pick} | "
              f"{measured[pick]['time_us']:.0f} | {100 * slower:.1f}%{flag} | {algos[best]['bound_us']:.0f} |")
    print(f"\n{len(rows) - len(misses)} of {len(rows)} sizes within {100 * args.tolerance:.0f}% of the fastest"
          + (f"; over: {', '.join(misses)}" if misses else ""))
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
