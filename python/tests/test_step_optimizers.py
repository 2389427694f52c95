"""What the capture says of the optimizers a step function builds itself (bench/advise/new_user/
sparse_embed.py: DLRM's SparseAdam over the embeddings and Adam over the MLPs). Each test fails
without the fix it guards."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402


def test_a_step_with_two_optimizers_of_its_own_names_them(tmp_path, capsys):
    """meta capture.optimizer said "adamw", the capture's own optimizer, which the step never
    stepped; now it names the step's own."""
    model = tmp_path / "two.py"
    model.write_text(textwrap.dedent("""
        import torch
        def build_model():
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        def make_batch(): return (torch.randn(4, 8),)
        def step(model, batch, run):
            if "opts" not in run.state:
                run.state["opts"] = [torch.optim.SGD(model[0].parameters(), lr=0.1),
                                     torch.optim.Adam(model[2].parameters(), lr=1e-3)]
            model(*batch).float().mean().backward()
            for opt in run.state["opts"]:
                opt.step()
                opt.zero_grad(set_to_none=True)
    """))
    out = str(tmp_path / "two.db")
    assert main(["capture", str(model), "-o", out]) == 0, capsys.readouterr().err
    meta = mhc_torch.read_table(out, "meta").set_index("key")["value"].to_dict()
    assert meta["capture.optimizer"] == "step: SGD, Adam"   # was "adamw"
