"""torchvision's ConvNeXt-Tiny on ImageNet-sized images, classification loss, SGD with momentum
and nesterov built in build_optimizer (a torchvision reference-script recipe), bf16 autocast."""
import torch
import torch.nn.functional as F
from torchvision.models import convnext_tiny

BATCH = 32


def build_model(small=False):
    return convnext_tiny(num_classes=10 if small else 1000)


def make_batch(small=False):
    n, s = (2, 64) if small else (BATCH, 224)
    return torch.randn(n, 3, s, s), torch.randint(0, 10 if small else 1000, (n,))


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y, label_smoothing=0.1)


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True, weight_decay=2e-5)
