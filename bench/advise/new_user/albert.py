"""ALBERT-base masked-language-model pretraining (transformers AlbertForMaskedLM from its config):
one transformer layer's weights shared by all 12 layers (the same module called 12 times a
forward), a factorised embedding (128 -> 768); batch 32 x 512 with bert_mlm.py's batch."""
from transformers import AlbertConfig, AlbertForMaskedLM

import bert_mlm


def build_model(small=False):
    cfg = AlbertConfig(vocab_size=512 if small else 30000, embedding_size=32 if small else 128,
                       hidden_size=64 if small else 768, num_hidden_layers=12, num_attention_heads=4 if small else 12,
                       intermediate_size=128 if small else 3072, max_position_embeddings=512)
    return AlbertForMaskedLM(cfg)


def make_batch(small=False):
    b = bert_mlm.make_batch(small)
    if not small:  # ALBERT's vocabulary: 30,000
        b["input_ids"] = b["input_ids"].clamp(max=29999)
        b["labels"] = b["labels"].clamp(max=29999)
    return b
