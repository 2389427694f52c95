"""A DLRM-style recommender (as facebookresearch/dlrm and TorchRec's examples write it without
TorchRec): 8 sparse features, each an nn.EmbeddingBag(mode="sum") of 1,000,000 rows x 128 over a
multi-hot bag of 20 ids a sample given as flat ids and offsets, a bottom MLP over 13 dense
features, the pairwise dot-product interaction (bmm), a top MLP and BCE-with-logits; batch 8192,
dense AdamW over every parameter, fp32 (recommenders train their tables in fp32)."""
import torch
import torch.nn.functional as F
from torch import nn

TABLES, ROWS, DIM, BAG, DENSE, BATCH = 8, 1_000_000, 128, 20, 13, 8192


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    def __init__(self, tables=TABLES, rows=ROWS, dim=DIM):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.bottom = mlp([DENSE, 512, 256, dim])
        n = tables + 1
        self.top = mlp([dim + n * (n - 1) // 2, 1024, 1024, 512, 256, 1])

    def forward(self, dense, ids, offsets):
        x = self.bottom(dense)
        feats = [x] + [emb(ids[t], offsets[t]) for t, emb in enumerate(self.embeddings)]
        t = torch.stack(feats, 1)                          # batch x (tables + 1) x dim
        z = torch.bmm(t, t.transpose(1, 2))
        li, lj = torch.tril_indices(t.shape[1], t.shape[1], offset=-1, device=t.device)
        return self.top(torch.cat([x, z[:, li, lj]], 1)).squeeze(1)


def build_model(small=False):
    return DLRM(2, 100, 16) if small else DLRM()


def make_batch(small=False):
    b, tables, rows, dim = (4, 2, 100, 16) if small else (BATCH, TABLES, ROWS, DIM)
    return {"dense": torch.randn(b, DENSE),
            "ids": torch.randint(0, rows, (tables, b * BAG)),
            "offsets": torch.arange(0, b * BAG, BAG).expand(tables, b).contiguous(),
            "click": torch.randint(0, 2, (b,)).float()}


def loss_fn(model, batch):
    logits = model(batch["dense"], batch["ids"], batch["offsets"])
    return F.binary_cross_entropy_with_logits(logits, batch["click"])
