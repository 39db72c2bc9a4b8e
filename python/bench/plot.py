#!/usr/bin/python3
"""Plots the PyTorch benchmarks' JSON (matplotlib; Debian's python3-matplotlib, outside the torch venv).

    plot.py bench torch-bench.json -o torch-busbw.png     # bench_torch.py: busbw per collective and way
    plot.py train a.json [b.json ...] -o separate.png     # separate_hook_train.py: loss curves, a panel per file
    plot.py dp a.json [b.json ...] -o paro-dp.png         # train_lm.py: step time vs memory, a panel per file
    plot.py ttt a.json [b.json ...] -o ttt.png            # time_to_target.py: loss vs wall time, a panel per file
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loss_curves import running_mean, wall_clock  # noqa: E402


def plot_bench(data: dict, out: str) -> None:
    records, n = data["records"], data["procs"]
    colls = list(dict.fromkeys(r["coll"] for r in records))
    columns = min(5, len(colls))
    rows = (len(colls) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.4 * rows), sharey=True, squeeze=False)
    labels = {"paro": "torch.distributed on paro", "gloo": "torch.distributed on gloo",
              "direct": "paro without torch's layer"}
    for ax, coll in zip(axes.flat, colls):
        for way, style in (("paro", "o-"), ("gloo", "s-"), ("direct", "^--")):
            mine = sorted((r for r in records if r["coll"] == coll and r["way"] == way), key=lambda r: r["bytes"])
            if mine:
                ax.plot([r["bytes"] for r in mine], [r["busbw_gbps"] for r in mine], style, label=labels[way])
        ax.set_xscale("log", base=2)
        ax.set_title(coll)
        ax.set_xlabel("size (bytes)")
        ax.grid(True, alpha=0.3)
    for ax in axes.flat[len(colls):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("busbw (GB/s)")
    axes[0][0].legend(fontsize="small")
    fig.suptitle(f"{n} local processes, float32 sum (slowest rank, median of {data['rounds']} interleaved rounds)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_train(runs: list, out: str) -> None:
    """One panel per separate_hook_train.py JSON (an optimizer, or G-SEPARATE), its runs' loss curves."""
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.5), squeeze=False)
    for ax, data in zip(axes[0], runs):
        window = max(1, data["steps"] // 30)
        cap = 4 * max(run["losses"][0] for run in data["runs"].values())  # a diverging run leaves the plot
        for name, run in data["runs"].items():
            losses = run["losses"]
            smooth = [sum(losses[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1))
                      for i in range(len(losses))]
            gone = next((i for i, v in enumerate(smooth) if not v < cap), None)  # NaN compares false
            ratio = run["dense_bytes_per_step"] / run["wire_bytes_per_step"]
            label = f"{name} ({ratio:.1f}x fewer bytes)" if run["ratio"] else name
            ax.plot(smooth[:gone], label=label + (f", diverged at step {gone}" if gone is not None else ""))
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel(f"training loss (mean of {window} steps)")
        ax.set_title(data.get("title", "separate_hook"), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_dp(runs: list, out: str) -> None:
    """One panel per train_lm.py JSON (a cluster): each way's step time against its state bytes per rank."""
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 5), squeeze=False)
    marks = {"ddp": "s", "fsdp": "^", "hsdp": "D", "gloo-ddp": "x"}
    for ax, data in zip(axes[0], runs):
        for r in data["records"]:
            mb, step = r["state_bytes"] / 2**20, r["step_s"]
            if r["way"].startswith("dp:"):
                ax.plot(mb, step, "o", color="tab:blue")
                ax.annotate(r["way"][3:], (mb, step), fontsize=7, xytext=(3, 3), textcoords="offset points")
            else:
                color = "tab:red" if r["algorithm"] == "ring" else "tab:green"
                ax.plot(mb, step, marks.get(r["way"], "x"), color=color, markersize=8,
                        label=f"{r['way']} ({r['algorithm']})")
        ax.plot([], [], "o", color="tab:blue", label="paro_torch.dp (automatic)")
        ax.set_xlabel("parameters + gradients + optimizer states per rank (MiB)")
        ax.set_ylabel("step time (s, median of rounds, slowest rank)")
        ax.set_title(f"{data['ranks']} ranks in groups of {data['group']}, {data['parameters'] / 1e6:.1f} M "
                     f"parameters\nPARO_EMULATE={data['emulate']}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_ttt(runs: list, out: str) -> None:
    """One panel per time_to_target.py JSON (a link speed): every method's smoothed loss against wall time."""
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.8), squeeze=False)
    for ax, data in zip(axes[0], runs):
        window = data["args"]["window"]
        for r in data["records"]:
            ax.plot(wall_clock(r["step_s"]), running_mean(r["losses"], window), label=r["method"],
                    linewidth=2.2 if r["method"] == "fp32" else 1.2)
        target = data["records"][0].get("target")
        if target is not None:
            ax.axhline(target, color="gray", linestyle=":", linewidth=1, label="fp32's final loss")
            ax.set_ylim(target - 0.05, target + 0.6)  # the approach to the target, not the first steps
        ax.set_xlabel("wall time (s, slowest rank)")
        ax.set_ylabel(f"training loss (mean of {window} steps)")
        ax.set_title(f"{data['ranks']} ranks, PARO_EMULATE={data['emulate']}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["bench", "train", "dp", "ttt"])
    parser.add_argument("json", nargs="+", help="bench: one file; train, dp, ttt: one panel per file")
    parser.add_argument("-o", "--out", required=True)
    args = parser.parse_args()
    data = []
    for path in args.json:
        with open(path) as f:
            data.append(json.load(f))
    if args.kind == "bench":
        plot_bench(data[0], args.out)
    elif args.kind == "dp":
        plot_dp(data, args.out)
    elif args.kind == "ttt":
        plot_ttt(data, args.out)
    else:
        plot_train(data, args.out)


if __name__ == "__main__":
    main()
