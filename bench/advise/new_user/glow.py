"""Glow (a normalising flow, as the paper and rosinality/glow-pytorch write it): 3 levels of 16
flow steps on 64 x 64 images, each step an ActNorm, an invertible 1x1 convolution whose
log-determinant is torch.linalg.slogdet of its weight, and an affine coupling with a 512-channel
conv net; squeeze between levels, half the channels factored out to a learned prior; the loss is
the negative log-likelihood in bits per dimension (torch.distributions.Normal.log_prob); batch
32, fp32, Adam."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal

SIZE, CHANNELS, STEPS, LEVELS, HIDDEN, BATCH = 64, 3, 16, 3, 512, 32


class ActNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.loc, self.log_scale = nn.Parameter(torch.zeros(1, c, 1, 1)), nn.Parameter(torch.zeros(1, c, 1, 1))

    def forward(self, x):
        return (x + self.loc) * self.log_scale.exp(), x.shape[2] * x.shape[3] * self.log_scale.sum()


class InvConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.linalg.qr(torch.randn(c, c))[0])

    def forward(self, x):
        logdet = x.shape[2] * x.shape[3] * torch.linalg.slogdet(self.weight)[1]
        return F.conv2d(x, self.weight[:, :, None, None]), logdet


class Coupling(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c // 2, hidden, 3, padding=1), nn.ReLU(), nn.Conv2d(hidden, hidden, 1),
                                 nn.ReLU(), nn.Conv2d(hidden, c, 3, padding=1))

    def forward(self, x):
        a, b = x.chunk(2, 1)
        log_s, t = self.net(a).chunk(2, 1)
        s = torch.sigmoid(log_s + 2)
        return torch.cat([a, (b + t) * s], 1), torch.log(s).flatten(1).sum(1)


class FlowStep(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.actnorm, self.invconv, self.coupling = ActNorm(c), InvConv(c), Coupling(c, hidden)

    def forward(self, x):
        x, l1 = self.actnorm(x)
        x, l2 = self.invconv(x)
        x, l3 = self.coupling(x)
        return x, l1 + l2 + l3


def squeeze(x):
    b, c, h, w = x.shape
    return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, 4 * c, h // 2, w // 2)


class Glow(nn.Module):
    def __init__(self, channels=CHANNELS, steps=STEPS, levels=LEVELS, hidden=HIDDEN):
        super().__init__()
        self.levels, self.priors, c = nn.ModuleList(), nn.ModuleList(), channels
        for i in range(levels):
            c *= 4
            self.levels.append(nn.ModuleList(FlowStep(c, hidden) for _ in range(steps)))
            last = i == levels - 1
            self.priors.append(nn.Conv2d(c if last else c // 2, 2 * c if last else c, 3, padding=1))
            c = c if last else c // 2

    def forward(self, x):
        logdet, logp = 0, 0
        for i, (steps, prior) in enumerate(zip(self.levels, self.priors)):
            x = squeeze(x)
            for step in steps:
                x, ld = step(x)
                logdet = logdet + ld
            if i < len(self.levels) - 1:
                x, z = x.chunk(2, 1)
                mean, log_sd = prior(x).chunk(2, 1)
            else:
                z = x
                mean, log_sd = prior(torch.zeros_like(x)).chunk(2, 1)
            logp = logp + Normal(mean, log_sd.exp()).log_prob(z).flatten(1).sum(1)
        return logp + logdet


def build_model(small=False):
    return Glow(3, 2, 2, 16) if small else Glow()


def make_batch(small=False):
    n, s = (2, 8) if small else (BATCH, SIZE)
    return {"x": torch.rand(n, CHANNELS, s, s) - 0.5}


def loss_fn(model, batch):
    x = batch["x"]
    dims = x[0].numel()
    ll = model(x + torch.rand_like(x) / 256) - dims * math.log(256)   # dequantised, 8 bits
    return (-ll / (dims * math.log(2))).mean()                       # bits per dimension


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-4)
