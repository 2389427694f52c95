"""Hugging Face CLIP (CLIPModel from its configuration, no weights), ViT-B/32 shape: a 12-layer
vision tower (hidden 768, 224 x 224 images in 32 x 32 patches) and a 12-layer text tower (hidden
512, 77 tokens), trained with CLIP's own contrastive loss (return_loss=True: cross-entropy over
the batch's image-text similarities in both directions). Batch 256 pairs; AdamW (default)."""
import torch
from transformers import CLIPConfig, CLIPModel

BATCH, TOKENS = 256, 77


def build_model(small=False):
    if small:
        cfg = CLIPConfig(text_config=dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=12,
                                          num_attention_heads=4, max_position_embeddings=16),
                         vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=12,
                                            num_attention_heads=4, image_size=32, patch_size=8),
                         projection_dim=16)
    else:
        cfg = CLIPConfig(text_config=dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=12,
                                          num_attention_heads=8),
                         vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                            num_attention_heads=12, image_size=224, patch_size=32),
                         projection_dim=512)
    return CLIPModel(cfg)


def make_batch(small=False):
    n, t, vocab, size = (4, 16, 512, 32) if small else (BATCH, TOKENS, 49408, 224)
    return {"input_ids": torch.randint(0, vocab, (n, t)), "pixel_values": torch.randn(n, 3, size, size),
            "return_loss": True}
