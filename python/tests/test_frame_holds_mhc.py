"""mhc_torch's own mHC model (mhc-27b, tiny-mhc) is a model's code to the capture's frame holds:
its plain functions hold their locals until they return, as a user's model's helpers do."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.models import preset  # noqa: E402


def _rows(path, sql, args=()):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _frees(path):
    """Each device allocation's free, by (label, bytes, time made)."""
    out = {}
    for label, size, t0, t1 in _rows(path, "SELECT s.text, a.bytes, a.t_alloc, a.t_free FROM allocations a "
                                           "JOIN strings s ON s.id = a.label WHERE a.device >= 0"):
        out.setdefault((label, size, t0), []).append(t1)
    return {k: sorted(v, key=lambda t: -1 if t is None else t) for k, v in out.items()}


def test_sinkhorn_holds_its_logits_until_it_returns(tmp_path, mhc_exe, preset_capture):
    """sinkhorn(logits, iters) keeps its argument until it returns, after its 20 iterations; the
    capture read only code outside mhc_torch, so the hold was not recorded and a checkpointed
    layer's prediction freed the logits at their last use (mHC-27B shape, 4 layers, every block
    checkpointed: 16 allocations freed earlier than captured, 2026-12-05). Now the predicted step
    frees every allocation where the capture of the setting does."""
    build, make_batch, loss_fn, _ = preset("tiny-mhc", batch=1, seq=16, layers=2, hc=4)
    setting = {"checkpoint": {"modules": ["MhcTransformer.layers.0", "MhcTransformer.layers.1"], "policy": "full"}}
    capt, pred = (str(tmp_path / n) for n in ("set.db", "pred.db"))
    # the step without the setting: the same capture as test_settings_capture's mhc policy and
    # test_capture's n = 4 (conftest.preset_capture)
    base, _ = preset_capture(tmp_path, "tiny-mhc", batch=1, seq=16, layers=2, hc=4)
    labels = dict(_rows(base, "SELECT a.id, s.text FROM allocations a JOIN strings s ON s.id = a.label"))
    meta = dict(_rows(base, "SELECT key, value FROM meta"))
    held = {labels[a] for a, _ in json.loads(meta["capture.frame_holds"])}
    # the logits: gate * h + bias, made by the maps' add and read by amax and the subtraction
    assert {f"MhcTransformer.layers.{i}.{c}.maps:aten::add" for i in (0, 1) for c in ("hc_attn", "hc_mlp")} <= held
    mhc_torch.capture(build, make_batch, steps=1, path=capt, loss_fn=loss_fn, setting=setting)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--trace-out", pred],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    predicted, captured = _frees(pred), _frees(capt)
    assert set(predicted) == set(captured)
    assert [k for k in predicted if predicted[k] != captured[k]] == []
