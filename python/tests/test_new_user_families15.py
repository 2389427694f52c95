"""Training setups a new user brought on 2026-12-07, fifteenth round (bench/advise/new_user: deep
kernel learning with a Cholesky factor, an RNN whose recurrent matrix is kept orthogonal by
torch.nn.utils.parametrizations, CapsNet's dynamic routing, the user's own Shampoo with
torch.linalg.eigh, a hypernetwork run by torch.func.functional_call under vmap): each test fails
without the fix it guards (docs/results.md, "Five more training setups as a new user, fifteenth
round", 2026-12-07)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.utils import parametrizations, parametrize  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import mhc_torch  # noqa: E402


def captured_peak(path):
    """The most bytes the capture's device allocations hold at once (the GPU's own workspaces
    left out: the host's kernels take none)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT a.t_alloc, a.t_free, a.bytes, s.text FROM allocations a "
                          "JOIN strings s ON s.id = a.label WHERE a.device = 0").fetchall()
    events = []
    for t_alloc, t_free, nbytes, label in rows:
        if "cuBLAS" in label:
            continue
        events.append((t_alloc, 1, nbytes))
        if t_free is not None:
            events.append((t_free, 0, -nbytes))
    now = peak = 0
    for _, _, nbytes in sorted(events):
        now += nbytes
        peak = max(peak, now)
    return peak


def profiler_peak(build, batch, loss_fn):
    """One step on real host tensors (forward, backward, Adam's step) under torch's memory
    profiler: the most tensor bytes live at once, as bench/advise/cpu_profiler_peak.py counts."""
    torch.manual_seed(0)
    model, x = build(), batch()
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        loss = loss_fn(model, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    live, now, peak = {}, 0, 0
    for _, action, (key, _), nbytes in prof._memory_profile().timeline:
        if ("CREATE" in str(action) or "PREEXISTING" in str(action)) and key not in live:
            live[key] = nbytes
            now += nbytes
        elif "DESTROY" in str(action):
            now -= live.pop(key, 0)
        peak = max(peak, now)
    return peak


class OrthogonalRecurrence(nn.Module):
    """A recurrent matrix kept orthogonal (the matrix exponential of a skew-symmetric parameter),
    its parametrization cached over the unrolled steps as PyTorch's docs advise."""

    def __init__(self, width=32, init=False):
        super().__init__()
        rec = nn.Linear(width, width, bias=False)
        if init:
            nn.init.orthogonal_(rec.weight)
        self.rec = parametrizations.orthogonal(rec)
        self.out = nn.Linear(width, 8)

    def forward(self, x):
        h = torch.zeros_like(x[:, 0])
        with parametrize.cached():
            for t in range(x.shape[1]):
                h = torch.tanh(x[:, t] + self.rec(h))
        return self.out(h).square().mean()


@pytest.mark.parametrize("init", [False, True])
def test_an_orthogonal_parametrization_registered_when_the_model_is_built(tmp_path, init):
    """orthogonal_rnn.py: registering the parametrization asks whether the weight is orthogonal
    already (torch.allclose on its values), and the capture stopped with `op aten.allclose.default
    cannot run on fake tensors`. The question is answered as for a drawn weight (factored by QR;
    one made orthogonal by nn.init.orthogonal_ first is copied on the GPU, the same base), and
    the step's peak bounds the host's: the matrix exponential's temporaries are modelled at their
    most (the host's single matrices of small norm take fewer, test below)."""
    path = str(tmp_path / "orth.db")

    def batch():
        return torch.randn(4, 6, 32)

    def loss(m, x):
        return m(x)

    mhc_torch.capture(lambda: OrthogonalRecurrence(init=init), batch, steps=1, path=path, autocast_dtype=None,
                      loss_fn=loss)
    with sqlite3.connect(path) as db:
        kept = dict(db.execute("SELECT s.text, a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                               "WHERE s.text LIKE '%rec.parametrizations.weight.%' AND a.t_free IS NULL").fetchall())
    # the parameter the map reads (32 x 32 fp32) and the base it multiplies (the buffer `base`)
    assert kept["rec.parametrizations.weight.original"] == 32 * 32 * 4, kept
    assert kept["buffer rec.parametrizations.weight.0.base"] == 32 * 32 * 4, kept
    host = profiler_peak(lambda: OrthogonalRecurrence(init=init), batch, loss)
    assert captured_peak(path) >= host, (host, captured_peak(path))


class Exponential(nn.Module):
    """A generator's exponential: one matrix, or a batch of them, with 1-norms far above 1 (the
    degree-18 path with scaling and squaring that a batch always takes)."""

    def __init__(self, batch):
        super().__init__()
        self.gen = nn.Parameter(torch.randn(*batch, 48, 48))

    def forward(self, x):
        return (x @ torch.linalg.matrix_exp(self.gen * 0.5)).square().mean()


@pytest.mark.parametrize("batch", [(), (3,)])
def test_the_matrix_exponentials_temporaries(tmp_path, batch):
    """matrix_exp's kernel (one ATen implementation for every device) keeps the powers and
    products of its polynomial beside its output: 10 matrices for a batch, 12 for a single
    matrix of a large norm. Fake tensors ran its meta function only: the host's step peaked at
    545,520 B for one 48 x 48 generator against the capture's 112,136 B, and 1,411,836 B against
    333,320 B for three (the backward's exponential of the 96 x 96 block matrix). Now the two
    agree to the 4-byte scalars and the polynomials' coefficients (25 floats a call), which the
    capture does not trace."""
    path = str(tmp_path / "exp.db")

    def make():
        return Exponential(batch)

    def data():
        return torch.randn(8, 48)

    def loss(m, x):
        return m(x)

    mhc_torch.capture(make, data, steps=1, path=path, autocast_dtype=None, loss_fn=loss)
    host = profiler_peak(make, data, loss)
    assert 0 <= host - captured_peak(path) <= 256, (host, captured_peak(path))


class ExactGP(nn.Module):
    """An exact Gaussian process's negative log likelihood over 64 points: an RBF kernel with a
    learned length scale, its Cholesky factor, one solve for the 1 target column."""

    def __init__(self):
        super().__init__()
        self.log_length = nn.Parameter(torch.zeros(()))

    def forward(self, x, y):
        k = torch.exp(-0.5 * torch.cdist(x, x).square() / self.log_length.exp().square())
        chol = torch.linalg.cholesky(k + torch.eye(x.shape[0]))
        alpha = torch.cholesky_solve(y, chol)
        return (y * alpha).sum() + torch.log(torch.diagonal(chol)).sum()


def test_the_flops_of_a_cholesky_factor_and_its_solves(tmp_path):
    """gp_cholesky.py: torch's flop counter has no entry for the dense factorizations and solves,
    so the capture counted 0 FLOPs for them (the 4,096-point step: 9.4 GFLOP forward where the
    factor alone is 22.9). Golub and Van Loan's counts: the factor n^3/3 = 64^3/3 = 87,381, a
    solve with the factor 2 n^2 k = 2 x 64^2 x 1 = 8,192, and the backward's triangular solves
    n^2 per right-hand side (64 of them: the factor's gradient is a matrix)."""
    path = str(tmp_path / "gp.db")
    mhc_torch.capture(ExactGP, lambda: (torch.randn(64, 3), torch.randn(64, 1)), steps=1, path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT s.text, i.flops FROM kernels k JOIN strings s ON s.id = k.name "
                          "JOIN kernel_info i ON i.kernel = k.id ORDER BY k.id").fetchall()
    by_name = {}
    for name, flops in rows:
        by_name.setdefault(name, []).append(flops)
    assert by_name["aten::linalg_cholesky_ex"] == [64 ** 3 // 3], by_name
    assert by_name["aten::cholesky_solve"][0] == 2 * 64 * 64, by_name
    solves = by_name["aten::linalg_solve_triangular"]
    assert solves and solves == [64 ** 3] * len(solves), by_name
