"""Model families a new user brought in 2026-12-05 (bench/advise/new_user: an LSTM language model,
a GNN with a masked loss, ...): what the capture says of each. Each test fails without the fix it
guards."""
import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

LSTM = """
    import torch
    class Lm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 8)
            self.rnns = torch.nn.ModuleList([torch.nn.LSTM(8, 16, batch_first=True), torch.nn.GRU(16, 16)])
            self.head = torch.nn.Linear(16, 64)
        def forward(self, ids):
            x, _ = self.rnns[0](self.embed(ids))
            x, _ = self.rnns[1](x)
            return self.head(x)
    def build_model(): return Lm()
    def make_batch(): return {"ids": torch.randint(0, 64, (2, 5))}
    def loss_fn(model, batch): return model(batch["ids"]).float().mean()
"""


def test_recurrent_layers_are_named_as_not_modelled(tmp_path, capsys):
    """nn.LSTM and nn.GRU run cuDNN's RNN kernel on a GPU (a reserve space; fp16 under autocast);
    the capture records the CPU's aten::mkldnn_rnn_layer in its place, silently before: the trace
    now names the modules (meta capture.unmodelled_modules) and the capture warns in one line."""
    model = tmp_path / "lstm.py"
    model.write_text(textwrap.dedent(LSTM))
    out = str(tmp_path / "lstm.db")
    assert main(["capture", str(model), "-o", out]) == 0
    err = capsys.readouterr().err
    assert "warning: Lm.rnns.0, Lm.rnns.1 (recurrent layers) run cuDNN's RNN kernel on a GPU" in err, err
    meta = dict(mhc_torch.read_table(out, "meta")[["key", "value"]].values)
    assert json.loads(meta["capture.unmodelled_modules"]) == ["Lm.rnns.0", "Lm.rnns.1"]


def test_a_model_without_recurrent_layers_gets_no_such_warning(tmp_path, capsys):
    model = tmp_path / "mlp.py"
    model.write_text(textwrap.dedent("""
        import torch
        def build_model(): return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        def make_batch(): return (torch.randn(4, 8),)
        def loss_fn(model, batch): return model(*batch).float().mean()
    """))
    out = str(tmp_path / "mlp.db")
    assert main(["capture", str(model), "-o", out]) == 0
    assert "cuDNN" not in capsys.readouterr().err
    assert "capture.unmodelled_modules" not in set(mhc_torch.read_table(out, "meta")["key"])


def test_a_loss_over_a_boolean_mask_says_what_captures(tmp_path, capsys):
    """A GNN's loss over its training nodes, cross_entropy(logits[mask], y[mask]), stops the capture
    (nonzero: its shape depends on the mask's values), which the line said without a way out; it
    now says how to write the same loss with fixed shapes, and that form captures."""
    model = tmp_path / "masked.py"
    body = """
        import torch
        import torch.nn.functional as F
        def build_model(): return torch.nn.Linear(8, 3)
        def make_batch(): return {"x": torch.randn(6, 8), "y": torch.randint(0, 3, (6,)), "mask": torch.rand(6) < 0.5}
        def loss_fn(model, b): return F.cross_entropy(model(b["x"])LOGITS, LABELS)
    """
    model.write_text(textwrap.dedent(body.replace("LOGITS", '[b["mask"]]').replace("LABELS", 'b["y"][b["mask"]]')))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "op aten.nonzero.default cannot run on fake tensors" in err and \
        "cross_entropy(logits, labels.masked_fill(~mask, -100))" in err, err
    model.write_text(textwrap.dedent(body.replace("LOGITS", "").replace("LABELS", 'b["y"].masked_fill(~b["mask"], -100)')))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 0, capsys.readouterr().err
