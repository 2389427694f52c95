"""Whisper-small's shape (encoder-decoder speech: 12 + 12 layers, d_model 768) from its config,
batch 16 of 30 s log-mel inputs (80 x 3000) and 128-token transcripts."""
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

BATCH, TOKENS = 16, 128


def build_model(small=False):
    d = 64 if small else 768
    cfg = WhisperConfig(vocab_size=512 if small else 51865, num_mel_bins=80, d_model=d, encoder_layers=12,
                        decoder_layers=12, encoder_attention_heads=4 if small else 12,
                        decoder_attention_heads=4 if small else 12, encoder_ffn_dim=4 * d, decoder_ffn_dim=4 * d,
                        max_source_positions=50 if small else 1500, max_target_positions=448, use_cache=False,
                        **(dict(pad_token_id=0, bos_token_id=1, eos_token_id=1, decoder_start_token_id=2) if small else {}))
    return WhisperForConditionalGeneration(cfg)


def make_batch(small=False):
    n, frames, tokens, vocab = (2, 100, 16, 512) if small else (BATCH, 3000, TOKENS, 51865)
    return {"input_features": torch.randn(n, 80, frames), "labels": torch.randint(0, vocab, (n, tokens))}
