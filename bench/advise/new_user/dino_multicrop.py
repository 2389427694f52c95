"""DINO self-distillation (Caron et al.) as facebookresearch/dino's main_dino.py trains it: a
ViT-S/16 student (timm vit_small_patch16_224, dynamic_img_size so that it takes both crop sizes,
no classifier) with DINO's projection head (3-layer MLP to 256, then a weight-normalised layer to
65,536 prototypes: torch.nn.utils.parametrizations.weight_norm), multi-crop: 2 global crops of
224 x 224 and 6 local crops of 96 x 96 per image, the student run once per crop size (the crops of
one size concatenated), the teacher (an EMA copy made with copy.deepcopy, no gradients) on the global
crops under no_grad; the cross-entropy between the teacher's centred, sharpened and the
student's outputs; AdamW(lr 5e-4, weight decay 0.04), bf16 autocast, the teacher's EMA (0.996) and
centre updated after each step. Batch 32 images."""
import copy

import timm
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

BATCH, GLOBAL, LOCAL, N_LOCAL, OUT = 32, 224, 96, 6, 65536


class DINOHead(nn.Module):
    def __init__(self, dim, out, hidden=2048, bottleneck=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, bottleneck))
        self.last = weight_norm(nn.Linear(bottleneck, out, bias=False))

    def forward(self, x):
        return self.last(F.normalize(self.mlp(x), dim=-1))


class Student(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.backbone = timm.create_model("vit_tiny_patch16_224" if small else "vit_small_patch16_224",
                                          pretrained=False, num_classes=0, dynamic_img_size=True)
        self.head = DINOHead(self.backbone.num_features, 256 if small else OUT, 64 if small else 2048,
                             32 if small else 256)

    def forward(self, crops):   # crops: a list, the global crops first; one backbone call per size
        sizes = [c.shape[-1] for c in crops]
        feats, i = [], 0
        while i < len(crops):
            j = i
            while j < len(crops) and sizes[j] == sizes[i]:
                j += 1
            feats.append(self.backbone(torch.cat(crops[i:j])))
            i = j
        return self.head(torch.cat(feats))


def build_model(small=False):
    return Student(small)


def make_batch(small=False):
    n, g, l, k = (2, 32, 16, 2) if small else (BATCH, GLOBAL, LOCAL, N_LOCAL)
    return [torch.randn(n, 3, g, g) for _ in range(2)] + [torch.randn(n, 3, l, l) for _ in range(k)]


def step(model, crops, run):
    if "teacher" not in run.state:
        run.state["teacher"] = copy.deepcopy(model).requires_grad_(False)
        run.state["opt"] = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.04)
        run.state["center"] = torch.zeros(1, model.head.last.weight.shape[0], device="cuda")
    teacher, opt, center = run.state["teacher"], run.state["opt"], run.state["center"]
    crops = [c.cuda(non_blocking=True) for c in crops]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with torch.no_grad():
            t_out = teacher(crops[:2])
        s_out = model(crops)
        t = F.softmax((t_out - center) / 0.04, dim=-1).chunk(2)
        s = (s_out / 0.1).chunk(len(crops))
        loss, terms = 0, 0
        for iq, q in enumerate(t):
            for v in range(len(s)):
                if v == iq:
                    continue
                loss = loss + torch.sum(-q * F.log_softmax(s[v], dim=-1), dim=-1).mean()
                terms += 1
        loss = loss / terms
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    with torch.no_grad():
        sp, tp = list(model.parameters()), list(teacher.parameters())
        torch._foreach_mul_(tp, 0.996)
        torch._foreach_add_(tp, sp, alpha=0.004)
        center.mul_(0.9).add_(t_out.float().mean(0, keepdim=True), alpha=0.1)
