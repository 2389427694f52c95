"""An offloaded layer's input that the caller's frame holds past the layer, predicted as captured:
`h = F.relu(layer(h))` keeps the old `h` until F.relu returns and the name is rebound, so under an
offload (autograd no longer holds it) it dies after the ReLU, not after the matmul that last reads
it. The capture records that hold (meta capture.frame_holds: a model frame's locals are held at
every return of a function it called); before 2026-12-06 only the returning frame's own locals
counted, and NeRF's fine MLP offloaded (sync) was predicted +10.08% over its reserved bytes. The
head's Linear saves the offloaded MLP's output too: its node lets go of it after the engine's sum
of the bias gradient (4 MiB under there before)."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(256, 256) for _ in range(4))

    def forward(self, h):
        for layer in self.layers:
            h = F.relu(layer(h))
        return h


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(256, 8)

    def forward(self, x):
        return self.head(self.mlp(x)).square().mean()


def _capture(path, setting=None):
    return mhc_torch.capture(Net, lambda: torch.randn(4096, 256), steps=1, path=path, autocast_dtype=None,
                             setting=setting, loss_fn=lambda model, batch: model(batch),
                             optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1))


def _live(path):
    """Live device bytes as each kernel starts."""
    db = sqlite3.connect(path)
    try:
        kernels = db.execute("SELECT k.t_start, s.text FROM kernels k JOIN strings s ON s.id = k.name "
                             "WHERE k.device = 0 ORDER BY k.t_start, k.id").fetchall()
        allocs = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall()
    finally:
        db.close()
    out = []
    for t, name in kernels:
        out.append((name, sum(b for b, a, f in allocs if a <= t and (f is None or f > t))))
    return out


def test_caller_frame_hold_recorded(tmp_path):
    """Each layer's input is held to the ReLU after its matmul (the loop's rebinding of `h`)."""
    path = str(tmp_path / "base.db")
    _capture(path)
    db = sqlite3.connect(path)
    try:
        names = dict(db.execute("SELECT k.id, s.text FROM kernels k JOIN strings s ON s.id = k.name"))
        holds = json.loads(db.execute("SELECT value FROM meta WHERE key = 'capture.frame_holds'").fetchone()[0])
        made = dict(db.execute("SELECT id, t_alloc FROM allocations"))
        relu_outputs = [a for a, in db.execute(
            "SELECT a.id FROM allocations a JOIN kernels k ON k.t_start <= a.t_alloc AND a.t_alloc < k.t_end "
            "JOIN strings s ON s.id = k.name WHERE s.text = 'aten::relu' ORDER BY a.t_alloc")]
    finally:
        db.close()
    held = {a: k for a, k in holds}
    # the first three ReLU outputs are the next layers' inputs: held to the next ReLU
    assert [names[held[a]] for a in relu_outputs[:3]] == ["aten::relu"] * 3, (holds, made)


@pytest.mark.parametrize("mode", ["sync", "streamed"])
def test_offload_of_frame_held_inputs_as_captured(mhc_exe, tmp_path, mode):
    """Streamed: the ReLU's save of its output is unpacked by its own node (threshold_backward, in
    the MLP), after the next Linear's weight-gradient matmul inside the MLP that reads it too; the
    prefetch from it came one node early before 2026-12-06 (peak +4.13%)."""
    base, applied, out = str(tmp_path / "base.db"), str(tmp_path / "applied.db"), str(tmp_path / "out.db")
    _capture(base)
    setting = {"offload": {"mode": mode, "modules": ["Net.mlp"], "min_bytes": 0}}
    got = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json", "--trace-out", out],
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    row = json.loads(got.stdout)["rows"][0]
    captured = _capture(applied, setting)
    simulated = subprocess.run([mhc_exe, "simulate", applied, "--capacity", "unlimited", "--json"],
                               capture_output=True, text=True)
    assert simulated.returncode == 0, simulated.stderr
    assert (row["peak_bytes"], row["host_peak_bytes"], row["reserved_bytes"]) == \
        (captured.peak_bytes, int(captured.meta["capture.host_peak_bytes"]),
         json.loads(simulated.stdout)["metrics"]["simulated_peak_bytes"])
    # every kernel: the head's Linear saves the MLP's output too, and its node lets go of it after
    # the engine's sum of the bias gradient, not at its last read
    assert _live(out) == _live(applied)
