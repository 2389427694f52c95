"""A ConvNet for CIFAR-sized images trained by the user's own Shampoo (Gupta et al. 2018): for
each weight reshaped to a matrix, left and right statistics G G^T and G^T G accumulated every
step and their inverse fourth roots taken by `torch.linalg.eigh` (the eigenvalues clamped), the
gradient preconditioned on both sides; grafted to SGD's step size, momentum. Parameters of one
dimension take plain momentum. Batch 512 of 32 x 32, fp32."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH = 512


class Shampoo(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9, eps=1e-6):
        super().__init__(params, dict(lr=lr, momentum=momentum, eps=eps))

    @staticmethod
    def root(stat, eps):
        vals, vecs = torch.linalg.eigh(stat)
        return (vecs * vals.clamp_min(eps).pow(-0.25)) @ vecs.T

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                g = p.grad.reshape(p.shape[0], -1)
                if p.ndim > 1:
                    if not state:
                        state["left"] = torch.zeros(g.shape[0], g.shape[0], device=p.device)
                        state["right"] = torch.zeros(g.shape[1], g.shape[1], device=p.device)
                    state["left"].addmm_(g, g.T)
                    state["right"].addmm_(g.T, g)
                    pre = self.root(state["left"], group["eps"]) @ g @ self.root(state["right"], group["eps"])
                    d = (pre * (g.norm() / (pre.norm() + 1e-12))).view_as(p)
                else:
                    d = p.grad
                if "mu" not in state:
                    state["mu"] = torch.zeros_like(p)
                state["mu"].mul_(group["momentum"]).add_(d)
                p.add_(state["mu"], alpha=-group["lr"])


def block(a, b):
    return nn.Sequential(nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU())


def build_model(small=False):
    w = 8 if small else 128
    return nn.Sequential(block(3, w), block(w, 2 * w), nn.MaxPool2d(2), block(2 * w, 2 * w), nn.MaxPool2d(2),
                         block(2 * w, 4 * w), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10))


def make_batch(small=False):
    n, s = (4, 8) if small else (BATCH, 32)
    return torch.randn(n, 3, s, s), torch.randint(0, 10, (n,))


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def build_optimizer(model):
    return Shampoo(model.parameters())
