"""A plain-PyTorch decoder whose blocks live in an nn.ModuleDict (named, not numbered), called in a
custom loop in a fixed order, with the output head tied to the embedding (head.weight is
embed.weight)."""
import torch
import torch.nn.functional as F
from torch import nn

from decoder import BATCH, HEADS, HIDDEN, SEQ, VOCAB, Block

NAMES = ["early_a", "early_b", "mid_a", "mid_b", "late_a", "late_b"]


class DictDecoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=HIDDEN, heads=HEADS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleDict({n: Block(d, heads) for n in NAMES})
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids):
        x = self.embed(ids)
        for name in NAMES:
            x = self.blocks[name](x)
        return self.head(self.norm(x))


def build_model(small=False):
    return DictDecoder(512, 64, 4) if small else DictDecoder()


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())
