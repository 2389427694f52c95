#!/usr/bin/env python3
"""A small GPT-like model trained for a few steps on the GPU, the program that gpu-check
records with `mhc record`. Each step and each layer is an NVTX range ("step N", "layer N"),
the markers the recorder turns into steps. Prints one JSON line with the step times.

    python3 record_train.py [STEPS]   (default 25)
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 25
torch.manual_seed(0)
dev = "cuda"
V, D, H, L, T, B = 8192, 512, 8, 4, 256, 16


class Block(nn.Module):
    def __init__(self, i):
        super().__init__()
        self.i = i
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x, mask):
        torch.cuda.nvtx.range_push(f"layer {self.i}")
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        torch.cuda.nvtx.range_pop()
        return x


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.zeros(T, D))
        self.blocks = nn.ModuleList(Block(i) for i in range(L))
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        mask = torch.triu(torch.full((T, T), float("-inf"), device=idx.device), 1)
        x = self.emb(idx) + self.pos
        for b in self.blocks:
            x = b(x, mask)
        return self.head(x)


model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = torch.randint(0, V, (B, T + 1), device=dev)
times = []
for s in range(steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda.nvtx.range_push(f"step {s}")
    logits = model(data[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), data[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
print(json.dumps({"step_s": times, "loss": float(loss),
                  "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                  "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)
