"""Advice a user can deploy, the third round of new-user models (docs/results.md): the optimizer a
training script builds itself, left to torch's defaults or built inside its step, is the one the
capture steps and `mhc advise` answers for; the frames that hold a checkpointed block's tensors
are read wherever the model's code came from. Each test fails without the fix it guards."""
import json
import subprocess
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    def build_model():
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 64))

    def make_batch():
        return (torch.randn(32, 64),)

    def loss_fn(model, batch):
        return model(*batch).float().pow(2).mean()
""")


def _kernel_names(path):
    k = mhc_torch.read_table(path, "kernels")
    return list(k["name"])


@pytest.mark.parametrize("explicit", [False, True])
def test_an_optimizer_left_to_torchs_default_runs_foreach_as_on_a_gpu(tmp_path, explicit):
    """`torch.optim.AdamW(model.parameters(), lr=...)` and `clip_grad_norm_` leave foreach to torch,
    which on CUDA tensors runs the foreach kernels; on the capture's fake CPU tensors it ran the
    per-parameter loop (no `_foreach_sqrt` of all the second moments at once: a lower peak than
    the GPU's, other kernels). The default choice is now the GPU's: the same trace as foreach=True."""
    model = tmp_path / "m.py"
    foreach = ", foreach=True" if explicit else ""
    model.write_text(MODEL + textwrap.dedent(f"""
        def step(model, batch, run):
            with run.autocast():
                loss = loss_fn(model, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0{foreach})
            run.optimizer.step()
            run.optimizer.zero_grad()

        def build_optimizer(model):
            return torch.optim.AdamW(model.parameters(), lr=1e-3{foreach})
    """))
    out = str(tmp_path / "m.db")
    assert main(["capture", str(model), "-o", out, "--steps", "2"]) == 0
    names = _kernel_names(out)
    assert "aten::_foreach_sqrt" in names and "aten::_foreach_norm" in names
    assert "aten::lerp_" not in names   # the per-parameter loop's
    from torch.optim import optimizer as opt_module   # put back after the capture
    assert "cpu" not in opt_module._get_foreach_kernels_supported_devices()
    from torch._subclasses.fake_tensor import FakeTensor
    assert FakeTensor not in opt_module._foreach_supported_types
