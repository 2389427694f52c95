"""A mixture-of-experts decoder in Qwen2-MoE's style (transformers' Qwen2MoeConfig, no weights):
every layer's MLP is 16 routed experts with top-4 softmax routing plus a shared expert behind a
sigmoid gate; grouped query attention (16 query heads, 4 key/value heads) with rotary positions.
4 layers, hidden 1024, batch 4 x 2048; the router's auxiliary load-balancing loss is added to the
language-model loss (output_router_logits=True, router_aux_loss_coef 0.001)."""
import torch
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

BATCH, SEQ, VOCAB = 4, 2048, 32000


def build_model(small=False):
    d = 64 if small else 1024
    cfg = Qwen2MoeConfig(vocab_size=512 if small else VOCAB, hidden_size=d, intermediate_size=2 * d,
                         moe_intermediate_size=d // 2 if small else 512, shared_expert_intermediate_size=d if small else 2048,
                         num_hidden_layers=4, num_attention_heads=4 if small else 16,
                         num_key_value_heads=2 if small else 4, num_experts=16, num_experts_per_tok=4,
                         decoder_sparse_step=1, norm_topk_prob=False, output_router_logits=True,
                         router_aux_loss_coef=0.001, max_position_embeddings=4096, use_cache=False)
    return Qwen2MoeForCausalLM(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
