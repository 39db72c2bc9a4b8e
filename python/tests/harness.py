"""Runs a function on n local processes, each with torch.distributed initialised on a fresh store.

    run(4, body, "arg")   # body(rank, n, "arg") in 4 spawned processes, default group on `backend`

A failure on any rank raises in the caller with that rank's traceback. The processes get the environment
torchrun would give them on one node (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK), plus `env`.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from datetime import timedelta

import torch.multiprocessing as mp


def _entry(rank, n, body, args, env, init_file, backend, timeout_s):
    os.environ.update({"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0"})
    os.environ.update(env)
    import torch
    import torch.distributed as dist

    import paro_torch  # noqa: F401  (registers "paro")

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=n,
                            timeout=timedelta(seconds=timeout_s))
    try:
        body(rank, n, *args)
    finally:
        # Frees the body's groups held in reference cycles (a DeviceMesh, FSDP modules), so that destroying
        # them joins their worker threads now: a gloo worker that drops a Work's tensors while Python
        # finalizes aborts the process (torch 2.15, ProcessGroupGloo::runLoop).
        gc.collect()
        dist.destroy_process_group()


def exit_codes(n: int, body, *args, env: dict | None = None, backend: str = "paro", timeout_s: float = 120.0,
               deadline_s: float = 300.0) -> list:
    """As run(), but waits for every process, whatever the others did, and returns their exit codes
    (negative: killed by that signal; None: still running at the deadline, then killed)."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_entry, args=(r, n, body, args, dict(env or {}), os.path.join(tmp, "store"),
                                                   backend, timeout_s)) for r in range(n)]
        for p in procs:
            p.start()
        codes = []
        end = time.monotonic() + deadline_s
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
            codes.append(p.exitcode)
            if p.exitcode is None:
                p.kill()
        return codes


def run(n: int, body, *args, env: dict | None = None, backend: str = "paro", timeout_s: float = 120.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_entry, args=(n, body, args, dict(env or {}), os.path.join(tmp, "store"), backend,
                                         timeout_s), nprocs=n, join=True, start_method="spawn")
