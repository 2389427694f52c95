"""A plain residual MLP (a tabular / recommendation-style tower: 12 blocks of LayerNorm, Linear
4096 -> 16384, GELU, Linear back, batch 16,384 rows of 512 features) whose blocks the user
compiled one by one (`torch.compile(block)`: each block an OptimizedModule, the loop and the
loss eager). A capture records the eager step: run it with TORCHDYNAMO_DISABLE=1
(docs/torch.md, "Not captured")."""
import torch
import torch.nn.functional as F
from torch import nn

ROWS, FEATURES, HIDDEN, CLASSES = 16384, 512, 4096, 1000


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Tower(nn.Module):
    def __init__(self, features=FEATURES, d=HIDDEN, classes=CLASSES, layers=12):
        super().__init__()
        self.inp = nn.Linear(features, d)
        self.blocks = nn.ModuleList(torch.compile(Block(d)) for _ in range(layers))
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def build_model(small=False):
    return Tower(16, 32, 5) if small else Tower()


def make_batch(small=False):
    n, f, c = (8, 16, 5) if small else (ROWS, FEATURES, CLASSES)
    return {"x": torch.randn(n, f), "y": torch.randint(0, c, (n,))}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["x"]), batch["y"])
