"""CapsNet (Sabour et al. 2017) on 28 x 28 digits: a 9 x 9 convolution, 32 x 8-dimensional
primary capsules, 10 digit capsules of 16 by three iterations of dynamic routing (softmax over the
routes, the agreement added to the logits in place of the user's own loop), the margin loss and
a reconstruction decoder from the true class's capsule masked by `one_hot`. Batch 256, fp32,
Adam."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, CLASSES = 256, 10


def squash(s, dim=-1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)


class CapsNet(nn.Module):
    def __init__(self, maps=256, prim=32, side=28, iters=3):
        super().__init__()
        self.conv = nn.Conv2d(1, maps, 9)
        self.prim = nn.Conv2d(maps, prim * 8, 9, stride=2)
        g = (side - 16) // 2
        self.routes, self.prim_maps, self.iters = prim * g * g, prim, iters
        self.W = nn.Parameter(0.01 * torch.randn(1, self.routes, CLASSES, 16, 8))
        self.decoder = nn.Sequential(nn.Linear(16 * CLASSES, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(),
                                     nn.Linear(1024, side * side), nn.Sigmoid())

    def forward(self, x, labels):
        u = F.relu(self.conv(x))
        u = self.prim(u)
        n = x.shape[0]
        u = squash(u.view(n, self.prim_maps, 8, -1).permute(0, 1, 3, 2).reshape(n, self.routes, 8))
        u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)           # n, routes, 10, 16
        b = torch.zeros(n, self.routes, CLASSES, device=x.device, dtype=x.dtype)
        for i in range(self.iters):
            c = b.softmax(dim=2)
            v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))               # n, 10, 16
            if i < self.iters - 1:
                b = b + (u_hat * v.unsqueeze(1)).sum(-1)
        lengths = v.norm(dim=-1)
        onehot = F.one_hot(labels, CLASSES).to(x.dtype)
        margin = (onehot * F.relu(0.9 - lengths).square() + 0.5 * (1 - onehot) * F.relu(lengths - 0.1).square())
        recon = self.decoder((v * onehot.unsqueeze(-1)).flatten(1))
        return margin.sum(1).mean() + 0.0005 * F.mse_loss(recon, x.flatten(1), reduction="sum") / n


def build_model(small=False):
    return CapsNet(16, 4, 20) if small else CapsNet()


def make_batch(small=False):
    n, s = (4, 20) if small else (BATCH, 28)
    return torch.rand(n, 1, s, s), torch.randint(0, CLASSES, (n,))


def loss_fn(model, batch):
    return model(*batch)
