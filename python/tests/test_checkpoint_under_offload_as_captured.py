"""A checkpointed block under an offload's hook, with saves outside the checkpoint, predicted as
captured (ResNet-50, layer1.0 checkpointed and a streamed offload of layer1.0-1: +4.40% peak
before 2026-12-06). Two rules, each of which failed here:
- a save inside a checkpoint that its policy does not keep is not made (the checkpoint's holder
  replaces it): blocks.0's in-place ReLU saves its output, which blocks.1's conv saves too; the
  prediction held it to blocks.0's backward, where the step lets it die after blocks.1's forward
  and copies it back (forward peak over by one activation);
- the checkpoint's input that the hook packs is held by the stem's ReLU, which saved it earlier:
  it stays on the device and the hook uses it as it is. The hook took that pack for the ReLU
  saving its own output (the node made last), kept no way to see it alive, and copied it back at
  the recomputation beside the live one (python/mhc_torch/offload.py)."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from tiny_models import ResBlock  # noqa: E402


class Net(nn.Module):
    """The forward's peak is at its wide head, after the blocks: what the blocks still hold counts."""

    def __init__(self):
        super().__init__()
        self.stem, self.blocks = nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(ResBlock(), ResBlock(), ResBlock())
        self.head = nn.Conv2d(8, 64, 1)

    def forward(self, x):
        return torch.sigmoid(self.head(self.blocks(torch.relu(self.stem(x))))).mean()


def _batch():
    return torch.randn(4, 3, 16, 16)


def _capture(path, setting=None):
    return mhc_torch.capture(Net, _batch, steps=1, path=path, autocast_dtype=None, setting=setting,
                             loss_fn=lambda model, batch: model(batch),
                             optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1))


def _copies(path, kind):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*), coalesce(sum(bytes), 0) FROM copies WHERE kind = ?", (kind,)).fetchone()
    finally:
        db.close()


@pytest.mark.parametrize("mode", ["streamed", "sync"])
@pytest.mark.parametrize("checkpointed,offloaded", [
    (["Net.blocks.0"], ["Net.blocks.0", "Net.blocks.1"]),   # ResNet-50's case
    (["Net.blocks.1"], ["Net.blocks.0", "Net.blocks.1"]),   # its input made inside the hook
    (["Net.blocks.0"], ["Net.blocks.1"]),                   # the checkpoint outside the hook
], ids=["ckpt0-off01", "ckpt1-off01", "ckpt0-off1"])
def test_checkpoint_under_offload_as_captured(mhc_exe, tmp_path, mode, checkpointed, offloaded):
    base, applied, out = str(tmp_path / "base.db"), str(tmp_path / "applied.db"), str(tmp_path / "out.db")
    _capture(base)
    setting = {"checkpoint": {"modules": checkpointed},
               "offload": {"mode": mode, "modules": offloaded, "min_bytes": 0}}
    got = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json", "--trace-out", out],
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    row = json.loads(got.stdout)["rows"][0]
    captured = _capture(applied, setting)
    assert (row["peak_bytes"], row["host_peak_bytes"]) == \
        (captured.peak_bytes, int(captured.meta["capture.host_peak_bytes"]))
    assert _copies(out, 0) == _copies(applied, 0)   # the copies back, as many and as large
    simulated = subprocess.run([mhc_exe, "simulate", applied, "--capacity", "unlimited", "--json"],
                               capture_output=True, text=True)
    assert simulated.returncode == 0, simulated.stderr
    assert row["reserved_bytes"] == json.loads(simulated.stdout)["metrics"]["simulated_peak_bytes"]
