"""An SN-GAN (Miyato et al.) for 128 x 128 images: a ResNet generator and a ResNet discriminator
whose every convolution and linear layer is wrapped in torch.nn.utils.parametrizations.spectral_norm
(one power iteration per forward in training mode, its u and v vectors updated in place), the
projection discriminator's class embedding too; hinge loss, Adam(lr 2e-4, betas (0, 0.999)) for
each network, one discriminator step then one generator step per iteration, fp32 as the
reference code trains it. Batch 64, 1000 classes."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

BATCH, Z, CLASSES = 64, 128, 1000


def sn(m):
    return spectral_norm(m)


class GBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
        self.c1, self.c2 = sn(nn.Conv2d(cin, cout, 3, 1, 1)), sn(nn.Conv2d(cout, cout, 3, 1, 1))
        self.sc = sn(nn.Conv2d(cin, cout, 1))

    def forward(self, x):
        h = F.interpolate(F.relu(self.bn1(x)), scale_factor=2)
        h = self.c2(F.relu(self.bn2(self.c1(h))))
        return h + self.sc(F.interpolate(x, scale_factor=2))


class DBlock(nn.Module):
    def __init__(self, cin, cout, first=False):
        super().__init__()
        self.first = first
        self.c1, self.c2 = sn(nn.Conv2d(cin, cout, 3, 1, 1)), sn(nn.Conv2d(cout, cout, 3, 1, 1))
        self.sc = sn(nn.Conv2d(cin, cout, 1))

    def forward(self, x):
        h = x if self.first else F.relu(x)
        h = F.avg_pool2d(self.c2(F.relu(self.c1(h))), 2)
        return h + F.avg_pool2d(self.sc(x), 2)


class Generator(nn.Module):
    def __init__(self, ch=64, blocks=5):
        super().__init__()
        self.ch = ch
        self.fc = sn(nn.Linear(Z, 4 * 4 * 16 * ch))
        chans = [16, 16, 8, 4, 2, 1][:blocks + 1]
        self.blocks = nn.Sequential(*(GBlock(chans[i] * ch, chans[i + 1] * ch) for i in range(blocks)))
        self.out = nn.Sequential(nn.BatchNorm2d(chans[blocks] * ch), nn.ReLU(), sn(nn.Conv2d(chans[blocks] * ch, 3, 3, 1, 1)))

    def forward(self, z):
        return torch.tanh(self.out(self.blocks(self.fc(z).view(z.shape[0], 16 * self.ch, 4, 4))))


class Discriminator(nn.Module):
    def __init__(self, ch=64, blocks=5):
        super().__init__()
        chans = [3, 1, 2, 4, 8, 16, 16][:blocks + 1]
        chans = [3] + [c * ch for c in chans[1:]]
        self.blocks = nn.Sequential(*(DBlock(chans[i], chans[i + 1], i == 0) for i in range(blocks)))
        self.fc = sn(nn.Linear(chans[blocks], 1))
        self.embed = sn(nn.Embedding(CLASSES, chans[blocks]))

    def forward(self, x, y):
        h = F.relu(self.blocks(x)).sum((2, 3))
        return self.fc(h).squeeze(1) + (self.embed(y) * h).sum(1)


class SNGAN(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.G, self.D = (Generator(8, 2), Discriminator(8, 2)) if small else (Generator(), Discriminator())


def build_model(small=False):
    return SNGAN(small)


def make_batch(small=False):
    n, s = (2, 16) if small else (BATCH, 128)
    return torch.randn(n, 3, s, s), torch.randint(0, CLASSES, (n,))


def step(model, batch, run):
    if "optD" not in run.state:
        run.state["optD"] = torch.optim.Adam(model.D.parameters(), lr=2e-4, betas=(0.0, 0.999))
        run.state["optG"] = torch.optim.Adam(model.G.parameters(), lr=2e-4, betas=(0.0, 0.999))
    opt_d, opt_g = run.state["optD"], run.state["optG"]
    real, y = (t.cuda() for t in batch)
    z = torch.randn(real.shape[0], Z, device="cuda")
    # discriminator: hinge loss on real and (detached) fake
    fake = model.G(z).detach()
    loss_d = F.relu(1 - model.D(real, y)).mean() + F.relu(1 + model.D(fake, y)).mean()
    opt_d.zero_grad(set_to_none=True)
    loss_d.backward()
    opt_d.step()
    # generator
    loss_g = -model.D(model.G(z), y).mean()
    opt_g.zero_grad(set_to_none=True)
    loss_g.backward()
    opt_g.step()
