"""torchvision's ViT-B/16 (torchvision.models.vit_b_16, no weights): its encoder blocks are
children of an nn.Sequential named encoder_layer_0 .. encoder_layer_11 and attend through
nn.MultiheadAttention; batch 64 of 224 x 224 images, 1000 classes, label smoothing 0.1."""
import torch
import torch.nn.functional as F
from torchvision.models import VisionTransformer, vit_b_16

BATCH = 64


def build_model(small=False):
    if small:  # torchvision zeroes the head: a random one, so that the small copy's gradients are not all 0
        m = VisionTransformer(image_size=32, patch_size=8, num_layers=12, num_heads=4, hidden_dim=64, mlp_dim=128,
                              num_classes=10)
        torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        return m
    return vit_b_16()


def make_batch(small=False):
    n, size, classes = (2, 32, 10) if small else (BATCH, 224, 1000)
    return {"images": torch.randn(n, 3, size, size), "labels": torch.randint(0, classes, (n,))}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["images"]), batch["labels"], label_smoothing=0.1)
