"""ViT-Base/16 image classification (transformers ViTForImageClassification from its config),
batch 64 of 224 x 224 images, 1000 classes."""
import torch
from transformers import ViTConfig, ViTForImageClassification

BATCH = 64


def build_model(small=False):
    cfg = ViTConfig(image_size=32 if small else 224, patch_size=8 if small else 16, hidden_size=64 if small else 768,
                    num_hidden_layers=12, num_attention_heads=4 if small else 12,
                    intermediate_size=128 if small else 3072, num_labels=10 if small else 1000)
    return ViTForImageClassification(cfg)


def make_batch(small=False):
    n, size, classes = (2, 32, 10) if small else (BATCH, 224, 1000)
    return {"pixel_values": torch.randn(n, 3, size, size), "labels": torch.randint(0, classes, (n,))}
