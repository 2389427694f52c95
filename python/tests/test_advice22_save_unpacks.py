"""A streamed offload's prefetch from a save whose storage a later op of the same module saved
too: F.normalize's vector norm and its division both save their input. Autograd runs the
division's node first and the norm's two nodes later (after clamp_min's); the offload hook's
unpack of the norm's save brings back the saves before it (python/mhc_torch/offload.py, _unpack).
Until 2026-12-07 the prediction took every save of that storage as unpacked at its first unpack
(the division's) and brought the Linear's input back two nodes early: the triplet siamese encoder
(bench/advise/new_user/triplet_siamese.py) predicted 3.29 GiB reserved against 3.15 GiB captured.
The capture now records each save's own unpack (meta capture.save_unpacks)."""
import json

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from tiny_models import Normalized  # noqa: E402
from predicted_as_applied import assert_predicted_as_applied  # noqa: E402

STREAMED = {"offload": {"mode": "streamed", "modules": None, "max_fwd_stash": 2, "prefetch": 2}}


def _batch():
    return (torch.randn(256, 512),)


def _capture(path, setting=None):
    return mhc_torch.capture(Normalized, _batch, steps=1, path=str(path), setting=setting, loss_fn=lambda m, b: m(*b))


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
    assert_predicted_as_applied(mhc_exe, tmp_path, STREAMED, _capture)
