"""A hand-written mixture-of-experts decoder: causal attention through
F.scaled_dot_product_attention, then a top-2 router over 8 experts with a fixed capacity per expert
(Switch/GShard style: a token's slot in its expert is the cumsum of the one-hot routing; tokens past
the capacity go to a dump row). Tokens are dispatched into an [experts * capacity + 1, d] buffer with
index_add_, the experts run as one batched matmul over stacked weights, and the outputs are
gathered back with index_select and combined with index_add_ weighted by the gates (cast back to the
tokens' dtype: under autocast the experts' outputs are bf16, and index_add_ takes one dtype); a
load-balancing auxiliary loss is added. AdamW (default). 4 blocks, d 1024, batch 8 x 512."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, EXPERTS, TOPK, CAP_FACTOR = 32000, 1024, 16, 8, 2, 1.25
BATCH, SEQ = 8, 512


class MoE(nn.Module):
    def __init__(self, d, experts, hidden):
        super().__init__()
        self.experts = experts
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)

    def forward(self, x):
        b, t, d = x.shape
        tokens = x.reshape(-1, d)
        n = tokens.shape[0]
        cap = int(CAP_FACTOR * n * TOPK / self.experts)
        probs = self.router(tokens).float().softmax(-1)
        gate, expert = probs.topk(TOPK, dim=-1)                      # [n, k]
        gate = gate / gate.sum(-1, keepdim=True)
        onehot = F.one_hot(expert.t().reshape(-1), self.experts)       # [k*n, E], choice 1 of all tokens first
        pos = (onehot.cumsum(0) - 1).gather(1, expert.t().reshape(-1, 1)).squeeze(1)
        keep = pos < cap
        slot = torch.where(keep, expert.t().reshape(-1) * cap + pos, torch.full_like(pos, self.experts * cap))
        src = torch.arange(n, device=x.device).repeat(TOPK)
        buf = tokens.new_zeros(self.experts * cap + 1, d).index_add_(0, slot, tokens[src])
        h = buf[:-1].view(self.experts, cap, d)
        h = torch.bmm(F.gelu(torch.bmm(h, self.w1.to(h.dtype))), self.w2.to(h.dtype))
        out_rows = torch.cat([h.reshape(-1, d), h.new_zeros(1, d)]).index_select(0, slot)
        w = (gate.t().reshape(-1) * keep).to(out_rows.dtype)
        y = torch.zeros_like(tokens).index_add_(0, src, (out_rows * w[:, None]).to(tokens.dtype))
        frac = onehot.float().mean(0)
        self.aux = self.experts * (frac * probs.mean(0)).sum()
        return y.view(b, t, d)


class Block(nn.Module):
    def __init__(self, d, heads, experts):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.moe = MoE(d, experts, 2 * d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.moe(self.ln2(x))


class MoEDecoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, layers=4, experts=EXPERTS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, experts) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def build_model(small=False):
    return MoEDecoder(512, 64, 4, 4, 4) if small else MoEDecoder()


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 16) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    aux = sum(b.moe.aux for b in model.blocks)
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten()) + 0.01 * aux
