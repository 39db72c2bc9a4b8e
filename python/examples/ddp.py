"""The DDP example of docs/pytorch.md: torchrun --nproc-per-node 4 python/examples/ddp.py"""

import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import paro_torch

dist.init_process_group("paro", pg_options=paro_torch.Options(algorithm="automatic"))
torch.manual_seed(0)                                 # the same initial weights everywhere (DDP checks them)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(1024, 64)
labels = (data[:, 0] > 0).long()
rank, world = dist.get_rank(), dist.get_world_size()
for step in range(100):
    start = (step * world + rank) * 8 % 1024         # each rank its own 8 samples
    loss = torch.nn.functional.cross_entropy(model(data[start:start + 8]), labels[start:start + 8])
    optimizer.zero_grad()
    loss.backward()                                  # DDP's buckets all-reduced by paro, overlapped
    optimizer.step()
if rank == 0:
    print(step, loss.item(), paro_torch.algorithm_for("all_reduce", 25 << 20))
dist.destroy_process_group()
