"""A DLRM-style recommender: 8 embedding tables of 1,000,000 x 128 with sparse=True (their gradients
are sparse COO tensors), a bottom MLP over 13 dense features, pairwise dot-product interactions and
a top MLP, binary cross-entropy. Two optimizers as the DLRM recipe trains it: SparseAdam over the
tables and Adam over the dense layers, built once in the step (run.state) and stepped by the
user's own loop. Batch 4096."""
import torch
import torch.nn.functional as F
from torch import nn

TABLES, ROWS, DIM, DENSE, BATCH = 8, 1_000_000, 128, 13, 4096


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    def __init__(self, rows=ROWS, dim=DIM, tables=TABLES):
        super().__init__()
        self.emb = nn.ModuleList(nn.Embedding(rows, dim, sparse=True) for _ in range(tables))
        self.bottom = mlp([DENSE, 512, 256, dim])
        n = tables + 1
        self.top = mlp([dim + n * (n - 1) // 2, 1024, 1024, 512, 256, 1])

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], dim=1)
        inter = torch.bmm(feats, feats.transpose(1, 2))
        i, j = torch.triu_indices(feats.shape[1], feats.shape[1], offset=1, device=x.device)
        return self.top(torch.cat([x, inter[:, i, j]], dim=1)).squeeze(1)


def build_model(small=False):
    return DLRM(1000, 16) if small else DLRM()


def make_batch(small=False):
    n, rows = (8, 1000) if small else (BATCH, ROWS)
    return {"dense": torch.randn(n, DENSE), "sparse": torch.randint(0, rows, (n, TABLES)),
            "click": torch.randint(0, 2, (n,)).float()}


def loss_fn(model, batch):
    return F.binary_cross_entropy_with_logits(model(batch["dense"], batch["sparse"]).float(), batch["click"])


def step(model, batch, run):
    if "opts" not in run.state:
        sparse = [p for n, p in model.named_parameters() if n.startswith("emb.")]
        dense = [p for n, p in model.named_parameters() if not n.startswith("emb.")]
        run.state["opts"] = [torch.optim.SparseAdam(sparse, lr=1e-3), torch.optim.Adam(dense, lr=1e-3)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model, batch)
    loss.backward()
    for opt in run.state["opts"]:
        opt.step()
        opt.zero_grad(set_to_none=True)
