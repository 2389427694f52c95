"""Supervised fine-tuning with packed sequences, as TRL's SFTTrainer runs it with packing=True and
padding_free: several documents of different lengths concatenated into each row of 4096 tokens,
no attention mask, position_ids restarting at 0 at each document (transformers then masks
attention within each document: a block-diagonal causal mask from the position ids), the first
token of each document not predicted from the previous one (label -100). A SmolLM-360M-like
Llama shape from its config (16 layers here, hidden 960, 15 heads with 5 key/value heads, MLP
2560, vocabulary 49,152, tied embeddings), AdamW(lr 2e-5, weight decay 0.01), a cosine schedule
with warmup, gradient clipping to 1.0, bf16 autocast, batch 2 x 4096."""
import math

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ROWS, SEQ, DOCS = 2, 4096, [1000, 700, 1500, 896]


def build_model(small=False):
    cfg = LlamaConfig(vocab_size=512 if small else 49152, hidden_size=64 if small else 960,
                      intermediate_size=128 if small else 2560, num_hidden_layers=2 if small else 16,
                      num_attention_heads=4 if small else 15, num_key_value_heads=2 if small else 5,
                      max_position_embeddings=SEQ, tie_word_embeddings=True, use_cache=False)
    return LlamaForCausalLM(cfg)


def make_batch(small=False):
    docs = [d // 32 for d in DOCS] if small else DOCS
    v = 512 if small else 49152
    ids = torch.randint(0, v, (ROWS, sum(docs)))
    pos = torch.cat([torch.arange(d) for d in docs]).repeat(ROWS, 1)
    labels = ids.masked_fill(pos == 0, -100)   # a document's first token is not predicted from the last one's
    return {"input_ids": ids, "position_ids": pos, "labels": labels}


def build_optimizer(model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-5)
    warmup, total = 100, 10000
    torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / warmup if s < warmup else
                                      0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup))))
    return opt


def loss_fn(model, batch):
    batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
    return model(**batch).loss
