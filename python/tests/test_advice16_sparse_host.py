"""The optimizer on the host with sparse gradients (nn.Embedding(sparse=True)): the setting runs
on real CPU tensors as the plain optimizer does (indices and values moved to the host, several
backwards accumulated as the autograd engine accumulates them), its capture counts the host
gradient it makes, and fake tensors refuse a copy_ between layouts as every device does. Before
2026-12-07 the real run raised `copy_() between dense and sparse Tensors` in the backward while
the capture (fake tensors) passed, so `mhc-torch advise --verify` verified a setting that ran
nowhere."""
import copy
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.fake_mode import _RecordingFakeMode  # noqa: E402

HOST = {"optimizer": {"state": "host"}}
OPTIMIZERS = {   # the torch.optim optimizers that take sparse gradients
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sparse-adam": lambda ps: torch.optim.SparseAdam(ps, lr=0.1),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_gradients_step_on_host_as_plain(name):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 4, sparse=True)
    ref = copy.deepcopy(emb)
    ref_opt = OPTIMIZERS[name](ref.parameters())
    model, opt = mhc_torch.apply(emb, OPTIMIZERS[name](emb.parameters()), HOST)
    for _ in range(2):
        for _ in range(2):   # gradient accumulation: the second backward adds to the first
            ids = torch.randint(0, 50, (3, 2))
            model(ids).pow(2).sum().backward()
            ref(ids).pow(2).sum().backward()
        assert opt.offloaded_params[0][1].grad.is_sparse
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    assert torch.equal(emb.weight, ref.weight)


@pytest.mark.parametrize("dense_self", [True, False])
def test_fake_copy_between_layouts_refused(dense_self):
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.ones(2, 3), (4, 3))
    dense = torch.zeros(4, 3)
    dst, src = (dense, sparse) if dense_self else (sparse, dense)
    with pytest.raises(RuntimeError, match="between dense and sparse"):
        dst.clone().copy_(src)   # the real CPU kernel
    with _RecordingFakeMode() as mode:
        fdst, fsrc = mode.from_tensor(dst), mode.from_tensor(src)
        with pytest.raises(RuntimeError, match="between dense and sparse"):
            fdst.copy_(fsrc)
        fdst.copy_(fdst)   # the same layouts still copy


class _Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(512, 32, sparse=True)
        self.out = torch.nn.Linear(32, 1)

    def forward(self, ids):
        return self.out(self.e(ids).mean(1)).sum()


def _batch():
    return (torch.arange(64).reshape(8, 8) % 512,)   # 64 distinct rows


def _capture(path, optimizer, setting=None):
    return mhc_torch.capture(_Bag, _batch, steps=2, path=path, setting=setting, loss_fn=lambda m, b: m(*b),
                             optimizer=OPTIMIZERS[optimizer])


TABLE, LINEAR = 512 * 32 * 4, 33 * 4
MASTERS_AND_STATE = 2 * (TABLE + LINEAR)   # the fp32 copies, and Adagrad's state_sum
SPARSE_GRAD = 64 * 8 + 64 * 32 * 4   # int64 indices and fp32 values of the 64 rows looked up


def _predicted_and_captured(mhc_exe, shared_run, tmp_path, optimizer):
    def make(folder):
        _capture(str(folder / "base.db"), optimizer)
        out = subprocess.run([mhc_exe, "advise", str(folder / "base.db"), "--setting", json.dumps(HOST), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        captured = _capture(str(folder / "applied.db"), optimizer, HOST)
        return json.loads(out.stdout)["rows"][0]["host_peak_bytes"], int(captured.meta["capture.host_peak_bytes"])

    return shared_run(("sparse host", optimizer), make, tmp_path)


def test_sparse_host_capture_counts_host_gradient(mhc_exe, shared_run, tmp_path):
    _, captured = _predicted_and_captured(mhc_exe, shared_run, tmp_path, "adagrad")
    assert captured >= MASTERS_AND_STATE + SPARSE_GRAD   # the host gradient: indices and values
    assert captured < MASTERS_AND_STATE + TABLE   # no dense gradient buffer of the table's size


# SGD's momentum buffer is a clone of the first sparse gradient (indices and values); before
# zero_grad dropped the sparse host gradient, the capture held the last step's beside the next
# backward's: 92,044 B captured against 83,340 predicted. Its sparse momentum buffer grows by each
# step's gradient (`buf.add_(grad)`: a sparse add concatenates into new parts, python/mhc_torch/
# fake_mode.py), and the old parts die only once the new are made, as every device's kernel has
# it: 100,748 B predicted and captured (before 2026-12-07 the capture freed them first, 92,044 B)
@pytest.mark.parametrize("optimizer", ["adagrad", "sgd-momentum"])
def test_sparse_host_predicted_as_captured(mhc_exe, shared_run, tmp_path, optimizer):
    predicted, captured = _predicted_and_captured(mhc_exe, shared_run, tmp_path, optimizer)
    assert predicted == captured


# SGD's foreach step on the device adds each gradient to its momentum buffer with
# torch._foreach_add_, whose kernels take the slow path (one add_ a pair) for a sparse pair: the
# sparse momentum buffer grows by the second step's 64 entries (int64 indices, fp32 values of 32);
# fake tensors' foreach kept the first step's
def test_sparse_momentum_grows_on_the_device(mhc_exe, shared_run, tmp_path):
    import sqlite3

    _predicted_and_captured(mhc_exe, shared_run, tmp_path, "sgd-momentum")
    with sqlite3.connect(tmp_path / "base.db") as db:
        made = [b for b, in db.execute("SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                                       "WHERE s.text = 'e.weight.momentum_buffer' ORDER BY a.id")]
    assert made == [64 * 8, 64 * 32 * 4, 128 * 8, 128 * 32 * 4]
