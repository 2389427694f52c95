"""A mixture-of-experts decoder in OLMoE's style (transformers' OlmoeConfig, no weights): every
layer's MLP is 16 experts with top-4 routing (softmax router, no shared expert), the experts
stored as 3-D tensors and run by transformers' default grouped-matmul implementation (tokens
sorted by expert; shapes do not depend on the routing). 4 layers, hidden 1024, batch 4 x 2048."""
import torch
from transformers import OlmoeConfig, OlmoeForCausalLM

BATCH, SEQ, VOCAB = 4, 2048, 50304


def config(small=False, **kw):
    d = 64 if small else 1024
    return OlmoeConfig(vocab_size=512 if small else VOCAB, hidden_size=d, intermediate_size=d // 2 if small else 1024,
                       num_hidden_layers=4, num_attention_heads=4 if small else 16,
                       num_key_value_heads=4 if small else 16, num_experts=16, num_experts_per_tok=4,
                       max_position_embeddings=4096, use_cache=False, **kw)


def build_model(small=False):
    return OlmoeForCausalLM(config(small))


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
