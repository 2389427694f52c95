"""A small convolutional net for reference_settings_compare.py (torchvision is not needed): a stem,
three residual blocks of two 3x3 convolutions with BatchNorm (a buffer-holding module inside each
block), and a pooled linear head. Its blocks are what selective checkpointing keeps convolutions
of (docs/simulator.md "Settings": save_matmuls). Captured with
`mhc-torch capture tests/sim/settings_conv.py`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CH, SIZE, BATCH, CLASSES = 16, 32, 4, 10


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class Net(nn.Module):
    def __init__(self, blocks=3):
        super().__init__()
        self.stem = nn.Conv2d(3, CH, 3, padding=1)
        self.blocks = nn.ModuleList([Block(CH) for _ in range(blocks)])
        self.head = nn.Linear(CH, CLASSES)

    def forward(self, x):
        h = F.relu(self.stem(x))
        for b in self.blocks:
            h = b(h)
        return self.head(h.mean(dim=(2, 3)))


def build_model():
    return Net()


def make_batch():
    return (torch.randn(BATCH, 3, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,)))


def loss_fn(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])
