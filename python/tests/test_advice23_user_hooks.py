"""Saves made under a user's own saved-tensor hooks (`with torch.autograd.graph.saved_tensors_hooks(
pack, unpack):` around the model's call, as activation-compression code does) record their own
unpack (meta capture.save_unpacks) as the capture's own hooks' saves do. Until 2026-12-08 they did
not: every such save took its storage's first unpack, and a streamed offload's prefetch from the
earlier of two saves of one storage (F.normalize's vector norm and division both save their input)
was predicted two backward nodes early, as test_advice22_save_unpacks.py shows for the capture's
own hooks. The offload's hooks, entered by the model's forward pre-hook, are innermost there and
take the model's saves, as on a GPU."""
import json

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from tiny_models import Normalized  # noqa: E402
from predicted_as_applied import assert_predicted_as_applied  # noqa: E402

STREAMED = {"offload": {"mode": "streamed", "modules": None, "max_fwd_stash": 2, "prefetch": 2}}


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
    return mhc_torch.capture(Normalized, _batch, steps=1, path=str(path), setting=setting, loss_fn=_loss)


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
    assert_predicted_as_applied(mhc_exe, tmp_path, STREAMED, _capture)
