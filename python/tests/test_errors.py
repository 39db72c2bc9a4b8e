"""Errors: bad arguments raise at the call with what is allowed; SEPARATE settings known to diverge warn; a
paro error on the progress thread surfaces from the Work with paro's message; a killed process makes the
others raise within the timeout."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from harness import exit_codes, run


def body_bad_arguments(rank: int, n: int) -> None:
    with pytest.raises(ValueError,
                       match="reduce op BAND is not supported; allowed: SUM AVG PRODUCT MIN MAX PREMUL_SUM"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(TypeError, match="allowed: float32 float64 float16 bfloat16 int8 int32 int64 uint8"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool))  # (complex tensors reach backends as real views)
    with pytest.raises(ValueError, match="must hold"):
        dist.all_gather_into_tensor(torch.empty(n * 4 + 1), torch.ones(4))
    with pytest.raises(ValueError, match="one per rank"):
        dist.all_gather([torch.empty(2)] * (n + 1), torch.ones(2))
    with pytest.raises(TypeError, match="same type"):
        dist.reduce_scatter_tensor(torch.empty(2, dtype=torch.float64), torch.ones(2 * n))
    # A tensor on a device the backend does not serve (a meta tensor, handed to the backend object itself).
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    with pytest.raises(ValueError, match="a tensor on meta; allowed: cpu"):
        backend.allreduce([torch.ones(3, device="meta")])
    with pytest.raises(ValueError, match="do not split evenly over"):
        dist.all_to_all_single(torch.empty(2 * n + 1), torch.ones(2 * n + 1))
    with pytest.raises(ValueError, match=f"input_split_sizes add up to {n} rows; the tensor has {2 * n}"):
        dist.all_to_all_single(torch.empty(2 * n), torch.ones(2 * n), [2] * n, [1] * n)
    with pytest.raises(ValueError, match="one of each per rank"):
        dist.all_to_all([torch.empty(1)] * n, [torch.ones(1)] * (n + 1))
    with pytest.raises(ValueError, match="input_split_sizes has -1; sizes are >= 0"):
        dist.all_to_all_single(torch.empty(2 * n), torch.ones(2 * n), [2] * n, [-1, 2 * n + 1] + [0] * (n - 2))
    options = dist.ReduceOptions()
    options.rootRank = n
    with pytest.raises(ValueError, match=f"reduce: root rank {n}; allowed: 0 .. {n - 1}"):
        backend.reduce([torch.ones(2)], options)
    with pytest.raises(ValueError, match=f"send: peer {rank} is this rank"):
        backend.send([torch.ones(2)], rank, 0)
    with pytest.raises(ValueError, match="send: tag 16384; allowed: 0 .. 16383"):
        dist.send(torch.ones(2), dst=1 - rank, tag=16384)
    with pytest.raises(ValueError, match="recv from any source is not supported"):
        dist.recv(torch.ones(2))
    with pytest.raises(ValueError, match="monitored_barrier is not supported; use dist.barrier()"):
        dist.monitored_barrier()
    # A receive of another length than its message fails on the receiver, naming the sender and both sizes;
    # both ranks go on.
    if rank == 0:
        dist.send(torch.ones(5), dst=1)
    else:
        with pytest.raises(Exception, match="paro: rank 1: recv from rank 0 with tag 0: rank 0 sent 20 bytes, "
                                            "this receive takes 16"):
            dist.recv(torch.empty(4), src=0)
    # The group still works after rejected calls: nothing was issued, or the failed receive was drained.
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(n)))
    got = torch.empty(3)
    works = [dist.isend(torch.full((3,), float(rank)), dst=1 - rank), dist.irecv(got, src=1 - rank)]
    for w in works:
        w.wait()
    assert torch.equal(got, torch.full((3,), float(1 - rank))), got


def test_bad_arguments_raise_at_the_call():
    run(2, body_bad_arguments)


def test_separate_state_warns_where_error_feedback_diverges():
    import warnings

    import paro_torch

    net = torch.nn.Linear(512, 512)
    with pytest.warns(RuntimeWarning, match=r"ratio 64 with the smoothed rule and beta 0.95 .* grows without bound"):
        paro_torch.SeparateState(net, ratio=64)
    with pytest.warns(RuntimeWarning, match="beta_on_residual rule"):
        paro_torch.SeparateState(net, ratio=16, error_rule="beta_on_residual")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paro_torch.SeparateState(net, ratio=32)
        paro_torch.SeparateState(net, ratio=64, beta=0.98)
        paro_torch.SeparateState(net, ratio=64, error_feedback=False)


def body_disagreement(rank: int, n: int) -> None:
    # Under PARO_CHECK=1 the ranks compare each call first: different counts fail on every rank, with
    # paro's message, from the Work (the check runs on paro's progress thread).
    t = torch.ones(5 + rank)
    work = dist.all_reduce(t, async_op=True)
    with pytest.raises(Exception, match="paro: .*count"):
        work.wait()
    assert work.is_completed() and not work.is_success()
    # The group is unusable afterwards (the ranks are out of step): later calls fail, naming the first error.
    with pytest.raises(Exception, match="not run"):
        dist.all_reduce(torch.ones(2))


def test_a_paro_error_surfaces_with_its_message():
    run(2, body_disagreement, env={"PARO_CHECK": "1"})


def body_killed(rank: int, n: int, timeout_s: float, report: str) -> None:
    dist.all_reduce(torch.ones(4))  # everyone is connected
    if rank == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(Exception, match="paro: .*(fail|gone|time)"):
        for _ in range(100):
            dist.all_reduce(torch.ones(1 << 16))
    elapsed = time.monotonic() - start
    assert elapsed < timeout_s + 5, f"rank {rank} raised only after {elapsed:.1f} s"
    with open(f"{report}.{rank}", "w") as f:
        f.write(f"{elapsed:.2f}")
    os._exit(0)  # skip destroy_process_group: the group is broken


def test_killed_process_makes_the_others_raise(tmp_path):
    timeout_s = 20.0
    report = str(tmp_path / "raised")
    codes = exit_codes(3, body_killed, timeout_s, report, env={"PARO_TIMEOUT": str(timeout_s)})
    assert codes == [0, 0, -signal.SIGKILL], codes
    for rank in (0, 1):
        print(f"rank {rank} raised after {open(f'{report}.{rank}').read()} s")
