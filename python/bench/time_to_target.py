"""Time to the same loss under gradient compression: DDP in fp32, with torch's bf16 compression hook, with
PowerSGD (its rank chosen to send what SEPARATE sends at the middle ratio) and with paro's separate_hook at
several ratios and G-SEPARATE, training train_lm.py's byte-level GPT under torchrun on the paro backend's
emulated links, from the same weights on the same batches.

    PARO_EMULATE=nodes=2,ranks=2,inter_gbps=1 PARO_TRACE=1 \\
        torchrun --standalone --nproc-per-node 4 time_to_target.py --steps 300 --json ttt.json

For every run: the loss curve against wall-clock time (the slowest rank's step times added up), the time
to reach the fp32 run's final loss (the mean of its last --window steps; a run's loss is the same running
mean; a run that has not reached it after --steps goes on, up to --patience times as many), the loss
reached in the fp32 run's wall time and after its number of steps, bytes per step between and inside
nodes (the links' trace), and for SEPARATE where a step's time goes: its hook's projection (with the error
feedback that forms h), all-reduce (issue to completion) and reconstruction (with the error update),
beside the compute measured without communication. Methods: fp32, bf16, powersgd:R, separate:R[:bB],
gseparate:R[:bB] (B: the block-diagonal projection's block).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import paro_torch
import train_lm as lm
from loss_curves import running_mean, wall_clock


def matrices(model: torch.nn.Module, min_elements: int) -> list:
    return [p.shape for p in model.parameters() if p.dim() == 2 and p.numel() >= min_elements]


def powersgd_rank(model: torch.nn.Module, ratio: int, min_elements: int) -> int:
    """The PowerSGD rank r whose r (rows + cols) floats per matrix add up closest to SEPARATE's numel / ratio."""
    shapes = matrices(model, min_elements)
    separate = sum(s.numel() / ratio for s in shapes)
    return max(1, round(separate / sum(s[0] + s[1] for s in shapes)))


def make(method: str, args, group):
    kind, _, arg = method.partition(":")
    # PowerSGD issues its second all-reduce from a future callback. With several buckets those callbacks run
    # on a thread pool in whatever order they finish, so the ranks issue them in different orders and the
    # collectives mismatch (on any CPU backend); in one bucket there is one chain of callbacks.
    model = DDP(lm.build(args), process_group=group, **({"bucket_cap_mb": 1024} if kind == "powersgd" else {}))
    arg, _, block = arg.partition(":b")  # separate:R:bB, the block-diagonal projection with blocks of B columns
    state = None
    if kind == "bf16":
        model.register_comm_hook(group, default_hooks.bf16_compress_hook)
    elif kind == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=int(arg),
                                            start_powerSGD_iter=max(2, args.warm_up), min_compression_rate=2)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif kind in ("separate", "gseparate"):
        state = paro_torch.SeparateState(model, group, ratio=int(arg), start_iter=args.warm_up,
                                         min_elements=args.min_elements, adaptive=kind == "gseparate",
                                         beta=args.beta, block_cols=int(block or args.block_cols),
                                         **({"seed": args.projection_seed} if args.projection_seed is not None else {}))
        model.register_comm_hook(state, paro_torch.separate_hook)
    elif kind != "fp32":
        raise SystemExit(f"time_to_target: method {method!r}; allowed: fp32 bf16 powersgd:R separate:R[:bB] "
                         "gseparate:R[:bB]")
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    return model, opt, state


def run(method: str, args, groups: dict, text: torch.Tensor, target: float | None = None) -> dict:
    """Trains with `method` for args.steps steps and, given fp32's target, on until the loss's running mean
    reaches it (at most args.patience times as many steps in all)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    model, opt, state = make(method, args, groups["paro"])
    losses, seconds = [], []
    dist.barrier(group=groups["gloo"])
    paro_torch._C.take_link_bytes(rank)
    steps = args.steps if target is None else int(args.steps * args.patience)
    for step in range(steps):
        start = time.perf_counter()
        for micro in range(args.accumulation):
            x, y = lm.batch(text, args, rank, step, micro)
            loss = F.cross_entropy(model(x).reshape(-1, lm.VOCAB), y.reshape(-1))
            if micro < args.accumulation - 1:
                with model.no_sync():
                    loss.backward()
            else:
                loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad()
        took = time.perf_counter() - start
        both = torch.tensor([took, float(loss.detach()) / n], dtype=torch.float64)
        slowest = both[:1].clone()
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
        dist.all_reduce(both, group=groups["gloo"])
        seconds.append(float(slowest))
        losses.append(float(both[1]))
        recent = losses[-args.window:]
        if target is not None and step + 1 >= args.steps and sum(recent) / len(recent) <= target:
            break
    intra, inter = paro_torch._C.take_link_bytes(rank)
    split = state.timings() if isinstance(state, paro_torch.SeparateState) else None
    counts = torch.tensor([intra, inter], dtype=torch.float64)
    dist.all_reduce(counts, group=groups["gloo"])
    record = {"method": method, "losses": losses, "step_s": seconds,
              "intra_bytes_per_step": float(counts[0]) / n / len(losses),
              "inter_bytes_per_step": float(counts[1]) / n / len(losses)}
    if split is not None:
        record["separate_s_per_step"] = {k: v / len(losses) for k, v in split.items()}
        record["compression_ratio"] = state.compression_ratio()
    return record


def first_time_at(clock: list, curve: list, target: float) -> float | None:
    """The wall time at which a running-mean loss curve first reaches target (None: never)."""
    return next((t for t, v in zip(clock, curve) if v <= target), None)


def summarize(records: list, window: int, steps: int) -> list:
    """Adds to every record the time to fp32's final loss, the loss at fp32's wall time and at its step count;
    returns the table's lines."""
    base = next(r for r in records if r["method"] == "fp32")
    base_curve, base_clock = running_mean(base["losses"], window), wall_clock(base["step_s"])
    target, budget = base_curve[-1], base_clock[-1]
    # fp32's own time to target: where its running mean first reaches its final value, which a noisy
    # plateau can put before its last step. Every method is timed the same way.
    base_reached = first_time_at(base_clock, base_curve, target)
    lines = [f"target: fp32's loss at step {steps} (mean of its last {window} steps) = {target:.4f}, "
             f"first reached after {base_reached:.1f} s of its {budget:.1f} s",
             f"| method | time to target (s) | vs fp32 | loss at fp32's time | loss at step {steps} | vs fp32 | "
             "s/step | inter MiB/step | intra MiB/step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        curve, clock = running_mean(r["losses"], window), wall_clock(r["step_s"])
        total = clock[-1]
        reached = first_time_at(clock, curve, target)
        within = [v for t, v in zip(clock, curve) if t <= budget]
        r.update(target=target, time_to_target_s=reached, loss_at_fp32_time=within[-1] if within else None,
                 loss_at_steps=curve[steps - 1], wall_s=total)
        speed = f"{base_reached / reached:.2f}x" if reached else f"not in {len(clock)} steps"
        at_time = f"{within[-1]:.4f}" if within else "-"
        lines.append(f"| {r['method']} | {'-' if reached is None else round(reached, 1)} | {speed} | {at_time} | "
                     f"{curve[steps - 1]:.4f} | {100 * (curve[steps - 1] / target - 1):+.1f}% | "
                     f"{total / len(clock):.3f} | {r['inter_bytes_per_step'] / 2**20:.2f} | "
                     f"{r['intra_bytes_per_step'] / 2**20:.2f} |")
    return lines


def report(data: dict) -> list:
    """The printed report of a run (also from its saved JSON: --summarize)."""
    args = argparse.Namespace(**data["args"])
    middle = sorted(args.ratios)[len(args.ratios) // 2]
    lines = [f"# {data['parameters'] / 1e6:.2f} M parameters, {data['ranks']} ranks, {args.batch} x {args.context} "
             f"tokens per rank and micro-step, {args.steps} steps, warm-up {args.warm_up} plain steps, PowerSGD rank "
             f"{data['powersgd_rank']} (SEPARATE ratio {middle}'s bytes), PARO_EMULATE={data['emulate']}"]
    lines += summarize(data["records"], args.window, args.steps)
    c = data["compute"]
    lines.append(f"compute without communication: forward {c['forward_s'] * 1e3:.1f} ms, backward "
                 f"{c['backward_s'] * 1e3:.1f} ms per micro-step, AdamW "
                 f"{c['optimizer_s_per_element'] * data['parameters'] * 1e3:.1f} ms per step")
    for r in data["records"]:
        if "separate_s_per_step" in r:
            t = r["separate_s_per_step"]
            lines.append(f"{r['method']}: per step projection {t['project'] * 1e3:.1f} ms, all-reduce "
                         f"{t['all_reduce'] * 1e3:.1f} ms (issue to completion), reconstruction "
                         f"{t['reconstruct'] * 1e3:.1f} ms; {r['compression_ratio']:.1f}x fewer bytes")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lm.add_model_arguments(ap, batch=4, accumulation=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw", help="sgd: momentum 0.9")
    ap.add_argument("--lr", type=float, help="default: 1e-3 for adamw, 0.1 for sgd")
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clipping (0: none)")
    ap.add_argument("--ratios", type=int, nargs="+", default=[8, 16, 32], help="separate_hook's ratios")
    ap.add_argument("--gseparate", type=int, default=32, help="G-SEPARATE's ratio (0: none)")
    ap.add_argument("--warm-up", type=int, default=2,
                    help="plain all-reduces before compressing (PowerSGD needs at least 2 with error feedback)")
    ap.add_argument("--beta", type=float, default=0.95, help="separate_hook's error-feedback beta")
    ap.add_argument("--block-cols", type=int, default=0, help="separate_hook's block size (0: the full projection)")
    ap.add_argument("--projection-seed", type=int, help="separate_hook's shared seed (default: the hook's own)")
    ap.add_argument("--min-elements", type=int, default=65536, help="smaller gradients go uncompressed")
    ap.add_argument("--window", type=int, default=50, help="steps in a loss's running mean")
    ap.add_argument("--patience", type=float, default=1.5,
                    help="a method that has not reached fp32's loss after --steps runs on, up to this many times them")
    ap.add_argument("--methods", help="comma-separated, instead of the default list (fp32 first)")
    ap.add_argument("--json")
    ap.add_argument("--summarize", metavar="JSON", help="print the report of a saved run and exit")
    args = ap.parse_args()
    if args.summarize:
        with open(args.summarize) as f:
            for line in report(json.load(f)):
                print(line)
        return
    if args.lr is None:
        args.lr = 0.1 if args.optimizer == "sgd" else 1e-3

    dist.init_process_group("paro")
    torch.set_num_threads(1)
    rank = dist.get_rank()
    text = lm.corpus(args.corpus)
    groups = {"gloo": dist.new_group(backend="gloo"), "paro": dist.group.WORLD}
    model = lm.build(args)
    model_size = sum(p.numel() for p in model.parameters())
    middle = sorted(args.ratios)[len(args.ratios) // 2]
    rank_r = powersgd_rank(model, middle, args.min_elements)
    methods = args.methods.split(",") if args.methods else (
        ["fp32", "bf16", f"powersgd:{rank_r}"] + [f"separate:{r}" for r in args.ratios] + [f"separate:{middle}:b64"] +
        ([f"gseparate:{args.gseparate}"] if args.gseparate else []))
    if methods[0] != "fp32":
        raise SystemExit("time_to_target: the first method must be fp32 (the target)")
    compute = lm.compute_times(args, groups, text)
    records = []
    for method in methods:
        target = running_mean(records[0]["losses"], args.window)[-1] if records else None
        records.append(run(method, args, groups, text, target))
        if rank == 0:
            r = records[-1]
            print(f"# {method}: {sum(r['step_s']):.1f} s, final loss {r['losses'][-1]:.4f}", flush=True)
    if rank == 0:
        data = {"args": vars(args), "emulate": os.environ.get("PARO_EMULATE", ""), "ranks": dist.get_world_size(),
                "parameters": model_size, "powersgd_rank": rank_r,
                "compute": dict(zip(("forward_s", "backward_s", "optimizer_s_per_element"), compute)),
                "records": records}
        for line in report(data):
            print(line)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
