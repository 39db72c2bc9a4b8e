#!/usr/bin/python3
"""Plots the PyTorch benchmarks' JSON (matplotlib; Debian's python3-matplotlib, outside the torch venv).

    plot.py bench torch-bench.json -o torch-busbw.png     # bench_torch.py: busbw per collective and way
    plot.py train separate-train.json -o separate.png     # separate_hook_train.py: loss curves per run
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def busbw(coll: str, nbytes: int, n: int, time_us: float) -> float:
    factor = 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n
    return factor * nbytes / time_us / 1e3


def plot_bench(data: dict, out: str) -> None:
    records, n = data["records"], data["procs"]
    colls = ["all_reduce", "all_gather", "reduce_scatter"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    labels = {"paro": "torch.distributed on paro", "gloo": "torch.distributed on gloo",
              "direct": "paro without torch's layer"}
    for ax, coll in zip(axes, colls):
        for way, style in (("paro", "o-"), ("gloo", "s-"), ("direct", "^--")):
            rows = sorted((r for r in records if r["coll"] == coll and r["way"] == way), key=lambda r: r["bytes"])
            ax.plot([r["bytes"] for r in rows], [busbw(coll, r["bytes"], n, r["time_us"]) for r in rows], style,
                    label=labels[way])
        ax.set_xscale("log", base=2)
        ax.set_title(coll)
        ax.set_xlabel("size (bytes)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("busbw (GB/s)")
    axes[0].legend()
    fig.suptitle(f"{n} local processes, float32 sum (median of {data['rounds']} interleaved rounds)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_train(data: dict, out: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    window = max(1, data["steps"] // 30)
    for name, run in data["runs"].items():
        losses = run["losses"]
        smooth = [sum(losses[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1))
                  for i in range(len(losses))]
        ratio = run["dense_bytes_per_step"] / run["wire_bytes_per_step"]
        ax.plot(smooth, label=f"{name} ({ratio:.1f}x fewer bytes)" if run["ratio"] else name)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (mean of {window} steps)")
    ax.set_title(data.get("title", "separate_hook"))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["bench", "train"])
    parser.add_argument("json")
    parser.add_argument("-o", "--out", required=True)
    args = parser.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    (plot_bench if args.kind == "bench" else plot_train)(data, args.out)


if __name__ == "__main__":
    main()
