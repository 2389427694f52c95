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


class Block(nn.Module):
    """x -> fc2(relu(fc1(x))) without biases: relu saves its output, and fc2 saves it again as its
    input (the bytes each save takes: settings_net.py)."""

    def __init__(self, d=16, h=64):
        super().__init__()
        self.fc1 = nn.Linear(d, h, bias=False)
        self.fc2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    """Three Blocks: the settings tests' tiny model (its module names, "Net.blocks.0.fc1", are in
    their figures)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Normalized(nn.Module):
    """F.normalize over a Linear's output: its vector norm and division both save their input (a
    storage two ops save, for the offload tests' unpack order)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(512, 512)
        self.out = nn.Linear(512, 32)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return nn.functional.normalize(self.out(h), dim=-1).pow(2).sum()


SPARSE_ROWS, SPARSE_DIM, SPARSE_LOOKUPS = 512, 32, 64


class SparseBag(nn.Module):
    """A sparse embedding's rows averaged: a sparse gradient, SPARSE_LOOKUPS rows of it a pass."""

    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(SPARSE_ROWS, SPARSE_DIM, sparse=True)
        self.out = nn.Linear(SPARSE_DIM, 1)

    def forward(self, ids):
        return self.out(self.e(ids).mean(1)).sum()
