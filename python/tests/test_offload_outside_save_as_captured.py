"""An offloaded module's output that a save outside the module holds too, predicted as captured:
the caller's mul saves the module's sigmoid output (NeRF's `w[..., None] * rgb`). The backward
runs the mul's node first, which lets go of it; the hook's unpack in the sigmoid's backward then
finds it gone and copies it back (python/mhc_torch/offload.py). Before 2026-12-06 the prediction
kept it on the device to the sigmoid's backward with no copy back: peak +4.66%. A save outside
made before the module's (the caller's tanh, whose output the module's linear saves) still holds
it at the hook's unpack: used as it is, no copy back, in both (the module's own output, which
nothing else saves there, comes back)."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from tiny_models import ResBlock  # noqa: E402


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(256, 256)

    def forward(self, x):
        return torch.sigmoid(self.lin(x))


class After(nn.Module):
    """The mul outside `inner` saves inner's output after inner saved it."""

    def __init__(self):
        super().__init__()
        self.inner, self.w = Inner(), nn.Linear(256, 256)

    def forward(self, x):
        return self.inner(x) * self.w(x)


class Before(nn.Module):
    """tanh outside `inner` saves its output before inner's linear saves it."""

    def __init__(self):
        super().__init__()
        self.pre, self.inner = nn.Linear(256, 256), Inner()

    def forward(self, x):
        return self.inner(torch.tanh(self.pre(x)))


def _batch():
    return torch.randn(2048, 256)


def _loss(model, batch):
    return model(batch).sum()   # saves nothing: the module's output is held only by what the models say


def _capture(path, build, setting=None):
    return mhc_torch.capture(build, _batch, steps=1, path=path, autocast_dtype=None, setting=setting, loss_fn=_loss,
                             optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True))


def _copies_back(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM copies WHERE kind = 0").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("build,copies_back", [(After, 1), (Before, 1)], ids=["after", "before"])
@pytest.mark.parametrize("mode", ["sync", "streamed"])
def test_offload_of_an_output_saved_outside_as_captured(mhc_exe, tmp_path, build, copies_back, mode):
    base, applied = str(tmp_path / "base.db"), str(tmp_path / "applied.db")
    _capture(base, build)
    setting = {"offload": {"mode": mode, "modules": [f"{build.__name__}.inner"], "min_bytes": 0}}
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    captured = _capture(applied, build, setting)
    # the sigmoid's output comes back; the batch (the caller's) and Before's tanh output are used as they are
    assert _copies_back(applied) == copies_back
    assert (row["peak_bytes"], row["host_peak_bytes"]) == \
        (captured.peak_bytes, int(captured.meta["capture.host_peak_bytes"]))
    simulated = subprocess.run([mhc_exe, "simulate", applied, "--capacity", "unlimited", "--json"],
                               capture_output=True, text=True)
    assert simulated.returncode == 0, simulated.stderr
    assert row["reserved_bytes"] == json.loads(simulated.stdout)["metrics"]["simulated_peak_bytes"]


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.blocks = nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(ResBlock(), ResBlock(), ResBlock())

    def forward(self, x):
        return self.blocks(torch.relu(self.stem(x))).mean()


def test_checkpointed_inplace_relu_under_streamed_offload_trains_as_plain():
    """blocks.1 saves blocks.0's output, made by the in-place ReLU inside blocks.0's checkpoint,
    whose node's saved result the checkpoint packed: the offload's check whether that node still
    holds the storage read it, which unpacked the checkpoint's holder, and the backward stopped
    (CheckpointError: "Unpack is being triggered for a tensor that was already unpacked once";
    ResNet-50 with layer1.0 checkpointed and a streamed offload of layer1.0-1). A dead storage is
    now seen without reading it."""
    torch.manual_seed(0)
    plain = ResNet()
    applied = ResNet()
    applied.load_state_dict(plain.state_dict())
    setting = {"checkpoint": {"modules": ["blocks.0"]},
               "offload": {"mode": "streamed", "modules": ["blocks.0", "blocks.1"], "min_bytes": 0}}
    applied, _ = mhc_torch.apply(applied, torch.optim.SGD(applied.parameters(), lr=0.1), setting)
    x = torch.randn(4, 3, 16, 16)
    plain(x).backward()
    applied(x).backward()
    for (name, p), q in zip(plain.named_parameters(), applied.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7), name
