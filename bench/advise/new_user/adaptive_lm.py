"""A word-level language model on WikiText-103's vocabulary (267,735 words) with PyTorch's adaptive
softmax (nn.AdaptiveLogSoftmaxWithLoss, Grave et al. 2017; cutoffs 20,000 / 40,000 / 200,000, div
value 4), as fairseq's and PyTorch's word-language-model examples train it: the head keeps the
frequent words, each tail cluster sees only the targets that fall in it (a selection by the
labels' values: nonzero, index_select, index_copy). A 12-layer pre-norm Transformer encoder (d 1024,
16 heads, FFN 4096, causal mask); batch 8 x 512, bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, CUTOFFS, D, LAYERS, HEADS, SEQ, BATCH = 267735, [20000, 40000, 200000], 1024, 12, 16, 512, 8


class AdaptiveLM(nn.Module):
    def __init__(self, vocab=VOCAB, cutoffs=CUTOFFS, d=D, layers=LAYERS, heads=HEADS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(d, vocab, cutoffs, div_value=4.0)

    def forward(self, ids, targets):
        s = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(s, device=ids.device)
        h = self.norm(self.encoder(self.embed(ids), mask=mask, is_causal=True))
        return self.softmax(h.flatten(0, 1).float(), targets.flatten()).loss


def build_model(small=False):
    return AdaptiveLM(1000, [100, 300, 600], 64, LAYERS, 4) if small else AdaptiveLM()


def make_batch(small=False):
    # words drawn by frequency rank as text has them (Zipf): most fall in the head, some in each tail
    vocab = 1000 if small else VOCAB
    n = (2, 33) if small else (BATCH, SEQ + 1)
    ids = (torch.rand(n) ** 4 * vocab).long().clamp_(max=vocab - 1)
    return {"ids": ids}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=2.5e-4, weight_decay=0.01)


def loss_fn(model, batch):
    ids = batch["ids"]
    return model(ids[:, :-1], ids[:, 1:])
