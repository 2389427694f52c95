"""A decoder whose model code already checkpoints every block selectively, as torchtitan's
op-level selective activation checkpointing does: `checkpoint(block, x, use_reentrant=False,
context_fn=partial(create_selective_checkpoint_contexts, policy))`, the policy saving the matmuls'
and attention's outputs (MUST_SAVE) and recomputing the rest (PREFER_RECOMPUTE); Llama shape,
16 layers, hidden 2048, 16 heads, MLP 5632, vocab 32000, batch 4 x 2048, bf16 autocast."""
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

VOCAB, HIDDEN, HEADS, MLP, LAYERS, BATCH, SEQ = 32000, 2048, 16, 5632, 16, 4, 2048
SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default}


def policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = (nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False),
                                         nn.Linear(ff, d, bias=False))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, layers=LAYERS, d=HIDDEN, heads=HEADS, ff=MLP, vocab=VOCAB):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts, policy))
        return self.head(self.norm(x))


def build_model(small=False):
    return Decoder(2, 64, 4, 128, 100) if small else Decoder()


def make_batch(small=False):
    b, s, v = (2, 16, 100) if small else (BATCH, SEQ, VOCAB)
    ids = torch.randint(0, v, (b, s))
    return {"ids": ids, "labels": ids}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten())
