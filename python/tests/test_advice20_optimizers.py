"""nn.Embedding(sparse=True) with an integer batch, captured and predicted: a loss that reduces
the lookups themselves (`emb(ids).sum()`, a regulariser on them) makes the embedding's gradient
from the ids' values and a constant incoming gradient, so the batch's values followed it into a
sparse tensor; a sparse tensor has no strides and was taken for one value expanded, and the
capture stopped on `reshape is not implemented for sparse tensors` (python/mhc_torch/batch_values.py).
SparseAdam's host step, which no test compared with a capture; coalesce of a gradient whose ids repeat. And LBFGS, whose step needs a
closure: the capture said Python's `step() missing 1 required positional argument: 'closure'`."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.errors import CaptureError  # noqa: E402

ROWS, DIM = 256, 16
HOST = {"optimizer": {"state": "host"}}


class _Lookups(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(ROWS, DIM, sparse=True)

    def forward(self, ids):
        return self.e(ids)


def _batch():
    return (torch.arange(32).reshape(4, 8) % 24,)   # 32 lookups of 24 distinct rows


def _capture(path, setting=None):
    return mhc_torch.capture(_Lookups, _batch, steps=1, path=path, setting=setting,
                             loss_fn=lambda m, b: m(*b).sum(),
                             optimizer=lambda ps: torch.optim.SparseAdam(ps, lr=1e-3))


def _base_and_host(mhc_exe, shared_run, tmp_path):
    def make(folder):
        base = _capture(str(folder / "base.db"))
        out = subprocess.run([mhc_exe, "advise", str(folder / "base.db"), "--setting", json.dumps(HOST), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        host = _capture(str(folder / "host.db"), HOST)
        return base, json.loads(out.stdout)["rows"][0], host

    return shared_run(("advice20 sparse",), make, tmp_path)


def test_loss_of_the_lookups_captures(mhc_exe, shared_run, tmp_path):
    base, _, _ = _base_and_host(mhc_exe, shared_run, tmp_path)
    table = ROWS * DIM * 4
    assert base.peak_bytes >= 3 * table   # the table and SparseAdam's two moments


def test_sparse_adam_host_predicted_as_captured(mhc_exe, shared_run, tmp_path):
    _, predicted, host = _base_and_host(mhc_exe, shared_run, tmp_path)
    assert predicted["peak_bytes"] == host.peak_bytes
    assert predicted["host_peak_bytes"] == int(host.meta["capture.host_peak_bytes"])


def test_closure_optimizer_refused_saying_why(tmp_path):
    with pytest.raises(CaptureError, match=r"LBFGS.step\(closure\) needs a closure.*reads the loss and the gradients"):
        mhc_torch.capture(_Lookups, _batch, steps=1, path=str(tmp_path / "t.db"), loss_fn=lambda m, b: m(*b).sum(),
                          optimizer=lambda ps: torch.optim.LBFGS(ps))


# coalesce keeps each distinct row once, on a GPU as on a CPU: the capture gave it every lookup (32,
# an upper bound) where the batch's ids tell the rows (24); SparseAdam's and Adagrad's sparse steps
# size their temporaries by it (SparseAdam's moments at those rows, their updates)
def test_coalesce_keeps_each_row_looked_up_once(mhc_exe, shared_run, tmp_path):
    _base_and_host(mhc_exe, shared_run, tmp_path)
    rows = len(set(_batch()[0].flatten().tolist()))
    assert rows == 24
    with sqlite3.connect(tmp_path / "base.db") as db:
        made = [b for b, in db.execute("SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                                       "WHERE s.text IN ('aten::_coalesce', 'aten::sparse_mask') ORDER BY a.id")]
    assert made == [rows * 8, rows * DIM * 4, rows * DIM * 4, rows * DIM * 4]   # indices, values, 2 moments


# the printed code of the host answer: DeepSpeed's ZeRO takes no sparse gradient (deepspeed/runtime/zero
# has none; DeepSpeed's pull request 8504), so its lines would not run; mhc_torch.apply's line does
def test_sparse_adam_host_code_is_not_deepspeeds(mhc_exe, shared_run, tmp_path):
    _base_and_host(mhc_exe, shared_run, tmp_path)
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--setting", json.dumps(HOST)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "deepspeed" not in out.stdout and "ZeRO has no sparse gradients" in out.stdout
    assert 'mhc_torch.apply(model, optimizer, {"optimizer":{"state":"host"}})' in out.stdout
