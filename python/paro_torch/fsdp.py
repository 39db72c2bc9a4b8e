"""paro's hierarchical all-gather and reduce-scatter for FSDP2.

Two ways, both shown in tests/test_training.py:
  * FSDP on a paro process group: its all-gathers and reduce-scatters run on paro, with the algorithm the
    group's Options (or PARO_ALGO) choose;
  * use_paro_collectives(module): FSDP keeps its own process group (gloo, say) for everything else, and
    its parameter all-gathers and gradient reduce-scatters run on a paro group of the same ranks with the
    given algorithm (FSDP2's set_custom_all_gather / set_custom_reduce_scatter).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from . import Options

__all__ = ["ParoAllGather", "ParoReduceScatter", "use_paro_collectives"]

try:
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import (
        AllGather,
        DefaultAllocMixin,
        ReduceScatter,
    )
except ImportError as e:  # torch before 2.9 has no custom FSDP collectives
    raise ImportError("paro_torch.fsdp needs FSDP2's custom collectives (torch >= 2.9): " + str(e)) from e


class _OnParoGroup:
    """Runs on a paro group over the ranks of the group FSDP passes (made once per FSDP group)."""

    def __init__(self, algorithm: str) -> None:
        self.options = Options(algorithm=algorithm)
        self._groups: dict = {}

    def paro_group(self, group: dist.ProcessGroup) -> dist.ProcessGroup:
        key = group.group_name
        if key not in self._groups:
            ranks = dist.get_process_group_ranks(group)
            self._groups[key] = dist.new_group(ranks, backend="paro", pg_options=self.options,
                                               use_local_synchronization=True)
        return self._groups[key]


class ParoAllGather(DefaultAllocMixin, AllGather, _OnParoGroup):
    def __init__(self, algorithm: str = "paro_cc") -> None:
        _OnParoGroup.__init__(self, f"allgather:{algorithm}")

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 async_op: bool = False):
        return dist.all_gather_into_tensor(output_tensor, input_tensor, group=self.paro_group(group),
                                           async_op=async_op)


class ParoReduceScatter(DefaultAllocMixin, ReduceScatter, _OnParoGroup):
    def __init__(self, algorithm: str = "paro_cc") -> None:
        _OnParoGroup.__init__(self, f"reducescatter:{algorithm}")

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 op, async_op: bool = False):
        return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=self.paro_group(group),
                                          async_op=async_op)


def use_paro_collectives(module: torch.nn.Module, algorithm: str = "paro_cc") -> None:
    """Makes every FSDP2 module under (and including) `module` all-gather parameters and reduce-scatter
    gradients with paro's `algorithm` (collective over FSDP's ranks: call it on every rank)."""
    from torch.distributed.fsdp import FSDPModule

    all_gather, reduce_scatter = ParoAllGather(algorithm), ParoReduceScatter(algorithm)
    found = False
    for m in module.modules():
        if isinstance(m, FSDPModule):
            m.set_custom_all_gather(all_gather)
            m.set_custom_reduce_scatter(reduce_scatter)
            found = True
    if not found:
        raise ValueError("use_paro_collectives: no module under this one is sharded with fully_shard")
