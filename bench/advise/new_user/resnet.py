"""ResNet-50 (torchvision) with BatchNorm, batch 128 of 224 x 224 images: no stack of transformer
blocks, four stages of bottleneck blocks."""
import torch
import torch.nn.functional as F
from torchvision.models import resnet50

BATCH = 128


def build_model(small=False):
    return resnet50(num_classes=10 if small else 1000)


def make_batch(small=False):
    n, size, classes = (2, 64, 10) if small else (BATCH, 224, 1000)
    return (torch.randn(n, 3, size, size), torch.randint(0, classes, (n,)))


def loss_fn(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])
