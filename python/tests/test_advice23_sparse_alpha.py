"""A sparse + sparse add with alpha other than 1 on a GPU multiplies the source's values into a
temporary before it concatenates both operands' parts (add_out_sparse_cuda: `s_values_.mul(value)`),
which SGD's Nesterov step makes on a sparse gradient (`grad.add(buf, alpha=momentum)`, and
`torch._foreach_add_(grads, bufs, alpha=momentum)` in its foreach step). Until 2026-12-08 the
capture had no such temporary (python/mhc_torch/workspaces.py, sparse_add_ahead)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from tiny_models import SPARSE_DIM as DIM, SPARSE_LOOKUPS as LOOKUPS, SparseBag  # noqa: E402


def _batch():
    return (torch.arange(LOOKUPS).reshape(8, 8),)


@pytest.mark.parametrize("foreach", [False, True])
def test_scaled_source_values_held_for_the_add(tmp_path, foreach):
    path = str(tmp_path / "s.db")
    mhc_torch.capture(SparseBag, _batch, steps=2, path=path, optimizer=lambda p: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, foreach=foreach))
    with sqlite3.connect(path) as db:
        temps = db.execute("SELECT a.id, a.bytes, a.t_alloc, a.t_free FROM allocations a JOIN strings s ON "
                           "s.id = a.label WHERE s.text LIKE 'sparse add: source values x alpha%'").fetchall()
        # one Nesterov add a step, one sparse parameter: the momentum buffer's values, fp32, 64 rows
        # (the first gradient's clone), then 128 (buf x 0.9 + the second's, concatenated)
        assert [t[1] for t in sorted(temps)] == [LOOKUPS * DIM * 4, 2 * LOOKUPS * DIM * 4]
        for aid, nbytes, t_alloc, t_free in temps:
            kernel = db.execute("SELECT k.id, k.t_start, k.t_end FROM kernels k JOIN accesses x ON "
                                "x.kernel = k.id WHERE x.allocation = ?", (aid,)).fetchall()
            assert len(kernel) == 1 and kernel[0][1:] == (t_alloc, t_free)
            # taken before the result's indices and values, which the same kernel writes
            made = db.execute("SELECT a.id FROM allocations a JOIN accesses x ON x.allocation = a.id "
                              "WHERE x.kernel = ? AND a.t_alloc = ? AND a.id != ?", (kernel[0][0], t_alloc, aid)).fetchall()
            assert len(made) == 2 and all(other > aid for (other,) in made)
