"""A LLaVA-style vision-language model (transformers' LlavaForConditionalGeneration from a config:
a CLIP ViT-L/14-shaped vision tower at 336 px, 8 of its 24 layers, a two-layer MLP projector and a
Llama decoder of 8 layers, hidden 2048), fine-tuned on one image and its caption: the image's 576
patch features replace the <image> tokens of the prompt, the loss on the caption's tokens only
(labels -100 on the image and the prompt). AdamW, bf16 autocast. Batch 4 x 1024 tokens."""
import torch
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

BATCH, SEQ, IMAGE_TOKEN, VOCAB = 4, 1024, 32000, 32064


def config(small=False):
    vision = CLIPVisionConfig(hidden_size=32 if small else 1024, intermediate_size=64 if small else 4096,
                              num_hidden_layers=8, num_attention_heads=2 if small else 16,
                              image_size=28 if small else 336, patch_size=14, projection_dim=32 if small else 768)
    text = LlamaConfig(vocab_size=VOCAB, hidden_size=64 if small else 2048, intermediate_size=128 if small else 5504,
                       num_hidden_layers=8, num_attention_heads=4 if small else 16,
                       num_key_value_heads=4 if small else 16, max_position_embeddings=4096, use_cache=False)
    return LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                       vision_feature_layer=-2, vision_feature_select_strategy="default")


def build_model(small=False):
    return LlavaForConditionalGeneration(config(small))


def make_batch(small=False):
    n, seq, patches = (2, 32, 4) if small else (BATCH, SEQ, 576)
    ids = torch.randint(0, 32000, (n, seq))
    ids[:, 1:1 + patches] = IMAGE_TOKEN
    labels = ids.clone()
    labels[:, :1 + patches + 16] = -100   # the image and the prompt
    s = 28 if small else 336
    return {"input_ids": ids, "pixel_values": torch.randn(n, 3, s, s), "labels": labels}
