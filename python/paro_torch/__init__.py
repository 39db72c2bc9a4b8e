"""paro for PyTorch: a ``torch.distributed`` backend named ``"paro"``, a SEPARATE communication hook for
DDP, and paro_cc's hierarchical collectives for FSDP.

    import paro_torch                      # registers the backend
    dist.init_process_group("paro")        # under torchrun, or mpirun

See docs/pytorch.md.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _C
from .separate_hook import SeparateState, separate_hook

__all__ = ["Options", "SeparateState", "separate_hook", "topology", "algorithm_for", "backend_of"]


@dataclasses.dataclass
class Options:
    """How one process group runs; pass as ``pg_options`` to ``init_process_group`` or ``new_group``.
    Empty strings leave the environment's choice (PARO_ALGO, PARO_GROUP).

    algorithm: PARO_ALGO's grammar: ``"paro_cc"``, ``"allreduce:ring;allgather:paro_cc"``, ``"automatic"``.
    group:     PARO_GROUP's grammar: ``"node"``, ``"switch"``, ``"pod"`` or a size such as ``"4"``.
    transport: ``"auto"`` (mpi under mpirun, else ucx over torch's store), ``"ucx"`` or ``"mpi"``.
    """

    algorithm: str = ""
    group: str = ""
    transport: str = ""

    def __post_init__(self) -> None:
        for name in ("algorithm", "group", "transport"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"paro_torch.Options.{name} must be a str, got {type(getattr(self, name)).__name__}")
        if self.transport not in ("", "auto", "ucx", "mpi"):
            raise ValueError(f"paro_torch.Options.transport={self.transport!r}; allowed: auto ucx mpi")


def _create(dist_opts, backend_options):
    options = backend_options if backend_options is not None else Options()
    if not isinstance(options, Options):
        raise TypeError(f"the paro backend takes paro_torch.Options as pg_options, got {type(options).__name__}")
    # paro's transports end a wait on a dead peer after PARO_TIMEOUT; without one, the group's own timeout.
    timeout = dist_opts.timeout
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    os.environ.setdefault("PARO_TIMEOUT", f"{seconds:g}")
    transport = options.transport or os.environ.get("PARO_TORCH_TRANSPORT", "auto")
    members = list(dist_opts.global_ranks_in_group or [])  # empty for the default group
    return _C.create_backend(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        options.algorithm,
        options.group,
        transport,
        members,
        dist.get_world_size() if members else dist_opts.group_size,
    )


def _wait_for_completions() -> None:
    # A future completed on torch's inter-op pool may still hold tensors; released during Python's
    # finalization they would abort the process (csrc/backend.hpp, CompletionsInFlight).
    still_running = _C.wait_for_completions(60.0)
    if still_running:
        print(f"paro_torch: {still_running} future completion(s) still running 60 s after exit began",
              file=sys.stderr)


atexit.register(_wait_for_completions)

# CUDA tensors where the extension was built with CUDA (PARO_TORCH_CUDA=1; never run on a GPU yet).
dist.Backend.register_backend("paro", _create, extended_api=True, devices=["cpu", "cuda"] if _C.with_cuda else ["cpu"])


def backend_of(group: dist.ProcessGroup | None = None) -> _C.ParoBackend:
    """The paro backend object behind a process group (the default group when None)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C.ParoBackend):
        raise ValueError(f"process group {pg.group_name!r} does not run on the paro backend")
    return backend


def topology(group: dist.ProcessGroup | None = None) -> dict:
    """paro-topo's view of a paro process group: each rank's pod, switch, node, local index and group; the
    levels; the groups and rails; where each fact came from."""
    return backend_of(group).topology()


def algorithm_for(collective: str, nbytes: int, group: dist.ProcessGroup | None = None) -> str:
    """The algorithm paro runs for a collective ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all')
    whose full buffer holds ``nbytes`` bytes on this group."""
    return backend_of(group).algorithm_for(collective, nbytes)
