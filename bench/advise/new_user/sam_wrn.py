"""Sharpness-aware minimisation (SAM, Foret et al.) as its widely used PyTorch implementation
(davda54/sam) is written and called: a torch.optim.Optimizer subclass that wraps a base optimizer
(SGD, momentum 0.9, nesterov, weight decay 5e-4) sharing its parameter groups; each step runs the
forward and backward twice: first_step() moves every weight by rho x its normalised gradient (the
move e_w kept in the optimizer's state), the second backward at the moved weights, second_step()
moves them back and steps the base optimizer. WideResNet-28-10 on CIFAR-10 (the paper's model),
batch 256, bf16 autocast, label smoothing 0.1."""
import torch
import torch.nn.functional as F
from torch import nn

BATCH, CLASSES = 256, 10


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = torch.norm(torch.stack([p.grad.norm(p=2) for g in self.param_groups for p in g["params"]
                                            if p.grad is not None]), p=2)
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale.to(p)
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class WideBasic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, 1, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, stride, 1, bias=False)
        self.short = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x):
        o = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(o))))
        return y + (self.short(o) if self.short is not None else x)


class WideResNet(nn.Module):
    def __init__(self, depth=28, k=10):
        super().__init__()
        n, w = (depth - 4) // 6, [16, 16 * k, 32 * k, 64 * k]
        self.conv = nn.Conv2d(3, w[0], 3, 1, 1, bias=False)
        blocks, cin = [], w[0]
        for stage, stride in zip(w[1:], (1, 2, 2)):
            for i in range(n):
                blocks.append(WideBasic(cin, stage, stride if i == 0 else 1))
                cin = stage
        self.blocks = nn.Sequential(*blocks)
        self.bn, self.fc = nn.BatchNorm2d(cin), nn.Linear(cin, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn(self.blocks(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def build_model(small=False):
    return WideResNet(10, 2) if small else WideResNet()


def make_batch(small=False):
    n = 4 if small else BATCH
    return torch.randn(n, 3, 32, 32), torch.randint(0, CLASSES, (n,))


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9,
                                     nesterov=True, weight_decay=5e-4)
        # PASTE HERE
    opt = run.state["optimizer"]
    x, y = (t.cuda(non_blocking=True) for t in batch)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    loss.backward()
    opt.first_step(zero_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
    opt.second_step(zero_grad=True)
