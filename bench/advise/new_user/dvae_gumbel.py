"""DALL-E's discrete VAE (Ramesh et al. 2021, section 2.1 and appendix A) as a user retrains it:
a ResNet encoder of four groups (widths 1, 2, 4 and 8 x 256, two bottleneck blocks each, max
pooling between groups) from 256 x 256 images to logits over 8,192 codes on a 32 x 32 grid, the
Gumbel-softmax relaxation (`F.gumbel_softmax`, soft) fed to the mirrored decoder through a 1 x 1
convolution, a reconstruction loss and the KL divergence to the uniform prior, the relaxation's
temperature annealed from 1 to 1/16 and the KL weight from 0 to 6.6 by the user's own step, and
AdamW with amsgrad (its running maximum of the second moment: a third state tensor per
parameter). bf16 autocast, batch 8."""
import math

import torch
import torch.nn.functional as F
from torch import nn

CODES, GRID_SIDE, SIDE, BATCH, ANNEAL_STEPS = 8192, 32, 256, 8, 5000


class Block(nn.Module):
    def __init__(self, cin, cout, layers):
        super().__init__()
        hid = cout // 4
        self.id_path = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
        self.res = nn.Sequential(nn.ReLU(), nn.Conv2d(cin, hid, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hid, hid, 3, padding=1), nn.ReLU(), nn.Conv2d(hid, hid, 3, padding=1),
                                 nn.ReLU(), nn.Conv2d(hid, cout, 1))
        self.gain = 1 / layers ** 2

    def forward(self, x):
        return self.id_path(x) + self.gain * self.res(x)


def groups(widths, layers, resample):
    mods, cin = [], widths[0]
    for i, w in enumerate(widths):
        mods += [Block(cin, w, layers), Block(w, w, layers)]
        cin = w
        if i < len(widths) - 1:
            mods.append(resample())
    return mods


class DVAE(nn.Module):
    def __init__(self, hid=256, codes=CODES):
        super().__init__()
        widths = [hid, 2 * hid, 4 * hid, 8 * hid]
        layers = 2 * len(widths)
        self.encoder = nn.Sequential(nn.Conv2d(3, hid, 7, padding=3), *groups(widths, layers, lambda: nn.MaxPool2d(2)),
                                     nn.ReLU(), nn.Conv2d(8 * hid, codes, 1))
        back = widths[::-1]
        self.decoder = nn.Sequential(nn.Conv2d(codes, back[0] // 2, 1),
                                     *groups([back[0] // 2] + back[1:], layers,
                                             lambda: nn.Upsample(scale_factor=2, mode="nearest")),
                                     nn.ReLU(), nn.Conv2d(back[-1], 3, 1))
        self.codes = codes

    def forward(self, x, tau, kl_weight):
        logits = self.encoder(x).float()
        z = F.gumbel_softmax(logits, tau=tau, hard=False, dim=1)
        rec = self.decoder(z)
        q = F.log_softmax(logits, dim=1)
        kl = (q.exp() * (q + math.log(self.codes))).sum(1).mean()
        return F.mse_loss(rec.float(), x) + kl_weight * kl


def build_model(small=False):
    return DVAE(hid=16, codes=64) if small else DVAE()


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SIDE)
    return torch.rand(n, 3, s, s) * 2 - 1


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4, amsgrad=True)


def step(model, batch, run):
    it = run.state.get("it", 0)
    frac = min(it / ANNEAL_STEPS, 1.0)
    tau = math.exp(frac * math.log(1 / 16))        # 1 to 1/16, exponentially
    kl_weight = 6.6 * frac
    with run.autocast():
        loss = model(batch.cuda(non_blocking=True), tau, kl_weight)
    run.backward(loss)
    run.optimizer_step()
    run.zero_grad(set_to_none=True)
    run.state["it"] = it + 1
