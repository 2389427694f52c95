"""The optimizer on the host, predicted as captured: the host peak of `mhc advise --setting
'{"optimizer":{"state":"host"}}'` equals, to the byte, the capture of the step with that setting
applied, read both as the capture counted it (meta capture.host_peak_bytes) and as every trace
reader replays the trace's events (docs/trace-format.md "Events at one instant", what --verify
compares). Before 2026-12-06 the host step's ops took no time in the capture, so its temporaries
(foreach AdamW's square roots of every second moment, held at once) were made and freed at one
instant and counted one at a time: --verify showed the prediction 18.5% over the capture."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mhc_torch  # noqa: E402
from tiny_models import gpt2, gpt2_batch  # noqa: E402

OPTIMIZERS = {
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True),
    "adamw-default": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
    "adam-forloop": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9, foreach=True),
}
SETTINGS = {
    "host": {"optimizer": {"state": "host"}},
    "host-fused": {"optimizer": {"state": "host", "impl": "fused"}},
}


def _host_live_peak(path):
    """The host's live peak in the order of "Events at one instant": at one time the frees of
    blocks made earlier, then the blocks made then by id, each alive only then freed at once."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device = -1").fetchall()
    finally:
        db.close()
    events = []
    for row_id, nbytes, t_alloc, t_free in rows:
        events.append((t_alloc, 1, row_id, nbytes))
        if t_free is not None:
            events.append((t_free, 0 if t_free > t_alloc else 1, row_id, -nbytes))
    live = peak = 0
    for _, _, _, delta in sorted(events):   # a block made and freed at t: its free sorts right after it
        live += delta
        peak = max(peak, live)
    return peak


def _capture(path, optimizer, dtype, setting=None):
    return mhc_torch.capture(gpt2, gpt2_batch, steps=2, path=path, param_dtype=dtype, setting=setting,
                             optimizer=optimizer)


@pytest.mark.parametrize("optimizer,setting,dtype", [
    ("adamw-foreach", "host", None), ("adamw-foreach", "host", torch.bfloat16),
    ("adamw-default", "host", None), ("adam-forloop", "host", None), ("sgd-momentum", "host", None),
    ("adamw-foreach", "host-fused", None)])
def test_host_optimizer_peak_as_captured(mhc_exe, tmp_path, shared_run, optimizer, setting, dtype):
    base, applied = str(tmp_path / "base.db"), str(tmp_path / "applied.db")
    # the step without the setting: one capture for the settings that start from it
    shared_run(("host optimizer base", optimizer, str(dtype)),
               lambda folder: _capture(str(folder / "base.db"), OPTIMIZERS[optimizer], dtype), tmp_path)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(SETTINGS[setting]), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    captured = _capture(applied, OPTIMIZERS[optimizer], dtype, SETTINGS[setting])
    assert row["peak_bytes"] == captured.peak_bytes
    assert row["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"]) == _host_live_peak(applied)
