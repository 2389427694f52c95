"""The settings tests' tiny model (three MLP blocks, tiny_models.py), the bytes each of its saves
takes, and what the tests read back from a capture: rows, live bytes, recomputations, copies,
host memory; mhc-torch run in this process or its own; mhc advise's prediction beside a capture."""
import contextlib
import io
import json
import sqlite3
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from tiny_models import Net  # noqa: E402

# The tiny model: 3 blocks of x -> fc2(relu(fc1(x))), 32 tokens x 16 features, hidden 64, fp32.
# Per block: fc1's output h (32 x 64 x 4 = 8192 B) dies once relu has run (relu saves its output,
# not its input); relu's output a (8192 B) is saved twice (by relu, and by fc2 as its input); the
# block's output x (32 x 16 x 4 = 2048 B) is the next block's input, saved by its fc1. Block 0's
# input is the batch, which needs no gradient, so block 0's fc1 saves the batch but not its weight.
# The loss is the sum of the last output (saves nothing). Alive for the backward: a0, a1, a2
# (3 x 8192) + x1, x2 (2 x 2048) + the loss (4) = 28,676 B of activations.
# The forward's saves, numbered as an offload counts them (a matmul saves its weight's transpose,
# then its input, before it runs; relu its output after): 0 batch; 1 a0; 2 W2^T, 3 a0 (block 0's
# fc2); 4 W1^T, 5 x1; 6 a1; 7 W2^T, 8 a1; 9 W1^T, 10 x2; 11 a2; 12 W2^T, 13 a2.
A, X, LOSS = 8192, 2048, 4
BASELINE = 3 * A + 2 * X + LOSS
PARAMS = 6 * 64 * 16 * 4


def _capture(tmp_path, setting, name="net.db"):
    path = str(tmp_path / name)
    mhc_torch.capture(Net, lambda: (torch.randn(32, 16),), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b).sum(), setting=setting)
    return path


def _rows(path, sql, args=()):
    db = sqlite3.connect(path)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _backward_start(path):
    return _rows(path, "SELECT min(k.t_start) FROM kernels k JOIN kernel_info i ON i.kernel = k.id WHERE i.phase = 1")[0][0]


def _live(path, t, where):
    return _rows(path, f"SELECT coalesce(sum(bytes), 0) FROM allocations WHERE {where} AND t_alloc <= ? "
                       "AND (t_free IS NULL OR t_free > ?)", (t, t))[0][0]


def _activations_at_backward(path):
    return _live(path, _backward_start(path), "device >= 0 AND category = 3")


def _recomputed(path):
    return [(n, m) for n, m in _rows(path, "SELECT s.text, ms.text FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                                           "JOIN strings s ON s.id = k.name JOIN modules m ON m.id = i.module "
                                           "JOIN strings ms ON ms.id = m.name WHERE i.phase = 3 ORDER BY k.id")]


def _copies(path):
    return _rows(path, "SELECT kind, stream, count(*), sum(bytes) FROM copies GROUP BY 1, 2 ORDER BY 1, 2")


def _host(path):
    return dict(_rows(path, "SELECT c.name, sum(a.bytes) FROM allocations a JOIN categories c ON c.id = a.category "
                            "WHERE a.device = -1 GROUP BY 1"))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mhc_torch.cli", *args], capture_output=True, text=True)


class _Ran:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli_here(*args):
    """`mhc-torch ARGS` in this process (torch imported once, not once per capture): for the
    captures that succeed; what the command prints on failing is checked through _cli's process."""
    from mhc_torch.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(map(str, args)))
    return _Ran(code, out.getvalue(), err.getvalue())


NET_FILE = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64, bias=False), nn.Linear(64, 16, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.sum()


def build_model():
    return Net()


def make_batch():
    return (torch.randn(32, 16),)
"""


def _predicted_and_captured(tmp_path, mhc_exe, source, setting, **recipe):
    """The model in `source` (a model file's text) captured as is, `mhc advise --setting` on that
    capture, and the model captured again with the setting applied (mhc_torch.apply, as --verify
    does, in this process): (the prediction's JSON, the capture's result)."""
    ns = {}
    exec(source, ns)  # noqa: S102 - the model text of this file
    kw = {"loss_fn": lambda m, b: m(*b), "autocast_dtype": None}
    kw.update(recipe)
    if "step" in ns:
        kw["step"] = ns["step"]
    base = tmp_path / "base.db"
    if not base.exists():
        mhc_torch.capture(ns["build_model"], ns["make_batch"], path=str(base), **kw)
    predicted = _advise_json(mhc_exe, base, setting)
    captured = mhc_torch.capture(ns["build_model"], ns["make_batch"], path=str(tmp_path / "set.db"),
                                 setting=setting, **kw)
    return predicted, captured


def _alloc_events(path, step):
    """The allocations and frees of one step's forward and backward in time order, as (+/-, bytes, label)."""
    rows = _rows(path, "SELECT a.bytes, a.t_alloc, a.t_free, s.text FROM allocations a JOIN strings s ON s.id = a.label "
                       "WHERE a.device >= 0")
    lo, hi = _rows(path, "SELECT min(k.t_start), min(CASE WHEN s.text LIKE 'aten::_foreach%' THEN k.t_start END) "
                         "FROM kernels k JOIN strings s ON s.id = k.name WHERE k.step = ?", (step,))[0]
    # up to the optimizer step (AdamW's foreach kernels)
    ev = [(t0, 1, "+", b, label) for b, t0, t1, label in rows if lo <= t0 <= hi]
    ev += [(t1, 0, "-", b, label) for b, t0, t1, label in rows if t1 is not None and lo <= t1 <= hi]
    return [e[2:] for e in sorted(ev)]


def _alloc_order(path):
    """Step 1's allocations (by size) in order, with the frees between two of them as a sorted list."""
    out, frees = [], []
    for sign, nbytes, _ in _alloc_events(path, 1):
        if sign == "-":
            frees.append(nbytes)
            continue
        if out:
            out.append(sorted(frees))
        frees = []
        out.append(nbytes)
    return out


LOSS_INSIDE_FILE = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(64, 1024)

    def forward(self, x, labels):
        for b in self.blocks:
            x = b(x)
        logits = self.head(x)
        loss_fct = nn.CrossEntropyLoss()   # made here, as T5's and BART's forward do: not a child
        return loss_fct(logits, labels)


def build_model():
    return Net()


def make_batch():
    return torch.randn(512, 64), torch.randint(0, 1024, (512,))
'''


def _advise_json(mhc_exe, path, setting):
    out = subprocess.run([mhc_exe, "advise", str(path), "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
