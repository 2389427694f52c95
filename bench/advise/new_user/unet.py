"""A small diffusion UNet (DDPM style): timestep embedding, ResBlocks with GroupNorm and SiLU,
self-attention at the 16x16 level, skip connections kept in a list through the down path; the
noise-prediction MSE loss; AdamW (default)."""
import math
import torch
import torch.nn.functional as F
from torch import nn

BATCH, RES = 16, 64


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32 if cin >= 32 else 1, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(F.silu(temb))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm, self.qkv, self.out = nn.GroupNorm(32, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, 4, c // 4, hh * ww).permute(1, 0, 2, 4, 3)
        y = F.scaled_dot_product_attention(q, k, v)
        return x + self.out(y.permute(0, 1, 3, 2).reshape(b, c, hh, ww))


class UNet(nn.Module):
    def __init__(self, ch=128, mults=(1, 2, 2, 4)):
        super().__init__()
        tdim = ch * 4
        self.temb = nn.Sequential(nn.Linear(ch, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.ch = ch
        self.inp = nn.Conv2d(3, ch, 3, padding=1)
        self.down = nn.ModuleList()
        chans, c = [], ch
        for m in mults:
            self.down.append(ResBlock(c, ch * m, tdim))
            c = ch * m
            chans.append(c)
        self.mid = ResBlock(c, c, tdim)
        self.mid_attn = Attn(c)
        self.up = nn.ModuleList()
        for m in reversed(mults):
            self.up.append(ResBlock(c + chans.pop(), ch * m, tdim))
            c = ch * m
        self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, x, t):
        temb = self.temb(timestep_embedding(t, self.ch))
        h = self.inp(x)
        skips = []
        for i, blk in enumerate(self.down):
            h = blk(h, temb)
            skips.append(h)
            if i < len(self.down) - 1:
                h = F.avg_pool2d(h, 2)
        h = self.mid_attn(self.mid(h, temb))
        for i, blk in enumerate(self.up):
            h = blk(torch.cat([h, skips.pop()], 1), temb)
            if i < len(self.up) - 1:
                h = F.interpolate(h, scale_factor=2, mode="nearest")
        return self.out(h)


def build_model(small=False):
    return UNet(ch=32) if small else UNet()


def make_batch(small=False):
    n, r = (2, 32) if small else (BATCH, RES)
    return torch.randn(n, 3, r, r), torch.randint(0, 1000, (n,))


def loss_fn(model, batch):
    x0, t = batch
    noise = torch.randn_like(x0)
    a = (1 - t.float() / 1000)[:, None, None, None]
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    return F.mse_loss(model(xt, t), noise)
