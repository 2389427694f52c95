"""Training setups a new user brought on 2026-12-06, eleventh round (bench/advise/new_user: VideoMAE
masked video pre-training, MeanFlow's forward-mode jvp, a PINN trained with LBFGS, a jagged
nested-tensor encoder, tensor and sequence parallelism, a MEGABYTE byte model): each test fails
without the fix it guards (docs/results.md, "Six more training setups as a new user, eleventh
round", 2026-12-06)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.errors import CaptureError  # noqa: E402


def allocations(path):
    """(bytes, label) of the device's allocations."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text FROM allocations a JOIN strings s ON s.id = a.label "
                          "WHERE a.device = 0 ORDER BY a.id").fetchall()


class VisibleTokens(nn.Module):
    """VideoMAE's selection: the tokens a batch's boolean mask leaves visible, x[~mask], then a
    layer over them; the labels checked by value first, as Hugging Face losses check them."""

    def __init__(self, d=32, vocab=50):
        super().__init__()
        self.vocab = vocab
        self.lin = nn.Linear(d, d)

    def forward(self, x, mask, labels):
        if labels.max() >= self.vocab:     # .item() of a batch tensor
            raise ValueError("label out of range")
        b, _, d = x.shape
        visible = x[~mask].reshape(b, -1, d)
        return self.lin(visible).square().mean()


def test_selection_by_a_batch_mask_is_captured_with_the_masks_count(tmp_path):
    """x[~mask] by a mask make_batch() made stopped the capture (`aten.nonzero cannot run on fake
    tensors`), and so did labels.max() read into Python: fake tensors hold no values. The batch's
    integer and boolean tensors keep their values beside them now, and the selection has the rows
    the mask leaves: 3 of 8 per sample here, 2 x 3 x 32 fp32 values."""
    def make_batch():
        mask = torch.zeros(2, 8, dtype=torch.bool)
        mask[:, :5] = True
        return torch.randn(2, 8, 32), mask, torch.randint(0, 50, (2,))

    path = str(tmp_path / "mask.db")
    r = mhc_torch.capture(VisibleTokens, make_batch, steps=1, path=path, autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b))
    assert r.kernels > 0
    index = [b for b, label in allocations(path) if label.endswith("aten::index")]
    assert index and index[0] == 2 * 3 * 32 * 4, allocations(path)

    # a batch tensor written in place by an op whose inputs have no kept values (here from a
    # parameter) has values no one knows: selecting by it is refused as before, not answered
    # from the stale ones
    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, mask):
            mask.copy_(self.lin(x) > 0)
            return x[mask].sum() + self.lin(x).sum()

    with pytest.raises(CaptureError, match="nonzero|index"):
        mhc_torch.capture(Writes, lambda: (torch.randn(3, 4), torch.ones(3, 4, dtype=torch.bool)), steps=1,
                          path=str(tmp_path / "w.db"), autocast_dtype=None, loss_fn=lambda m, b: m(*b))


def test_forward_mode_zero_tangents_and_meta_copies_hold_no_memory(tmp_path):
    """torch.func.jvp through a Linear: the weight's tangent is a ZeroTensor
    (aten._efficientzerotensor, no memory on any device) and adding it runs the op once on meta
    copies of the operands (to learn the result's shape). The capture counted both as device
    memory: on a 16384 x 256 -> 4096 MLP its forward-and-backward peak was 1.63 GB against the
    1.36 GB a real step's RSS rose by; 1,358,954,496 B against 1,358,823,424 B now."""
    from torch.func import jvp

    def loss_fn(model, x):
        u, du = jvp(model, (x,), (torch.ones_like(x),))
        return F.mse_loss(u, du.detach())

    path = str(tmp_path / "jvp.db")
    mhc_torch.capture(lambda: nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 16)),
                      lambda: torch.randn(32, 16), steps=1, path=path, autocast_dtype=None, loss_fn=loss_fn)
    labels = [label for _, label in allocations(path)]
    assert not [x for x in labels if "_efficientzerotensor" in x or "prims::add" in x or x.endswith("aten::to")], labels
    # the first Linear's forward: its output, the tangent's two products and their sum, the zero
    # bias tangent's add (a copy of the other operand): 5 of 32 x 64 fp32, not 8
    first = [b for b, label in allocations(path) if label.startswith("Sequential.0:")]
    assert first.count(32 * 64 * 4) == 5, first


def test_lbfgs_is_refused_saying_that_it_reads_values(tmp_path, new_user_file):
    """torch.optim.LBFGS reads the loss and the gradients into Python (its convergence tests and
    line search): the capture stopped with a hint about a queue's pointer kept in a tensor, which
    says nothing to a PINN user. It names LBFGS and what to capture instead now."""
    m = new_user_file("pinn_lbfgs")
    with pytest.raises(CaptureError) as e:
        mhc_torch.capture(lambda: m.build_model(small=True), lambda: m.make_batch(small=True), steps=1,
                          path=str(tmp_path / "pinn.db"), step=m.step_lbfgs, autocast_dtype=None)
    msg = str(e.value)
    assert "\n" not in msg and "pinn_lbfgs.py" in msg and "LBFGS.step() reads the loss" in msg, msg


def test_jagged_nested_tensor_is_refused_in_one_line(tmp_path, new_user_file):
    """A batch of torch.nested jagged tensors stopped the capture with torch's `AssertionError:
    self.shape_env must not be None`, deep in torch's meta conversion. One line now: why, where
    and what to capture instead."""
    m = new_user_file("njt_varlen")
    with pytest.raises(CaptureError) as e:
        mhc_torch.capture(lambda: m.build_model(small=True), lambda: m.make_batch(small=True), steps=1,
                          path=str(tmp_path / "njt.db"), loss_fn=m.loss_fn)
    msg = str(e.value)
    assert "\n" not in msg and "nested tensor of jagged layout" in msg and "njt_varlen.py:" in msg, msg


@pytest.mark.parametrize("name", ["videomae"])
def test_new_user_model_files_capture_small(tmp_path, name, new_user_file, capture_small):
    """The model file added here that guards a fix captures at its small size (videomae through
    its boolean tube mask)."""
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0


def test_tensor_parallel_sharding_propagation_is_not_the_ranks_memory(tmp_path, new_user_file, capture_small,
                                                                      mhc_exe):
    """Tensor and sequence parallelism without FSDP2 (parallelize_module): DTensor's sharding
    propagation runs each op once more on fake tensors of the global shape, which the capture left
    out under FSDP2 only. Under TP it recorded them as the rank's memory (an RMSNorm's pow of the
    whole sequence, 4 x the rank's shard) and their reused storages as accesses outside their
    lifetimes, which `mhc advise` refused (`access-outside-lifetime`)."""
    import json
    import subprocess

    m = new_user_file("tp_decoder")
    path = tmp_path / "tp.db"
    capture_small(m, path)
    norm = sorted({b for b, label in allocations(str(path)) if label == "Decoder.blocks.0.n1:aten::pow"})
    # the rank's sequence shard: 2 x (32 / 4) tokens x 64 fp32, and the backward's [16, 1] pow
    assert norm == [2 * 8 * 4, 2 * 8 * 64 * 4], norm
    out = subprocess.run([mhc_exe, "advise", str(path), "--setting", "{}", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"][0]["peak_bytes"] > 0


def test_tensor_parallel_saves_are_the_local_shards(tmp_path, new_user_file, mhc_exe):
    """Under tensor parallelism autograd saves DTensors, whose wrapper storage holds nothing: the
    capture recorded none of those saves, so a checkpointed block's prediction kept them (the TP
    decoder at 6 GiB: checkpoint 5 of 8 predicted 5.96 GiB, captured 4.72). The saves are their
    local shards now; checkpointing a block is predicted as captured (97,967,112 B predicted
    against 89,574,408 B captured before)."""
    import json
    import subprocess

    m = new_user_file("tp_decoder")
    decoder = m.Decoder

    def build():
        m.Decoder = lambda *a, **k: decoder(512, 256, 4, 1024, 2)
        try:
            return m.build_model(small=True)
        finally:
            m.Decoder = decoder

    def batch():
        ids = torch.randint(0, 512, (4, 512))
        return {"ids": ids, "labels": ids.clone()}

    setting = {"checkpoint": {"modules": ["Decoder.blocks.0"]}}
    base, done = str(tmp_path / "base.db"), str(tmp_path / "ckpt.db")
    mhc_torch.capture(build, batch, steps=1, path=base, loss_fn=m.loss_fn)
    captured = mhc_torch.capture(build, batch, steps=1, path=done, loss_fn=m.loss_fn, setting=setting)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"][0]["peak_bytes"] == captured.peak_bytes


class _JvpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 16)) for _ in range(2))

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x


def test_modules_inside_jvp_are_named_and_not_checkpointed(tmp_path, mhc_exe):
    """MeanFlow's du/dt by torch.func.jvp: `mhc advise` offered checkpointing the blocks, and
    PyTorch stops on it (the recomputation runs without the tangents: "A different number of
    tensors was saved during the original forward and recomputation"; the verification's capture
    stopped with "Cannot access storage of TensorWrapper"). Meta capture.jvp_modules names the
    modules that ran inside; advise refuses checkpointing them in one line and keeps the optimizer
    settings."""
    import subprocess
    from torch.func import jvp

    def loss_fn(model, x):
        u, du = jvp(model, (x,), (torch.ones_like(x),))
        return F.mse_loss(u, du.detach())

    path = str(tmp_path / "jvp.db")
    mhc_torch.capture(_JvpNet, lambda: torch.randn(32, 16), steps=1, path=path, autocast_dtype=None, loss_fn=loss_fn)
    meta = dict(mhc_torch.read_table(path, "meta")[["key", "value"]].values)
    assert meta.get("capture.jvp_modules") == '["_JvpNet"]', meta.get("capture.jvp_modules")
    out = subprocess.run([mhc_exe, "advise", path, "--setting",
                          '{"checkpoint": {"modules": ["_JvpNet.blocks.0"]}}'], capture_output=True, text=True)
    assert out.returncode == 2 and "inside torch.func's jvp" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = subprocess.run([mhc_exe, "advise", path, "--setting", '{"optimizer": {"state": "host"}}', "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_batch_past_a_gib_is_not_made_again_on_the_host(tmp_path):
    """The batch is made a second time on real host tensors only for its masks' and labels' values:
    a batch of more than 1 GiB in all (here 1.25 GiB of fp32 frames beside its mask) is not, so the
    host's memory is not taken for it, and a selection by its mask stops as it did before values
    were kept."""
    def make_batch():
        mask = torch.zeros(2, 8, dtype=torch.bool)
        mask[:, :5] = True
        return torch.randn(2, 8, 32), mask, torch.randint(0, 50, (2,)), torch.randn(1024, 1024, 320)

    with pytest.raises(CaptureError, match="nonzero|index|item|max"):
        mhc_torch.capture(VisibleTokens, make_batch, steps=1, path=str(tmp_path / "wide.db"), autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b[:3]) + b[3].mean())
