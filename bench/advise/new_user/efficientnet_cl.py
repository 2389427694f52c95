"""timm's EfficientNet-B0 trained as its paper and timm's recipe do, in channels_last: the model
and the images converted with memory_format=torch.channels_last (the PyTorch tutorial's advice for
convolutions on tensor cores), bf16 autocast, BatchNorm, drop path, and RMSprop (alpha 0.9, eps
1e-3, momentum 0.9: TensorFlow's EfficientNet settings) built in build_optimizer."""
import timm
import torch
import torch.nn.functional as F

BATCH = 96


def build_model(small=False):
    model = timm.create_model("efficientnet_b0", num_classes=10 if small else 1000, drop_path_rate=0.2)
    return model.to(memory_format=torch.channels_last)


def make_batch(small=False):
    n, s = (2, 64) if small else (BATCH, 224)
    x = torch.randn(n, 3, s, s).contiguous(memory_format=torch.channels_last)
    return x, torch.randint(0, 10 if small else 1000, (n,))


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y, label_smoothing=0.1)


def build_optimizer(model):
    return torch.optim.RMSprop(model.parameters(), lr=0.016, alpha=0.9, eps=1e-3, momentum=0.9, weight_decay=1e-5)
