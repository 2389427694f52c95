"""A GAN trained as PyTorch's DCGAN example does, at 128 x 128: a generator of transposed
convolutions with BatchNorm and a discriminator of strided convolutions with BatchNorm and
LeakyReLU, two Adam optimizers (lr 2e-4, betas (0.5, 0.999)) built once in the step. Each step
updates the discriminator on a real batch and on the generator's fake batch (detached), then the
generator through the discriminator's verdict on the same fake batch: two backward passes and two
optimizer steps a step, the losses binary cross-entropy on logits. fp32 (no autocast)."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, NZ, NGF, NDF = 128, 128, 128, 128


class Generator(nn.Module):
    def __init__(self, nz=NZ, ngf=NGF, levels=5):
        super().__init__()
        chans = [ngf * 2 ** (levels - 1 - i) for i in range(levels)]   # 2048 .. 128 at full size
        layers = [nn.ConvTranspose2d(nz, chans[0], 4, 1, 0, bias=False), nn.BatchNorm2d(chans[0]), nn.ReLU(True)]
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(chans[-1], 3, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf=NDF, levels=5):
        super().__init__()
        chans = [ndf * 2 ** i for i in range(levels)]
        layers = [nn.Conv2d(3, chans[0], 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace=True)]
        layers += [nn.Conv2d(chans[-1], 1, 4, 1, 0, bias=False)]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x).view(-1)


class GAN(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        width = 4 if small else NGF   # every layer kept, narrow
        self.netG, self.netD = Generator(NZ, width), Discriminator(width)


def build_model(small=False):
    return GAN(small)


def make_batch(small=False):
    n, res = (2, 128) if small else (BATCH, 128)
    return torch.randn(n, 3, res, res)


def step(model, real, run):
    netG, netD = model.netG, model.netD
    if "optD" not in run.state:
        run.state["optD"] = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        run.state["optG"] = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD, optG = run.state["optD"], run.state["optG"]
    real = real.to("cuda")
    b = real.shape[0]
    ones, zeros = torch.ones(b, device=real.device), torch.zeros(b, device=real.device)
    # (1) the discriminator: real batch, then fake batch (detached from the generator)
    netD.zero_grad(set_to_none=True)
    errD_real = F.binary_cross_entropy_with_logits(netD(real), ones)
    errD_real.backward()
    fake = netG(torch.randn(b, NZ, 1, 1, device=real.device))
    errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), zeros)
    errD_fake.backward()
    optD.step()
    # (2) the generator: the discriminator's verdict on the same fake batch, labelled real
    netG.zero_grad(set_to_none=True)
    errG = F.binary_cross_entropy_with_logits(netD(fake), ones)
    errG.backward()
    optG.step()
