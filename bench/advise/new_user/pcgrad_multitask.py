"""Multi-task dense prediction with PCGrad (Yu et al., "Gradient Surgery for Multi-Task Learning"),
as its PyTorch implementations (WeiChengTseng/Pytorch-PCGrad) run it: a shared ResNet-50 trunk
(torchvision, no weights, dilated last stage) and three heads on NYUv2-sized 288 x 384 images:
13-class segmentation (cross-entropy), depth (L1) and surface normals (cosine). Each task's
gradient of the shared and head parameters comes from its own backward through the one graph
(loss.backward(retain_graph=True) for all but the last), is flattened and kept; conflicting
gradients are projected off each other, summed and written back into .grad; then Adam (lr 1e-4).
bf16 autocast, batch 8."""
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet50

BATCH, H, W, CLASSES = 8, 288, 384, 13


class Head(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(cin, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256), nn.ReLU(),
                                 nn.Conv2d(256, cout, 1))

    def forward(self, x, size):
        return F.interpolate(self.net(x), size=size, mode="bilinear", align_corners=False)


class MultiTask(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        r = resnet50(replace_stride_with_dilation=[False, True, True], width_per_group=width)
        self.trunk = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4)
        self.seg, self.depth, self.normal = Head(2048, CLASSES), Head(2048, 1), Head(2048, 3)

    def forward(self, x):
        f = self.trunk(x)
        size = x.shape[-2:]
        return self.seg(f, size), self.depth(f, size), self.normal(f, size)


def build_model(small=False):
    return MultiTask(8) if small else MultiTask()


def make_batch(small=False):
    n, h, w = (2, 32, 32) if small else (BATCH, H, W)
    return (torch.randn(n, 3, h, w), torch.randint(0, CLASSES, (n, h, w)), torch.rand(n, 1, h, w),
            F.normalize(torch.randn(n, 3, h, w), dim=1))


def pc_backward(params, losses):
    """PCGrad: one backward per task, project conflicting gradients, write the sum into .grad."""
    grads = []
    for i, loss in enumerate(losses):
        for p in params:
            p.grad = None
        loss.backward(retain_graph=i < len(losses) - 1)
        grads.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params]))
    projected = [g.clone() for g in grads]
    for i, g in enumerate(projected):
        for j, other in enumerate(grads):
            if i != j:
                dot = torch.dot(g, other)
                g.sub_(torch.clamp(dot, max=0) / (other.norm() ** 2 + 1e-12) * other)
    total = torch.stack(projected).sum(0)
    offset = 0
    for p in params:
        p.grad = total[offset:offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.Adam(model.parameters(), lr=1e-4)
        # PASTE HERE
    opt = run.state["optimizer"]
    x, seg, depth, normal = (t.cuda(non_blocking=True) for t in batch)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        s, d, n = model(x)
        losses = [F.cross_entropy(s.float(), seg), F.l1_loss(d.float(), depth),
                  (1 - F.cosine_similarity(n.float(), normal, dim=1)).mean()]
    pc_backward([p for p in model.parameters() if p.requires_grad], losses)
    opt.step()
    opt.zero_grad(set_to_none=True)
