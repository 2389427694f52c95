"""A translation model on PyTorch's own nn.Transformer (the "Attention is all you need" base shape:
6 + 6 layers, d_model 512, 8 heads, FFN 2048, pre-norm, GELU), shared source/target embedding of
a 32,000 vocabulary, batch 64 sentence pairs of 256 source and 256 target tokens, causal target
mask, label smoothing 0.1. Its blocks are encoder.layers.N and decoder.layers.N, clones made with copy.deepcopy (which the capture
refused with `Mixing fake modes NYI` before 2026-12-05)."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, BATCH, SRC, TGT = 32000, 512, 64, 256, 256


class Translator(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=8, ffn=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, 1024, d))
        self.core = nn.Transformer(d, heads, 6, 6, ffn, dropout=0.1, activation="gelu", batch_first=True,
                                   norm_first=True)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, src, tgt):
        s = self.embed(src) + self.pos[:, :src.shape[1]]
        t = self.embed(tgt) + self.pos[:, :tgt.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        return self.head(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))


def build_model(small=False):
    return Translator(512, 32, 4, 64) if small else Translator()


def make_batch(small=False):
    n, s, t, v = (2, 12, 10, 512) if small else (BATCH, SRC, TGT, VOCAB)
    return {"src": torch.randint(0, v, (n, s)), "tgt": torch.randint(0, v, (n, t + 1))}


def loss_fn(model, batch):
    tgt = batch["tgt"]
    logits = model(batch["src"], tgt[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), tgt[:, 1:].flatten(), label_smoothing=0.1)
