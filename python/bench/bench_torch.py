"""torch.distributed on paro against gloo, and the Python/c10d layer's cost over paro itself, side by side.

    python bench/bench_torch.py --procs 4 --min 1M --max 256M --rounds 3 --iters 3 \
        --json torch-bench.json --markdown torch-bench.md [--paro-bench build/bin]

In `procs` local processes, for each size S (the full buffer, as nccl-tests and paro-bench count it; float32,
sum) and method of torch.distributed that a trainer calls:
  all_reduce, all_gather (all_gather_into_tensor), reduce_scatter (reduce_scatter_tensor),
  all_to_all (all_to_all_single, equal blocks), all_to_allv (all_to_all_single with skewed split sizes: half
  of each rank's S/4 elements to the next rank, the rest spread over the others, as MoE routing to a popular
  expert does), broadcast, reduce, gather, scatter (root 0; gather and scatter move S in blocks of S/n), and
  send_recv (batch_isend_irecv: every rank sends S to the next rank and receives S from the previous),
these ways are timed:
  paro    the call on a paro process group (Work, future, completion thread),
  gloo    the same call on a gloo process group,
  direct  (all_reduce, all_gather, reduce_scatter) the same paro communicator called from C++ without
          torch.distributed's layer (ParoBackend.direct: paro's nonblocking verb and a wait).
Each measurement is `iters` calls back to back after a barrier, the time per call of the slowest rank; the
ways alternate call by call within a round, and the median over `rounds` rounds is reported, so that drift
on a shared machine hits them alike. busbw as nccl-tests counts it: 2(n-1)/n S/t for all-reduce, S/t for
broadcast, reduce and send_recv, (n-1)/n S/t for the others. With --paro-bench DIR, paro's C++ benchmark (paro-run + paro-bench
--backend ucx, automatic, out of place) runs afterwards for the same sizes, for reference (other processes,
not interleaved).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from spawn import run_workers

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "broadcast", "reduce",
               "gather", "scatter", "send_recv"]
DIRECT = ["all_reduce", "all_gather", "reduce_scatter"]  # the collectives ParoBackend.direct runs
WAYS = ["paro", "gloo", "direct"]


def ways_of(coll: str) -> list:
    return WAYS if coll in DIRECT else WAYS[:2]


def busbw(coll: str, nbytes: int, n: int, time_us: float) -> float:
    """GB/s, as nccl-tests counts it."""
    factor = {"all_reduce": 2 * (n - 1) / n, "broadcast": 1, "reduce": 1, "send_recv": 1}.get(coll, (n - 1) / n)
    return factor * nbytes / time_us / 1e3


def skewed_splits(count: int, n: int) -> list:
    """splits[i][j]: the elements rank i sends rank j in all_to_allv (half to rank i+1, the rest spread)."""
    share = count // 2 // (n - 1)
    hot = count - (n - 1) * share
    return [[hot if j == (i + 1) % n else share for j in range(n)] for i in range(n)]


def parse_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def sizes(lo: int, hi: int, factor: int) -> list:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def worker(rank: int, n: int, init: str, args, out_path: str) -> None:
    os.environ.update({"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0"})
    import paro_torch

    torch.set_num_threads(1)
    dist.init_process_group("paro", init_method=init, rank=rank, world_size=n, timeout=timedelta(seconds=900))
    paro, gloo = dist.group.WORLD, dist.new_group(backend="gloo")
    backend = paro_torch.backend_of(paro)

    def algorithm(coll: str, nbytes: int) -> str:
        if coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            return paro_torch.algorithm_for(coll, nbytes)
        if coll == "reduce":  # an all-reduce whose result the root keeps
            return paro_torch.algorithm_for("all_reduce", nbytes)
        return {"all_to_allv": "pairwise", "broadcast": "tree/chain", "gather": "direct", "scatter": "direct",
                "send_recv": "messages"}[coll]

    def call(way: str, coll: str, b: dict) -> None:
        full, part, out = b["full"], b["part"], b["out"]
        if way == "direct":
            if coll == "reduce_scatter":
                backend.direct(coll, part, full)
            else:
                backend.direct(coll, full, part)
            return
        group = paro if way == "paro" else gloo
        if coll == "all_reduce":
            dist.all_reduce(full, group=group)
        elif coll == "all_gather":
            dist.all_gather_into_tensor(full, part, group=group)
        elif coll == "reduce_scatter":
            dist.reduce_scatter_tensor(part, full, group=group)
        elif coll == "all_to_all":
            dist.all_to_all_single(out, full, group=group)
        elif coll == "all_to_allv":
            splits = b["splits"]
            dist.all_to_all_single(b["skewed_out"], full, output_split_sizes=[splits[j][rank] for j in range(n)],
                                   input_split_sizes=splits[rank], group=group)
        elif coll == "broadcast":
            dist.broadcast(full, src=0, group=group)
        elif coll == "reduce":
            dist.reduce(full, dst=0, group=group)
        elif coll == "gather":
            dist.gather(part, b["blocks"] if rank == 0 else None, dst=0, group=group)
        elif coll == "scatter":
            dist.scatter(part, b["blocks"] if rank == 0 else None, src=0, group=group)
        else:
            ops = [dist.P2POp(dist.isend, full, (rank + 1) % n, group=group),
                   dist.P2POp(dist.irecv, out, (rank - 1) % n, group=group)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

    def timed(way: str, coll: str, b: dict) -> float:
        dist.barrier(group=gloo)
        start = time.perf_counter()
        for _ in range(args.iters):
            call(way, coll, b)
        took = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64)
        dist.all_reduce(took, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
        return took.item() * 1e6

    records = []
    for size in sizes(args.min, args.max, args.factor):
        count = size // 4 // n * n
        splits = skewed_splits(count, n)
        b = {"full": torch.ones(count), "part": torch.ones(count // n), "out": torch.empty(count), "splits": splits,
             "skewed_out": torch.empty(sum(splits[j][rank] for j in range(n))),
             "blocks": [torch.empty(count // n) for _ in range(n)]}
        for coll in COLLECTIVES:
            ways = ways_of(coll)
            times = {way: [] for way in ways}
            for way in ways:
                call(way, coll, b)  # warm-up
            for _ in range(args.rounds):
                for way in ways:
                    times[way].append(timed(way, coll, b))
            for way in ways:
                t = statistics.median(times[way])
                records.append({"coll": coll, "way": way, "bytes": count * 4, "ranks": n, "time_us": t,
                                "times_us": times[way], "busbw_gbps": busbw(coll, count * 4, n, t),
                                "algo": algorithm(coll, count * 4) if way != "gloo" else "gloo"})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(records, f)
    dist.destroy_process_group()


def paro_bench(bin_dir: str, args) -> dict:
    """paro-bench's times on the ucx transport with automatic selection, for the collectives it runs:
    {(coll, bytes): time_us}."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for coll in DIRECT + ["all_to_all"]:
            path = os.path.join(tmp, f"{coll}.json")
            command = [os.path.join(bin_dir, "paro-run"), "-n", str(args.procs), "--",
                       os.path.join(bin_dir, "paro-bench"), "--backend", "ucx", "--algo", "automatic", "--coll", coll,
                       "-b", str(args.min), "-e", str(args.max), "-f", str(args.factor), "-n", str(args.iters),
                       "-w", "1", "--placement", "out", "-c", "0", "--json", path]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            with open(path) as f:
                for r in json.load(f):
                    out[(r["coll"], r["bytes"])] = r["time_us"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--min", type=parse_bytes, default=parse_bytes("1M"))
    parser.add_argument("--max", type=parse_bytes, default=parse_bytes("256M"))
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--iters", type=int, default=3, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per way; the median is reported")
    parser.add_argument("--paro-bench", help="directory with paro-run and paro-bench (built with UCX)")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--markdown", help="write the table here")
    args = parser.parse_args()
    if args.procs < 2 or args.min < 4 * args.procs or args.max < args.min or args.factor < 2 or args.iters < 1 \
            or args.rounds < 1:
        parser.error("need --procs >= 2, --min >= 4 x procs bytes, --max >= --min, --factor >= 2, --iters and "
                     "--rounds >= 1")

    records = run_workers(worker, args.procs, args)
    native = paro_bench(args.paro_bench, args) if args.paro_bench else {}

    n = args.procs
    lines = [f"torch.distributed with {n} local processes, float32 sum, median of {args.rounds} rounds of "
             f"{args.iters} calls, the slowest rank's time (busbw GB/s; 'direct': the same paro communicator "
             "without torch.distributed's layer, interleaved with the others)", "",
             "| method | size | algorithm | paro | gloo | paro / gloo | direct | torch layer's cost |"
             + (" paro-bench |" if native else ""),
             "|---|---:|---|---:|---:|---:|---:|---:|" + ("---:|" if native else "")]
    by = {(r["coll"], r["way"], r["bytes"]): r for r in records}
    for coll in COLLECTIVES:
        for size in sorted({r["bytes"] for r in records}):
            p, g, d = (by.get((coll, way, size)) for way in WAYS)
            row = (f"| {coll} | {size / 2**20:g} MiB | {p['algo']} | {p['busbw_gbps']:.2f} | {g['busbw_gbps']:.2f} | "
                   f"{p['busbw_gbps'] / g['busbw_gbps']:.2f}x | ")
            row += (f"{d['busbw_gbps']:.2f} | {100 * (p['time_us'] / d['time_us'] - 1):+.1f}% |" if d else "- | - |")
            if native:
                t = native.get((coll, size))
                row += f" {busbw(coll, size, n, t):.2f} |" if t else " - |"
            lines.append(row)
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"procs": n, "iters": args.iters, "rounds": args.rounds, "records": records,
                       "paro_bench": [{"coll": c, "bytes": b, "time_us": t} for (c, b), t in native.items()]}, f,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
