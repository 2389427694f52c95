"""Masked-autoencoder pre-training (transformers' ViTMAEForPreTraining, ViT-B/16 encoder and the
paper's 8-block 512-wide decoder, from a config): 75% of the patches masked by a random
permutation (argsort of noise), the encoder on the rest, the decoder on all, the loss on the
masked patches with normalised pixels. AdamW betas (0.9, 0.95), weight decay 0.05 as the MAE
paper's recipe, bf16 autocast. Batch 64 of 224 x 224."""
import torch
from transformers import ViTMAEConfig, ViTMAEForPreTraining

BATCH = 64


def build_model(small=False):
    cfg = ViTMAEConfig(hidden_size=64 if small else 768, num_hidden_layers=12,
                       num_attention_heads=4 if small else 12, intermediate_size=128 if small else 3072,
                       image_size=32 if small else 224, patch_size=8 if small else 16,
                       decoder_hidden_size=64 if small else 512, decoder_num_hidden_layers=8,
                       decoder_num_attention_heads=4 if small else 16,
                       decoder_intermediate_size=128 if small else 2048, mask_ratio=0.75, norm_pix_loss=True)
    return ViTMAEForPreTraining(cfg)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, 224)
    return {"pixel_values": torch.randn(n, 3, s, s)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1.5e-4, betas=(0.9, 0.95), weight_decay=0.05)
