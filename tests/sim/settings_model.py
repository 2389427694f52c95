"""A small model for reference_settings_compare.py with what the presets lack: a module called
several times per pass (one shared block after each block), a frozen weight (its autocast cast is
not cached), a block whose last saving op saves its own output (relu: the early stop reruns it),
and an fp32 buffer. Captured with `mhc-torch capture tests/sim/settings_model.py`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, SEQ = 512, 128, 128


class Block(nn.Module):
    def __init__(self, d, relu_last=False):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.relu_last = relu_last

    def forward(self, x):
        y = self.fc2(F.gelu(self.fc1(self.norm(x))))
        return x + (torch.relu(y) if self.relu_last else y)


class Net(nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList([Block(DIM, relu_last=(i == 1)) for i in range(layers)])
        self.shared = Block(DIM)
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer("scale", torch.ones(DIM))
        self.blocks[0].fc1.weight.requires_grad_(False)   # frozen: cast anew at each use

    def forward(self, ids):
        h = self.emb(ids) * self.scale
        for b in self.blocks:
            h = self.shared(b(h))
        return self.head(h)


def build_model():
    return Net()


def make_batch():
    ids = torch.randint(0, VOCAB, (2, SEQ))
    return {"ids": ids}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.view(-1, VOCAB), batch["ids"].view(-1))
