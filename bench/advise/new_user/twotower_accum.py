"""A two-tower retrieval model: user and item towers over nn.EmbeddingBag(sparse=True) tables (mode
"sum" with per-sample weights, bags given by offsets), an in-batch softmax over their dot products,
Adagrad over every parameter (the tables' sparse gradients with the towers' dense ones), and
gradient accumulation written in the step: 2 micro-batches, each backward adding to the sparse
gradients. 200,000 x 64 tables, 1,024 pairs a micro-batch, 20 ids a bag."""
import torch
import torch.nn.functional as F
from torch import nn

ROWS, DIM, PAIRS, BAG, MICRO = 200_000, 64, 1024, 20, 2


class Tower(nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, dim))

    def forward(self, ids, offsets, weights):
        return F.normalize(self.mlp(self.bag(ids, offsets, per_sample_weights=weights)), dim=-1)


class TwoTower(nn.Module):
    def __init__(self, rows=ROWS, dim=DIM):
        super().__init__()
        self.user, self.item = Tower(rows, dim), Tower(rows, dim)

    def forward(self, u_ids, u_off, u_w, i_ids, i_off, i_w):
        return self.user(u_ids, u_off, u_w) @ self.item(i_ids, i_off, i_w).T / 0.05


def build_model(small=False):
    return TwoTower(2000, 16) if small else TwoTower()


def make_batch(small=False):
    pairs, rows = (16, 2000) if small else (PAIRS * MICRO, ROWS)
    batch = {}
    for side in ("u", "i"):
        batch[side + "_ids"] = torch.randint(0, rows, (pairs * BAG,))
        batch[side + "_w"] = torch.rand(pairs * BAG)
    return batch


def loss_fn(model, batch):
    n = batch["u_ids"].numel() // BAG
    off = torch.arange(0, n * BAG, BAG)
    logits = model(batch["u_ids"], off, batch["u_w"], batch["i_ids"], off, batch["i_w"])
    return F.cross_entropy(logits.float(), torch.arange(n))


def build_optimizer(model):
    return torch.optim.Adagrad(model.parameters(), lr=0.05)


def step(model, batch, run):
    parts = {k: v.chunk(MICRO) for k, v in batch.items()}
    for m in range(MICRO):
        with run.autocast():
            loss = loss_fn(model, {k: v[m] for k, v in parts.items()}) / MICRO
        run.backward(loss)
        del loss
    run.optimizer_step()
    run.zero_grad()
