"""An MLP-Mixer-B/16 (Tolstikhin et al.) written in plain PyTorch, its 12 mixer layers in one
nn.Sequential that the forward runs with torch.utils.checkpoint.checkpoint_sequential(self.layers,
4, x, use_reentrant=False): the user has already split the stack into 4 checkpointed segments (the
last segment's layers keep their activations, as checkpoint_sequential runs it plainly). ImageNet
classification at 224 x 224, label smoothing 0.1, AdamW(lr 1e-3, weight decay 0.05), bf16
autocast; batch 128."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

BATCH, IMG, PATCH, CLASSES = 128, 224, 16, 1000


class MixerLayer(nn.Module):
    def __init__(self, tokens, d, tok_hidden, ch_hidden):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tok_hidden), nn.GELU(), nn.Linear(tok_hidden, tokens))
        self.channel_mlp = nn.Sequential(nn.Linear(d, ch_hidden), nn.GELU(), nn.Linear(ch_hidden, d))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, img=IMG, d=768, depth=12, segments=4):
        super().__init__()
        tokens = (img // PATCH) ** 2
        self.segments = segments
        self.stem = nn.Conv2d(3, d, PATCH, PATCH)
        self.layers = nn.Sequential(*(MixerLayer(tokens, d, d // 2, 4 * d) for _ in range(depth)))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, CLASSES)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = checkpoint_sequential(self.layers, self.segments, x, use_reentrant=False)
        return self.head(self.norm(x).mean(1))


def build_model(small=False):
    return Mixer(32, 64, 4, 2) if small else Mixer()


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, IMG)
    return torch.randn(n, 3, s, s), torch.randint(0, CLASSES, (n,))


def loss_fn(model, batch):
    x, y = batch
    return F.cross_entropy(model(x.cuda()), y.cuda(), label_smoothing=0.1)


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
