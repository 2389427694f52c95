"""Which modules `mhc advise` takes for the model's blocks (advise/src/capture_info.cpp
find_blocks), on small models shaped as the families a new user brought (bench/advise/new_user:
CLIP's embeddings beside its layers, Swin's stages of blocks). Each test fails without the fix it
guards."""
import subprocess

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Embeddings(nn.Module):
    """CLIP's text embeddings: a token and a position nn.Embedding side by side."""

    def __init__(self, vocab, tokens, dim):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Embedding(tokens, dim)

    def forward(self, ids):
        return self.token_embedding(ids) + self.position_embedding(torch.arange(ids.shape[1]))


class TextTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings(64, 16, 32)
        self.layers = nn.ModuleList(Block(32) for _ in range(3))

    def forward(self, ids):
        x = self.embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return x.float().pow(2).mean()


class Stage(nn.Module):
    """A Swin stage: its blocks, then a downsampling projection."""

    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.downsample = nn.Linear(dim, 2 * dim)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.downsample(x)


class Stages(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([Stage(16, 1), Stage(32, 2)])

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return x.float().pow(2).mean()


def _blocks_line(path, mhc_exe):
    out = subprocess.run([mhc_exe, "advise", path, "--setting", "{}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[0]


def test_single_layers_side_by_side_are_not_blocks(tmp_path, mhc_exe):
    """CLIP ViT-B/32's "26 blocks" held text_model.embeddings' token_embedding and
    position_embedding (two nn.Embedding, named children of one type): two answers printed the same
    text, differing only in which embedding they checkpointed. Now the blocks are the layers."""
    path = str(tmp_path / "text.db")
    mhc_torch.capture(TextTower, lambda: (torch.randint(0, 64, (64, 16)),), steps=1, path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    line = _blocks_line(path, mhc_exe)
    assert line.endswith(": 3 blocks (TextTower.layers), 1 step"), line   # was "5 blocks (TextTower.layers, TextTower.embeddings)"


def test_stages_of_different_depths_offer_the_blocks_inside_them(tmp_path, mhc_exe):
    """Swin-T's blocks were its 4 stages (2, 2, 6 and 2 Swin blocks each, and a downsampling): a
    choice per stage, where a user checkpoints the blocks one by one. Stages that differ in
    structure and hold stacks doing most of their work give those stacks' blocks (a stack of one
    block included), named as the model's own modules."""
    path = str(tmp_path / "stages.db")
    mhc_torch.capture(Stages, lambda: (torch.randn(64, 8, 16),), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b))
    line = _blocks_line(path, mhc_exe)
    assert " 3 blocks (" in line, line   # was "2 blocks (Stages.stages)"
    assert "Stages.stages.0.blocks" in line and "Stages.stages.1.blocks" in line, line
    model = Stages()   # the stacks named are the model's own modules
    prefixes = line[line.index("(") + 1:line.index(")")].split(", ")
    assert sorted(len(model.get_submodule(p.removeprefix("Stages."))) for p in prefixes) == [1, 2]
