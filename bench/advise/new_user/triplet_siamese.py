"""A siamese encoder trained with a triplet loss: one encoder of 8 residual MLP blocks run three
times a step (anchor, positive, negative share its weights, so each block is called three times in
one forward and its saved activations are three calls' worth), nn.TripletMarginLoss, AdamW, bf16
autocast. 512 triplets of 1,024 features a step, width 2,048."""
import torch
from torch import nn

FEATURES, WIDTH, BLOCKS, TRIPLETS = 1024, 2048, 8, 512


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Encoder(nn.Module):
    def __init__(self, features=FEATURES, width=WIDTH, blocks=BLOCKS):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.out = nn.Linear(width, 256)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return nn.functional.normalize(self.out(x), dim=-1)


class Siamese(nn.Module):
    def __init__(self, **sizes):
        super().__init__()
        self.encoder = Encoder(**sizes)
        self.loss = nn.TripletMarginLoss(margin=0.2)

    def forward(self, anchor, positive, negative):
        return self.loss(self.encoder(anchor), self.encoder(positive), self.encoder(negative))


def build_model(small=False):
    return Siamese(features=32, width=64, blocks=BLOCKS) if small else Siamese()


def make_batch(small=False):
    n, f = (8, 32) if small else (TRIPLETS, FEATURES)
    return {"anchor": torch.randn(n, f), "positive": torch.randn(n, f), "negative": torch.randn(n, f)}


def loss_fn(model, batch):
    return model(batch["anchor"], batch["positive"], batch["negative"])
