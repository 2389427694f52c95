"""SimCLR (Chen et al. 2020) as a PyTorch user trains it on 8 GPUs' worth of batch on one: a
torchvision ResNet-50 (its fc dropped), a 2-layer projection head with BatchNorm to 128, the
NT-Xent loss over both views of the batch (a 2N x 2N cosine-similarity matrix, its diagonal
masked out, temperature 0.1), and LARS written by the user as a torch.optim.Optimizer subclass
(the layer-wise trust ratio eta x ||w|| / ||g + wd w|| applied to weights, biases and BatchNorm
parameters left out of the adaptation and the decay, as the paper does). Batch 256 images, two
views of 224 x 224 each; bf16 autocast."""
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

BATCH, SIDE, TEMPERATURE = 256, 224, 0.1


class LARS(torch.optim.Optimizer):
    """SGD with momentum whose update of each tensor of a group with `lars` set is scaled by
    eta x ||w|| / ||g + wd x w|| (You et al. 2017)."""

    def __init__(self, params, lr, momentum=0.9, weight_decay=1e-6, eta=1e-3):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta, lars=True))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                if group["lars"]:
                    d = d.add(p, alpha=group["weight_decay"])
                    w_norm, d_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(d)
                    one = torch.ones_like(w_norm)
                    trust = torch.where((w_norm > 0) & (d_norm > 0), group["eta"] * w_norm / d_norm, one)
                    d = d.mul(trust)
                state = self.state[p]
                if "mu" not in state:
                    state["mu"] = torch.zeros_like(p)
                mu = state["mu"]
                mu.mul_(group["momentum"]).add_(d)
                p.add_(mu, alpha=-group["lr"])


class SimCLR(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.encoder = torchvision.models.resnet18() if small else torchvision.models.resnet50()
        width = self.encoder.fc.in_features
        self.encoder.fc = nn.Identity()
        self.projector = nn.Sequential(nn.Linear(width, width, bias=False), nn.BatchNorm1d(width), nn.ReLU(),
                                       nn.Linear(width, 128, bias=False), nn.BatchNorm1d(128, affine=False))

    def forward(self, view1, view2):
        z = F.normalize(self.projector(self.encoder(torch.cat([view1, view2]))), dim=1)
        return nt_xent(z.float(), TEMPERATURE)


def nt_xent(z, t):
    """Each view's positive is its other view; every other of the 2N embeddings is a negative."""
    n = z.shape[0] // 2
    sim = (z @ z.T) / t
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(sim, target)


def build_model(small=False):
    return SimCLR(small)


def make_batch(small=False):
    n, s = (4, 32) if small else (BATCH, SIDE)
    return torch.randn(n, 3, s, s), torch.randn(n, 3, s, s)


def loss_fn(model, batch):
    return model(*batch)


def build_optimizer(model):
    plain = [p for n, p in model.named_parameters() if p.ndim == 1]
    weights = [p for n, p in model.named_parameters() if p.ndim > 1]
    lr = 0.3 * BATCH / 256
    return LARS([{"params": weights}, {"params": plain, "lars": False, "weight_decay": 0.0}], lr=lr,
                weight_decay=1e-6)
