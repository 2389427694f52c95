"""A Perceiver IO language model as transformers' PerceiverForMaskedLM builds it from a config
(no download): UTF-8 bytes (vocabulary 262) cross-attended into 256 latents of 1280 channels,
latent self-attention blocks, then decoder queries (one per input position) cross-attending back
to the latents; masked-byte modelling, AdamW(lr 1e-4), bf16 autocast. 12 latent layers (of 26),
batch 16 x 2048 bytes."""
import torch
from transformers import PerceiverConfig, PerceiverForMaskedLM

BATCH, SEQ = 16, 2048


def build_model(small=False):
    cfg = PerceiverConfig(num_latents=16 if small else 256, d_latents=64 if small else 1280,
                          d_model=32 if small else 768, num_blocks=1,
                          num_self_attends_per_block=2 if small else 12,
                          num_self_attention_heads=4 if small else 8, num_cross_attention_heads=4 if small else 8,
                          qk_channels=None, v_channels=None, vocab_size=262,
                          max_position_embeddings=32 if small else SEQ)
    return PerceiverForMaskedLM(cfg)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SEQ)
    ids = torch.randint(6, 262, (n, s))
    labels = torch.full_like(ids, -100)
    labels[:, 5::7] = ids[:, 5::7]
    ids[:, 5::7] = 3   # [MASK]
    return {"inputs": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
