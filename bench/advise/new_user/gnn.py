"""A graph neural network written by hand (no PyG): 6 GraphSAGE-style layers with mean
aggregation by index_add_ over an edge list, residual connections and LayerNorm, full-batch node
classification on a graph of 200,000 nodes and 4,000,000 edges (hidden 256, 47 classes, as
ogbn-products); the loss on the training nodes only (a boolean mask). Written as
`cross_entropy(logits[mask], y[mask])` the capture stops (`op aten.nonzero.default cannot run on
fake tensors`: the number of masked rows depends on the mask's values); the same loss with the
labels outside the mask set to ignore_index (-100) captures."""
import torch
import torch.nn.functional as F
from torch import nn

NODES, EDGES, FEATURES, HIDDEN, CLASSES = 200_000, 4_000_000, 100, 256, 47


class SageLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.self_lin, self.neigh_lin = nn.Linear(d, d), nn.Linear(d, d, bias=False)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, src, dst, inv_deg):
        msg = x.index_select(0, src)
        agg = torch.zeros_like(x).index_add_(0, dst, msg) * inv_deg
        return x + F.relu(self.norm(self.self_lin(x) + self.neigh_lin(agg)))


class Sage(nn.Module):
    def __init__(self, features=FEATURES, d=HIDDEN, classes=CLASSES, layers=6):
        super().__init__()
        self.inp = nn.Linear(features, d)
        self.layers = nn.ModuleList(SageLayer(d) for _ in range(layers))
        self.out = nn.Linear(d, classes)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        deg = torch.zeros(x.shape[0], device=x.device).index_add_(0, dst, torch.ones_like(dst, dtype=torch.float))
        inv_deg = (1.0 / deg.clamp(min=1)).unsqueeze(1)
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h, src, dst, inv_deg)
        return self.out(h)


def build_model(small=False):
    return Sage(16, 32, 5) if small else Sage()


def make_batch(small=False):
    n, e, f, c = (64, 512, 16, 5) if small else (NODES, EDGES, FEATURES, CLASSES)
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(n, f, generator=g), "edge_index": torch.randint(0, n, (2, e), generator=g),
            "y": torch.randint(0, c, (n,), generator=g), "train_mask": torch.rand(n, generator=g) < 0.5}


def loss_fn(model, batch):
    logits = model(batch["x"], batch["edge_index"])
    labels = batch["y"].masked_fill(~batch["train_mask"], -100)  # = cross_entropy(logits[mask], y[mask])
    return F.cross_entropy(logits, labels)
