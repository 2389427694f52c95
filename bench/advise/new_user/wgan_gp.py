"""WGAN-GP (Gulrajani et al., "Improved Training of Wasserstein GANs"): a ResNet critic without
normalisation and a generator with BatchNorm at 128 x 128, the critic's loss with the gradient
penalty: the critic's gradient with respect to random interpolates of real and fake images, taken
with torch.autograd.grad(create_graph=True), so the critic's backward runs through a backward (a
double backward). Adam(lr 1e-4, betas (0, 0.9)) for each network, one critic step then one
generator step, fp32."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, RES, NZ, CH = 64, 128, 128, 128


class CriticBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(cin, cout, 3, 1, 1), nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = self.c2(F.leaky_relu(self.c1(F.leaky_relu(x, 0.2)), 0.2))
        return F.avg_pool2d(h + self.skip(x), 2)


class Critic(nn.Module):
    def __init__(self, ch=CH, levels=5):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, 1, 1)
        chans = [ch * min(2 ** i, 8) for i in range(levels + 1)]
        self.blocks = nn.ModuleList(CriticBlock(a, b) for a, b in zip(chans, chans[1:]))
        self.out = nn.Linear(chans[-1], 1)

    def forward(self, x):
        h = self.stem(x)
        for b in self.blocks:
            h = b(h)
        return self.out(F.leaky_relu(h, 0.2).sum((2, 3))).view(-1)


class GenBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
        self.c1, self.c2 = nn.Conv2d(cin, cout, 3, 1, 1), nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2)
        return self.c2(F.relu(self.bn2(self.c1(F.relu(self.bn1(x)))))) + self.skip(x)


class Generator(nn.Module):
    def __init__(self, ch=CH, levels=5):
        super().__init__()
        chans = [ch * min(2 ** i, 8) for i in reversed(range(levels + 1))]
        self.fc = nn.Linear(NZ, chans[0] * 4 * 4)
        self.blocks = nn.ModuleList(GenBlock(a, b) for a, b in zip(chans, chans[1:]))
        self.out = nn.Sequential(nn.BatchNorm2d(chans[-1]), nn.ReLU(), nn.Conv2d(chans[-1], 3, 3, 1, 1), nn.Tanh())
        self.c0 = chans[0]

    def forward(self, z):
        h = self.fc(z).view(z.shape[0], self.c0, 4, 4)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


class WGAN(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        ch = 8 if small else CH
        self.G, self.D = Generator(ch), Critic(ch)


def build_model(small=False):
    return WGAN(small)


def make_batch(small=False):
    return torch.randn(2 if small else BATCH, 3, RES, RES)


def step(model, real, run):
    G, D = model.G, model.D
    if "optD" not in run.state:
        run.state["optD"] = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
        run.state["optG"] = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    optD, optG = run.state["optD"], run.state["optG"]
    real = real.cuda()
    b = real.shape[0]
    # (1) the critic, with the gradient penalty
    optD.zero_grad(set_to_none=True)
    fake = G(torch.randn(b, NZ, device=real.device)).detach()
    alpha = torch.rand(b, 1, 1, 1, device=real.device)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    grad, = torch.autograd.grad(D(mixed).sum(), mixed, create_graph=True)
    gp = ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    loss_d = D(fake).mean() - D(real).mean() + 10 * gp
    loss_d.backward()
    optD.step()
    # (2) the generator
    optG.zero_grad(set_to_none=True)
    loss_g = -D(G(torch.randn(b, NZ, device=real.device))).mean()
    loss_g.backward()
    optG.step()
