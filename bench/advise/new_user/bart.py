"""BART-base's shape (encoder-decoder, 6 + 6 layers, d_model 768; transformers' BartConfig, no
weights), batch 16: 512 tokens in, 128 out (labels shifted into the decoder's input by the model)."""
import torch
from transformers import BartConfig, BartForConditionalGeneration

BATCH, SRC, TGT, VOCAB = 16, 512, 128, 50265


def build_model(small=False):
    d = 64 if small else 768
    cfg = BartConfig(vocab_size=512 if small else VOCAB, d_model=d, encoder_layers=6, decoder_layers=6,
                     encoder_attention_heads=4 if small else 12, decoder_attention_heads=4 if small else 12,
                     encoder_ffn_dim=4 * d, decoder_ffn_dim=4 * d, max_position_embeddings=1024, use_cache=False)
    return BartForConditionalGeneration(cfg)


def make_batch(small=False):
    n, src, tgt, vocab = (2, 32, 16, 512) if small else (BATCH, SRC, TGT, VOCAB)
    return {"input_ids": torch.randint(3, vocab, (n, src)), "attention_mask": torch.ones(n, src, dtype=torch.long),
            "labels": torch.randint(3, vocab, (n, tgt))}
