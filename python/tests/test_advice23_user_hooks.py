"""Saves made under a user's own saved-tensor hooks (`with torch.autograd.graph.saved_tensors_hooks(
pack, unpack):` around the model's call, as activation-compression code does) record their own
unpack (meta capture.save_unpacks) as the capture's own hooks' saves do. Until 2026-12-08 they did
not: every such save took its storage's first unpack, and a streamed offload's prefetch from the
earlier of two saves of one storage (F.normalize's vector norm and division both save their input)
was predicted two backward nodes early, as test_advice22_save_unpacks.py shows for the capture's
own hooks. The offload's hooks, entered by the model's forward pre-hook, are innermost there and
take the model's saves, as on a GPU."""
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


def _pack(t):
    return t.detach()   # a new object for each save, as a compressing hook's copy is


def _unpack(t):
    return t


def _loss(model, batch):
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        return model(*batch)


def _batch():
    return (torch.randn(256, 512),)


def _capture(path, setting=None):
    return mhc_torch.capture(_Normalized, _batch, steps=1, path=path, setting=setting, loss_fn=_loss)


def _device_events(path):
    """The device's allocations and frees in time order: (+bytes or -bytes) each."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device >= 0").fetchall()
    events = [(t, 1, i, b) for i, b, t, _ in rows] + [(t, 0, i, -b) for i, b, _, t in rows if t is not None]
    return [b for *_, b in sorted(events)]


def test_user_hook_saves_unpacked_by_their_own_node(mhc_exe, tmp_path):
    base = _capture(str(tmp_path / "base.db"))
    order = json.loads(base.meta["capture.pack_order"])
    unpacks = json.loads(base.meta["capture.save_unpacks"])
    assert len(unpacks) == len(order) and all(k > 0 for k in unpacks)
    by_storage = {}
    for (alloc, saver), unpacked in zip(order, unpacks):
        by_storage.setdefault(alloc, {}).setdefault(saver, unpacked)
    twice = [sorted(saves.items()) for saves in by_storage.values() if len(saves) == 2]
    assert len(twice) == 3 and all(earlier[1] > later[1] for earlier, later in twice)
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--setting", json.dumps(STREAMED), "--json",
                          "--trace-out", str(tmp_path / "predicted.db")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    applied = _capture(str(tmp_path / "applied.db"), STREAMED)
    assert _device_events(tmp_path / "predicted.db") == _device_events(tmp_path / "applied.db")
    assert row["peak_bytes"] == int(applied.meta["capture.peak_bytes"])
    assert row["host_peak_bytes"] == int(applied.meta["capture.host_peak_bytes"])
