"""paro_torch.dp: every valid strategy trains the parameters DDP trains, holds the memory and sends the bytes
its model says, resumes from a checkpoint under another strategy or rank count, and refuses bad input
before any collective.

Equality is bitwise: every rank rounds its gradients to multiples of 2^-16 (a tensor hook, the same under
DDP), so that sums over ranks and micro-steps are exact in any order, and averages over 4 or 8 ranks too.
Across rank counts the data split changes the rounding, so that comparison is without it, within 1e-5."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import run

STEPS, ACCUMULATION, BATCH, SEQ, VOCAB, WIDTH = 10, 2, 8, 8, 37, 12
GRID = 2.0 ** 16


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(WIDTH), torch.nn.LayerNorm(WIDTH)
        # No key bias: its gradient is zero in exact arithmetic (softmax ignores a shift), rounding noise in
        # floats, which Adam would scale up to lr-sized steps that differ with the data split.
        self.qkv, self.proj = torch.nn.Linear(WIDTH, 3 * WIDTH, bias=False), torch.nn.Linear(WIDTH, WIDTH)
        self.fc, self.out = torch.nn.Linear(WIDTH, 4 * WIDTH + 1), torch.nn.Linear(4 * WIDTH + 1, WIDTH)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).view(x.shape[0], x.shape[1], 3, 2, WIDTH // 2).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(x.shape))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(torch.nn.Module):
    """Sizes that divide no rank count: 37-token vocabulary, a 49-wide MLP; a parameter of the root's own, a
    frozen one."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, WIDTH)
        self.pos = torch.nn.Parameter(torch.randn(SEQ, WIDTH) * 0.1)
        self.temperature = torch.nn.Parameter(torch.ones(1), requires_grad=False)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.ln = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x)) / self.temperature


def model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return TinyGPT()


def batch(rank: int, n: int, step: int, micro: int):
    """This rank's share of the global batch of BATCH sequences of a micro-step."""
    g = torch.Generator().manual_seed(1000 * step + micro)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    share = data[rank * BATCH // n:(rank + 1) * BATCH // n]
    return share[:, :-1], share[:, 1:]


def round_gradients(net: torch.nn.Module) -> None:
    for p in net.parameters():
        if p.requires_grad:
            p.register_hook(lambda g: torch.round(g * GRID) / GRID)


def loss_of(net, x, y):
    return F.cross_entropy(net(x).reshape(-1, VOCAB), y.reshape(-1))


def train(net, opt, rank: int, n: int, first: int, steps: int, no_sync, clip: float | None = None) -> list:
    norms = []
    for step in range(first, first + steps):
        for micro in range(ACCUMULATION):
            x, y = batch(rank, n, step, micro)
            if micro < ACCUMULATION - 1:
                with no_sync():
                    loss_of(net, x, y).backward()
            else:
                loss_of(net, x, y).backward()
        if clip is not None:
            norms.append(float(clip(net, opt)))
        opt.step()
        opt.zero_grad()
    return norms


def adamw(params):
    return torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1)


def ddp_reference(rank: int, n: int, steps: int = STEPS, rounded: bool = True, clip: float | None = None):
    net = DDP(model(), process_group=dist.new_group(backend="gloo"), bucket_cap_mb=0.001)
    if rounded:
        round_gradients(net.module)
    opt = adamw(net.parameters())
    clipper = None if clip is None else (lambda m, o: torch.nn.utils.clip_grad_norm_(m.parameters(), clip))
    norms = train(net, opt, rank, n, 0, steps, net.no_sync, clipper)
    return {k: v.detach().clone() for k, v in net.module.state_dict().items()}, norms


def sharded(strategy: str, seed: int = 0, rounded: bool = True, **kwargs):
    import paro_torch.dp

    net, opt = paro_torch.dp.shard(model(seed), torch.optim.AdamW, strategy=strategy, algorithm="ring", lr=3e-3,
                                   weight_decay=0.1, **kwargs)
    if rounded:
        round_gradients(net)
    return net, opt


def dp_clip(max_norm):
    return lambda net, opt: opt.clip_grad_norm_(max_norm)


def assert_same(trained: dict, reference: dict, what: str, exact: bool = True) -> None:
    assert trained.keys() == reference.keys(), (sorted(trained), sorted(reference))
    for key in reference:
        if exact:
            assert torch.equal(trained[key], reference[key]), \
                f"{what}: {key} differs from DDP's (max {(trained[key] - reference[key]).abs().max():.3g})"
        else:
            torch.testing.assert_close(trained[key], reference[key], rtol=1e-5, atol=1e-5,
                                       msg=lambda m: f"{what}: {key}: {m}")


def body_every_strategy(rank: int, n: int, shared: str) -> None:
    import paro_torch
    import paro_torch.dp as pdp

    reference, _ = ddp_reference(rank, n)
    m = n // 2
    for s in pdp.valid_strategies():
        net, opt = sharded(s.name)
        assert (net.paro_dp.place.n, net.paro_dp.place.m) == (n, m)
        paro_torch._C.take_link_bytes(rank)  # from here: the training steps' bytes only
        train(net, opt, rank, n, 0, STEPS, net.paro_dp.no_sync)
        net.paro_dp.synchronize()
        intra, inter = paro_torch._C.take_link_bytes(rank)
        assert_same(pdp.full_state_dict(net), reference, s.name)
        # Memory: the persistent state from the tensors' storages, exactly the model's.
        lengths = [u.real for u in net.paro_dp.units]
        held = net.paro_dp.memory()
        predicted = pdp.footprint(s, lengths, n, m)
        for key in predicted:
            assert held[key] == predicted[key], f"{s.name}: {key} {held[key]} bytes, the model says {predicted[key]}"
        # Bytes per link class, from the emulated links' trace: the model's, step for step.
        want = pdp.traffic(s, lengths, n, m, accumulation=ACCUMULATION)
        assert (intra, inter) == (STEPS * want["intra"], STEPS * want["inter"]), \
            f"{s.name}: sent {intra} intra / {inter} inter bytes in {STEPS} steps; the model says " \
            f"{STEPS * want['intra']:.0f} / {STEPS * want['inter']:.0f}"

    # Global-norm clipping: the norm DDP's clip_grad_norm_ sees, and the same clipped training.
    for s in ("NIG", "GGG"):
        ref, ref_norms = ddp_reference(rank, n, steps=3, clip=0.05)
        net, opt = sharded(s)
        norms = train(net, opt, rank, n, 0, 3, net.paro_dp.no_sync, dp_clip(0.05))
        torch.testing.assert_close(torch.tensor(norms), torch.tensor(ref_norms), rtol=1e-5, atol=0)
        assert min(ref_norms) > 0.05, ref_norms  # the clipping did scale
        assert_same(pdp.full_state_dict(net), ref, f"{s} clipped", exact=False)

    # Resume: 5 steps of NIG, saved, loaded into IGG (and GGI) built from another initialisation: 5 more
    # steps give DDP's 10.
    folder = os.path.join(shared, f"nig-{n}")
    net, opt = sharded("NIG")
    train(net, opt, rank, n, 0, 5, net.paro_dp.no_sync)
    pdp.save(folder, net, opt)
    for other in ("IGG", "GGG", "NNN"):
        net, opt = sharded(other, seed=1)
        pdp.load(folder, net, opt)
        train(net, opt, rank, n, 5, STEPS - 5, net.paro_dp.no_sync)
        assert_same(pdp.full_state_dict(net), reference, f"NIG saved at step 5, resumed as {other}")

    if n == 4:  # for the 8-process test: a checkpoint and DDP's parameters, without rounding
        unrounded, _ = ddp_reference(rank, n, rounded=False)
        net, opt = sharded("NIG", rounded=False)
        train(net, opt, rank, n, 0, 5, net.paro_dp.no_sync)
        pdp.save(os.path.join(shared, "unrounded-4"), net, opt)
        if rank == 0:
            torch.save(unrounded, os.path.join(shared, "ddp-unrounded-4.pt"))
    elif os.path.exists(os.path.join(shared, "ddp-unrounded-4.pt")):
        net, opt = sharded("GIG", seed=1, rounded=False)
        pdp.load(os.path.join(shared, "unrounded-4"), net, opt)
        train(net, opt, rank, n, 5, STEPS - 5, net.paro_dp.no_sync)
        reference4 = torch.load(os.path.join(shared, "ddp-unrounded-4.pt"))
        assert_same(pdp.full_state_dict(net), reference4, "saved by 4 ranks as NIG, resumed by 8 as GIG",
                    exact=False)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return str(tmp_path_factory.mktemp("dp"))


_TRACED = {"PARO_TRACE": "1", "PARO_ALGO": "ring"}


def test_every_strategy_equals_ddp_on_two_nodes_of_two(shared):
    run(4, body_every_strategy, shared, env={"PARO_EMULATE": "nodes=2,ranks=2", **_TRACED}, timeout_s=300)


def test_every_strategy_equals_ddp_on_two_nodes_of_four(shared):
    run(8, body_every_strategy, shared, env={"PARO_EMULATE": "nodes=2,ranks=4", **_TRACED}, timeout_s=300)


def body_bf16(rank: int, n: int) -> None:
    """bf16 compute with fp32 master weights: the parameters stay fp32, the loss falls, and p = N keeps a
    bf16 copy (counted in 'params')."""
    import paro_torch.dp as pdp

    for s in ("NNN", "IGG"):
        net, opt = sharded(s, rounded=False, param_dtype=torch.bfloat16)
        assert all(p.dtype == torch.bfloat16 for p in net.parameters() if p.requires_grad)
        x, y = batch(rank, n, 0, 0)
        first = None
        for _ in range(8):
            loss = loss_of(net, x, y)
            first = first if first is not None else float(loss)
            loss.backward()
            opt.step()
            opt.zero_grad()
        assert float(loss) < first - 0.1, (s, first, float(loss))
        assert all(v.dtype == torch.float32 for v in pdp.full_state_dict(net).values())
        lengths = [u.real for u in net.paro_dp.units]
        assert net.paro_dp.memory()["params"] == pdp.footprint(s, lengths, n, n // 2, param_bytes=2,
                                                               master_copy=True)["params"]


def test_bf16_compute_with_fp32_master_weights():
    run(4, body_bf16, env={"PARO_EMULATE": "nodes=2,ranks=2"})


def body_bad_input(rank: int, n: int) -> None:
    import paro_torch.dp as pdp

    def refused(exc, text, **kwargs):
        with pytest.raises(exc) as e:
            pdp.shard(model(), kwargs.pop("optimizer", torch.optim.AdamW), **kwargs)
        assert text in str(e.value), str(e.value)

    refused(ValueError, "strategy GNN is not valid: parameters are sharded over all ranks but optimizer states "
            "only replicated", strategy="GNN")
    refused(ValueError, "strategy 'NXG'", strategy="NXG")
    refused(ValueError, "grouping '2' gives groups of [1, 2] ranks; PaRO-DP needs groups of equal size",
            strategy="NIG", grouping="2")
    refused(ValueError, "optimizer LBFGS cannot run on a flat shard", strategy="NIG", optimizer=torch.optim.LBFGS)
    refused(ValueError, "AdamW({'betas': 3})", strategy="NIG", betas=3)
    # A model whose parameters differ on one rank: every rank refuses, naming it.
    net = model()
    if rank == 1:
        with torch.no_grad():
            net.head.bias[3] += 1
    with pytest.raises(ValueError, match="parameter 'head.bias' differs between rank 0 and rank 1"):
        pdp.shard(net, torch.optim.AdamW, strategy="NIG")
    # Tied parameters: refused, naming the units.
    tied = model()
    tied.head.weight = tied.tok.weight
    with pytest.raises(ValueError, match="shared by units 'tok' and 'head'"):
        pdp.shard(tied, torch.optim.AdamW, strategy="NIG")
    # A second backward after the synchronised one, before step(): refused at its forward.
    net, opt = sharded("NIG", rounded=False)
    x, y = batch(rank, n, 0, 0)
    loss_of(net, x, y).backward()
    with pytest.raises(RuntimeError, match="no_sync"):
        loss_of(net, x, y).backward()
    opt.step()
    loss_of(net, x, y).backward()  # usable after the step
    opt.step()


def test_bad_input_is_refused_before_any_collective():
    run(3, body_bad_input)


def test_the_advisor_prices_the_traffic_model():
    """advise()'s communication time is traffic() over the bandwidths (no latency), every strategy is in
    its list, and on slow links between groups the strategies that gather or scatter globally come last."""
    import paro_torch.dp as pdp

    lengths, n, m = [1000, 36037, 36037, 4999], 8, 4
    machine = pdp.Machine(intra_bytes_per_s=10e9, inter_bytes_per_s=0.1e9, forward_s=1e-5, backward_s=2e-5,
                          optimizer_s_per_element=1e-12)  # communication-bound
    advice = pdp.advise(lengths, n, m, machine, accumulation=2)
    assert sorted(a["strategy"] for a in advice) == sorted(s.name for s in pdp.valid_strategies())
    for a in advice:
        t = pdp.traffic(a["strategy"], lengths, n, m, accumulation=2)
        assert a["communication_s"] == pytest.approx(t["intra"] / 10e9 + t["inter"] / 0.1e9, rel=1e-12)
        assert a["state_bytes"] == sum(pdp.footprint(a["strategy"], lengths, n, m).values())
    assert [a["strategy"][0] for a in advice[-3:]] == ["G"] * 3, [a["strategy"] for a in advice]
    assert advice == sorted(advice, key=lambda a: a["step_s"])
    # A module is cut into the units shard() would make: the root's own pos, tok, two blocks, ln, head.
    net = model()
    lengths = pdp.unit_lengths_of(net)
    assert lengths == [SEQ * WIDTH, VOCAB * WIDTH] + [sum(p.numel() for p in b.parameters()) for b in net.blocks] + \
        [2 * WIDTH, (WIDTH + 1) * VOCAB]
    assert pdp.advise(net, n, m, machine) == pdp.advise(lengths, n, m, machine)
