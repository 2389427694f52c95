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

ROWS, DIM, LOOKUPS = 512, 32, 64
HOST = {"optimizer": {"state": "host"}}


class _Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(ROWS, DIM, sparse=True)
        self.out = torch.nn.Linear(DIM, 1)

    def forward(self, ids):
        return self.out(self.e(ids).mean(1)).sum()


def _batch():
    return (torch.arange(LOOKUPS).reshape(8, 8),)   # 64 distinct rows


def _base(shared_run, tmp_path):
    def make(folder):
        mhc_torch.capture(_Bag, _batch, steps=1, micro_batches=2, path=str(folder / "base.db"),
                          loss_fn=lambda m, b: m(*b), optimizer=lambda ps: torch.optim.Adagrad(ps, lr=0.1))
        return str(folder / "base.db")

    shared_run(("advice21 sparse accumulated",), make, tmp_path)
    return tmp_path / "base.db"


def _made(path, label):
    with sqlite3.connect(path) as db:
        return [b for b, in db.execute("SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                                       "WHERE s.text = ? ORDER BY a.id", (label,))]


# the first backward's gradient (64 entries: int64 indices, fp32 values of 32), then the second's
# added to it: 128 entries; coalesce (Adagrad's sparse step) keeps the 64 distinct rows once
def test_accumulated_sparse_gradient_holds_both_backwards(shared_run, tmp_path):
    base = _base(shared_run, tmp_path)
    one = [LOOKUPS * 8, LOOKUPS * DIM * 4]
    assert _made(base, "e.weight.grad") == one + [2 * b for b in one]
    assert _made(base, "aten::_coalesce") == one


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
    assert "ZeRO has no sparse gradients, and e.weight has one" in out.stdout
    assert 'mhc_torch.apply(model, optimizer, {"optimizer":{"state":"host"}})' in out.stdout
