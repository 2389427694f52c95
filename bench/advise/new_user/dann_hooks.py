"""Domain-adversarial training (DANN) with its gradient reversal written as a tensor hook, and a
per-layer gradient-norm monitor written as module full-backward hooks (as training scripts log
them): a ResNet-50 feature extractor (torchvision), a label classifier on the source images and a
domain classifier on source and target through `feat.register_hook(lambda g: -lam * g)`;
Office-31 style, 224 x 224, 32 source + 32 target images a step, bf16 autocast, SGD."""
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

BATCH, CLASSES, LAMBDA = 32, 31, 0.1
GRAD_NORMS = {}


def monitor(name):
    def hook(module, grad_input, grad_output):
        GRAD_NORMS[name] = grad_output[0].detach().float().norm()
    return hook


class DANN(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        net = torchvision.models.resnet18() if small else torchvision.models.resnet50()
        width = net.fc.in_features
        net.fc = nn.Identity()
        self.features = net
        self.classifier = nn.Linear(width, CLASSES)
        self.domain = nn.Sequential(nn.Linear(width, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1))
        for name in ("layer1", "layer2", "layer3", "layer4"):
            getattr(net, name).register_full_backward_hook(monitor(name))

    def forward(self, source, target):
        feat = self.features(torch.cat([source, target]))
        reversed_feat = feat.view_as(feat)             # its own node: the hook sees the domain head's gradient only
        if reversed_feat.requires_grad:
            reversed_feat.register_hook(lambda g: -LAMBDA * g)
        return self.classifier(feat[: source.shape[0]]), self.domain(reversed_feat).squeeze(1)


def build_model(small=False):
    return DANN(small)


def make_batch(small=False):
    b, s = (2, 64) if small else (BATCH, 224)
    return {"source": torch.randn(b, 3, s, s), "target": torch.randn(b, 3, s, s),
            "label": torch.randint(0, CLASSES, (b,))}


def loss_fn(model, batch):
    logits, dom = model(batch["source"], batch["target"])
    b = batch["source"].shape[0]
    domain_label = torch.cat([torch.zeros(b, device=dom.device), torch.ones(b, device=dom.device)])
    return F.cross_entropy(logits, batch["label"]) + F.binary_cross_entropy_with_logits(dom.float(), domain_label)


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
