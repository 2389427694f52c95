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
