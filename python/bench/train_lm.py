"""Trains a byte-level GPT on Debian's fortunes under torchrun, with every PaRO-DP strategy (paro_torch.dp) and
with torch's own data parallelism (DDP, FSDP2 = GGG, HSDP = III) on the paro backend, all over the same
emulated links, and reports each one's step time, tokens/s, loss, state bytes per rank and bytes per link
class; with --advise, paro_torch.dp.advise's prediction beside each strategy.

    PARO_EMULATE=nodes=2,ranks=2,inter_gbps=1 PARO_TRACE=1 \\
        torchrun --nproc-per-node 4 train_lm.py --json dp.json

torch's ways run twice: with every collective a flat ring (what a flat NCCL-style ring does on these links)
and with paro's automatic choice; paro_torch.dp's strategies run with automatic. Every run starts from the same
weights and sees the same batches. gloo cannot be paced: --gloo adds DDP on gloo as an unpaced reference,
never in a ratio. Timing: a gloo barrier (unpaced) before the measured steps, the slowest rank's time.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import paro_torch
import paro_torch.dp as pdp

VOCAB = 256


class Block(torch.nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width, bias=False)
        self.proj = torch.nn.Linear(width, width)
        self.fc, self.out = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, width: int, layers: int, heads: int, context: int) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, width)
        self.pos = torch.nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = torch.nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def corpus(path: str) -> torch.Tensor:
    files = sorted(f for f in glob.glob(os.path.join(path, "*")) if os.path.isfile(f) and "." not in
                   os.path.basename(f)) if os.path.isdir(path) else [path]
    if not files:
        sys.exit(f"train_lm: no text under {path} (Debian: apt-get install fortunes)")
    data = b"".join(open(f, "rb").read() for f in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def batch(text: torch.Tensor, args, rank: int, step: int, micro: int):
    g = torch.Generator().manual_seed(1_000_003 * step + 1009 * micro + rank)
    starts = torch.randint(0, text.numel() - args.context - 1, (args.batch,), generator=g)
    rows = torch.stack([text[s:s + args.context + 1] for s in starts.tolist()])
    return rows[:, :-1], rows[:, 1:]


def build(args) -> torch.nn.Module:
    torch.manual_seed(args.seed)
    return GPT(args.width, args.layers, args.heads, args.context)


def storages_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        s = t.untyped_storage()
        if s.data_ptr() not in seen:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


def state_bytes(model, opt) -> dict:
    """Bytes of parameters, gradients and optimizer states this rank holds (FSDP: the local shards)."""
    local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    grads = [(g.to_local() if hasattr(g, "to_local") else g) for g in (p.grad for p in model.parameters())]
    states = [v.to_local() if hasattr(v, "to_local") else v for st in opt.state.values() for v in st.values()
              if torch.is_tensor(v) and v.dim() > 0]
    return {"params": storages_bytes(local), "grads": storages_bytes(grads), "optimizer": storages_bytes(states)}


def make(way: str, algorithm: str, args, groups: dict):
    """(model, optimizer, no_sync, clip) for one way of training."""
    model = build(args)
    opt_args = dict(lr=args.lr, weight_decay=0.1)
    if way.startswith("dp:"):
        model, opt = pdp.shard(model, torch.optim.AdamW, strategy=way[3:], algorithm=algorithm, **opt_args)
        return model, opt, model.paro_dp.no_sync, lambda: opt.clip_grad_norm_(1.0)
    if way in ("ddp", "gloo-ddp"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        group = groups["gloo"] if way == "gloo-ddp" else groups[("world", algorithm)]
        model = DDP(model, process_group=group)
        opt = torch.optim.AdamW(model.parameters(), **opt_args)
        return model, opt, model.no_sync, lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    n = dist.get_world_size()
    if way == "fsdp":
        mesh = DeviceMesh.from_group(groups[("world", algorithm)], "cpu")
    else:  # hsdp: replicate along the rail, shard inside the node
        m = groups["m"]
        mesh = DeviceMesh.from_group([groups[("rail", algorithm)], groups[("node", algorithm)]], "cpu",
                                     mesh=torch.arange(n).view(n // m, m), mesh_dim_names=("replicate", "shard"))
    for b in model.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), **opt_args)

    class NoSync:  # FSDP2's accumulation switch as a context manager
        def __enter__(self):
            model.set_requires_gradient_sync(False)

        def __exit__(self, *exc):
            model.set_requires_gradient_sync(True)

    return model, opt, NoSync, lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)


def train(way: str, algorithm: str, args, groups: dict, text: torch.Tensor) -> dict:
    rank, n = dist.get_rank(), dist.get_world_size()
    model, opt, no_sync, clip = make(way, algorithm, args, groups)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier(group=groups["gloo"])
            paro_torch._C.take_link_bytes(rank)
        start = time.perf_counter()
        for micro in range(args.accumulation):
            x, y = batch(text, args, rank, step, micro)
            if micro < args.accumulation - 1:
                with no_sync():
                    F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).backward()
            else:
                loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
                loss.backward()
        clip()
        opt.step()
        if step == args.warmup + args.steps - 1:  # gradients still held
            memory = model.paro_dp.memory() if way.startswith("dp:") else state_bytes(model, opt)
        opt.zero_grad()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
            losses.append(float(loss.detach()))
    if way.startswith("dp:"):
        model.paro_dp.synchronize()  # the last rebuild belongs to the measured steps
    intra, inter = paro_torch._C.take_link_bytes(rank)
    # The slowest rank's time; the loss averaged over ranks.
    summary = torch.tensor([sum(times), statistics.median(times), losses[-1] / n, intra, inter], dtype=torch.float64)
    slowest = summary.clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
    total = summary.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM, group=groups["gloo"])
    step_s = float(slowest[0]) / args.steps
    tokens = n * args.batch * args.context * args.accumulation
    record = {"way": way, "algorithm": algorithm, "step_s": step_s, "median_step_s": float(slowest[1]),
              "tokens_per_s": tokens / step_s, "loss": float(total[2]),
              "intra_bytes_per_step": float(total[3]) / n / args.steps,
              "inter_bytes_per_step": float(total[4]) / n / args.steps,
              "memory": memory, "state_bytes": memory["params"] + memory["grads"] + memory["optimizer"]}
    del model, opt
    return record


def compute_times(args, groups: dict, text: torch.Tensor) -> tuple:
    """(forward, backward) seconds of one micro-step without communication, and AdamW's step per element,
    measured on every rank at once (so with the same CPU sharing as training); the medians, averaged over
    ranks."""
    rank = dist.get_rank()
    model = build(args)
    x, y = batch(text, args, rank, 0, 0)
    forward, backward = [], []
    for _ in range(4):
        dist.barrier(group=groups["gloo"])
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        t1 = time.perf_counter()
        loss.backward()
        forward.append(t1 - t0)
        backward.append(time.perf_counter() - t1)
    flat = torch.nn.Parameter(torch.zeros(sum(p.numel() for p in model.parameters())))
    flat.grad = torch.randn_like(flat)
    opt = torch.optim.AdamW([flat], lr=args.lr, weight_decay=0.1)
    steps = []
    for _ in range(4):
        t0 = time.perf_counter()
        opt.step()
        steps.append(time.perf_counter() - t0)
    measured = torch.tensor([statistics.median(forward), statistics.median(backward),
                             statistics.median(steps) / flat.numel()], dtype=torch.float64)
    dist.all_reduce(measured, group=groups["gloo"])
    return tuple((measured / dist.get_world_size()).tolist())


def calibrate(args, groups: dict, text: torch.Tensor, units: list) -> "pdp.Machine":
    """What advise() needs, measured on the training processes: compute_times(), and the bytes per second and
    per-message latency of scoped all-gathers inside the group and along the rail on the emulated links."""
    backend = paro_torch.backend_of(groups[("world", "automatic")])
    rates, latency = {}, {}
    for scope in ("intra", "inter"):
        _, k = paro_torch._C.scope_of(backend, scope)
        if k == 1:
            rates[scope], latency[scope] = float("inf"), 0.0
            continue
        # The rate from the difference between a unit's size and four times it; the latency from k elements.
        timing = {}
        for elements in (k, max(units) // k * k, 4 * (max(units) // k * k)):
            block = torch.ones(elements // k)
            out = torch.empty(elements)
            samples = []
            for _ in range(5):
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                paro_torch._C.start_scoped(backend, "all_gather", scope, "automatic", out, block).wait()
                samples.append(time.perf_counter() - t0)
            timing[elements] = statistics.median(samples)
        small, mid, large = sorted(timing)
        latency[scope] = timing[small] / (k - 1)
        rates[scope] = (large - mid) * 4 / k * (k - 1) / max(timing[large] - timing[mid], 1e-6)
    f, b, o = compute_times(args, groups, text)
    links = torch.tensor([rates["intra"], rates["inter"], max(latency.values())], dtype=torch.float64)
    dist.all_reduce(links, group=groups["gloo"])
    intra, inter, lat = (links / dist.get_world_size()).tolist()
    # The processes share the CPU cores that also copy the bytes inside a node.
    return pdp.Machine(intra_bytes_per_s=intra, inter_bytes_per_s=inter, forward_s=f, backward_s=b,
                       optimizer_s_per_element=o, latency_s=lat, intra_uses_compute=True)


def spearman(a: list, b: list) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r
    ra, rb = ranks(a), ranks(b)
    mean = (len(a) - 1) / 2
    cov = sum((x - mean) * (y - mean) for x, y in zip(ra, rb))
    var = sum((x - mean) ** 2 for x in ra)
    return cov / var


def summarize(records: list, machine) -> dict:
    """The ratios the benchmark is read by, from the medians of one run."""
    step = {(r["way"], r["algorithm"]): r["step_s"] for r in records}
    dp = {r["way"]: r for r in records if r["way"].startswith("dp:")}
    out: dict = {"lines": []}
    if not dp:
        return out
    best = min(dp.values(), key=lambda r: r["step_s"])
    out["best"] = best["way"]
    lines = [f"best paro_torch.dp strategy: {best['way'][3:]} ({best['step_s']:.3f} s/step, "
             f"{best['state_bytes'] / 2**20:.1f} MB/rank)"]
    for way, algorithm in (("fsdp", "ring"), ("ddp", "automatic"), ("fsdp", "automatic"), ("hsdp", "automatic"),
                           ("ddp", "ring"), ("hsdp", "ring")):
        if (way, algorithm) in step:
            ratio = step[(way, algorithm)] / best["step_s"]
            out[f"{way}_{algorithm}_over_best"] = ratio
            lines.append(f"{way} ({algorithm}) / best: {ratio:.2f}x")
    if machine is not None and len(dp) >= 3 and all("predicted_step_s" in r for r in dp.values()):
        ways = sorted(dp)
        rho = spearman([dp[w]["predicted_step_s"] for w in ways], [dp[w]["step_s"] for w in ways])
        pick = min(ways, key=lambda w: dp[w]["predicted_step_s"])
        out.update(spearman=rho, advised=pick, advised_over_best=dp[pick]["step_s"] / best["step_s"])
        lines.append(f"advisor: picks {pick[3:]}, measured {dp[pick]['step_s']:.3f} s/step = "
                     f"{out['advised_over_best']:.2f}x the best; rank correlation (Spearman) of predicted and "
                     f"measured step times over {len(ways)} strategies: {rho:.2f}")
    out["lines"] = lines
    return out


def add_model_arguments(ap: argparse.ArgumentParser, batch: int, accumulation: int) -> None:
    """The model, its data and their defaults, shared by the harnesses that train this model."""
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=batch, help="sequences per rank and micro-step")
    ap.add_argument("--accumulation", type=int, default=accumulation, help="micro-steps per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(ap, batch=2, accumulation=2)
    ap.add_argument("--steps", type=int, default=4, help="measured steps per way")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--ways", default="all", help="comma-separated: ddp, fsdp, hsdp, dp:NIG, ..., dp:all; "
                    "default: all of them")
    ap.add_argument("--gloo", action="store_true", help="also DDP on gloo (unpaced; a reference, no ratio)")
    ap.add_argument("--rounds", type=int, default=1, help="every way once per round, interleaved; the median")
    ap.add_argument("--advise", action="store_true", help="calibrate, and predict every strategy's step time")
    ap.add_argument("--json", help="write the records here (rank 0)")
    args = ap.parse_args()

    dist.init_process_group("paro")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    text = corpus(args.corpus)
    topo = paro_torch.topology()
    m = len(topo["groups"][0])
    groups = {"gloo": dist.new_group(backend="gloo"), "m": m}
    for algorithm in ("ring", "automatic"):
        options = paro_torch.Options(algorithm=algorithm)
        groups[("world", algorithm)] = dist.new_group(backend="paro", pg_options=options)
        for kind, lists in (("node", topo["groups"]), ("rail", topo["rails"])):
            mine, _ = dist.new_subgroups_by_enumeration(lists, backend="paro", pg_options=options)
            groups[(kind, algorithm)] = mine
    wanted = args.ways.split(",") if args.ways != "all" else ["ddp", "fsdp", "hsdp", "dp:all"]
    runs = []
    for way in wanted:
        if way == "dp:all":
            runs += [("dp:" + s.name, "automatic") for s in pdp.valid_strategies()]
        elif way.startswith("dp:"):
            runs.append((way, "automatic"))
        elif way in ("ddp", "fsdp", "hsdp"):
            runs += [(way, "ring"), (way, "automatic")]
        else:
            sys.exit(f"train_lm: way {way!r}; allowed: ddp fsdp hsdp dp:<strategy> dp:all")
    if args.gloo:
        runs.append(("gloo-ddp", "gloo"))
    model = build(args)
    params = sum(p.numel() for p in model.parameters())
    units = pdp.unit_lengths_of(model)
    del model
    machine = calibrate(args, groups, text, units) if args.advise else None
    header = (f"# {params / 1e6:.2f} M parameters in {len(units)} units, {n} ranks in groups of {m}, {args.batch} x "
              f"{args.context} tokens per rank and micro-step, {args.accumulation} micro-steps, "
              f"{args.rounds} round(s) of {args.steps} measured steps, "
              f"PARO_EMULATE={os.environ.get('PARO_EMULATE', '')}")
    if rank == 0:
        print(header, flush=True)
    rounds: dict = {}
    for round_ in range(args.rounds):
        for way, algorithm in runs:
            r = train(way, algorithm, args, groups, text)
            rounds.setdefault((way, algorithm), []).append(r)
            if rank == 0:
                print(f"# round {round_ + 1}: {way} ({algorithm}) {r['step_s']:.3f} s/step", flush=True)
    records = []
    for (way, algorithm), rs in rounds.items():
        r = dict(rs[len(rs) // 2] if len(rs) % 2 else rs[0])
        r["step_s"] = statistics.median(x["step_s"] for x in rs)
        r["rounds_step_s"] = [x["step_s"] for x in rs]
        r["tokens_per_s"] = n * args.batch * args.context * args.accumulation / r["step_s"]
        records.append(r)
    predicted = {}
    if machine is not None:
        for a in pdp.advise(units, n, m, machine, accumulation=args.accumulation):
            predicted["dp:" + a["strategy"]] = a
        for r in records:
            if r["way"] in predicted:
                r["predicted_step_s"] = predicted[r["way"]]["step_s"]
    if rank == 0:
        print("| way | collectives | step (s) | predicted (s) | tokens/s | loss | state MB/rank | intra MB/step | "
              "inter MB/step |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in records:
            guess = f"{r['predicted_step_s']:.3f}" if "predicted_step_s" in r else ""
            print(f"| {r['way']} | {r['algorithm']} | {r['step_s']:.3f} | {guess} | {r['tokens_per_s']:.0f} | "
                  f"{r['loss']:.4f} | {r['state_bytes'] / 2**20:.1f} | {r['intra_bytes_per_step'] / 2**20:.1f} | "
                  f"{r['inter_bytes_per_step'] / 2**20:.1f} |")
        summary = summarize(records, machine)
        for line in summary["lines"]:
            print(line)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": n, "group": m, "parameters": params, "units": units,
                           "emulate": os.environ.get("PARO_EMULATE", ""), "args": vars(args),
                           "machine": vars(machine) if machine else None, "records": records,
                           "summary": {k: v for k, v in summary.items() if k != "lines"}}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
