"""Training setups a new user brought on 2026-12-07, fourteenth round (bench/advise/new_user: soft
actor-critic from pixels with a replay buffer on the GPU, DCNv2 segmentation, SimCLR with a LARS
of the user's own, a decoder whose saved activations the user's own hooks keep in fp8, DALL-E's
discrete VAE): each test fails without the fix it guards (docs/results.md, "Five more training
setups as a new user, fourteenth round", 2026-12-07)."""
import sqlite3
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def allocations(path):
    """(bytes, label, t_alloc, t_free) of the device's allocations."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text, a.t_alloc, a.t_free FROM allocations a "
                          "JOIN strings s ON s.id = a.label WHERE a.device = 0 ORDER BY a.id").fetchall()


class WrittenBuffer(nn.Module):
    """A replay buffer's flags made with zeros when the model is built (one value: its values are
    kept, expanded), written at the batch's rows in the step, then selected by: how many rows are
    set decides the selection's shape."""

    def __init__(self, n=64):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.done = torch.zeros(n, dtype=torch.long)

    def forward(self, x, rows, flags):
        self.done[rows] = flags
        kept = torch.arange(self.done.shape[0], dtype=torch.float32, device=x.device)[self.done > 0]
        return self.lin(x).sum() + kept.sum()


def test_a_write_into_a_fill_keeps_the_written_values(tmp_path):
    """The zeros' kept values were one element expanded to the buffer's shape, and the write ran
    on it on the host: every place held the last value written (PyTorch warned of index_put_ on an
    expanded tensor), so the selection by `done > 0` took all 64 rows or none, where the GPU takes
    the 5 rows the batch sets. The shadow takes memory of its own before the write."""
    path = str(tmp_path / "buffer.db")

    def batch():
        return torch.randn(2, 4), torch.arange(8) * 3, torch.tensor([1, 0, 1, 1, 0, 1, 0, 1])   # 5 set
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        mhc_torch.capture(WrittenBuffer, batch, steps=1, path=path,
                          autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    kept = [b for b, label, _, _ in allocations(path) if label.endswith("aten::index")]
    assert kept == [5 * 4], kept
    assert not [w for w in said if "expanded" in str(w.message)], [str(w.message) for w in said]
