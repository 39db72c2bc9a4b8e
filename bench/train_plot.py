#!/usr/bin/env python3
"""Training curves from paro-train --json files: the loss per step (a moving average) of every record, one
line each, and a Markdown table of the final loss, validation loss and step time.

  bench/train_plot.py results/train/*.json -o docs/img/separate-training.png --table results/train/table.md
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(r):
    if r.get("compress") != "separate":
        return f"{r['strategy']} uncompressed"
    if not r.get("error_feedback", True):
        parts = ["no error feedback"]
    else:
        # Records written before the rule was renamed call beta_on_residual "seed" (or name no rule).
        rule = r.get("error_rule", "seed")
        parts = [f"error rule {'beta_on_residual' if rule == 'seed' else rule}"]
    if r.get("block_cols"):
        parts.append(f"block-diagonal b={r['block_cols']}")
    if r.get("adaptive"):
        parts.append("adaptive")
    return f"SEPARATE ratio {r['ratio']}, " + ", ".join(parts)


def smooth(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--table")
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--title", default="paro-train: character MLP on fortunes, 8 ranks")
    args = ap.parse_args()
    records = []
    for f in args.files:
        with open(f) as fh:
            records += json.load(fh)
    base = next((r for r in records if r.get("compress") != "separate"), None)
    fig, ax = plt.subplots(figsize=(8, 5))
    rows = ["| run | loss, last 20 steps | vs uncompressed | validation loss | step (ms) |", "|---|---:|---:|---:|---:|"]
    for r in records:
        losses = r["losses"]
        finite = [float("nan") if x is None or x != x or abs(x) > 1e9 else x for x in losses]
        ax.plot(range(len(finite)), smooth(finite, args.window), label=label(r))
        last = sum(finite[-20:]) / len(finite[-20:])
        rel = "" if base is None else f"{(last / (sum(base['losses'][-20:]) / 20) - 1) * 100:+.1f}%"
        val = r["validation_loss"]
        val = "diverged (NaN)" if val is None or val != val else f"{val:.4f}"
        shown = "diverged (NaN)" if last != last else f"{last:.4f}"
        rows.append(f"| {label(r)} | {shown} | {rel if last == last else ''} | {val} | {r['step_ms']:.1f} |")
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (moving average of {args.window})")
    ax.set_ylim(top=6)
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    if args.table:
        with open(args.table, "w") as fh:
            fh.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
