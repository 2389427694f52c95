"""A Fourier Neural Operator (FNO-2d, as neuraloperator's and the paper's reference code write it):
4 spectral layers, each an rfft2 of the hidden field, a complex weight (cfloat parameters) mixing
the lowest modes by einsum, irfft2 back, plus a 1x1 convolution; Darcy flow at 256 x 256, batch
32, width 64, 32 modes; AdamW over the complex weights."""
import torch
import torch.nn.functional as F
from torch import nn

WIDTH, MODES, RES, BATCH = 64, 32, 256, 32


class SpectralConv2d(nn.Module):
    def __init__(self, width, modes):
        super().__init__()
        self.modes = modes
        scale = 1 / (width * width)
        self.w1 = nn.Parameter(scale * torch.rand(width, width, modes, modes, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.rand(width, width, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        b, c, h, w = x.shape
        m = self.modes
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.w1)
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out_ft, s=(h, w))


class FNOBlock(nn.Module):
    def __init__(self, width, modes):
        super().__init__()
        self.spectral = SpectralConv2d(width, modes)
        self.pointwise = nn.Conv2d(width, width, 1)

    def forward(self, x):
        return F.gelu(self.spectral(x) + self.pointwise(x))


class FNO2d(nn.Module):
    def __init__(self, width=WIDTH, modes=MODES, layers=4):
        super().__init__()
        self.lift = nn.Linear(3, width)
        self.blocks = nn.ModuleList(FNOBlock(width, modes) for _ in range(layers))
        self.proj = nn.Sequential(nn.Linear(width, 128), nn.GELU(), nn.Linear(128, 1))

    def forward(self, a):  # a: (b, h, w, 1)
        b, h, w, _ = a.shape
        gy, gx = torch.meshgrid(torch.linspace(0, 1, h, device=a.device), torch.linspace(0, 1, w, device=a.device),
                                indexing="ij")
        grid = torch.stack((gy, gx), -1).expand(b, h, w, 2)
        x = self.lift(torch.cat((a, grid), -1)).permute(0, 3, 1, 2)
        for block in self.blocks:
            x = block(x)
        return self.proj(x.permute(0, 2, 3, 1))


def build_model(small=False):
    return FNO2d(8, 4, 2) if small else FNO2d()


def make_batch(small=False):
    b, r = (2, 16) if small else (BATCH, RES)
    return {"a": torch.randn(b, r, r, 1), "u": torch.randn(b, r, r, 1)}


def loss_fn(model, batch):
    pred = model(batch["a"])
    return (pred - batch["u"]).norm() / batch["u"].norm()  # relative L2, as the FNO paper trains
