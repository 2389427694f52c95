"""A streamed offload's prefetch from a save whose storage a later op of the same module saved
too: F.normalize's vector norm and its division both save their input. Autograd runs the
division's node first and the norm's two nodes later (after clamp_min's); the offload hook's
unpack of the norm's save brings back the saves before it (python/mhc_torch/offload.py, _unpack).
Until 2026-12-07 the prediction took every save of that storage as unpacked at its first unpack
(the division's) and brought the Linear's input back two nodes early: the triplet siamese encoder
(bench/advise/new_user/triplet_siamese.py) predicted 3.29 GiB reserved against 3.15 GiB captured.
The capture now records each save's own unpack (meta capture.save_unpacks)."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402

STREAMED = {"offload": {"mode": "streamed", "modules": None, "max_fwd_stash": 2, "prefetch": 2}}


class _Normalized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(512, 512)
        self.out = torch.nn.Linear(512, 32)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return torch.nn.functional.normalize(self.out(h), dim=-1).pow(2).sum()


def _batch():
    return (torch.randn(256, 512),)


def _capture(path, setting=None):
    return mhc_torch.capture(_Normalized, _batch, steps=1, path=path, setting=setting, loss_fn=lambda m, b: m(*b))


def _device_events(path):
    """The device's allocations and frees in time order: (+bytes or -bytes) each."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device >= 0").fetchall()
    events = [(t, 1, i, b) for i, b, t, _ in rows] + [(t, 0, i, -b) for i, b, _, t in rows if t is not None]
    return [b for *_, b in sorted(events)]


def test_save_unpacked_by_its_own_node(mhc_exe, tmp_path):
    base = _capture(str(tmp_path / "base.db"))
    order = json.loads(base.meta["capture.pack_order"])
    unpacks = json.loads(base.meta["capture.save_unpacks"])
    assert len(unpacks) == len(order)
    # a storage two ops saved (the `out` Linear's output: the norm, then the division; the ReLU's
    # output: the ReLU, then the Linear; the norm: the norm, then clamp_min) comes back for the
    # later op's node first
    by_storage = {}
    for (alloc, saver), unpacked in zip(order, unpacks):
        by_storage.setdefault(alloc, {}).setdefault(saver, unpacked)
    twice = [sorted(saves.items()) for saves in by_storage.values() if len(saves) == 2]
    assert len(twice) == 3
    assert all(earlier[1] > later[1] > 0 for earlier, later in twice)
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--setting", json.dumps(STREAMED), "--json",
                          "--trace-out", str(tmp_path / "predicted.db")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    applied = _capture(str(tmp_path / "applied.db"), STREAMED)
    assert _device_events(tmp_path / "predicted.db") == _device_events(tmp_path / "applied.db")
    assert row["peak_bytes"] == int(applied.meta["capture.peak_bytes"])
    assert row["host_peak_bytes"] == int(applied.meta["capture.host_peak_bytes"])
