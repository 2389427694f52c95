"""Transformer-XL-style segment recurrence (Dai et al.; the memory of the reference code's
mem_transformer.py): a decoder of 12 layers (d_model 768, 12 heads) reads the stream in segments
of 512 tokens; each layer attends over its own hidden states of the previous segment, kept as a
memory of 512 positions (detached, no gradient through it) beside the current ones, and the new
memory is the last 512 of them after the step. The memory lives in a plain attribute of the model
(a list of tensors, as the reference code passes `mems` from one step to the next), so the second
step's forward holds the first step's memories. Causal attention over memory + segment by
F.scaled_dot_product_attention with a boolean mask; bf16 autocast, AdamW, batch 8."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, SEG, MEM, VOCAB = 8, 512, 512, 32000


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.o = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mem, mask):
        b, t, d = x.shape
        h = self.n1(x)
        ctx = h if mem is None else torch.cat([mem, h], 1)
        q = self.q(h).view(b, t, self.heads, -1).transpose(1, 2)
        k, v = self.kv(ctx).view(b, ctx.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, -ctx.shape[1]:])
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class TransformerXL(nn.Module):
    def __init__(self, d=768, heads=12, layers=12, seg=SEG, mem=MEM):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.seg, self.mem_len = seg, mem
        self.mems = None                              # the previous segment's hidden states, per layer

    def forward(self, ids):
        t = ids.shape[1]
        m = 0 if self.mems is None else self.mems[0].shape[1]
        mask = torch.ones(t, m + t, dtype=torch.bool, device=ids.device).tril(m)
        x = self.embed(ids)
        hiddens = []
        for i, layer in enumerate(self.layers):
            hiddens.append(x)
            x = layer(x, None if self.mems is None else self.mems[i], mask)
        with torch.no_grad():
            self.mems = [(h if self.mems is None else torch.cat([old, h], 1))[:, -self.mem_len:].detach()
                         for old, h in zip(self.mems or hiddens, hiddens)]
        return self.head(self.norm(x))


def build_model(small=False):
    return TransformerXL(64, 4, 12, 32, 32) if small else TransformerXL()


def make_batch(small=False):
    b, t = (2, 32) if small else (BATCH, SEG)
    ids = torch.randint(0, VOCAB, (b, t + 1))
    return ids


def loss_fn(model, ids):
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
