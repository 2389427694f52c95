"""A plain-PyTorch decoder whose blocks live in an nn.ModuleDict (named, not numbered), called in a
custom loop in a fixed order, with the output head tied to the embedding (head.weight is
embed.weight)."""
from torch import nn

# loss_fn and make_batch are this model file's (the capture reads them from it): decoder.py's
from decoder import HEADS, HIDDEN, VOCAB, Block, loss_fn, make_batch  # noqa: F401

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
