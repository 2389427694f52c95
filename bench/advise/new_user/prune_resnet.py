"""Magnitude pruning during training with torch.nn.utils.prune, as PyTorch's pruning tutorial and
lottery-ticket code do it: a torchvision ResNet-18 whose every convolution and linear weight is pruned
by global_unstructured(L1Unstructured, amount 0.5); each pruned module keeps weight_orig (the parameter)
and weight_mask (a buffer), and a forward pre-hook recomputes weight = weight_orig * weight_mask as a
plain attribute before each forward, so the step holds weight_orig, the mask and the masked
weight of every layer. Pruning runs once in build_model() (the ones it starts from are selected by
`t[mask == 1]` in torch's PruningContainer), then the training step: SGD with momentum (lr 0.1,
weight decay 1e-4), bf16 autocast, batch 64 of 224 x 224."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import prune
from torchvision.models import resnet18


def build_model(small=False):
    m = resnet18(num_classes=10 if small else 1000)
    params = [(mod, "weight") for mod in m.modules() if isinstance(mod, (nn.Conv2d, nn.Linear))]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.5)
    return m


def make_batch(small=False):
    n, s, c = (2, 32, 10) if small else (64, 224, 1000)
    return torch.rand(n, 3, s, s), torch.randint(0, c, (n,))


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)
