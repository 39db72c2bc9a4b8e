"""PaRO-DP for PyTorch: any ``nn.Module`` trained with one of the 14 PaRO-DP sharding strategies.

    model, optimizer = paro_torch.dp.shard(model, torch.optim.AdamW, strategy="NIG", lr=3e-4)
    for x, y in data:
        loss_fn(model(x), y).backward()     # gathers and reduce-scatters overlap compute
        optimizer.step()                    # the optimizer on this rank's shard, then the rebuild
        optimizer.zero_grad()

A strategy is three letters, for parameters (p), gradients (g) and optimizer states (os), each N (replicated),
I (sharded inside the rank's group, replicated across groups) or G (sharded over every rank); valid when os is
sharded at least as finely as p and g (14 of 27). NNN is DDP, NNG / NGG / GGG are ZeRO-1 / 2 / 3, III is
FSDP2's hybrid sharding.

The module is cut into units (each child, each element of a ModuleList / Sequential child, the root's own
parameters). A unit's trainable parameters become views of one flat vector, padded to a multiple of the rank
count and laid out as paro's C++ engine lays it out (include/paro/dp/model.hpp): an I shard is L/m elements
at the rank's index in its group, a G shard the piece of that I shard at its group's index on the rail, so
that every G collective is a collective along the rail and one inside the group, on the paro group's intra
and inter scopes. Collectives run on the group's progress thread in issue order, so the compute of one unit
overlaps the gather of the next (prefetch) and the reduce-scatter of the one before.

Gradients are averaged over ranks and summed over micro-steps, as DDP does; run every micro-step but the
last under ``model.paro_dp.no_sync()``. Frozen parameters (requires_grad=False) and buffers stay replicated.
See docs/paro-dp.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from typing import Callable, Iterable

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_flatten

from . import Options, _C, backend_of

__all__ = ["Strategy", "shard", "ShardedOptimizer", "Sharding", "footprint", "traffic", "advise", "Machine",
           "valid_strategies", "save", "load", "full_state_dict", "from_deepspeed_config", "unit_lengths_of"]

_LETTERS = "NIG"
_DESCRIBE = {"N": "replicated", "I": "sharded within the group", "G": "sharded over all ranks"}
_ALIASES = {"0": "NNN", "DDP": "NNN", "ZERO0": "NNN", "1": "NNG", "ZERO1": "NNG", "2": "NGG", "ZERO2": "NGG",
            "3": "GGG", "ZERO3": "GGG"}
# Optimizers whose update of an element reads only that element's parameter, gradient and state, so that
# running them on a flat shard is running them on the whole model.
_ELEMENTWISE = ("SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "Rprop",
                "ASGD")


@dataclasses.dataclass(frozen=True)
class Strategy:
    """Partitions of parameters, gradients and optimizer states: each "N", "I" or "G"."""

    p: str
    g: str
    os: str

    @property
    def name(self) -> str:
        return self.p + self.g + self.os

    def invalid_reason(self) -> str:
        """Empty when valid; else why not (as paro-advise says it)."""
        finer = lambda a, b: _LETTERS.index(a) > _LETTERS.index(b)  # noqa: E731
        why = []
        if finer(self.p, self.os):
            why.append(f"parameters are {_DESCRIBE[self.p]} but optimizer states only {_DESCRIBE[self.os]}: "
                       "a rank would update parameters it does not hold")
        if finer(self.g, self.os):
            why.append(f"gradients are {_DESCRIBE[self.g]} but optimizer states only {_DESCRIBE[self.os]}: "
                       "a rank would update states from gradients it does not hold")
        return "; ".join(why)

    @staticmethod
    def parse(text) -> "Strategy":
        """"NIG" (any case), a ZeRO stage ("0".."3", "zero1".."zero3", "ddp"), or a Strategy."""
        if isinstance(text, Strategy):
            s = text
        else:
            if not isinstance(text, str):
                raise TypeError(f"strategy must be a str such as 'NIG', got {type(text).__name__}")
            up = _ALIASES.get(text.upper(), text.upper())
            if len(up) != 3 or any(c not in _LETTERS for c in up):
                raise ValueError(f"strategy {text!r}: use three letters p g os, each N (replicated), I (within the "
                                 "group) or G (global), e.g. NIG; or a ZeRO stage 0-3")
            s = Strategy(up[0], up[1], up[2])
        reason = s.invalid_reason()
        if reason:
            raise ValueError(f"strategy {s.name} is not valid: {reason}")
        return s


def valid_strategies() -> list:
    """The 14 valid strategies, NNN .. GGG."""
    out = []
    for p in _LETTERS:
        for g in _LETTERS:
            for o in _LETTERS:
                if not Strategy(p, g, o).invalid_reason():
                    out.append(Strategy(p, g, o))
    return out


# --- the layout ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Place:
    n: int      # ranks
    m: int      # ranks per group
    local: int  # index in the group
    rail: int   # the group's index (on the rail)

    def parts(self, letter: str) -> int:
        return {"N": 1, "I": self.m, "G": self.n}[letter]

    def offset(self, letter: str, length: int) -> int:
        """Where this rank's shard of a vector of `length` (a multiple of n) starts."""
        if letter == "N":
            return 0
        i = self.local * (length // self.m)
        return i if letter == "I" else i + self.rail * (length // self.n)


def _padded(count: int, n: int) -> int:
    return (count + n - 1) // n * n


# --- the cost model --------------------------------------------------------------------------------------


def footprint(strategy, unit_lengths: Iterable[int], n: int, m: int, param_bytes: int = 4, grad_bytes: int = 4,
              state_bytes: int = 8, master_copy: bool = False) -> dict:
    """Bytes per rank that shard() holds between steps: 'params' (the stored shards; with master_copy the
    compute-precision copy of a p = N model as well), 'grads' (the accumulator at g's partition),
    'optimizer' (state_bytes per element of the os shard: 8 for Adam's two moments). unit_lengths: each
    unit's trainable element count (unpadded)."""
    s = Strategy.parse(strategy)
    place = _Place(n, m, 0, 0)
    total = sum(_padded(c, n) for c in unit_lengths if c > 0)
    params = total // place.parts(s.p) * 4 + (total * param_bytes if master_copy and s.p == "N" else 0)
    return {"params": params, "grads": total // place.parts(s.g) * grad_bytes,
            "optimizer": total // place.parts(s.os) * state_bytes}


def _unit_collectives(s: Strategy, L: int, n: int, m: int, param_bytes: float, grad_bytes: float) -> dict:
    """What shard() runs for one unit of padded length L, by phase: 'gather' (the parameters at p's partition
    made whole, once), 'scatter' (a micro-step's gradient to g's partition), 'boundary' (the accumulated
    gradient to os's partition) and 'rebuild' (the updated fp32 parameters back to p's partition), each a
    list of (scope, collective, ranks, bytes sent per rank by a ring: (k - 1) / k of the buffer, twice that
    for an all-reduce)."""
    k = n // m
    ring = lambda ranks, nbytes, twice=False: nbytes / ranks * (ranks - 1) * (2 if twice else 1)  # noqa: E731
    out = {"gather": [], "scatter": [], "boundary": [], "rebuild": []}
    if s.p == "G":
        out["gather"].append(("inter", "all_gather", k, ring(k, L / m * param_bytes)))
    if s.p != "N":
        out["gather"].append(("intra", "all_gather", m, ring(m, L * param_bytes)))
    if s.g != "N":
        out["scatter"].append(("intra", "reduce_scatter", m, ring(m, L * grad_bytes)))
    if s.g == "G":
        out["scatter"].append(("inter", "reduce_scatter", k, ring(k, L / m * grad_bytes)))
    rail = ("inter", "reduce_scatter", k, ring(k, L / m * grad_bytes)) if s.os == "G" else \
        ("inter", "all_reduce", k, ring(k, L / m * grad_bytes, twice=True))
    if s.g == "N":
        out["boundary"].append(("intra", "reduce_scatter", m, ring(m, L * grad_bytes)))
        out["boundary"].append(rail)
        if s.os == "N":
            out["boundary"].append(("intra", "all_gather", m, ring(m, L * grad_bytes)))
    elif s.g == "I":
        out["boundary"].append(rail)
    if s.os == "G" and s.p != "G":
        out["rebuild"].append(("inter", "all_gather", k, ring(k, L / m * 4)))
    if s.os != "N" and s.p == "N":
        out["rebuild"].append(("intra", "all_gather", m, ring(m, L * 4)))
    return out


def traffic(strategy, unit_lengths: Iterable[int], n: int, m: int, accumulation: int = 1, param_bytes: int = 4,
            grad_bytes: int = 4, gathers_per_micro_step: int = 2) -> dict:
    """Bytes per rank sent in one step ('intra': inside the group, 'inter': along the rail) by shard()'s
    collectives, each a ring: per micro-step p = I: intra all-gather of the parameters, p = G: rail then intra
    all-gather, each `gathers_per_micro_step` times (2: forward and backward, reshard_after_forward=True);
    g = I: intra reduce-scatter of the gradients, g = G: intra then rail reduce-scatter; at the boundary the
    gradients to os's partition (g = N: intra RS, rail AR or RS, and intra AG for os = N; g = I: rail AR or
    RS); after the optimizer the fp32 parameters rebuilt at p's partition (rail and/or intra all-gather)."""
    s = Strategy.parse(strategy)
    times = {"gather": accumulation * gathers_per_micro_step, "scatter": accumulation, "boundary": 1, "rebuild": 1}
    out = {"intra": 0.0, "inter": 0.0}
    for count in unit_lengths:
        if count > 0:
            for phase, runs in _unit_collectives(s, _padded(count, n), n, m, param_bytes, grad_bytes).items():
                for scope, _, _, nbytes in runs:
                    out[scope] += times[phase] * nbytes
    return out


def unit_lengths_of(module: torch.nn.Module) -> list:
    """The trainable element count of each unit shard() would cut `module` into."""
    return [sum(p.shape.numel() for p in params) for _, _, params in _units_of(module)]


@dataclasses.dataclass
class Machine:
    """What advise() needs to know of the cluster and the model's compute, per rank."""

    intra_bytes_per_s: float         # a collective's bytes sent per rank per second, inside the group
    inter_bytes_per_s: float         # ... and along the rail
    forward_s: float                 # one micro-step's forward, without communication
    backward_s: float                # ... and backward
    optimizer_s_per_element: float   # the optimizer's step, per element of the os shard
    latency_s: float = 0.0           # per message a ring sends ((k - 1) per ring pass)
    # True where the cores that compute also move the bytes inside the group (host memory: CPU training, or
    # more processes than cores): that time adds to the compute instead of hiding under it.
    intra_uses_compute: bool = False


def advise(model, n: int, m: int, machine: Machine, accumulation: int = 1, param_bytes: int = 4,
           grad_bytes: int = 4, reshard_after_forward: bool = True) -> list:
    """Every valid strategy's predicted step time, state bytes per rank and traffic, fastest first, for
    `model` (an nn.Module, or its units' trainable element counts) on n ranks in groups of m: shard()'s own schedule rather than perfect overlap.
    Collectives run one at a time on the group's progress thread. A micro-step's forward overlaps its
    gathers (prefetched; the first unit's is exposed), its backward the gathers again (reshard_after_forward),
    the reduce-scatters and, in the last micro-step, the boundary (the last unit's are exposed); the first
    forward after a step also waits for the rebuild queued before its gathers; the optimizer's time is the
    os shard's elements times machine.optimizer_s_per_element. With machine.intra_uses_compute the time of
    the collectives inside the group is added to the compute it would otherwise hide under."""
    unit_lengths = unit_lengths_of(model) if isinstance(model, torch.nn.Module) else list(model)
    lengths = [_padded(c, n) for c in unit_lengths if c > 0]
    if not lengths:
        raise ValueError("paro_torch.dp.advise: no unit has elements")
    bandwidth = {"intra": machine.intra_bytes_per_s, "inter": machine.inter_bytes_per_s}
    out = []
    for s in valid_strategies():
        phase_s, cpu_s = [], []  # per unit: {phase: seconds}, and the part of them inside the group
        for L in lengths:
            runs = _unit_collectives(s, L, n, m, param_bytes, grad_bytes)
            seconds = {phase: [(scope, nbytes / bandwidth[scope] +
                                machine.latency_s * (ranks - 1) * (2 if coll == "all_reduce" else 1))
                               for scope, coll, ranks, nbytes in r if ranks > 1] for phase, r in runs.items()}
            phase_s.append({phase: sum(t for _, t in v) for phase, v in seconds.items()})
            cpu_s.append({phase: sum(t for scope, t in v if scope == "intra" and machine.intra_uses_compute)
                          for phase, v in seconds.items()})
        phases = ("gather", "scatter", "boundary", "rebuild")
        total = {phase: sum(u[phase] for u in phase_s) for phase in phases}
        cpu = {phase: sum(u[phase] for u in cpu_s) for phase in phases}
        first, last = phase_s[0], phase_s[-1]
        regather = total["gather"] if reshard_after_forward else 0.0
        recopy = cpu["gather"] if reshard_after_forward else 0.0
        f, b = machine.forward_s, machine.backward_s
        forward = max(f + cpu["gather"], total["gather"]) + first["gather"]
        first_forward = (max(f + cpu["rebuild"] + cpu["gather"], total["rebuild"] + total["gather"]) +
                         first["rebuild"] + first["gather"])
        backward = max(b + recopy + cpu["scatter"], regather + total["scatter"]) + last["scatter"]
        last_backward = (max(b + recopy + cpu["scatter"] + cpu["boundary"],
                             regather + total["scatter"] + total["boundary"]) + last["scatter"] + last["boundary"])
        place = _Place(n, m, 0, 0)
        optimizer = sum(lengths) // place.parts(s.os) * machine.optimizer_s_per_element
        step = first_forward + (accumulation - 1) * (forward + backward) + last_backward + optimizer
        memory = footprint(s, unit_lengths, n, m)
        out.append({"strategy": s.name, "step_s": step, "state_bytes": sum(memory.values()), "memory": memory,
                    "traffic": traffic(s, unit_lengths, n, m, accumulation, param_bytes, grad_bytes,
                                       2 if reshard_after_forward else 1),
                    "communication_s": accumulation * (2 * total["gather"] if reshard_after_forward else
                                                       total["gather"]) + accumulation * total["scatter"] +
                    total["boundary"] + total["rebuild"]})
    out.sort(key=lambda a: (a["step_s"], a["state_bytes"]))
    return out


# --- the sharded model -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Param:
    owner: torch.nn.Module
    attr: str
    name: str  # in the root module's state_dict
    shape: torch.Size
    begin: int  # in the unit's flat vector


class _Unit:
    """One module's trainable parameters as one flat vector, stored at p's partition."""

    def __init__(self, name: str, module: torch.nn.Module, params: list, sharding: "Sharding") -> None:
        self.name, self.module, self.params, self.sh = name, module, params, sharding
        place, s = sharding.place, sharding.strategy
        self.real = sum(p.shape.numel() for p in params)
        self.L = _padded(self.real, place.n)
        full = torch.zeros(self.L, dtype=torch.float32)
        for p in params:
            full[p.begin:p.begin + p.shape.numel()] = getattr(p.owner, p.attr).detach().reshape(-1)
        begin = place.offset(s.p, self.L)
        self.shard = full[begin:begin + self.L // place.parts(s.p)].clone()  # fp32 master, at p
        del full
        # What the module computes with: the shard itself (p = N, fp32), else a flat buffer of the compute
        # type, gathered (p != N) or cast (p = N) before use. Parameters are views of `compute`; collectives
        # and casts write through `writer`, a second tensor on the same storage with its own version counter,
        # so that refilling a buffer autograd saved does not fail backward's version check.
        dtype = sharding.param_dtype
        if s.p == "N" and dtype == torch.float32:
            self.compute = self.shard
        else:
            self.compute = torch.empty(self.L, dtype=dtype)
        self.writer = torch.empty(0, dtype=dtype).set_(self.compute.untyped_storage(), 0, (self.L,), (1,))
        self.holds = self.compute is self.shard  # compute holds this step's values
        for p in params:
            view = self.compute[p.begin:p.begin + p.shape.numel()].view(p.shape)
            setattr(p.owner, p.attr, torch.nn.Parameter(view, requires_grad=True))
        if s.p != "N":
            self._free_storage()
        self.grad_acc = torch.zeros(self.L // place.parts(s.g), dtype=torch.float32)  # at g
        os_begin = place.offset(s.os, self.L) - begin
        self.os_param = torch.nn.Parameter(self.shard[os_begin:os_begin + self.L // place.parts(s.os)])
        self.gathering: list = []      # started gathers of `compute`
        self.rebuilding: list = []     # started rebuilds of `shard` after a step
        self.boundary: list = []       # started boundary collectives of grad_acc
        self.reported: set = set()     # parameters whose gradient arrived in this backward
        self.needs_grad = False        # this backward reached the unit
        self.backward_done = False     # ... and is done with it

    def parameters(self) -> list:
        return [getattr(p.owner, p.attr) for p in self.params]

    # -- parameters --

    def _free_storage(self) -> None:
        self.compute.untyped_storage().resize_(0)
        self.holds = False

    def start_gather(self) -> None:
        """p != N: the full parameters into `compute`, started (after the rebuild they are made from)."""
        sh, s = self.sh, self.sh.strategy
        if self.holds or self.gathering or s.p == "N":
            return
        self.wait_rebuild()
        src = self.shard if sh.param_dtype == torch.float32 else self.shard.to(sh.param_dtype)
        storage = self.compute.untyped_storage()
        storage.resize_(self.L * self.compute.element_size())
        if s.p == "G":
            i = sh.place.offset("I", self.L)
            slot = self.writer[i:i + self.L // sh.place.m]
            self.gathering.append(sh.start("all_gather", "inter", slot, src))
            self.gathering.append(sh.start("all_gather", "intra", self.writer, slot))
        elif s.p == "I":
            self.gathering.append(sh.start("all_gather", "intra", self.writer, src))
        sh.note_transient()

    def ready(self) -> None:
        """The parameters hold this step's values."""
        if self.holds:
            return
        if self.sh.strategy.p == "N":  # the shard rebuilt, then the cast copy refreshed
            self.wait_rebuild()
            if self.compute is not self.shard:
                with torch.no_grad():
                    self.writer.copy_(self.shard)
            self.holds = True
            return
        self.start_gather()
        for started in self.gathering:
            started.wait()
        self.gathering = []
        self.holds = True

    def release(self) -> None:
        """p != N: frees the gathered parameters (autograd's saved views keep the storage object), once a
        gather in flight (a prefetch no forward or backward used) has landed."""
        if self.sh.strategy.p == "N":
            return
        for started in self.gathering:
            started.wait()
        self.gathering = []
        self._free_storage()

    def wait_rebuild(self) -> None:
        for started in self.rebuilding:
            started.wait()
        self.rebuilding = []

    def start_rebuild(self) -> None:
        """After the optimizer updated the os shard inside `shard`: `shard` rebuilt at p's partition."""
        sh, s, L = self.sh, self.sh.strategy, self.L
        place = sh.place
        if s.os == "G" and s.p != "G":
            i = place.offset("I", L) - place.offset(s.p, L)
            slot = self.shard[i:i + L // place.m]
            g = place.rail * (L // place.n)
            self.rebuilding.append(sh.start("all_gather", "inter", slot, slot[g:g + L // place.n]))
        if s.os != "N" and s.p == "N":
            i = place.offset("I", L)
            self.rebuilding.append(sh.start("all_gather", "intra", self.shard, self.shard[i:i + L // place.m]))
        if s.p == "N":
            self.holds = False
        else:
            self.release()

    # -- gradients --

    def pack_gradients(self, into: torch.Tensor) -> None:
        """Adds the parameters' gradients into `into` (the full flat layout) and drops them."""
        for p, param in zip(self.params, self.parameters()):
            if param.grad is not None:
                into[p.begin:p.begin + p.shape.numel()] += param.grad.reshape(-1)
                param.grad = None

    def start_boundary(self) -> None:
        """grad_acc (summed over ranks at g's partition) to os's partition, started."""
        sh, s, L, place = self.sh, self.sh.strategy, self.L, self.sh.place
        acc, m, n = self.grad_acc, place.m, place.n
        i, g = place.local * (L // m), place.rail * (L // n)
        if s.g == "N":
            slot = acc[i:i + L // m]
            self.boundary.append(sh.start("reduce_scatter", "intra", slot, acc))
            if s.os == "G":
                self.boundary.append(sh.start("reduce_scatter", "inter", slot[g:g + L // n], slot))
            else:
                self.boundary.append(sh.start("all_reduce", "inter", slot, slot))
            if s.os == "N":
                self.boundary.append(sh.start("all_gather", "intra", acc, slot))
        elif s.g == "I":
            if s.os == "G":
                self.boundary.append(sh.start("reduce_scatter", "inter", acc[g:g + L // n], acc))
            else:
                self.boundary.append(sh.start("all_reduce", "inter", acc, acc))

    def os_gradient(self) -> torch.Tensor:
        place, s = self.sh.place, self.sh.strategy
        begin = place.offset(s.os, self.L) - place.offset(s.g, self.L)
        return self.grad_acc[begin:begin + self.L // place.parts(s.os)]


class Sharding:
    """The state shard() attaches to the module as ``module.paro_dp``."""

    def __init__(self, module, strategy: Strategy, group, algorithm: str, param_dtype, reshard_after_forward: bool,
                 prefetch: bool) -> None:
        self.module, self.strategy, self.group, self.algorithm = module, strategy, group, algorithm
        self.param_dtype, self.reshard_after_forward, self.prefetch = param_dtype, reshard_after_forward, prefetch
        self.backend = backend_of(group)
        local, m = _C.scope_of(self.backend, "intra")
        rail, k = _C.scope_of(self.backend, "inter")
        n = dist.get_world_size(group)
        if m * k != n:
            raise ValueError(f"paro_torch.dp: {n} ranks in groups of {m} on rails of {k}; PaRO-DP needs groups of "
                             "equal size")
        self.place = _Place(n, m, local, rail)
        self.units: list = []
        self.forward_order: list = []   # units in the order the last forward ran them
        self._order: list = []
        self.sync = True                 # the next backward ends with the boundary collectives
        self.synced = False              # gradients are at os's partition; only step() may follow
        self.in_backward = False
        self.pending_scatter = None      # (unit, full gradient, started) of the last reduce-scatter
        self.handed = False              # the os gradients are averaged and set as the optimizer's
        self.optimizer = None            # the inner torch optimizer
        self.exporting = False           # full_state_dict reads the module's state_dict
        self.peak = {"gathered_params": 0, "full_grads": 0}

    def start(self, collective: str, scope: str, output: torch.Tensor, input: torch.Tensor):
        return _C.start_scoped(self.backend, collective, scope, self.algorithm, output, input)

    def transient_bytes(self) -> dict:
        gathered = sum(u.compute.untyped_storage().nbytes() for u in self.units if self.strategy.p != "N")
        full = self.pending_scatter[1].nbytes if self.pending_scatter else 0
        return {"gathered_params": gathered, "full_grads": full}

    def note_transient(self, extra_full_grads: int = 0) -> None:
        now = self.transient_bytes()
        now["full_grads"] += extra_full_grads
        for k, v in now.items():
            self.peak[k] = max(self.peak[k], v)

    def synchronize(self) -> None:
        """Waits for every collective this sharding started (the rebuild after a step, prefetched gathers)."""
        for unit in self.units:
            unit.wait_rebuild()
            for started in unit.gathering:
                started.wait()
            unit.gathering = []
            if self.strategy.p != "N" and unit.compute.untyped_storage().nbytes():
                unit.holds = True

    @contextlib.contextmanager
    def no_sync(self):
        """Micro-steps whose gradients only accumulate (g = I / G still reduce-scatter them inside the group
        and along the rail as the strategy says); the boundary runs after the first backward outside it."""
        before, self.sync = self.sync, False
        try:
            yield
        finally:
            self.sync = before

    def memory(self) -> dict:
        """Bytes this rank holds, counted from the tensors' storages: the persistent 'params' (fp32 shards,
        and a p = N model's compute-precision copy), 'grads' and 'optimizer' (every state tensor of an
        element per shard element), and the peaks of the transient 'gathered_params' and 'full_grads'."""
        out = {"params": 0, "grads": 0, "optimizer": 0}
        for u in self.units:
            out["params"] += u.shard.untyped_storage().nbytes()
            if self.strategy.p == "N" and u.compute is not u.shard:
                out["params"] += u.compute.untyped_storage().nbytes()
            out["grads"] += u.grad_acc.untyped_storage().nbytes()
            for v in self.optimizer.state.get(u.os_param, {}).values():
                if _is_vector_state(v, u.os_param):
                    out["optimizer"] += v.untyped_storage().nbytes()
        out.update(self.peak)
        return out

    # -- hooks --

    def before_state_dict(self) -> None:
        if self.strategy.p != "N" and not self.exporting:
            raise RuntimeError(f"paro_torch.dp: the module's parameters are sharded ({self.strategy.name}); its "
                               "state_dict() would hold freed storage. Use paro_torch.dp.full_state_dict(module) "
                               "(collective) or paro_torch.dp.save")

    def begin_forward(self) -> None:
        if torch.is_grad_enabled() and self.synced:
            raise RuntimeError("paro_torch.dp: a forward after a backward that synchronised the gradients, before "
                               "optimizer.step(); for gradient accumulation run every micro-step but the last under "
                               "model.paro_dp.no_sync()")
        self._order = []

    def end_forward(self) -> None:
        self.forward_order = self._order

    def before_forward(self, unit: _Unit) -> None:
        if unit not in self._order:
            self._order.append(unit)
        unit.ready()
        if self.prefetch and self.forward_order:
            nxt = self._next(unit, self.forward_order)
            if nxt is not None:
                nxt.start_gather()

    def after_forward(self, unit: _Unit, output) -> None:
        if self.reshard_after_forward:
            unit.release()
        if torch.is_grad_enabled():
            for t in tree_flatten(output)[0]:
                if torch.is_tensor(t) and t.requires_grad:
                    t.register_hook(lambda grad, unit=unit: self.before_backward(unit))

    def before_backward(self, unit: _Unit) -> None:
        if not self.in_backward:
            self.in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self.after_backward)
        if not unit.needs_grad:
            unit.needs_grad = True
            unit.ready()
            if self.prefetch:
                prev = self._next(unit, list(reversed(self.forward_order)))
                if prev is not None and not prev.backward_done:
                    prev.start_gather()

    @staticmethod
    def _next(unit, order):
        try:
            i = order.index(unit)
        except ValueError:
            return None
        return order[i + 1] if i + 1 < len(order) else None

    def gradient_arrived(self, unit: _Unit, param) -> None:
        if not self.in_backward:  # a gradient before any unit output's hook (a parameter used outside its unit)
            self.in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self.after_backward)
        unit.reported.add(id(param))
        if len(unit.reported) == len(unit.params):
            self._unit_done(unit)

    def _unit_done(self, unit: _Unit) -> None:
        unit.reported = set()
        unit.needs_grad = False
        unit.backward_done = True
        s, L, place = self.strategy, unit.L, self.place
        if s.g == "N":
            unit.pack_gradients(unit.grad_acc)
            if self.sync:
                unit.start_boundary()
        else:
            full = torch.zeros(L, dtype=torch.float32)
            unit.pack_gradients(full)
            i = place.offset("I", L)
            started = [self.start("reduce_scatter", "intra", full[i:i + L // place.m], full)]
            if s.g == "G":
                slot = full[i:i + L // place.m]
                g = place.rail * (L // place.n)
                started.append(self.start("reduce_scatter", "inter", slot[g:g + L // place.n], slot))
            self.note_transient(full.nbytes)
            # One deep: the previous unit's reduce-scatter, issued a unit's compute ago, is added now, so that
            # every rank issues the same collectives in the same order whatever the timing.
            self._finish_scatter()
            self.pending_scatter = (unit, full, started)
        if self.strategy.p != "N":
            unit.release()

    def _finish_scatter(self) -> None:
        if self.pending_scatter is None:
            return
        unit, full, started = self.pending_scatter
        self.pending_scatter = None
        for st in started:
            st.wait()
        begin = self.place.offset(self.strategy.g, unit.L)
        unit.grad_acc += full[begin:begin + unit.grad_acc.numel()]
        if self.sync:
            unit.start_boundary()

    def after_backward(self) -> None:
        for unit in self.units:  # units some of whose parameters got no gradient in this backward
            if unit.reported or unit.needs_grad:
                self._unit_done(unit)
        self._finish_scatter()
        for unit in self.units:
            unit.release()
            unit.backward_done = False
        self.in_backward = False
        if self.sync:
            self.synced = True

    # -- the step --

    def finish_gradients(self) -> None:
        """Every boundary collective done (started now where all micro-steps ran under no_sync), and each
        unit's os gradient averaged over ranks and handed to the optimizer."""
        if not self.synced:
            for unit in self.units:
                unit.start_boundary()
            self.synced = True
        if self.handed:
            return
        for unit in self.units:
            for started in unit.boundary:
                started.wait()
            unit.boundary = []
            unit.os_param.grad = unit.os_gradient().mul_(1.0 / self.place.n)
        self.handed = True

    def after_step(self) -> None:
        for unit in self.units:
            unit.os_param.grad = None
            unit.grad_acc.zero_()
            unit.start_rebuild()
        self.synced = self.handed = False


def _units_of(module: torch.nn.Module) -> list:
    """(name, module, [_Param]) per unit: each child, each element of a container child, and the root's own
    parameters; only trainable parameters, at their offsets in the unit's flat vector."""
    cut = [("", module, True)]

    def walk(prefix, m):
        for name, child in m.named_children():
            full = f"{prefix}{name}"
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)) and \
                    not list(child.parameters(recurse=False)):
                walk(full + ".", child)
            else:
                cut.append((full, child, False))

    walk("", module)
    names = {id(p): n for n, p in module.named_parameters(remove_duplicate=False)}
    owner_of, out = {}, []
    for unit_name, unit_module, own_only in cut:
        params, begin = [], 0
        for sub in unit_module.modules() if not own_only else [unit_module]:
            for attr, p in list(sub.named_parameters(recurse=False)):
                if p is None or not p.requires_grad:
                    continue
                if id(p) in owner_of:
                    where = "appears twice in unit" if owner_of[id(p)] == unit_name else \
                        f"is shared by units {owner_of[id(p)] or '(root)'!r} and"
                    raise ValueError(f"paro_torch.dp: parameter {names[id(p)]!r} {where} {unit_name or '(root)'!r}; "
                                     "tied parameters are not supported (make them one unit)")
                owner_of[id(p)] = unit_name
                params.append(_Param(sub, attr, names[id(p)], p.shape, begin))
                begin += p.numel()
        if params:
            out.append((unit_name, unit_module, params))
    if not out:
        raise ValueError("paro_torch.dp: the module has no trainable parameters")
    return out


def _check_same_everywhere(module: torch.nn.Module, group) -> None:
    """Every rank's parameters equal rank 0's (names, shapes, types, values), or a ValueError on every rank
    naming the first that differs."""
    mine = []
    for name, p in module.named_parameters():
        digest = hashlib.sha1(p.detach().contiguous().cpu().view(torch.uint8).reshape(-1).numpy().tobytes())
        mine.append((name, tuple(p.shape), str(p.dtype), digest.hexdigest()))
    every = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, mine, group=group)
    for rank, theirs in enumerate(every):
        if theirs == every[0]:
            continue
        names0 = [e[0] for e in every[0]]
        for a, b in zip(every[0], theirs):
            if a != b:
                what = "shape or type" if a[:3] != b[:3] else "values"
                raise ValueError(f"paro_torch.dp.shard: parameter {a[0]!r} differs between rank 0 and rank {rank} "
                                 f"({what}: {a[1]} {a[2]} vs {b[1]} {b[2]}); every rank must start from the same "
                                 "model (seed the initialisation, or load the same checkpoint)")
        raise ValueError(f"paro_torch.dp.shard: rank 0 has {len(names0)} parameters, rank {rank} {len(theirs)}; "
                         "every rank must start from the same model")


class ShardedOptimizer(torch.optim.Optimizer):
    """A torch optimizer over this rank's os shards; step() first completes the gradients' synchronisation
    and afterwards rebuilds the parameters at p's partition. param_groups and state are the inner
    optimizer's (LR schedulers work on it)."""

    def __init__(self, sharding: Sharding, inner: torch.optim.Optimizer) -> None:  # noqa: super not called
        self.sharding, self.inner = sharding, inner
        sharding.optimizer = inner

    param_groups = property(lambda self: self.inner.param_groups)
    state = property(lambda self: self.inner.state)
    defaults = property(lambda self: self.inner.defaults)

    def __repr__(self) -> str:
        return f"ShardedOptimizer({self.sharding.strategy.name}, {self.inner!r})"

    def __getstate__(self):
        raise TypeError("ShardedOptimizer cannot be pickled; use paro_torch.dp.save")

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scales the gradients so that their global L2 norm is at most max_norm; returns the norm before."""
        sh = self.sharding
        sh.finish_gradients()
        local = torch.zeros(1, dtype=torch.float64)
        for unit in sh.units:
            local += unit.os_param.grad.double().pow(2).sum()
        scope = {"N": None, "I": "intra", "G": "global"}[sh.strategy.os]
        if scope:
            sh.start("all_reduce", scope, local, local).wait()
        norm = local.sqrt().to(torch.float32)
        coef = min(1.0, float(max_norm) / (float(norm) + 1e-6))
        if coef < 1.0:
            for unit in sh.units:
                unit.os_param.grad.mul_(coef)
        return norm

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("paro_torch.dp: step(closure) is not supported; call backward before step()")
        self.sharding.finish_gradients()
        self.inner.step()
        self.sharding.after_step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for unit in self.sharding.units:  # gradients are the sharding's; the model's own are None
            for param in unit.parameters():
                param.grad = None

    def state_dict(self):
        raise TypeError("ShardedOptimizer.state_dict: the state is sharded; use paro_torch.dp.save / load")

    def load_state_dict(self, state_dict):
        raise TypeError("ShardedOptimizer.load_state_dict: the state is sharded; use paro_torch.dp.save / load")


def shard(module: torch.nn.Module, optimizer_class: Callable, *, strategy="NIG", group=None, grouping: str = "",
          algorithm: str = "automatic", param_dtype: torch.dtype = torch.float32, reshard_after_forward: bool = True,
          prefetch: bool = True, **optimizer_kwargs):
    """Shards `module` (in place) and builds `optimizer_class(**optimizer_kwargs)` over this rank's shard.
    Collective over `group` (the default group when None), which must run on the paro backend; its groups
    (Options.group / PARO_GROUP, or `grouping` for a new paro group over the same ranks) must be of equal
    size. Returns (module, ShardedOptimizer); the module gains ``module.paro_dp`` (a Sharding).

    strategy:   "NIG", ... or a ZeRO stage; algorithm: paro's algorithm for every collective ("ring",
    "automatic", ...); param_dtype: what forward and backward compute in (e.g. torch.bfloat16; fp32 master
    weights, gradients reduced in fp32); reshard_after_forward: p != N frees a unit's gathered parameters
    after its forward and gathers them again for its backward; prefetch: the next unit's gather starts when
    a unit starts."""
    s = Strategy.parse(strategy)
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"paro_torch.dp.shard: module must be a torch.nn.Module, got {type(module).__name__}")
    if hasattr(module, "paro_dp"):
        raise ValueError("paro_torch.dp.shard: this module is already sharded")
    name = getattr(optimizer_class, "__name__", repr(optimizer_class))
    if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, torch.optim.Optimizer)
            and name in _ELEMENTWISE and optimizer_class.__module__.startswith("torch.optim")):
        raise ValueError(f"paro_torch.dp.shard: optimizer {name} cannot run on a flat shard (its update of an "
                         "element must read only that element); allowed: torch.optim." + ", torch.optim.".join(
                             _ELEMENTWISE))
    if param_dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"paro_torch.dp.shard: param_dtype {param_dtype}; allowed: float32, bfloat16, float16")
    for pname, p in module.named_parameters():
        if p.device.type != "cpu" or p.dtype != torch.float32:
            raise ValueError(f"paro_torch.dp.shard: parameter {pname!r} is {p.dtype} on {p.device}; shard() takes "
                             "float32 CPU parameters (param_dtype sets the compute precision)")
    group = group if group is not None else dist.group.WORLD
    backend = backend_of(group)  # refuses a group that is not paro's
    n = dist.get_world_size(group)
    topo = backend.topology()
    if grouping:
        sizes = _group_sizes(topo, grouping, n)
        if len(set(sizes)) > 1:
            raise ValueError(f"paro_torch.dp.shard: grouping {grouping!r} gives groups of {sorted(set(sizes))} "
                             "ranks; PaRO-DP needs groups of equal size")
        ranks = dist.get_process_group_ranks(group)
        group = dist.new_group(ranks, backend="paro", pg_options=Options(group=grouping),
                               use_local_synchronization=True)
        backend = backend_of(group)
        topo = backend.topology()
    sizes = [len(g) for g in topo["groups"]]
    if len(set(sizes)) > 1:
        raise ValueError(f"paro_torch.dp.shard: the group's grouping ({topo['grouping']}) gives groups of "
                         f"{sorted(set(sizes))} ranks; PaRO-DP needs groups of equal size (pass grouping=, e.g. a "
                         "size that divides the rank count)")
    try:
        inner_probe = optimizer_class([torch.nn.Parameter(torch.zeros(1))], **optimizer_kwargs)
        del inner_probe
    except TypeError as e:
        raise ValueError(f"paro_torch.dp.shard: {name}({optimizer_kwargs}): {e}") from e
    units = _units_of(module)
    _check_same_everywhere(module, group)

    sharding = Sharding(module, s, group, algorithm, param_dtype, reshard_after_forward, prefetch)
    for unit_name, unit_module, params in units:
        sharding.units.append(_Unit(unit_name, unit_module, params, sharding))
    module.register_forward_pre_hook(lambda mod, args: sharding.begin_forward())
    module.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: sharding.before_state_dict())
    for unit in sharding.units:
        unit.module.register_forward_pre_hook(lambda mod, args, unit=unit: sharding.before_forward(unit))
        unit.module.register_forward_hook(lambda mod, args, out, unit=unit: sharding.after_forward(unit, out))
        for param in unit.parameters():
            param.register_post_accumulate_grad_hook(lambda p, unit=unit: sharding.gradient_arrived(unit, p))
    module.register_forward_hook(lambda mod, args, out: sharding.end_forward())
    inner = optimizer_class([u.os_param for u in sharding.units], **optimizer_kwargs)
    module.paro_dp = sharding
    return module, ShardedOptimizer(sharding, inner)


def _group_sizes(topo: dict, grouping: str, n: int) -> list:
    """The group sizes paro's grouping would form over the ranks of topology `topo`, without a collective."""
    if grouping.isdigit():
        size = int(grouping)
        if size < 1 or n % size:
            return [size] * (n // max(size, 1)) + ([n % size] if size and n % size else [])
        return [size] * (n // size)
    key = {"node": "node", "switch": "switch", "pod": "pod"}.get(grouping)
    if key is None:
        raise ValueError(f"paro_torch.dp.shard: grouping {grouping!r}; allowed: node, switch, pod or a group size")
    counts: dict = {}
    for r in topo["ranks"]:
        counts[r[key]] = counts.get(r[key], 0) + 1
    return list(counts.values())


# --- checkpoints ------------------------------------------------------------------------------------------


def _every_rank_or_none(group, what: str, fn) -> None:
    """fn() on every rank; a failure anywhere raises on every rank."""
    error = None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - re-raised below, on every rank
        error = e
    flag = torch.tensor([0 if error is None else dist.get_rank(group) + 1], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    if error is not None:
        raise error
    if int(flag):
        raise RuntimeError(f"paro_torch.dp.{what} failed on rank {int(flag) - 1}")


def _shard_file(folder: str, rank: int) -> str:
    return os.path.join(folder, f"paro-dp-rank{rank:05d}.pt")


def save(folder: str, module: torch.nn.Module, optimizer: ShardedOptimizer) -> None:
    """Collective, between steps: this rank's share of every unit's parameters and optimizer states into
    `folder` (which every rank can write and read): the slice a G partition would give the rank, which lies
    inside whatever it holds, so every element is written once. load() restores it under any strategy,
    grouping or rank count."""
    sh = _sharding_of(module)
    place, s = sh.place, sh.strategy

    def write():
        os.makedirs(folder, exist_ok=True)
        units = {}
        for u in sh.units:
            g = place.offset("G", u.L)
            count = u.L // place.n
            p0, o0 = place.offset(s.p, u.L), place.offset(s.os, u.L)
            u.wait_rebuild()
            state = {}
            for key, v in optimizer.inner.state.get(u.os_param, {}).items():
                if _is_vector_state(v, u.os_param):
                    state[key] = v[g - o0:g - o0 + count].clone()
                else:
                    state[key] = v
            units[u.name] = {"real": u.real, "begin": g, "params": u.shard[g - p0:g - p0 + count].clone(),
                             "state": state}
        frozen = {n_: p.detach().clone() for n_, p in module.named_parameters() if not p.requires_grad}
        hyper = [{k: v for k, v in grp.items() if k != "params"} for grp in optimizer.param_groups]
        payload = {"ranks": place.n, "group": place.m, "strategy": s.name, "units": units, "frozen": frozen,
                   "param_groups": hyper, "format": 1}
        path = _shard_file(folder, dist.get_rank(sh.group))
        torch.save(payload, path + ".tmp")
        os.replace(path + ".tmp", path)

    _every_rank_or_none(sh.group, "save", write)


def load(folder: str, module: torch.nn.Module, optimizer: ShardedOptimizer) -> None:
    """Collective, between steps: what save() wrote replaces the parameters and optimizer states (the saved
    run's strategy, grouping and rank count may differ; its units and their sizes must be this module's)."""
    sh = _sharding_of(module)
    place, s = sh.place, sh.strategy

    def read():
        first = torch.load(_shard_file(folder, 0), weights_only=False)
        files = [first] + [torch.load(_shard_file(folder, r), weights_only=False) for r in range(1, first["ranks"])]
        for u in sh.units:
            if u.name not in first["units"] or first["units"][u.name]["real"] != u.real:
                saved = first["units"].get(u.name, {}).get("real")
                raise ValueError(f"paro_torch.dp.load: '{folder}' has no unit {u.name or '(root)'!r} of {u.real} "
                                 f"elements (it has {saved}); load into the model that was saved")
            u.wait_rebuild()
            fill(files, u.name, "params", u.shard, place.offset(s.p, u.L), u.real)
            state = {}
            for key, v in first["units"][u.name]["state"].items():
                if torch.is_tensor(v) and v.numel() == first["units"][u.name]["params"].numel() and v.dim() == 1:
                    target = torch.zeros_like(u.os_param)
                    fill(files, u.name, ("state", key), target, place.offset(s.os, u.L), u.real)
                    state[key] = target
                else:
                    state[key] = v.clone() if torch.is_tensor(v) else v
            if state:
                optimizer.inner.state[u.os_param] = state
            else:
                optimizer.inner.state.pop(u.os_param, None)
            if s.p == "N":
                u.holds = u.compute is u.shard
            else:
                u.release()
        frozen = dict(module.named_parameters())
        for n_, v in first["frozen"].items():
            with torch.no_grad():
                frozen[n_].copy_(v)
        for grp, saved in zip(optimizer.param_groups, first["param_groups"]):
            grp.update(saved)

    def fill(files, unit, what, out, begin, real):
        """out = elements [begin, begin + out.numel()) of the saved vector; zero past its real length."""
        out.zero_()
        end = min(begin + out.numel(), real)
        filled = []
        for f in files:
            piece = f["units"][unit]
            data = piece[what] if isinstance(what, str) else piece[what[0]][what[1]]
            lo, hi = max(begin, piece["begin"]), min(end, piece["begin"] + data.numel())
            if lo < hi:
                out[lo - begin:hi - begin] = data[lo - piece["begin"]:hi - piece["begin"]]
                filled.append((lo, hi))
        covered = begin
        for lo, hi in sorted(filled):
            if lo > covered:
                break
            covered = max(covered, hi)
        if covered < end:
            raise ValueError(f"paro_torch.dp.load: '{folder}' holds no values for elements {covered}..{end} of "
                             f"unit {unit or '(root)'!r}")

    _every_rank_or_none(sh.group, "load", read)


def full_state_dict(module: torch.nn.Module) -> dict:
    """Collective: every parameter (fp32 master values, under its original name) and buffer, on every rank,
    as a plain state_dict of the unsharded module."""
    sh = _sharding_of(module)
    place, s = sh.place, sh.strategy
    values = {}
    for u in sh.units:
        u.wait_rebuild()
        full = torch.zeros(u.L, dtype=torch.float32)
        if s.p == "N":
            full.copy_(u.shard)
        elif s.p == "I":
            sh.start("all_gather", "intra", full, u.shard).wait()
        else:
            i = place.offset("I", u.L)
            slot = full[i:i + u.L // place.m]
            sh.start("all_gather", "inter", slot, u.shard).wait()
            sh.start("all_gather", "intra", full, slot).wait()
        for p in u.params:
            values[p.name] = full[p.begin:p.begin + p.shape.numel()].view(p.shape).clone()
    sh.exporting = True
    try:
        entries = module.state_dict(keep_vars=True)
    finally:
        sh.exporting = False
    return {key: values[key] if key in values else v.detach().clone() if torch.is_tensor(v) else v
            for key, v in entries.items()}


def from_deepspeed_config(path: str) -> dict:
    """What a DeepSpeed JSON config says that PaRO-DP takes, read by paro's own reader (the C++ engine's):
    'strategy' (zero_optimization.paro_strategy, or .stage 0-3 as NNN / NNG / NGG / GGG), 'accumulation'
    (gradient_accumulation_steps), 'micro_batch' (train_micro_batch_size_per_gpu) and 'lr'
    (optimizer.params.lr; optimizer.type must be Adam or AdamW). Keys the file does not give are left out;
    a bad value raises naming the file and the field."""
    return {k: v for k, v in _C.read_deepspeed_config(path).items() if v is not None}


def _is_vector_state(v, os_param) -> bool:
    """An optimizer state with an element per shard element (Adam's moments), not a scalar (its step)."""
    return torch.is_tensor(v) and v.dim() == 1 and v.numel() == os_param.numel()


def _sharding_of(module) -> Sharding:
    sh = getattr(module, "paro_dp", None)
    if not isinstance(sh, Sharding):
        raise ValueError("paro_torch.dp: this module was not sharded with paro_torch.dp.shard")
    return sh
