"""Nested activation checkpointing already in the user's code, as hierarchical checkpointing is
written for deep networks (and as torch.utils.checkpoint documents nesting for use_reentrant=False):
a decoder of 4 stages of 4 blocks (d_model 1024, 16 heads, batch 4 x 2048 tokens), each stage
checkpointed as a whole and, inside it, each block checkpointed again, so the backward recomputes
a stage keeping only its blocks' inputs and then each block in turn. bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

BATCH, SEQ, VOCAB = 4, 2048, 32000


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class Stage(nn.Module):
    def __init__(self, d, heads, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


class Decoder(nn.Module):
    def __init__(self, d=1024, heads=16, stages=4, blocks=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.stages = nn.ModuleList(Stage(d, heads, blocks) for _ in range(stages))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for stage in self.stages:
            x = checkpoint(stage, x, use_reentrant=False)
        return self.head(self.norm(x))


def build_model(small=False):
    return Decoder(64, 4, 4, 4) if small else Decoder()


def make_batch(small=False):
    return torch.randint(0, VOCAB, (2, 33) if small else (BATCH, SEQ + 1))


def loss_fn(model, ids):
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
