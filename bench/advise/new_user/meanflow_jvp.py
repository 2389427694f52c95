"""MeanFlow (Geng et al., 2025), one-step generative training with forward-mode differentiation, as
its PyTorch reproductions write the loss: a DiT-style transformer u(z, r, t) of the average
velocity over [r, t] (patch 2 on 32 x 32 x 4 latents, 12 blocks of 768 with adaLN conditioning on
both times; attention written out, as the fused SDPA kernels have no forward-mode derivative), the target u_tgt = v - (t - r) * du/dt obtained with torch.func.jvp of the network
along the tangent (v, 0, 1) (forward-mode AD: the primal and its tangent in one pass), the target
detached, an MSE loss back-propagated through the primal; AdamW (lr 1e-4), batch 64, fp32 (the
jvp runs in fp32, as the reference code keeps it)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import jvp

BATCH, RES, CH, PATCH = 64, 32, 4, 2


def time_embed(t, dim):
    half = dim // 2
    freqs = torch.exp(-torch.arange(half, device=t.device, dtype=torch.float32) * (9.2103 / half))
    a = t[:, None] * 1000 * freqs[None]
    return torch.cat([a.cos(), a.sin()], dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d, elementwise_affine=False)
        self.ada = nn.Linear(d, 6 * d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, c):
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(c))[:, None].chunk(6, dim=-1)
        b, n, d = x.shape
        h = self.ln1(x) * (1 + s1) + b1
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        # written out: PyTorch's fused attention kernels have no forward-mode derivative
        y = ((q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5).softmax(-1) @ v
        x = x + g1 * self.proj(y.transpose(1, 2).reshape(b, n, d))
        h = self.ln2(x) * (1 + s2) + b2
        return x + g2 * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class MeanFlowDiT(nn.Module):
    def __init__(self, d=768, heads=12, layers=12, res=RES):
        super().__init__()
        self.d = d
        self.patch = nn.Conv2d(CH, d, PATCH, PATCH)
        self.pos = nn.Parameter(torch.zeros(1, (res // PATCH) ** 2, d))
        self.t_mlp = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d, elementwise_affine=False)
        self.out = nn.Linear(d, PATCH * PATCH * CH)
        self.res = res

    def forward(self, z, r, t):
        x = self.patch(z).flatten(2).transpose(1, 2) + self.pos
        c = self.t_mlp(torch.cat([time_embed(t, self.d), time_embed(t - r, self.d)], dim=-1))
        for blk in self.blocks:
            x = blk(x, c)
        x = self.out(self.norm(x))
        g = self.res // PATCH
        return x.view(-1, g, g, PATCH, PATCH, CH).permute(0, 5, 1, 3, 2, 4).reshape(-1, CH, self.res, self.res)


def build_model(small=False):
    return MeanFlowDiT(64, 4, 2, 8) if small else MeanFlowDiT()


def make_batch(small=False):
    n, res = (4, 8) if small else (BATCH, RES)
    return torch.randn(n, CH, res, res)


def loss_fn(model, x):
    n = x.shape[0]
    t = torch.rand(n, device=x.device)
    r = torch.rand(n, device=x.device) * t
    e = torch.randn_like(x)
    z = (1 - t[:, None, None, None]) * x + t[:, None, None, None] * e
    v = e - x
    u, dudt = jvp(model, (z, r, t), (v, torch.zeros_like(r), torch.ones_like(t)))
    u_tgt = (v - (t - r)[:, None, None, None] * dudt).detach()
    return F.mse_loss(u, u_tgt)
