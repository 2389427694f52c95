"""Deep kernel learning (Wilson et al. 2016): an MLP maps 64 features to 32, an RBF kernel over
the batch's features by `torch.cdist`, and the exact Gaussian process's negative marginal log
likelihood by a Cholesky factor (`torch.linalg.cholesky`, `torch.cholesky_solve`, the log
determinant from the factor's diagonal) with a learned length scale, output scale and noise.
Batch 4,096 (the kernel 4,096 x 4,096), fp32 (the factor needs it), Adam."""
import math

import torch
from torch import nn

FEATURES, LATENT, BATCH = 64, 32, 4096


class DeepKernelGP(nn.Module):
    def __init__(self, features=FEATURES, latent=LATENT, width=1024):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, latent))
        self.log_length = nn.Parameter(torch.zeros(()))
        self.log_scale = nn.Parameter(torch.zeros(()))
        self.log_noise = nn.Parameter(torch.full((), -2.0))

    def forward(self, x, y):
        z = self.net(x)
        d = torch.cdist(z, z).square()
        k = self.log_scale.exp() * torch.exp(-0.5 * d / self.log_length.exp().square())
        k = k + (self.log_noise.exp() + 1e-4) * torch.eye(k.shape[0], device=k.device, dtype=k.dtype)
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y.unsqueeze(1), chol)
        fit = 0.5 * (y.unsqueeze(1) * alpha).sum()
        logdet = torch.log(torch.diagonal(chol)).sum()
        return (fit + logdet + 0.5 * y.shape[0] * math.log(2 * math.pi)) / y.shape[0]


def build_model(small=False):
    return DeepKernelGP(8, 4, 16) if small else DeepKernelGP()


def make_batch(small=False):
    n, f = (32, 8) if small else (BATCH, FEATURES)
    x = torch.randn(n, f)
    return x, torch.sin(x[:, 0]) + 0.1 * torch.randn(n)


def loss_fn(model, batch):
    return model(*batch)


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)

