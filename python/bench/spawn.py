"""Runs a benchmark's worker(rank, procs, init_method, args, out_path) on `procs` local processes (spawned,
rendezvous through a file store) and returns the JSON that rank 0 wrote to out_path."""

import json
import os
import tempfile

import torch.multiprocessing as mp


def run_workers(worker, procs: int, args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.start_processes(worker, args=(procs, f"file://{tmp}/store", args, out), nprocs=procs, join=True,
                           start_method="spawn")
        with open(out) as f:
            return json.load(f)
