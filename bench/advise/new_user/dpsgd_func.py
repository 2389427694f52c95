"""Differentially private SGD (Abadi et al.) with per-sample gradients from torch.func, as Opacus's
"functorch" mode and the torch.func tutorial compute them: functional_call over the model's
parameters, vmap(grad(loss)) over the batch (each sample's gradient of every parameter at once), each
sample's gradient clipped to norm 1.0, summed, Gaussian noise (sigma 1.1) added, set as .grad, one
SGD(momentum 0.9) step. The model is a CIFAR-10 WideResNet-16-4 with GroupNorm (BatchNorm mixes
samples, so DP training replaces it), batch 128 of 32 x 32 images, fp32 (no autocast): no
loss.backward() runs."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

BATCH, CLIP, SIGMA = 128, 1.0, 1.1


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(16, cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.n2, self.c2 = nn.GroupNorm(16, cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.skip = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x):
        h = self.c1(F.relu(self.n1(x)))
        h = self.c2(F.relu(self.n2(h)))
        return h + (x if self.skip is None else self.skip(x))


class WideResNet(nn.Module):
    def __init__(self, width=4, per_stage=2, classes=10):
        super().__init__()
        chans = [16, 16 * width, 32 * width, 64 * width]
        self.stem = nn.Conv2d(3, chans[0], 3, 1, 1, bias=False)
        blocks = []
        for s in range(3):
            for i in range(per_stage):
                blocks.append(Block(chans[s] if i == 0 else chans[s + 1], chans[s + 1], 2 if i == 0 and s > 0 else 1))
        self.blocks = nn.Sequential(*blocks)
        self.norm, self.head = nn.GroupNorm(16, chans[-1]), nn.Linear(chans[-1], classes)

    def forward(self, x):
        return self.head(F.relu(self.norm(self.blocks(self.stem(x)))).mean((2, 3)))


def build_model(small=False):
    return WideResNet(width=1 if small else 4, per_stage=1 if small else 2)


def make_batch(small=False):
    n = 4 if small else BATCH
    return torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,))


def step(model, batch, run):
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    opt = run.state["opt"]
    x, y = (t.cuda(non_blocking=True) for t in batch)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def sample_loss(p, b, xi, yi):
        out = functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, None, 0, 0))(params, buffers, x, y)
    norms = torch.stack([g.flatten(1).norm(2, dim=1) for g in per_sample.values()], dim=1).norm(2, dim=1)
    scale = (CLIP / (norms + 1e-6)).clamp(max=1.0)
    for name, p in model.named_parameters():
        g = torch.einsum("i,i...->...", scale, per_sample[name])
        p.grad = (g + torch.randn_like(g) * SIGMA * CLIP) / x.shape[0]
    opt.step()
    opt.zero_grad(set_to_none=True)
