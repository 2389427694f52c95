"""A step that runs its backwards itself (`scaler.scale(loss).backward()` over micro-batches, as
nanoGPT's train.py does) ends each backward at the next op outside the autograd engine, which
closes the modules still open from that backward. The next micro-batch's model call starts before
that op: until 2026-12-08 it was closed with them, and the ops of the model's own forward (the
loss nanoGPT computes inside it) ran outside every module in every micro-batch but the first, so
an offload of the whole forward left their saves on the device in the prediction (nanoGPT,
bench/advise/new_user/nanogpt.py, sync: 3.29 GiB peak and 4.72 GiB reserved predicted against
3.17 and 3.96 GiB captured; 0.00% now)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from predicted_as_applied import assert_predicted_as_applied  # noqa: E402

SYNC = {"offload": {"mode": "sync", "modules": None}}
VOCAB, DIM = 256, 64


class _TiedLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, DIM)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM))
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.wte.weight   # tied, as nanoGPT's

    def forward(self, ids, targets):
        x = self.wte(ids)
        logits = self.head(x + self.mlp(x))
        return torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def _batch():
    return (torch.randint(0, VOCAB, (8, 128)), torch.randint(0, VOCAB, (8, 128)))


def _step(model, batch, run):
    for _ in range(2):   # gradient accumulation, the backward run by the step itself
        with run.autocast():
            loss = model(*batch) / 2
        loss.backward()
    run.optimizer_step()
    run.zero_grad()


def _capture(path, setting=None):
    return mhc_torch.capture(_TiedLM, _batch, steps=1, path=str(path), setting=setting, step=_step)


def test_each_micro_batch_runs_in_the_model(mhc_exe, tmp_path):
    _capture(tmp_path / "base.db")
    with sqlite3.connect(tmp_path / "base.db") as db:
        labels = [r[0] for r in db.execute("SELECT s.text FROM allocations a JOIN strings s ON s.id = a.label "
                                           "WHERE s.text LIKE '%aten::_log_softmax' ORDER BY a.id")]
    assert labels == ["_TiedLM:aten::_log_softmax"] * 2   # the loss in the model, in both micro-batches
    assert_predicted_as_applied(mhc_exe, tmp_path, SYNC, _capture, group_frees=True)
