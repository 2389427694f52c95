"""A Llama shape (8 layers, hidden 2048, batch 4 x 2048) whose user has already turned on
Hugging Face's own gradient checkpointing in build_model() (model.gradient_checkpointing_enable(),
non-reentrant): every decoder layer recomputes in the backward before any advice."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

BATCH, SEQ, VOCAB = 4, 2048, 32000


def build_model(small=False):
    d = 64 if small else 2048
    cfg = LlamaConfig(vocab_size=512 if small else VOCAB, hidden_size=d, intermediate_size=4 * d if small else 5632,
                      num_hidden_layers=8, num_attention_heads=4 if small else 16, num_key_value_heads=4 if small else 16,
                      max_position_embeddings=4096, use_cache=False)
    m = LlamaForCausalLM(cfg)
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return m


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
