"""NeRF as the original code and nerf-pytorch train it: positional encoding of points and view
directions, a coarse and a fine 8-layer MLP (width 256, a skip at layer 4), 64 stratified coarse
samples a ray and 128 fine ones drawn from the coarse weights by inverse-transform sampling
(cumsum, torch.searchsorted, gather), volume rendering by cumprod of the transmittance; 4096 rays
a batch, Adam, fp32 (NeRF trains in fp32)."""
import torch
import torch.nn.functional as F
from torch import nn

RAYS, COARSE, FINE, WIDTH = 4096, 64, 128, 256


def encode(x, freqs):
    bands = 2.0 ** torch.arange(freqs, device=x.device, dtype=x.dtype)
    xb = (x[..., None, :] * bands[:, None]).flatten(-2)
    return torch.cat([x, torch.sin(xb), torch.cos(xb)], -1)


class NeRFMLP(nn.Module):
    def __init__(self, width=WIDTH, depth=8, skip=4):
        super().__init__()
        self.skip = skip
        pin, din = 3 + 3 * 2 * 10, 3 + 3 * 2 * 4
        self.layers = nn.ModuleList(nn.Linear(pin if i == 0 else width + (pin if i == skip + 1 else 0), width)
                                    for i in range(depth))
        self.sigma = nn.Linear(width, 1)
        self.feature = nn.Linear(width, width)
        self.rgb = nn.Sequential(nn.Linear(width + din, width // 2), nn.ReLU(), nn.Linear(width // 2, 3))

    def forward(self, pts, dirs):
        p, d = encode(pts, 10), encode(dirs, 4)
        h = p
        for i, layer in enumerate(self.layers):
            h = F.relu(layer(h))
            if i == self.skip:
                h = torch.cat([h, p], -1)
        rgb = torch.sigmoid(self.rgb(torch.cat([self.feature(h), d.expand(*h.shape[:-1], -1)], -1)))
        return rgb, self.sigma(h).squeeze(-1)


def render(mlp, o, d, z):
    pts = o[:, None] + d[:, None] * z[..., None]
    rgb, sigma = mlp(pts, d[:, None])
    delta = torch.cat([z[:, 1:] - z[:, :-1], torch.full_like(z[:, :1], 1e10)], -1)
    alpha = 1 - torch.exp(-F.relu(sigma) * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha + 1e-10], -1), -1)[:, :-1]
    w = alpha * trans
    return (w[..., None] * rgb).sum(1), w


def sample_pdf(bins, weights, n):
    pdf = (weights + 1e-5) / (weights + 1e-5).sum(-1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[:, :1]), torch.cumsum(pdf, -1)], -1)
    u = torch.rand(*cdf.shape[:-1], n, device=cdf.device)
    idx = torch.searchsorted(cdf, u, right=True)
    below, above = (idx - 1).clamp(min=0), idx.clamp(max=cdf.shape[-1] - 1)
    cb, ca = cdf.gather(-1, below), cdf.gather(-1, above)
    bb, ba = bins.gather(-1, below), bins.gather(-1, above)
    t = (u - cb) / (ca - cb).clamp(min=1e-5)
    return bb + t * (ba - bb)


class NeRF(nn.Module):
    def __init__(self, width=WIDTH, coarse=COARSE, fine=FINE):
        super().__init__()
        self.n_coarse, self.n_fine = coarse, fine
        self.coarse, self.fine = NeRFMLP(width), NeRFMLP(width)

    def forward(self, o, d, near=2.0, far=6.0):
        t = torch.linspace(0, 1, self.n_coarse, device=o.device)
        z = near + (far - near) * t.expand(o.shape[0], -1)
        z = z + (torch.rand_like(z) - 0.5) * (far - near) / self.n_coarse     # stratified
        rgb_c, w = render(self.coarse, o, d, z)
        mids = 0.5 * (z[:, 1:] + z[:, :-1])
        z_fine = sample_pdf(mids, w[:, 1:-1].detach(), self.n_fine)
        z_all, _ = torch.sort(torch.cat([z, z_fine], -1), -1)
        rgb_f, _ = render(self.fine, o, d, z_all)
        return rgb_c, rgb_f


def build_model(small=False):
    return NeRF(32, 8, 8) if small else NeRF()


def make_batch(small=False):
    n = 16 if small else RAYS
    return {"o": torch.randn(n, 3), "d": F.normalize(torch.randn(n, 3), dim=-1), "rgb": torch.rand(n, 3)}


def loss_fn(model, batch):
    rgb_c, rgb_f = model(batch["o"], batch["d"])
    return F.mse_loss(rgb_c, batch["rgb"]) + F.mse_loss(rgb_f, batch["rgb"])


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=5e-4)
