"""SEPARATE as a DDP communication hook.

    state = paro_torch.SeparateState(model, ratio=32)      # model: the DDP module, or what it wraps
    ddp.register_comm_hook(state, paro_torch.separate_hook)

Each bucket's gradients are projected onto shared-seed random vectors (paro's C++ SEPARATE), the
projections are all-reduced with the state's process group (whatever its backend: gloo, paro, nccl) and
the estimate of the ranks' mean gradient is reconstructed into the bucket, with moving-average error
feedback (optionally reset every ``reset_every`` steps) and, with ``adaptive=True``, G-SEPARATE's width and
beta adaptation, agreed across the ranks by one small all-reduce of the cosines at the end of the backward
pass (issued on the autograd thread, so that every rank issues it at the same point: a collective issued from
a communication callback would run in whatever order the callbacks finish, and could block the backend's
own worker threads).

What PyTorch's PowerSGD hook taught, and how this hook differs: its state lives in one object that can be
checkpointed (``state_dict`` / ``load_state_dict``), and the first ``start_iter`` iterations may run plain
all-reduces as a warm-up. PowerSGD keys its state by bucket index, so it must wait for DDP to rebuild its
buckets after the first iteration, and a restored model (which starts with its initial buckets) does not
see the same buckets; here every parameter has its own compressor, keyed by its name in the model, so
bucket boundaries never matter and a checkpoint continues exactly, also with another bucket size.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations against dist.GradBucket and
# torch.futures.Future[torch.Tensor] as objects.

import hashlib
import threading
import time
import warnings

import torch
import torch.distributed as dist
from torch.autograd import Variable

from . import _C

__all__ = ["SeparateState", "separate_hook"]


class SeparateState:
    """The hook's state: options, one compressor per parameter of ``module`` and the traffic.

    ratio: columns per projection (16, 32, 64 as in the SEPARATE paper); error_rule: "smoothed" (the default,
    e <- beta e + (1 - beta)(h - h~)) or "beta_on_residual" (e <- (1 - beta) e + beta (h - h~), as the paper
    writes it; "seed" is its deprecated former name); min_elements: gradients smaller than this (and vectors,
    e.g. biases) go uncompressed; block_cols: 0 for the full projection, else the block size of the
    block-diagonal one; seed: shared by every rank (each parameter derives its own from its name).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        process_group: dist.ProcessGroup | None = None,
        *,
        ratio: int = 32,
        start_iter: int = 0,
        error_feedback: bool = True,
        beta: float = 0.95,
        error_rule: str = "smoothed",
        reset_every: int = 0,
        adaptive: bool = False,
        adapt_every: int = 100,
        min_elements: int = 65536,
        block_cols: int = 0,
        seed: int = 0x5E9A2A7E5EED,
    ) -> None:
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"SeparateState: module must be a torch.nn.Module, got {type(module).__name__}")
        if start_iter < 0:
            raise ValueError(f"SeparateState: start_iter={start_iter}; it must be >= 0")
        if isinstance(module, torch.nn.parallel.DistributedDataParallel):
            module = module.module  # names without DDP's "module." prefix, as the wrapped model has them
        self.process_group = process_group
        self._names = {id(p): name for name, p in module.named_parameters()}
        self.seed = seed % (1 << 64)
        self.start_iter = start_iter
        self.iteration = 0
        self._traffic = _Traffic()
        # Raises for bad options (ratio < 2, beta out of range, an unknown error rule) with what is allowed.
        self._compressors = _C.SeparateParameters(
            ratio=ratio, error_feedback=error_feedback, beta=beta, error_rule=error_rule, reset_every=reset_every,
            adaptive=adaptive, adapt_every=adapt_every, min_elements=min_elements, block_cols=block_cols)
        risk = self._compressors.divergence_risk()
        if risk:
            warnings.warn(risk, RuntimeWarning, stacklevel=2)
        self._index: dict[str, int] = {}  # parameter name -> its compressor
        self._pending: dict[str, bytes] = {}  # restored states of parameters not seen yet
        self._futures: list = []  # this iteration's compressed buckets: (bucket index, future of its adaptation)
        self._lock = threading.Lock()

    @property
    def wire_bytes(self) -> int:
        """Bytes all-reduced by this rank since the start (projections and uncompressed gradients)."""
        return self._traffic.wire

    @property
    def dense_bytes(self) -> int:
        """What uncompressed all-reduces would have moved for the same gradients."""
        return self._traffic.dense

    def timings(self) -> dict:
        """Seconds spent since the start, summed over buckets: 'project' (error feedback and projection, on
        the autograd thread), 'all_reduce' (from issuing the projections' all-reduce to its completion) and
        'reconstruct' (the estimate and the error update, in the completion callback)."""
        return dict(self._traffic.seconds)

    def compression_ratio(self) -> float:
        """Dense bytes over bytes on the wire so far (1.0 before any step)."""
        return self.dense_bytes / self.wire_bytes if self.wire_bytes else 1.0

    def state_dict(self) -> dict:
        """What a checkpoint needs: the iteration, the traffic and, per parameter name, its compressor's error
        buffer, step, width and beta. Take it between steps (after the optimizer step)."""
        with self._lock:
            tensors = dict(self._pending)
            tensors.update({name: self._compressors.save(i) for name, i in self._index.items()})
        return {"iteration": self.iteration, "wire_bytes": self.wire_bytes, "dense_bytes": self.dense_bytes,
                "seed": self.seed, "tensors": tensors}

    def load_state_dict(self, state: dict) -> None:
        """Restores a state_dict into a fresh state (same model and options; the compressors are restored
        when the hook first sees their parameters)."""
        if self._index:
            raise RuntimeError("SeparateState.load_state_dict: this state has already run; load into a fresh one")
        if state["seed"] != self.seed:
            raise ValueError(f"SeparateState.load_state_dict: the checkpoint's seed {state['seed']:#x} is not this "
                             f"state's {self.seed:#x}")
        self.iteration = state["iteration"]
        self._traffic.add(state["wire_bytes"], state["dense_bytes"])
        self._pending = dict(state["tensors"])

    def _indices(self, bucket: dist.GradBucket) -> list:
        """The bucket's parameters' compressors, made (or restored) on first sight."""
        out = []
        with self._lock:
            for param in bucket.parameters():
                name = self._names.get(id(param))
                if name is None:
                    raise ValueError("separate_hook: a parameter of this DDP model is not in the module the "
                                     "SeparateState was made with")
                index = self._index.get(name)
                if index is None:
                    index = len(self._index)
                    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
                    seed = (self.seed ^ int.from_bytes(digest, "little")) % (1 << 64)
                    self._compressors.add(index, list(param.shape), param.dtype, seed)
                    if name in self._pending:
                        self._compressors.load(index, self._pending.pop(name))
                    self._index[name] = index
                out.append(index)
        return out

    def _finish_iteration(self) -> None:
        """At the end of the backward pass: G-SEPARATE's agreement for the buckets that adapted, in bucket
        order (every rank has the same ones), with one all-reduce; then their steps are complete."""
        futures, self._futures = sorted(self._futures, key=lambda f: f[0]), []
        adapting = [f.wait() for _, f in futures]  # (indices, cosines) per bucket, empty where none adapt
        adapting = [a for a in adapting if a[0]]
        if not adapting:
            return
        cosines = torch.cat([c for _, c in adapting])
        dist.all_reduce(cosines, group=self.process_group)
        offset = 0
        for indices, _ in adapting:
            self._compressors.adapt(indices, cosines[offset:offset + len(indices)].contiguous())
            offset += len(indices)
            self._traffic.add(*self._compressors.traffic(indices))


class _Traffic:
    """Byte counts that callbacks update. Callbacks hold this, not the state: a callback that held the process
    group could drop its last reference on the backend's own worker thread (gloo's then joins itself)."""

    def __init__(self) -> None:
        self.wire = self.dense = 0
        self.seconds = {"project": 0.0, "all_reduce": 0.0, "reconstruct": 0.0}
        self._lock = threading.Lock()

    def add(self, wire: int, dense: int) -> None:
        with self._lock:
            self.wire += wire
            self.dense += dense

    def add_seconds(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.seconds[phase] += seconds


def separate_hook(state: SeparateState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: SEPARATE-compressed all-reduce of one bucket (CPU gradients)."""
    group = state.process_group
    n = dist.get_world_size(group)
    buffer = bucket.buffer()
    warm_up = state.iteration < state.start_iter  # alike for every bucket of an iteration
    if bucket.is_last():
        state.iteration += 1
    if warm_up:  # plain all-reduce of the mean
        size = buffer.numel() * buffer.element_size()
        state._traffic.add(size, size)
        future = dist.all_reduce(buffer, group=group, async_op=True).get_future()
        return future.then(lambda f: f.value()[0].div_(n))
    indices = state._indices(bucket)
    grads = bucket.gradients()  # views of the bucket's buffer: reconstructed in place
    compressors, traffic = state._compressors, state._traffic  # what the callback may hold (see _Traffic)
    wire = torch.empty(compressors.wire_floats(indices, grads), dtype=torch.float32)
    started = time.perf_counter()
    compressors.project(indices, grads, wire)
    issued = time.perf_counter()
    traffic.add_seconds("project", issued - started)
    future = dist.all_reduce(wire, group=group, async_op=True).get_future()
    adaptation = torch.futures.Future()  # G-SEPARATE's cosines of this bucket, for _finish_iteration
    if not state._futures:
        Variable._execution_engine.queue_callback(state._finish_iteration)
    state._futures.append((bucket.index(), adaptation))

    def reconstruct(f: torch.futures.Future) -> torch.Tensor:
        begun = time.perf_counter()
        traffic.add_seconds("all_reduce", begun - issued)
        try:
            adapting, cosines = compressors.reconstruct(indices, grads, grads, f.value()[0], n)
        except Exception as e:
            adaptation.set_exception(e)
            raise
        traffic.add_seconds("reconstruct", time.perf_counter() - begun)
        # These parameters' steps are complete; the adapting ones' complete in _finish_iteration.
        pending = set(adapting)
        traffic.add(*compressors.traffic([i for i in indices if i not in pending]))
        adaptation.set_result((adapting, cosines))
        return buffer

    return future.then(reconstruct)
