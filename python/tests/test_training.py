"""Training through the paro backend gives the parameters gloo gives: DDP (the default hook, and
SEPARATE's hook with checkpointed state), FSDP2 on a paro process group and with paro_cc as its custom
collectives. Two ranks: a sum of two floats is the same in any order, so the parameters are bitwise equal."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import run

STEPS = 6


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def batch(rank: int, step: int):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def optimizer(net: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)


def train(net: torch.nn.Module, rank: int, steps: int = STEPS, opt=None, first: int = 0) -> list:
    opt = opt or optimizer(net)
    losses = []
    for step in range(first, first + steps):
        x, y = batch(rank, step)
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def parameters(net: torch.nn.Module) -> list:
    return [p.detach().clone() for p in net.parameters()]


def body_ddp(rank: int, n: int) -> None:
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (dist.group.WORLD, gloo):
        net = DDP(model(), process_group=group, bucket_cap_mb=0.01)  # several buckets
        train(net, rank)
        results.append(parameters(net))
    for a, b in zip(*results):
        assert torch.equal(a, b), "DDP on paro and on gloo trained different parameters"


def test_ddp_trains_the_parameters_gloo_trains():
    run(2, body_ddp)


def body_separate_hook(rank: int, n: int) -> None:
    import paro_torch

    # The hook runs on either backend's all-reduce; both must give the same parameters, and a state
    # restored from a checkpoint must continue exactly as the original, also with other DDP buckets (a
    # fresh DDP model starts with its initial buckets, the original had rebuilt them).
    options = dict(ratio=16, min_elements=1024, reset_every=4, adaptive=True, adapt_every=2)
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (dist.group.WORLD, gloo):
        net = DDP(model(), process_group=group, bucket_cap_mb=0.01)
        state = paro_torch.SeparateState(net, group, **options)
        net.register_comm_hook(state, paro_torch.separate_hook)
        opt = optimizer(net)
        train(net, rank, 5, opt)
        assert state.compression_ratio() > 2, state.compression_ratio()
        saved = copy.deepcopy((net.module.state_dict(), opt.state_dict(), state.state_dict()))
        train(net, rank, 3, opt, first=5)
        results.append(parameters(net))
        for bucket_cap_mb in (0.01, 25):
            replay = DDP(model(), process_group=group, bucket_cap_mb=bucket_cap_mb)
            replay.module.load_state_dict(saved[0])
            replay_opt = optimizer(replay)
            replay_opt.load_state_dict(copy.deepcopy(saved[1]))  # it would adopt (and update) saved's buffers
            restored = paro_torch.SeparateState(replay, group, **options)
            restored.load_state_dict(saved[2])
            replay.register_comm_hook(restored, paro_torch.separate_hook)
            train(replay, rank, 3, replay_opt, first=5)
            for a, b in zip(results[-1], parameters(replay)):
                assert torch.equal(a, b), f"training from the hook's checkpoint diverged (buckets of {bucket_cap_mb} MB)"
    for a, b in zip(*results):
        assert torch.equal(a, b), "separate_hook on paro and on gloo trained different parameters"


def test_separate_hook_on_paro_and_gloo_and_from_a_checkpoint():
    run(2, body_separate_hook)


def body_separate_uncompressed(rank: int, n: int) -> None:
    import paro_torch

    # With every gradient below min_elements nothing is compressed: the hook's plain path must give the
    # parameters of a hook that all-reduces and then divides, bitwise (each element's mean is sum / n; DDP's
    # own all-reduce divides first, which rounds differently over 3 ranks).
    def sum_then_divide(_, bucket):
        future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return future.then(lambda f: f.value()[0].div_(n))

    results = []
    for hooked in (False, True):
        net = DDP(model(), bucket_cap_mb=0.01)
        if hooked:
            state = paro_torch.SeparateState(net, min_elements=1 << 30)
            net.register_comm_hook(state, paro_torch.separate_hook)
        else:
            net.register_comm_hook(None, sum_then_divide)
        train(net, rank)
        results.append(parameters(net))
    assert state.compression_ratio() == 1.0, state.compression_ratio()
    for a, b in zip(*results):
        assert torch.equal(a, b), "separate_hook without compression differs from a plain all-reduce"


def test_separate_hook_uncompressed_is_a_plain_all_reduce():
    run(3, body_separate_uncompressed)


def body_fsdp(rank: int, n: int, exact: bool) -> None:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    import paro_torch.fsdp

    gloo = dist.new_group(backend="gloo")
    results = []
    # FSDP on gloo; on paro (the default group); on gloo with paro_cc's all-gather and reduce-scatter.
    for how in ("gloo", "paro", "gloo + paro_cc collectives"):
        group = dist.group.WORLD if how == "paro" else gloo
        mesh = DeviceMesh.from_group(group, "cpu")
        net = model()
        for layer in net:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(net, mesh=mesh)
        if how.endswith("paro_cc collectives"):
            paro_torch.fsdp.use_paro_collectives(net, algorithm="paro_cc")
        train(net, rank)
        results.append([p.full_tensor().detach().clone() for p in net.parameters()])
    for how, other in zip(("paro", "gloo + paro_cc collectives"), results[1:]):
        for a, b in zip(results[0], other):
            if exact:
                assert torch.equal(a, b), f"FSDP with {how} trained different parameters than on gloo"
            else:  # sums over 4 ranks in another order round differently
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"FSDP with {how} vs gloo")


def test_fsdp_trains_the_parameters_gloo_trains():
    run(2, body_fsdp, True, env={"PARO_EMULATE": "nodes=2,ranks=1"})


def test_fsdp_with_paro_cc_on_two_nodes_of_two():
    run(4, body_fsdp, False, env={"PARO_EMULATE": "nodes=2,ranks=2"})


def body_trainer(rank: int, n: int, directory: str) -> None:
    """What a trainer on a paro default group calls, none of it through a "not supported" path: a 2 x 2
    DeviceMesh and HSDP (FSDP2 with its default AVG reduction) on it, torch.distributed.checkpoint save and
    load, split_group, a pipeline's batch_isend_irecv ring and an uneven all_to_all_single."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
    for name in ("replicate", "shard"):
        assert dist.get_backend(mesh.get_group(name)) == "paro", dist.get_backend(mesh.get_group(name))
    net = model()
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    train(net, rank)
    trained = [p.full_tensor().detach().clone() for p in net.parameters()]
    # The same steps under DDP on gloo: HSDP averages the same gradients.
    reference = DDP(model(), process_group=dist.new_group(backend="gloo"))
    train(reference, rank)
    for a, b in zip(trained, parameters(reference)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg="HSDP on paro vs DDP on gloo")

    # Save the sharded state and a replicated one (gathered through the object collectives), load them into
    # a fresh model, get the same parameters.
    dcp.save({"model": net.state_dict(), "extra": {"step": torch.tensor(STEPS)}}, checkpoint_id=directory)
    fresh = model()
    for layer in fresh:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(fresh, mesh=mesh)
    state = {"model": fresh.state_dict(), "extra": {"step": torch.tensor(0)}}
    dcp.load(state, checkpoint_id=directory)
    fresh.load_state_dict(state["model"])
    assert int(state["extra"]["step"]) == STEPS
    for a, b in zip(trained, fresh.parameters()):
        assert torch.equal(a, b.full_tensor()), "the checkpoint loaded other parameters"

    # split_group: the ranks of each half as a group of their own.
    half = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=half)
    assert torch.equal(t, torch.full((3,), float(1 if rank < 2 else 5))), t

    # A pipeline's steady state: activations to the next stage, gradients to the previous one.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    activation, gradient = torch.empty(1000), torch.empty(1000)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((1000,), float(rank)), nxt),
                                    dist.P2POp(dist.irecv, activation, prv),
                                    dist.P2POp(dist.isend, torch.full((1000,), -float(rank)), prv),
                                    dist.P2POp(dist.irecv, gradient, nxt)])
    for w in works:
        w.wait()
    assert torch.equal(activation, torch.full((1000,), float(prv)))
    assert torch.equal(gradient, torch.full((1000,), -float(nxt)))

    # MoE-style token routing: rank r sends r + k tokens to rank k.
    tokens = torch.cat([torch.full((rank + k, 4), float(10 * rank + k)) for k in range(n)])
    routed = torch.empty(sum(j + rank for j in range(n)), 4)
    dist.all_to_all_single(routed, tokens, [j + rank for j in range(n)], [rank + k for k in range(n)])
    assert torch.equal(routed, torch.cat([torch.full((j + rank, 4), float(10 * j + rank)) for j in range(n)]))


def test_a_trainers_calls_on_a_paro_default_group(tmp_path):
    run(4, body_trainer, str(tmp_path / "checkpoint"), env={"PARO_EMULATE": "nodes=2,ranks=2"})
