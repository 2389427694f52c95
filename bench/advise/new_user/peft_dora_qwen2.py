"""peft's DoRA (weight-decomposed low-rank adaptation, LoraConfig(use_dora=True)) on a Qwen2
shape (transformers Qwen2ForCausalLM from its config, no weights: 8 layers, hidden 1536, 12 heads
with 2 key/value heads, MLP 8960, vocabulary 151,936), rank 16 on every linear layer of the
decoder (target_modules="all-linear"): besides LoRA's A and B, each adapted layer's forward takes
the norm of its merged weight, W + scale x BA, every call; the base weights frozen in bf16
(torch_dtype as loaded for fine-tuning), the adapters fp32, AdamW(lr 2e-4), bf16 autocast,
batch 4 x 1024."""
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2Config, Qwen2ForCausalLM

BATCH, SEQ = 4, 1024


def build_model(small=False):
    cfg = Qwen2Config(vocab_size=512 if small else 151936, hidden_size=64 if small else 1536,
                      intermediate_size=128 if small else 8960, num_hidden_layers=2 if small else 8,
                      num_attention_heads=4 if small else 12, num_key_value_heads=2,
                      max_position_embeddings=SEQ, use_cache=False, tie_word_embeddings=True)
    base = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, use_dora=True, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    model = get_peft_model(base, lora)
    for n, p in model.named_parameters():   # the adapters train in fp32, as peft's autocast_adapter_dtype does
        if p.requires_grad:
            p.data = p.data.float()
    return model


def make_batch(small=False):
    n, t, v = (2, 32, 512) if small else (BATCH, SEQ, 151936)
    ids = torch.randint(0, v, (n, t))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def build_optimizer(model):
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
