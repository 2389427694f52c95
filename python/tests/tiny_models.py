"""Small models several tests capture: one definition each, so their figures stay comparable."""
import torch
from torch import nn


def gpt2():
    """A two-layer GPT-2 of width 32 (Hugging Face's class), in training mode, without its cache."""
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2, use_cache=False))
    m.train()
    return m


def gpt2_batch():
    """Two sequences of 16 tokens, labelled with themselves."""
    ids = torch.randint(0, 64, (2, 16))
    return {"input_ids": ids, "labels": ids.clone()}


class ResBlock(nn.Module):
    """A ResNet basic block: its in-place ReLU saves its output (ReluBackward's result)."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1, self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), \
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.b2(self.c2(self.relu(self.b1(self.c1(x))))) + x)
