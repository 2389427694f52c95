"""Quantization-aware training (eager mode, PyTorch's QAT tutorial and torchvision's
references/classification/train_quantization.py): torchvision's quantizable MobileNetV2 (no
weights), fuse_model(is_qat=True) folds conv + BatchNorm + ReLU, then
torch.ao.quantization.prepare_qat with get_default_qat_qconfig("x86") inserts a fake quantiser
after every activation and on every weight (FusedMovingAvgObsFakeQuantize: a moving min/max
observer and fake quantisation in one op), trained fp32 with SGD (lr 1e-4, momentum 0.9, weight
decay 1e-4) on ImageNet crops, batch 128."""
import torch
import torch.nn.functional as F
from torch.ao.quantization import get_default_qat_qconfig, prepare_qat
from torchvision.models.quantization import mobilenet_v2

BATCH = 128


def build_model(small=False):
    model = mobilenet_v2(weights=None, quantize=False, width_mult=0.25 if small else 1.0)
    model.train()
    model.fuse_model(is_qat=True)
    model.qconfig = get_default_qat_qconfig("x86")
    prepare_qat(model, inplace=True)
    return model


def make_batch(small=False):
    n, s = (2, 64) if small else (BATCH, 224)
    return torch.randn(n, 3, s, s), torch.randint(0, 1000, (n,))


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=1e-4)


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)
