"""A decoder-only transformer with manifold-constrained hyper-connections (mHC), in plain PyTorch.

The residual stream is widened to n streams (B, T, n, C). Around each sublayer (attention, MLP),
three maps computed from the streams mix them (Xie et al., "mHC: Manifold-Constrained
Hyper-Connections", 2025, after Zhu et al.'s hyper-connections):
  H_pre  (1 x n, sigmoid)          reads the sublayer's input from the n streams,
  H_post (1 x n, 2 sigmoid)        writes the sublayer's output back to the n streams,
  H_res  (n x n, doubly stochastic) mixes the streams: exp of the logits, then Sinkhorn-Knopp
                                   iterations (alternate row and column normalisation).
  x <- H_res x + H_post^T F(H_pre x)
The maps are dynamic (a linear projection of the RMS-normed flattened streams) plus static biases,
each scaled by a learned gate. n = 1 is the plain pre-norm residual transformer (no maps).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class MhcConfig:
    layers: int = 64
    hidden: int = 6144
    heads: int = 48
    kv_heads: int = 8
    ffn: int = 16384
    vocab: int = 129280
    max_seq: int = 4096
    n: int = 4  # residual streams; 1 = plain transformer
    sinkhorn_iters: int = 20
    rope_theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def sinkhorn(logits: torch.Tensor, iters: int) -> torch.Tensor:
    """A doubly stochastic matrix (last two dims) from unconstrained logits: exp, then `iters`
    alternating row and column normalisations (Sinkhorn-Knopp)."""
    m = torch.exp(logits - logits.amax(dim=(-2, -1), keepdim=True))
    for _ in range(iters):
        m = m / m.sum(dim=-1, keepdim=True)
        m = m / m.sum(dim=-2, keepdim=True)
    return m


class HcMaps(nn.Module):
    """The three maps of a hyper-connection from its n streams: RMSNorm of the flattened streams,
    a linear projection, sigmoids for H_pre and H_post, Sinkhorn-Knopp for H_res. A module of its
    own so that it can be recomputed in the backward alone (mhc_torch's "mhc" checkpoint policy
    checkpoints every module marked MHC_RECOMPUTE); the sublayer and the stream mixing stay."""

    MHC_RECOMPUTE = True

    def __init__(self, n: int, hidden: int, iters: int):
        super().__init__()
        self.n, self.iters = n, iters
        self.norm = RMSNorm(n * hidden)
        self.proj = nn.Linear(n * hidden, n * n + 2 * n, bias=False)
        self.bias = nn.Parameter(torch.zeros(n * n + 2 * n))
        self.gate = nn.Parameter(torch.full((3,), 0.01))

    def forward(self, x):
        """x: (B, T, n, C) -> pre (B, T, n), post (B, T, n), res (B, T, n, n)."""
        n = self.n
        h = self.proj(self.norm(x.flatten(-2))).float()
        b = self.bias.float()
        pre = torch.sigmoid(self.gate[0] * h[..., :n] + b[:n])
        post = 2 * torch.sigmoid(self.gate[1] * h[..., n:2 * n] + b[n:2 * n])
        res = sinkhorn((self.gate[2] * h[..., 2 * n:] + b[2 * n:]).unflatten(-1, (n, n)), self.iters)
        return pre, post, res


class HyperConnection(nn.Module):
    def __init__(self, n: int, hidden: int, iters: int):
        super().__init__()
        self.maps = HcMaps(n, hidden, iters)

    def forward(self, x, sublayer):
        pre, post, res = self.maps(x)
        u = torch.einsum("btn,btnc->btc", pre.to(x.dtype), x)
        y = sublayer(u)
        return torch.einsum("btnm,btmc->btnc", res.to(x.dtype), x) + post.to(y.dtype).unsqueeze(-1) * y.unsqueeze(-2)


def _rope(q, cos, sin):
    q1, q2 = q.chunk(2, dim=-1)
    return torch.cat((q1 * cos - q2 * sin, q1 * sin + q2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: MhcConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.hidden // c.heads
        self.norm = RMSNorm(c.hidden)
        self.q = nn.Linear(c.hidden, c.heads * self.head_dim, bias=False)
        self.kv = nn.Linear(c.hidden, 2 * c.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(c.heads * self.head_dim, c.hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.heads != self.kv_heads)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, c: MhcConfig):
        super().__init__()
        self.norm = RMSNorm(c.hidden)
        self.gate_up = nn.Linear(c.hidden, 2 * c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.hidden, bias=False)

    def forward(self, x):
        g, u = self.gate_up(self.norm(x)).chunk(2, dim=-1)
        return self.down(F.silu(g) * u)


class Block(nn.Module):
    def __init__(self, c: MhcConfig):
        super().__init__()
        self.attn, self.mlp = Attention(c), Mlp(c)
        if c.n > 1:
            self.hc_attn = HyperConnection(c.n, c.hidden, c.sinkhorn_iters)
            self.hc_mlp = HyperConnection(c.n, c.hidden, c.sinkhorn_iters)

    def forward(self, x, cos, sin):
        if x.dim() == 3:  # n = 1: plain residual
            x = x + self.attn(x, cos, sin)
            return x + self.mlp(x)
        x = self.hc_attn(x, lambda u: self.attn(u, cos, sin))
        return self.hc_mlp(x, self.mlp)


class MhcTransformer(nn.Module):
    def __init__(self, c: MhcConfig):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden)
        self.head = nn.Linear(c.hidden, c.vocab, bias=False)
        hd = c.hidden // c.heads
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, input_ids, labels):
        b, t = input_ids.shape
        ang = torch.outer(torch.arange(t, device=input_ids.device, dtype=torch.float32), self.inv_freq)
        cos, sin = ang.cos(), ang.sin()
        x = self.embed(input_ids)
        if self.c.n > 1:
            x = x.unsqueeze(-2).expand(b, t, self.c.n, self.c.hidden).contiguous()
        for layer in self.layers:
            x = layer(x, cos, sin)
        if self.c.n > 1:
            x = x.sum(-2)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())

