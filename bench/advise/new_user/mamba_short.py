"""Mamba (transformers MambaForCausalLM, hidden 768) with 6 layers and 64 tokens (batch 4): the
shape of mamba.py at a quarter of its sequential scan's length and half its layers, so that a
capture (transformers' scan runs one kernel group per token and layer) takes about a tenth as long."""
import torch
from transformers import MambaConfig, MambaForCausalLM

BATCH, SEQ = 4, 64


def build_model(small=False):
    cfg = MambaConfig(vocab_size=512 if small else 50280, hidden_size=32 if small else 768, state_size=16,
                      num_hidden_layers=6, use_cache=False)
    return MambaForCausalLM(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else 50280, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}
