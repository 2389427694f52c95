"""nn.Embedding(sparse=True) under gradient accumulation, and the host answer for the optimizers
that take sparse gradients. A sparse + sparse add on a GPU concatenates both operands' indices and
values (add_out_sparse_cuda), so the gradient the autograd engine accumulates over two backwards
holds both backwards' entries; fake tensors' meta kernel kept the first's, and the capture
understated the gradient. DeepSpeed's ZeRO takes no sparse gradient: the host answer for Adagrad
or SGD over a sparse embedding printed DeepSpeed lines that would not run."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from tiny_models import SPARSE_DIM as DIM, SPARSE_LOOKUPS as LOOKUPS, SparseBag  # noqa: E402

HOST = {"optimizer": {"state": "host"}}


def _batch():
    return (torch.arange(LOOKUPS).reshape(8, 8),)   # 64 distinct rows


def _step(model, batch, run):   # gradient accumulation written in the step, as a model file's
    for _ in range(2):
        run.backward(model(*batch) / 2)
    run.optimizer_step()
    run.zero_grad()


def _capture(path, setting=None):
    # built from the model as a model file's build_optimizer() is: in the capture's first step
    return mhc_torch.capture(SparseBag, _batch, steps=2, path=str(path), setting=setting, step=_step,
                             build_optimizer=lambda m: torch.optim.Adagrad(m.parameters(), lr=0.1))


def _base(shared_run, tmp_path):
    def make(folder):
        _capture(folder / "base.db")
        return str(folder / "base.db")

    shared_run(("advice21 sparse accumulated",), make, tmp_path)
    return tmp_path / "base.db"


def _host(mhc_exe, shared_run, tmp_path):
    def make(folder):
        _capture(folder / "base.db")
        out = subprocess.run([mhc_exe, "advise", str(folder / "base.db"), "--setting", json.dumps(HOST), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["rows"][0], _capture(folder / "host.db", HOST)

    return shared_run(("advice21 sparse accumulated", "host"), make, tmp_path)


def _made(path, label):
    with sqlite3.connect(path) as db:
        return [b for b, in db.execute("SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                                       "WHERE s.text = ? ORDER BY a.id", (label,))]


# the first backward's gradient (64 entries: int64 indices, fp32 values of 32), then the second's
# added to it: 128 entries; coalesce (Adagrad's sparse step) keeps the 64 distinct rows once.
# (Two steps: the first step's host peak is 140 B under its prediction, the dense parameters'
# Adagrad state, on main as well; the second step's is the peak of both.)
def test_accumulated_sparse_gradient_holds_both_backwards(shared_run, tmp_path):
    base = _base(shared_run, tmp_path)
    one = [LOOKUPS * 8, LOOKUPS * DIM * 4]
    assert _made(base, "e.weight.grad") == 2 * (one + [2 * b for b in one])   # 2 steps
    assert _made(base, "aten::_coalesce") == 2 * one


def test_fake_sparse_add_concatenates():
    from mhc_torch.fake_mode import _RecordingFakeMode
    new = torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors
    with _RecordingFakeMode():
        def sparse(n):
            return new(1, 1, [8, 4], torch.zeros(1, n, dtype=torch.long), torch.zeros(n, 4), dtype=torch.float32,
                       layout=torch.sparse_coo, device="cpu", is_coalesced=False)
        a, b = sparse(3), sparse(2)
        assert (a + b)._nnz() == 5
        a.add_(b)
        assert a._nnz() == 5 and a._values().shape == (5, 4)


# ZeRO has no sparse gradients (deepspeed/runtime/zero; DeepSpeed's pull request 8504): the host
# answer for Adagrad over a sparse embedding names the parameter and prints mhc_torch.apply's line
def test_adagrad_sparse_host_code_is_not_deepspeeds(mhc_exe, shared_run, tmp_path):
    base = _base(shared_run, tmp_path)
    out = subprocess.run([mhc_exe, "advise", str(base), "--setting", json.dumps(HOST)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "import deepspeed" not in out.stdout and "deepspeed.initialize" not in out.stdout
    assert "ZeRO has no sparse gradients, and e.weight has one (sparse=True)" in out.stdout
    assert 'mhc_torch.apply(model, optimizer, {"optimizer":{"state":"host"}})' in out.stdout


# The host optimizer under accumulation: each pass's own entries go down (the device holds one
# pass's), the host concatenates them onto its copy; Adagrad's host step coalesces the 128 entries
# to the 64 rows. Before 2026-12-07 the prediction kept the first pass's device gradient to the
# second's add and the accumulated one (128 entries) on the device, and stepped 128 entries:
# (with the capture's concatenation) 8,704 B over on the device and 25,088 B over on the host.
def test_accumulated_sparse_host_predicted_as_captured(mhc_exe, shared_run, tmp_path):
    predicted, captured = _host(mhc_exe, shared_run, tmp_path)
    assert predicted["peak_bytes"] == captured.peak_bytes
    assert predicted["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"])


# Adagrad's constructor makes its "sum" for every parameter: built in the step (a model file's
# build_optimizer), the host optimizer's were recorded as device memory when made, beside the
# device optimizer's (until 2026-12-07: a two-tower model's captured peak 275.98 MiB, 178.07 now)
def test_step_built_host_optimizer_state_is_host_memory(mhc_exe, shared_run, tmp_path):
    _host(mhc_exe, shared_run, tmp_path)
    with sqlite3.connect(tmp_path / "host.db") as db:
        made = db.execute("SELECT a.device FROM allocations a JOIN strings s ON s.id = a.label "
                          "WHERE s.text LIKE '%aten::full_like'").fetchall()
    assert made == [(-1,)] * 3   # e.weight's, out.weight's and out.bias's sums, on the host
