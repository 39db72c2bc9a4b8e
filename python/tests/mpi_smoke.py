"""The paro backend under mpirun: the transport is MPI (PARO_TORCH_TRANSPORT=auto sees Open MPI's
variables); the collectives, a subgroup and a DDP step give exact results.

    mpirun -np 3 python tests/mpi_smoke.py
"""

import os
import tempfile

import torch
import torch.distributed as dist

import paro_torch

rank, n = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
# torch still wants a store for its own bookkeeping; a file next to the job is enough here.
store = os.path.join(tempfile.gettempdir(), f"paro-mpi-smoke-{os.environ.get('OMPI_MCA_orte_hnp_uri', os.getppid())}"
                     .replace("/", "_").replace(";", "_")[:200])
dist.init_process_group("paro", init_method=f"file://{store}", rank=rank, world_size=n)
assert paro_torch.topology()["transport"] == "mpi", paro_torch.topology()["transport"]

x = torch.arange(10, dtype=torch.float64) + rank
dist.all_reduce(x)
assert torch.equal(x, torch.arange(10, dtype=torch.float64) * n + n * (n - 1) / 2), x

out = torch.empty(3 * n, dtype=torch.int32)
dist.all_gather_into_tensor(out, torch.full((3,), rank, dtype=torch.int32))
assert torch.equal(out, torch.arange(n, dtype=torch.int32).repeat_interleave(3)), out

part = torch.empty(4)
dist.reduce_scatter_tensor(part, torch.ones(4 * n))
assert torch.equal(part, torch.full((4,), float(n))), part

b = torch.full((5,), float(rank))
dist.broadcast(b, src=n - 1)
assert torch.equal(b, torch.full((5,), float(n - 1))), b

sub = dist.new_group([0, n - 1], backend="paro")
if rank in (0, n - 1):
    s = torch.ones(3)
    dist.all_reduce(s, group=sub)
    assert torch.equal(s, torch.full((3,), 2.0)), s
    assert paro_torch.topology(sub)["transport"] == "mpi"

torch.manual_seed(0)
net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
net(torch.full((4, 8), float(rank))).sum().backward()
grads = [p.grad.clone() for p in net.parameters()]
for g in grads:  # every rank holds the same averaged gradient
    copies = [torch.empty_like(g) for _ in range(n)]
    dist.all_gather(copies, g)
    assert all(torch.equal(c, g) for c in copies)

dist.barrier()
dist.destroy_process_group()
if rank == 0:
    os.remove(store) if os.path.exists(store) else None
    print(f"mpi_smoke: {n} ranks on the mpi transport: collectives, a subgroup and DDP exact")
