"""A Mistral shape from its config (AutoModelForCausalLM.from_config), the base frozen and
hand-written LoRA adapters (rank 16) on every attention projection and MLP matrix, as a user
does without peft; bf16 weights for the frozen base (model.to(bfloat16)) and fp32 adapters."""
import torch
from torch import nn
from transformers import AutoModelForCausalLM, MistralConfig

BATCH, SEQ = 4, 2048


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=16, alpha=32):
        super().__init__()
        self.base = base
        self.a = nn.Linear(base.in_features, r, bias=False, dtype=torch.float32)
        self.b = nn.Linear(r, base.out_features, bias=False, dtype=torch.float32)
        nn.init.zeros_(self.b.weight)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.b(self.a(x)) * self.scale


def build_model(small=False):
    cfg = MistralConfig(vocab_size=512 if small else 32000, hidden_size=64 if small else 2048,
                        intermediate_size=128 if small else 5632, num_hidden_layers=4 if small else 8,
                        num_attention_heads=4 if small else 16, num_key_value_heads=2 if small else 4,
                        max_position_embeddings=4096, use_cache=False, sliding_window=None)
    m = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    for p in m.parameters():
        p.requires_grad_(False)
    for layer in m.model.layers:
        for parent, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                              (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
            for n in names:
                setattr(parent, n, LoRALinear(getattr(parent, n)))
    return m


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else 32000, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
