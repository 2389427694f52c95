"""Flan-T5-base-shaped fine-tuning (transformers T5ForConditionalGeneration from a config, no
download: 12 + 12 layers, d_model 768, gated-GELU MLP 2048) with the optimizer Hugging Face's T5
documentation recommends, transformers' Adafactor (factored second moments: a row and a column
vector per matrix instead of AdamW's two full copies) at a fixed lr 1e-3 (scale_parameter=False,
relative_step=False, warmup_init=False), built in build_optimizer(model); bf16 autocast; batch 16:
512 tokens in, 128 out."""
import torch
from transformers import T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

BATCH, SRC, TGT = 16, 512, 128


def build_model(small=False):
    cfg = T5Config(vocab_size=512 if small else 32128, d_model=64 if small else 768, d_kv=16 if small else 64,
                   d_ff=128 if small else 2048, num_layers=2 if small else 12, num_heads=4 if small else 12,
                   feed_forward_proj="gated-gelu", tie_word_embeddings=False, use_cache=False,
                   decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(cfg)


def build_optimizer(model):
    return Adafactor(model.parameters(), lr=1e-3, scale_parameter=False, relative_step=False, warmup_init=False)


def make_batch(small=False):
    n, s, t, v = (2, 32, 8, 512) if small else (BATCH, SRC, TGT, 32128)
    return {"input_ids": torch.randint(1, v, (n, s)), "attention_mask": torch.ones(n, s, dtype=torch.long),
            "labels": torch.randint(1, v, (n, t))}
