"""Every method of the paro backend against gloo (point-to-point against exact values) on exactly representable
inputs: bitwise equal results for every dtype, reduce op, root, count (0, 1, odd, not divisible, large), in
place and out of place, contiguous or not, on the world and on subgroups, blocking and with several Works
outstanding."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from harness import run

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64,
          torch.uint8]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
COUNTS = [0, 1, 7, 1000, 65536 + 3]


def values(rank: int, count: int, dtype: torch.dtype, op=dist.ReduceOp.SUM, salt: int = 0) -> torch.Tensor:
    """Inputs whose reductions over up to 4 ranks are exact in every dtype, so any order gives the same bits."""
    g = torch.Generator().manual_seed(1000 * rank + 7 * count + salt)
    if op == dist.ReduceOp.PRODUCT:  # magnitudes 1 or 2: products up to 16
        v = torch.randint(1, 3, (count,), generator=g)
        if dtype != torch.uint8:
            v = v * (torch.randint(0, 2, (count,), generator=g) * 2 - 1)
    else:
        low = 0 if dtype == torch.uint8 else -30
        v = torch.randint(low, 31, (count,), generator=g)
    return v.to(dtype)


def same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
    assert torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a, b.view(-1).view(torch.uint8) if b.numel() else b), \
        f"{what}: results differ"


def check_all(rank: int, n: int, paro, gloo, counts, dtypes=DTYPES, device: str = "cpu") -> None:
    """paro's results on `device` against gloo's on the CPU (all_to_all's against their exact values)."""
    size = dist.get_world_size(paro)
    me = dist.get_rank(paro)
    for dtype in dtypes:
        for count in counts:
            tag = f"{dtype} count={count} n={size}"
            for op in OPS:
                x = values(me, count, dtype, op)
                a, b = x.to(device), x.clone()
                dist.all_reduce(a, op=op, group=paro)
                dist.all_reduce(b, op=op, group=gloo)
                same(a.cpu(), b, f"all_reduce {op} {tag}")
            x = values(me, count, dtype)
            # all_gather (a list of outputs) and all_gather_into_tensor
            outs_a = [torch.empty(count, dtype=dtype, device=device) for _ in range(size)]
            outs_b = [torch.empty(count, dtype=dtype) for _ in range(size)]
            dist.all_gather(outs_a, x.to(device), group=paro)
            dist.all_gather(outs_b, x, group=gloo)
            for k in range(size):
                same(outs_a[k].cpu(), outs_b[k], f"all_gather block {k} {tag}")
            flat = torch.empty(size * count, dtype=dtype, device=device)
            dist.all_gather_into_tensor(flat, x.to(device), group=paro)
            same(flat.cpu(), torch.cat(outs_b), f"all_gather_into_tensor {tag}")
            # reduce_scatter (a list of inputs) and reduce_scatter_tensor; gloo has only the latter's base form
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
                full = values(me, size * count, dtype, op, salt=1)
                want = full.clone()
                dist.all_reduce(want, op=op, group=gloo)
                want = want[me * count:(me + 1) * count]
                full = full.to(device)
                got = torch.empty(count, dtype=dtype, device=device)
                dist.reduce_scatter(got, list(full.chunk(size) if count else [full] * size), op=op, group=paro)
                same(got.cpu(), want, f"reduce_scatter {op} {tag}")
                got = torch.empty(count, dtype=dtype, device=device)
                dist.reduce_scatter_tensor(got, full, op=op, group=paro)
                same(got.cpu(), want, f"reduce_scatter_tensor {op} {tag}")
            check_all_to_all(me, size, paro, count, dtype, device)
            # broadcast from every root
            for root in range(size):
                b = values(me, count, dtype, salt=2)
                a = b.to(device)
                dist.broadcast(a, group_src=root, group=paro)
                dist.broadcast(b, group_src=root, group=gloo)
                same(a.cpu(), b, f"broadcast root {root} {tag}")
            check_rooted(me, size, paro, gloo, count, dtype, device)
            if device == "cpu":  # (point-to-point messages run on the host transports)
                check_messages(me, size, paro, count, dtype)


def check_rooted(me: int, size: int, paro, gloo, count: int, dtype: torch.dtype, device: str) -> None:
    """reduce (every op), gather and scatter from every root, against gloo; reduce leaves non-roots' tensors."""
    tag = f"{dtype} count={count} n={size}"
    for root in range(size):
        for op in OPS:
            x = values(me, count, dtype, op, salt=5)
            a, b = x.to(device), x.clone()
            dist.reduce(a, group_dst=root, op=op, group=paro)
            dist.reduce(b, group_dst=root, op=op, group=gloo)
            same(a.cpu(), b if me == root else x, f"reduce {op} root {root} {tag}")
        x = values(me, count, dtype, salt=6)
        outs_a = [torch.empty(count, dtype=dtype, device=device) for _ in range(size)] if me == root else None
        outs_b = [torch.empty(count, dtype=dtype) for _ in range(size)] if me == root else None
        dist.gather(x.to(device), outs_a, group_dst=root, group=paro)
        dist.gather(x, outs_b, group_dst=root, group=gloo)
        for k in range(size if me == root else 0):
            same(outs_a[k].cpu(), outs_b[k], f"gather root {root} block {k} {tag}")
        blocks = [values(j, count, dtype, salt=7 + root) for j in range(size)]
        got_a = torch.empty(count, dtype=dtype, device=device)
        got_b = torch.empty(count, dtype=dtype)
        dist.scatter(got_a, [t.to(device) for t in blocks] if me == root else None, group_src=root, group=paro)
        dist.scatter(got_b, blocks if me == root else None, group_src=root, group=gloo)
        same(got_a.cpu(), got_b, f"scatter root {root} {tag}")


def check_messages(me: int, size: int, paro, count: int, dtype: torch.dtype) -> None:
    """send/recv, isend/irecv and batch_isend_irecv around the group's ring, both ways, exact."""
    if size < 2:
        return
    tag = f"{dtype} count={count} n={size}"
    nxt, prv = (me + 1) % size, (me - 1) % size
    sent = values(me, count, dtype, salt=8)
    got = torch.empty(count, dtype=dtype)
    works = [dist.irecv(got, group_src=prv, group=paro, tag=3), dist.isend(sent, group_dst=nxt, group=paro, tag=3)]
    for w in works:
        w.wait()
    same(got, values(prv, count, dtype, salt=8), f"isend/irecv {tag}")
    # a pipeline's exchange: activations forward on tag 1, gradients backward on tag 2, posted at once
    forward, backward = torch.empty(count, dtype=dtype), torch.empty(count, dtype=dtype)
    ops = [dist.P2POp(dist.isend, sent, group=paro, group_peer=nxt, tag=1),
           dist.P2POp(dist.irecv, backward, group=paro, group_peer=nxt, tag=2),
           dist.P2POp(dist.isend, values(me, count, dtype, salt=9), group=paro, group_peer=prv, tag=2),
           dist.P2POp(dist.irecv, forward, group=paro, group_peer=prv, tag=1)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(forward, values(prv, count, dtype, salt=8), f"batch_isend_irecv forward {tag}")
    same(backward, values(nxt, count, dtype, salt=9), f"batch_isend_irecv backward {tag}")
    # blocking: even ranks send first, odd ranks receive first
    for first_send in (me % 2 == 0, me % 2 == 1):
        if first_send:
            dist.send(sent, group_dst=nxt, group=paro)
        else:
            dist.recv(got, group_src=prv, group=paro)
    same(got, values(prv, count, dtype, salt=8), f"send/recv {tag}")


def check_all_to_all(me: int, size: int, paro, count: int, dtype: torch.dtype, device: str) -> None:
    """all_to_all_single with equal blocks and with uneven splits (some zero), and the list form."""
    tag = f"{dtype} count={count} n={size}"
    sent = [values(j, size * count, dtype, salt=3) for j in range(size)]
    got = torch.empty(size * count, dtype=dtype, device=device)
    dist.all_to_all_single(got, sent[me].to(device), group=paro)
    want = torch.cat([sent[j][me * count:(me + 1) * count] for j in range(size)])
    same(got.cpu(), want, f"all_to_all_single {tag}")

    def rows(j: int, k: int) -> int:  # rows rank j sends rank k: 0 .. 3, different per pair
        return (j + 2 * k + count) % 4

    width = 3
    inputs = [values(j, width * sum(rows(j, k) for k in range(size)), dtype, salt=4).view(-1, width)
              for j in range(size)]
    want = torch.cat([inputs[j].split([rows(j, k) for k in range(size)])[me] for j in range(size)])
    got = torch.empty(want.shape, dtype=dtype, device=device)
    dist.all_to_all_single(got, inputs[me].to(device), [rows(j, me) for j in range(size)],
                           [rows(me, k) for k in range(size)], group=paro)
    same(got.cpu(), want, f"all_to_all_single uneven {tag}")
    outs = [torch.empty(rows(j, me), width, dtype=dtype, device=device) for j in range(size)]
    dist.all_to_all(outs, [t.to(device) for t in inputs[me].split([rows(me, k) for k in range(size)])], group=paro)
    same(torch.cat([o.cpu() for o in outs]), want, f"all_to_all {tag}")


def body_world(rank: int, n: int) -> None:
    gloo = dist.new_group(backend="gloo")
    check_all(rank, n, dist.group.WORLD, gloo, COUNTS)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_every_method_matches_gloo(n):
    run(n, body_world)


def body_subgroups(rank: int, n: int) -> None:
    # Uneven subgroups: {0, 2} and {1, 3, ...}; each rank checks the one it is in.
    members = [list(range(0, n, 2)), list(range(1, n, 2))]
    groups = [(dist.new_group(m, backend="paro"), dist.new_group(m, backend="gloo")) for m in members]
    paro, gloo = groups[rank % 2]
    check_all(rank, n, paro, gloo, [0, 5, 1001])
    dist.barrier()


@pytest.mark.parametrize("n", [3, 4])
def test_subgroups_match_gloo(n):
    run(n, body_subgroups)


def body_algorithms(rank: int, n: int) -> None:
    import paro_torch

    gloo = dist.new_group(backend="gloo")
    for algorithm in ("ring", "tree", "mics_hcs", "paro_seq", "paro_cc"):
        group = dist.new_group(backend="paro", pg_options=paro_torch.Options(algorithm=algorithm))
        for collective in ("all_reduce", "all_gather", "reduce_scatter"):
            assert paro_torch.algorithm_for(collective, 1 << 20, group) == algorithm
        # (mics_hcs has no all_to_all: the group's all_to_all is automatic's)
        check_all(rank, n, group, gloo, [0, 7, 1000], [torch.float32, torch.bfloat16, torch.int64])


def test_every_algorithm_on_two_nodes_of_two():
    run(4, body_algorithms, env={"PARO_EMULATE": "nodes=2,ranks=2"})


def body_shapes(rank: int, n: int) -> None:
    gloo = dist.new_group(backend="gloo")
    paro = dist.group.WORLD
    # Non-contiguous tensors are staged and written back.
    x = values(rank, 6 * 5, torch.float32).view(6, 5)
    a, b = x.t(), x.clone().t()
    assert not a.is_contiguous()
    dist.all_reduce(a, group=paro)
    dist.all_reduce(b, group=gloo)
    same(a.contiguous(), b.contiguous(), "all_reduce non-contiguous")
    # all_reduce_coalesced: one buffer for several tensors of one type
    ts = [values(rank, c, torch.int32, salt=c) for c in (3, 0, 17)]
    want = [t.clone() for t in ts]
    for t in want:
        dist.all_reduce(t, group=gloo)
    dist.all_reduce_coalesced(ts, group=paro)
    for t, w in zip(ts, want):
        same(t, w, "all_reduce_coalesced")
    # the coalesced tensor forms, through the backend object
    backend = paro._get_backend(torch.device("cpu"))
    ins = [values(rank, c, torch.float64, salt=c) for c in (4, 9)]
    outs = [torch.empty(n * c, dtype=torch.float64) for c in (4, 9)]
    backend.all_gather_single_coalesced(outs, ins).wait()
    for i, o in zip(ins, outs):
        want = torch.empty_like(o)
        dist.all_gather_into_tensor(want, i, group=gloo)
        same(o, want, "all_gather_single_coalesced")
    ins = [values(rank, n * c, torch.float64, salt=c) for c in (4, 9)]
    outs = [torch.empty(c, dtype=torch.float64) for c in (4, 9)]
    backend.reduce_scatter_single_coalesced(outs, ins).wait()
    for i, o, c in zip(ins, outs, (4, 9)):
        want = i.clone()
        dist.all_reduce(want, group=gloo)
        same(o, want[rank * c:(rank + 1) * c], "reduce_scatter_single_coalesced")
    # AVG, which gloo lacks: exact for values that the rank count divides
    v = torch.full((5,), float(n * (rank + 1)))
    dist.all_reduce(v, op=dist.ReduceOp.AVG, group=paro)
    assert torch.equal(v, torch.full((5,), float(n * (n + 1)) / 2)), v
    # PREMUL_SUM (FSDP2's gradient divide factor), by a number and by a one-element tensor: exact for powers of
    # two; the caller's input of the reduce-scatter stays as it was
    for factor in (0.25, torch.tensor([0.5], dtype=torch.float64)):
        f = float(factor)
        op = dist._make_nccl_premul_sum(factor)
        x = values(rank, 10, torch.float32)
        want = x.clone()
        dist.all_reduce(want, group=gloo)
        got = x.clone()
        dist.all_reduce(got, op=op, group=paro)
        same(got, want * f, f"all_reduce PREMUL_SUM {f}")
        full = values(rank, n * 3, torch.float32, salt=3)
        kept = full.clone()
        want = full.clone()
        dist.all_reduce(want, group=gloo)
        got = torch.empty(3)
        dist.reduce_scatter_tensor(got, full, op=op, group=paro)
        same(got, want[rank * 3:(rank + 1) * 3] * f, f"reduce_scatter_tensor PREMUL_SUM {f}")
        same(full, kept, "reduce_scatter_tensor PREMUL_SUM input")
    dist.barrier()


@pytest.mark.parametrize("n", [2, 3])
def test_noncontiguous_coalesced_and_avg(n):
    run(n, body_shapes)


def body_async(rank: int, n: int) -> None:
    gloo = dist.new_group(backend="gloo")
    inputs = [values(rank, 1000 + 37 * k, torch.float32, salt=k) for k in range(12)]
    outs = [x.clone() for x in inputs]
    works = [dist.all_reduce(t, async_op=True) for t in outs]
    gathered = torch.empty(n * 1000, dtype=torch.float32)
    works.append(dist.all_gather_into_tensor(gathered, inputs[0], async_op=True))
    futures = [w.get_future() for w in works]
    torch.futures.wait_all(futures)
    for w in works:
        assert w.is_completed() and w.is_success()
    for x, out in zip(inputs, outs):
        want = x.clone()
        dist.all_reduce(want, group=gloo)
        same(out, want, "async all_reduce")
    want = torch.empty_like(gathered)
    dist.all_gather_into_tensor(want, inputs[0], group=gloo)
    same(gathered, want, "async all_gather_into_tensor")
    # A future's callback may wait on another collective of the same group (PowerSGD-style hooks do).
    t = torch.ones(3)

    def nested(f):
        inner = torch.ones(3)
        dist.all_reduce(inner, async_op=True).get_future().wait()
        return f.value()[0] + inner

    result = dist.all_reduce(t, async_op=True).get_future().then(nested).wait()
    assert torch.equal(result, torch.full((3,), 2.0 * n)), result


@pytest.mark.parametrize("n", [2, 4])
def test_outstanding_works_and_nested_futures(n):
    run(n, body_async)


def body_topology(rank: int, n: int) -> None:
    import paro_torch

    topo = paro_torch.topology()
    assert [r["rank"] for r in topo["ranks"]] == list(range(n))
    assert topo["transport"] == "ucx"
    assert topo["levels"][0] == "node"
    assert sorted(sum(topo["groups"], [])) == list(range(n))
    assert paro_torch.algorithm_for("all_reduce", 1 << 20) in ("ring", "tree", "mics_hcs", "paro_seq", "paro_cc")
    sub = dist.new_group([0, n - 1], backend="paro", pg_options=paro_torch.Options(algorithm="ring", group="2"))
    if rank in (0, n - 1):
        assert paro_torch.algorithm_for("all_gather", 1 << 20, sub) == "ring"
        assert len(paro_torch.topology(sub)["ranks"]) == 2
    dist.barrier()


def test_topology_and_options():
    run(4, body_topology, env={"PARO_EMULATE": "nodes=2,ranks=2"})


def cuda_ranks() -> int:
    """How many ranks can run on CUDA tensors here: one GPU each, in a build with CUDA (PARO_TORCH_CUDA=1)."""
    import paro_torch

    return torch.cuda.device_count() if paro_torch._C.with_cuda and torch.cuda.is_available() else 0


def body_cuda(rank: int, n: int) -> None:
    torch.cuda.set_device(rank)
    device = f"cuda:{rank}"
    gloo = dist.new_group(backend="gloo")
    check_all(rank, n, dist.group.WORLD, gloo, COUNTS, device=device)
    # Inputs still being written by the caller's stream, a non-contiguous output staged back on it, and
    # several Works outstanding.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.full((1 << 20,), float(rank + 1), device=device)
        x.mul_(2)
        t = values(rank, 6 * 5, torch.float32, salt=3).to(device).view(6, 5).t()
        works = [dist.all_reduce(x, async_op=True), dist.all_reduce(t, async_op=True)]
        for w in works:
            w.wait()
        got_x, got_t = x.cpu(), t.contiguous().cpu()
    want_t = values(rank, 6 * 5, torch.float32, salt=3).view(6, 5).t().contiguous()
    dist.all_reduce(want_t, group=gloo)
    assert torch.equal(got_x, torch.full((1 << 20,), float(n * (n + 1)))), got_x[:4]
    same(got_t, want_t, "cuda all_reduce non-contiguous on a side stream")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_cuda_tensors_match_gloo(n):
    if cuda_ranks() < n:
        pytest.skip(f"needs {n} GPU(s) and paro_torch built with PARO_TORCH_CUDA=1; here {cuda_ranks()}")
    run(n, body_cuda)


def body_paced(rank: int, n: int, report: str) -> None:
    import time

    x = torch.ones(16 << 20)  # 64 MiB of float32
    dist.all_reduce(x)  # connected, and the links' clocks shared
    dist.barrier()
    start = time.monotonic()
    dist.all_reduce(x)
    all_reduce_s = time.monotonic() - start
    assert torch.equal(x[:4], torch.full((4,), float(n * n))), x[:4]
    message = torch.empty(1 << 20, dtype=torch.float64)  # 8 MiB
    dist.barrier()
    start = time.monotonic()
    if rank == 0:
        dist.send(message, dst=1)
    else:
        dist.recv(message, src=0)
    send_s = time.monotonic() - start
    with open(f"{report}.{rank}", "w") as f:
        f.write(f"{all_reduce_s} {send_s}")


def test_emulated_links_pace_the_backend(tmp_path):
    """PARO_EMULATE's links pace the torch backend's transport as they pace paro-bench's: 2 nodes at 1 Gbit/s,
    where an all-reduce of 64 MiB must move 64 MiB through each NIC (0.537 s) and a message of 8 MiB takes
    0.067 s. Only lower bounds: a loaded machine makes messages slower, never faster than their links."""
    report = str(tmp_path / "seconds")
    run(2, body_paced, report, env={"PARO_EMULATE": "nodes=2,ranks=1,inter_gbps=1"})
    for rank in range(2):
        all_reduce_s, send_s = map(float, open(f"{report}.{rank}").read().split())
        print(f"rank {rank}: all_reduce of 64 MiB {all_reduce_s:.3f} s, send/recv of 8 MiB {send_s:.3f} s")
        assert all_reduce_s >= (64 << 20) * 8 / 1e9, all_reduce_s
        assert send_s >= (8 << 20) * 8 / 1e9, send_s
