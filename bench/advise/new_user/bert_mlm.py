"""BERT-base masked-language-model pretraining (transformers BertForMaskedLM from its config, no
weights): 12 layers, hidden 768, batch 32 x 512 tokens, a padding mask (the last quarter of every
other sequence padded) and labels -100 except at the masked 15% of positions, as
DataCollatorForLanguageModeling makes them."""
import torch
from transformers import BertConfig, BertForMaskedLM

BATCH, SEQ, VOCAB = 32, 512, 30522


def build_model(small=False):
    cfg = BertConfig(vocab_size=512 if small else VOCAB, hidden_size=64 if small else 768, num_hidden_layers=12,
                     num_attention_heads=4 if small else 12, intermediate_size=128 if small else 3072,
                     max_position_embeddings=512, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return BertForMaskedLM(cfg)


def make_batch(small=False):
    n, t, vocab = (2, 32, 512) if small else (BATCH, SEQ, VOCAB)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (n, t), generator=g)
    mask = torch.ones(n, t, dtype=torch.long)
    mask[::2, 3 * t // 4:] = 0
    masked = (torch.rand(n, t, generator=g) < 0.15) & mask.bool()
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    ids = torch.where(masked, torch.full_like(ids, 4), ids)  # [MASK]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels}
