"""Hugging Face Swin-T (SwinForImageClassification from its default configuration, no weights):
four stages of 2, 2, 6, 2 shifted-window blocks (torch.roll, window partitioning, a relative
position bias gathered by index) with patch merging between them, so the blocks sit in four
ModuleLists of different lengths and widths. 64 images 224 x 224, 1000 classes; AdamW (default)."""
import torch
from transformers import SwinConfig, SwinForImageClassification

BATCH = 64


def build_model(small=False):
    if small:
        return SwinForImageClassification(SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2, 6, 2],
                                                     num_heads=[1, 2, 4, 8], window_size=2, num_labels=10))
    return SwinForImageClassification(SwinConfig(num_labels=1000))


def make_batch(small=False):
    n, size, classes = (2, 32, 10) if small else (BATCH, 224, 1000)
    return {"pixel_values": torch.randn(n, 3, size, size), "labels": torch.randint(0, classes, (n,))}
