"""A text classifier on nn.MultiheadAttention called as most code calls it: attn(h, h, h,
key_padding_mask=pad), need_weights left at its default (True), so PyTorch takes the slow path
and returns the attention weights averaged over heads (the model keeps the last layer's for
inspection); post-norm blocks, mean pooling over the unpadded tokens, label smoothing 0.1.
8 layers, d 768, 12 heads, batch 32 x 512 with padding."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, LAYERS, CLASSES, BATCH, SEQ = 30000, 768, 12, 8, 20, 32, 512


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, h, pad):
        a, w = self.attn(h, h, h, key_padding_mask=pad)
        h = self.ln1(h + self.drop(a))
        return self.ln2(h + self.drop(self.ff(h))), w


class Classifier(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, layers=LAYERS, classes=CLASSES, seq=SEQ):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d, padding_idx=0), nn.Embedding(seq, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, classes)

    def forward(self, ids, pad):
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for layer in self.layers:
            h, self.last_weights = layer(h, pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))


def build_model(small=False):
    return Classifier(512, 64, 4, LAYERS, 5, 16) if small else Classifier()


def make_batch(small=False):
    n, t, vocab, classes = (2, 16, 512, 5) if small else (BATCH, SEQ, VOCAB, CLASSES)
    ids = torch.randint(1, vocab, (n, t))
    pad = torch.arange(t)[None, :] >= torch.tensor([t, t * 3 // 4] * (n // 2))[:, None]
    return {"ids": ids.masked_fill(pad, 0), "pad": pad, "labels": torch.randint(0, classes, (n,))}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["ids"], batch["pad"]), batch["labels"], label_smoothing=0.1)
