"""A hypernetwork (Ha et al. 2016) for implicit neural representations: a task encoder reads 256
context points of each of 16 signals and emits every weight of a 5-layer SIREN-style MLP for that
signal; the target network runs through `torch.func.functional_call` with the generated weights,
batched over the signals by `torch.func.vmap`, on 4,096 query coordinates each. Only the
hypernetwork has parameters. Batch 16 signals, fp32, AdamW."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

SIGNALS, CONTEXT, QUERIES = 16, 256, 4096


class Hyper(nn.Module):
    def __init__(self, width=256, embed=512):
        super().__init__()
        self.target = nn.Sequential(nn.Linear(2, width), nn.Linear(width, width), nn.Linear(width, width),
                                    nn.Linear(width, width), nn.Linear(width, 1))
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.shapes = {n: p.shape for n, p in self.target.named_parameters()}
        total = sum(math.prod(s) for s in self.shapes.values())
        self.encoder = nn.Sequential(nn.Linear(3, embed), nn.ReLU(), nn.Linear(embed, embed))
        self.head = nn.Linear(embed, total)

    def weights(self, code):
        out, at = {}, 0
        for n, s in self.shapes.items():
            k = math.prod(s)
            out[n] = code[at:at + k].view(s)
            at += k
        return out

    def run(self, code, coords):
        params = self.weights(code)
        h = coords
        for i in range(5):
            h = functional_call(self.target[i], {"weight": params[f"{i}.weight"], "bias": params[f"{i}.bias"]}, (h,))
            if i < 4:
                h = torch.sin(30.0 * h if i == 0 else h)
        return h

    def forward(self, context, queries, values):
        code = self.head(self.encoder(context).mean(1))          # signals x total
        pred = vmap(self.run)(code, queries)
        return F.mse_loss(pred.squeeze(-1), values)


def build_model(small=False):
    return Hyper(8, 16) if small else Hyper()


def make_batch(small=False):
    n, c, q = (2, 8, 16) if small else (SIGNALS, CONTEXT, QUERIES)
    return torch.randn(n, c, 3), torch.rand(n, q, 2) * 2 - 1, torch.randn(n, q)


def loss_fn(model, batch):
    return model(*batch)


def build_optimizer(model):
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
