"""LoRA fine-tuning with peft: a Llama-shaped model (8 layers, hidden 2048) whose base weights
are frozen (requires_grad=False); only the adapters (rank 16 on q, k, v, o) train, so AdamW's
state is the adapters'. build_model(small=True) is the CPU copy the printed code is run on."""
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

BATCH, SEQ = 4, 2048


def build_model(small=False):
    cfg = LlamaConfig(vocab_size=512 if small else 32000, hidden_size=64 if small else 2048,
                      intermediate_size=160 if small else 5632, num_hidden_layers=8,
                      num_attention_heads=4 if small else 16, num_key_value_heads=4 if small else 16,
                      max_position_embeddings=4096, use_cache=False)
    base = LlamaForCausalLM(cfg)
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    return get_peft_model(base, lora)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else 32000, (2, 64) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
