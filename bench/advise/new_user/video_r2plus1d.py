"""torchvision's R(2+1)D-18 video classifier (r2plus1d_18, no weights): 3-D convolutions factored
into a spatial (1 x 3 x 3) and a temporal (3 x 1 x 1) convolution with BatchNorm3d between, four
stages of two blocks, trained as torchvision's references/video_classification/train.py does: clips
of 16 frames at 112 x 112, batch 24, SGD (lr 0.64, momentum 0.9, weight decay 1e-4), a warmup then
multi-step LR schedule, bf16 autocast, 400 Kinetics classes."""
import torch
import torch.nn.functional as F
from torchvision.models.video import r2plus1d_18

BATCH, FRAMES, RES = 24, 16, 112


def build_model(small=False):
    return r2plus1d_18(weights=None, num_classes=400)


def make_batch(small=False):
    n, t, s = (2, 4, 32) if small else (BATCH, FRAMES, RES)
    return torch.randn(n, 3, t, s, s), torch.randint(0, 400, (n,))


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.64, momentum=0.9, weight_decay=1e-4)


def loss_fn(model, batch):
    clips, labels = batch
    clips, labels = clips.cuda(non_blocking=True), labels.cuda(non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return F.cross_entropy(model(clips), labels)
