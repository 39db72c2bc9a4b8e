"""separate_hook on a small real model: an MLP classifying scikit-learn's handwritten digits (8x8 images,
1797 samples, shipped with the package), trained with DDP on `procs` local processes, once with DDP's
default all-reduce and once per SEPARATE ratio, from the same initial weights and the same batches.

    python bench/separate_hook_train.py --procs 4 --steps 300 --ratios 16 32 --json out.json

Prints per run the final training loss (mean of the last 10% of steps), the held-out accuracy, and the
bytes each rank all-reduced per step, compressed and dense. The loss curves go to --json for plotting.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from spawn import run_workers


def digits():
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(y), generator=g)
    test = order[:300]
    train = order[300:]
    return (x[train], y[train]), (x[test], y[test])


def model() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


def worker(rank: int, n: int, init: str, args, out_path: str) -> None:
    os.environ.update({"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0"})
    import paro_torch

    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=init, rank=rank, world_size=n,
                            timeout=timedelta(seconds=600))
    (x, y), (x_test, y_test) = digits()
    runs = {}
    for ratio in [0] + args.ratios:
        net = DDP(model())
        state = None
        if ratio:
            state = paro_torch.SeparateState(net, ratio=ratio, min_elements=4096, reset_every=args.reset_every,
                                             adaptive=args.adaptive, beta=args.beta, start_iter=args.warm_up)
            net.register_comm_hook(state, paro_torch.separate_hook)
        # Adam by default, as paro-train: SEPARATE's estimate is unbiased but noisy at high ratios, and SGD
        # with momentum at the uncompressed run's learning rate can diverge there (docs/pytorch.md).
        if args.optimizer == "adam":
            opt = torch.optim.Adam(net.parameters(), lr=args.lr)
        else:
            opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
        g = torch.Generator().manual_seed(1234)  # the same batches for every run; each rank its own slice
        losses = []
        for step in range(args.steps):
            idx = torch.randint(0, len(y), (n * args.batch,), generator=g)[rank * args.batch:(rank + 1) * args.batch]
            loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.clip)
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            losses.append(mean.item() / n)
        with torch.no_grad():
            accuracy = (net(x_test).argmax(1) == y_test).float().mean().item()
        dense = sum(p.numel() * 4 for p in net.parameters())
        name = f"{'G-SEPARATE' if args.adaptive else 'SEPARATE'} ratio {ratio}" if ratio else "uncompressed"
        runs[name] = {
            "ratio": ratio, "losses": losses, "accuracy": accuracy,
            "wire_bytes_per_step": state.wire_bytes / args.steps if state else dense,
            "dense_bytes_per_step": dense,
        }
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"procs": n, "steps": args.steps, "backend": args.backend, "runs": runs,
                   "title": f"separate_hook: MLP on sklearn digits, {n} processes on {args.backend}, {args.optimizer}"}, f)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam", help="sgd: momentum 0.9")
    parser.add_argument("--lr", type=float, help="learning rate (default: adam 1e-3, sgd 0.05)")
    parser.add_argument("--ratios", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--reset-every", type=int, default=0)
    parser.add_argument("--beta", type=float, default=0.95, help="the error feedback's beta")
    parser.add_argument("--warm-up", type=int, default=0, help="plain all-reduces before compressing")
    parser.add_argument("--clip", type=float, default=0, help="global gradient-norm clipping (0: none)")
    parser.add_argument("--adaptive", action="store_true", help="G-SEPARATE")
    parser.add_argument("--backend", default="paro", help="DDP's process group: paro or gloo")
    parser.add_argument("--json", help="write the loss curves and results here")
    args = parser.parse_args()
    if args.lr is None:
        args.lr = 1e-3 if args.optimizer == "adam" else 0.05
    result = run_workers(worker, args.procs, args)
    tail = max(1, args.steps // 10)
    base = sum(result["runs"]["uncompressed"]["losses"][-tail:]) / tail
    print(f"separate_hook on sklearn digits, MLP 64-512-512-10, {args.procs} processes on {args.backend}, "
          f"{args.steps} steps, {args.optimizer} lr {args.lr:g}, batch {args.batch} per process (final loss: mean of the last {tail})\n")
    print("| run | final loss | vs uncompressed | test accuracy | wire bytes/step | dense bytes/step | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in result["runs"].items():
        final = sum(r["losses"][-tail:]) / tail
        r["final_loss"] = final
        print(f"| {name} | {final:.4f} | {final - base:+.4f} | {100 * r['accuracy']:.1f}% | "
              f"{r['wire_bytes_per_step']:.0f} | {r['dense_bytes_per_step']:.0f} | "
              f"{r['dense_bytes_per_step'] / r['wire_bytes_per_step']:.1f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    sys.exit(main())
