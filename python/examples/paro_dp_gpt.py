"""A byte-level GPT trained with a PaRO-DP strategy (docs/paro-dp.md):
    torchrun --nproc-per-node 4 paro_dp_gpt.py --strategy NIG       # or --config ../../examples/ds_config.json"""
import argparse, contextlib, torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
import paro_torch.dp

class GPT(nn.Module):
    def __init__(self, width=128, layers=4, context=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, width), nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(layers))
        self.head = nn.Linear(width, 256)

    def forward(self, idx):
        x, mask = self.tok(idx) + self.pos[: idx.shape[1]], nn.Transformer.generate_square_subsequent_mask(idx.shape[1])
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(x)

ap = argparse.ArgumentParser()
ap.add_argument("--strategy", default="NIG"), ap.add_argument("--config")
ap.add_argument("--steps", type=int, default=50)
args = ap.parse_args()
dist.init_process_group("paro")
ds = paro_torch.dp.from_deepspeed_config(args.config) if args.config else {}
torch.manual_seed(0)  # every rank starts from the same weights (shard() checks)
model, opt = paro_torch.dp.shard(GPT(), torch.optim.AdamW, strategy=ds.get("strategy", args.strategy),
                                 lr=ds.get("lr", 1e-3))
text = torch.tensor(list(open("/usr/share/games/fortunes/computers", "rb").read()))
accumulation, micro_batch = ds.get("accumulation", 1), ds.get("micro_batch", 8)
for step in range(args.steps):
    g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
    for micro in range(accumulation):
        rows = torch.stack([text[s:s + 65] for s in torch.randint(0, len(text) - 65, (micro_batch,), generator=g)])
        with model.paro_dp.no_sync() if micro < accumulation - 1 else contextlib.nullcontext():
            loss = F.cross_entropy(model(rows[:, :-1]).flatten(0, 1), rows[:, 1:].flatten())
            loss.backward()
    opt.clip_grad_norm_(1.0), opt.step(), opt.zero_grad()
    if dist.get_rank() == 0 and step % 10 == 0:
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
paro_torch.dp.save("paro-dp-checkpoint", model, opt)  # loads under any strategy or rank count
dist.destroy_process_group()
