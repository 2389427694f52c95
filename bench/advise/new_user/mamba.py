"""Mamba (transformers MambaForCausalLM from its config: 12 layers, hidden 768), batch 4 x 256:
a state-space model with no attention."""
import torch
from transformers import MambaConfig, MambaForCausalLM

BATCH, SEQ = 4, 256


def build_model(small=False):
    cfg = MambaConfig(vocab_size=512 if small else 50280, hidden_size=32 if small else 768, state_size=16,
                      num_hidden_layers=12, use_cache=False)
    return MambaForCausalLM(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else 50280, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
