"""A decoder trained on packed documents with FlexAttention (torch.nn.attention.flex_attention, as
torchtitan and the attention-gym examples write document masking): each row of 8,192 tokens holds
several documents; a BlockMask made once per batch by create_block_mask from a mask_mod that
allows causal attention within a document only, a score_mod adding an ALiBi bias per head, and
flex_attention called in eager mode (no torch.compile). 8 blocks of d_model 1024, 16 heads,
SwiGLU MLP, RMSNorm, vocabulary 32,000, batch 2, bf16 autocast, AdamW."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

BATCH, SEQ, VOCAB = 2, 8192, 32000


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)
        self.register_buffer("slopes", 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads), persistent=False)

    def forward(self, x, block_mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score + slopes[h] * (kv_idx - q_idx)

        a = flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        g, u = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class Decoder(nn.Module):
    def __init__(self, d=1024, heads=16, layers=8):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, ids, doc):
        def document_causal(b, h, q_idx, kv_idx):
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

        mask = create_block_mask(document_causal, ids.shape[0], None, ids.shape[1], ids.shape[1], device=ids.device)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def build_model(small=False):
    return Decoder(64, 4, 8) if small else Decoder()


def make_batch(small=False):
    b, t = (2, 256) if small else (BATCH, SEQ)
    ids = torch.randint(0, VOCAB, (b, t))
    doc = (torch.arange(t) // (t // 4)).expand(b, t).contiguous()   # 4 documents a row
    return ids, doc


def loss_fn(model, batch):
    ids, doc = batch
    logits = model(ids[:, :-1], doc[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
