"""T5 (encoder-decoder) from a t5-small-like config: AutoModelForSeq2SeqLM.from_config, relative
position bias, inputs and labels of their own lengths; the capture's default step (AdamW)."""
import torch
from transformers import AutoModelForSeq2SeqLM, T5Config

BATCH, SRC, TGT = 8, 512, 128


def build_model(small=False):
    cfg = T5Config(vocab_size=512 if small else 32128, d_model=64 if small else 512, d_kv=16 if small else 64,
                   d_ff=128 if small else 2048, num_layers=2 if small else 6, num_heads=4 if small else 8,
                   use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    return AutoModelForSeq2SeqLM.from_config(cfg)


def make_batch(small=False):
    v = 512 if small else 32128
    return {"input_ids": torch.randint(0, v, (2, 32) if small else (BATCH, SRC)),
            "labels": torch.randint(0, v, (2, 16) if small else (BATCH, TGT))}
