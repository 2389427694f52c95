"""A checkpointed block that returns more than its hidden state (nn.MultiheadAttention's averaged
attention weights, called as most code calls it: need_weights left True): what `mhc advise`
predicts of the recomputation against the step captured with the setting applied
(bench/advise/new_user/mha_weights.py). Each test fails without the fix it guards."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402

D, HEADS, BATCH, SEQ = 32, 2, 4, 64


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln = nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, h):
        a, w = self.attn(h, h, h)   # w: the weights averaged over heads, returned beside h
        h = self.ln(h + a)
        return h + self.ff(h), w


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(3))

    def forward(self, x):
        w = None
        for layer in self.layers:
            x, w = layer(x)   # the last layer's weights kept, as for inspection
        return x.float().pow(2).mean()


SETTING = {"checkpoint": {"modules": ["Net.layers.1"], "policy": "full"}}


def _lifetimes(path, label):
    """Per allocation of `label`, in order: how many kernels started while it was alive."""
    db = sqlite3.connect(path)
    ids = [i for i, t in db.execute("SELECT id, text FROM strings") if t == label]
    rows = db.execute(f"SELECT t_alloc, t_free FROM allocations WHERE label IN ({','.join(map(str, ids))}) "
                      "AND device >= 0 ORDER BY t_alloc").fetchall()
    return [db.execute("SELECT COUNT(*) FROM kernels WHERE t_start >= ? AND t_start < ?",
                       (t0, t1 if t1 is not None else 1 << 62)).fetchone()[0] for t0, t1 in rows]


def test_a_side_output_recomputed_lives_until_the_recomputation_ends(tmp_path, mhc_exe):
    """The recomputation returns (h, w) and checkpoint drops that return value when it ends: the
    recomputed weights live until then. The prediction freed them at their last use (the forward
    had freed them after the block, at the next layer's return), so for mha_weights.py at
    --capacity 8GiB "checkpoint 3 of 8 blocks" predicted reserved 7.71 GiB, 0.60% under the
    7.75 GiB captured with it; now the same to the byte."""
    base, applied, predicted = (str(tmp_path / n) for n in ("base.db", "applied.db", "predicted.db"))
    batch = lambda: (torch.randn(BATCH, SEQ, D),)   # noqa: E731
    loss = lambda m, b: m(*b)   # noqa: E731
    mhc_torch.capture(Net, batch, steps=1, path=base, autocast_dtype=None, loss_fn=loss)
    mhc_torch.capture(Net, batch, steps=1, path=applied, autocast_dtype=None, loss_fn=loss, setting=SETTING)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(SETTING), "--trace-out", predicted],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    label = "Net.layers.1.attn:aten::mean"
    captured = _lifetimes(applied, label)
    assert len(captured) == 2   # the forward's weights and the recomputation's
    assert _lifetimes(predicted, label) == captured   # the recomputation's was 1 kernel, not until its end


def test_the_in_projection_lives_until_multi_head_attention_forward_returns(tmp_path, mhc_exe):
    """F.multi_head_attention_forward (torch's Python) keeps q, k and v, views of the packed
    in-projection, until it returns; in a checkpointed block, where autograd no longer holds it,
    the projection dies only then. The capture read the frames of the model's modules and its own
    helpers only, so the prediction freed it after its last matmul, 3 kernels early here (and in
    mha_weights.py 75 MiB early in each checkpointed layer)."""
    base, applied, predicted = (str(tmp_path / n) for n in ("base.db", "applied.db", "predicted.db"))
    batch = lambda: (torch.randn(BATCH, SEQ, D),)   # noqa: E731
    loss = lambda m, b: m(*b)   # noqa: E731
    mhc_torch.capture(Net, batch, steps=1, path=base, autocast_dtype=None, loss_fn=loss)
    mhc_torch.capture(Net, batch, steps=1, path=applied, autocast_dtype=None, loss_fn=loss, setting=SETTING)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(SETTING), "--trace-out", predicted],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    label = "Net.layers.1.attn:aten::clone"   # the packed q, k, v (and the output's transpose)
    captured = _lifetimes(applied, label)
    assert captured and _lifetimes(predicted, label) == captured
