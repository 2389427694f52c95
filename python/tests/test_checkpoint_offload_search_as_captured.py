"""The search's block choice "checkpoint + offload its saved inputs" (torchtune's activation
offloading beside activation checkpointing: the offload's hooks around each checkpointed block take
what it saves, its call's inputs), ranked first where it wins, printed, and verified by capture.

4 MiB (a block's input) below the reserved peak of checkpointing every block, the first answer
checkpoints blocks and offloads the inputs of two of them (sync: the streamed offload's stash of 5
saves keeps 4 blocks' inputs on the device until the backward). Before 2026-12-06 the search never
put a checkpoint and an offload on one block, nor offloaded in sync mode, and answered the host
optimizer there (checkpoint 2 of 4 + optimizer on host, +141.3% against +66.1%). `--verify` captures the step with the answer applied (mhc_torch.apply) and the
code printed for it, pasted into the model file, captures the same step: the
predicted peak, reserved peak and host bytes are the captured ones to the byte."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

PY = os.path.join(os.path.dirname(__file__), "..")

MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.fc2(torch.tanh(self.fc1(self.norm(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(4))
            self.head = nn.Linear(64, 8)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    def build_model():
        return Net()

    def make_batch():
        return (torch.randn(16384, 64),)

    def loss_fn(model, batch):
        return model(*batch).square().mean()
""")

ALL = [f"Net.blocks.{i}" for i in range(4)]


def _env():
    return dict(os.environ, PYTHONPATH=os.path.abspath(PY) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                MHC_TORCH=f"{sys.executable} -m mhc_torch.cli")


def _advise(mhc_exe, trace, *args):
    got = subprocess.run([mhc_exe, "advise", trace, *args, "--json"], capture_output=True, text=True, env=_env())
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def _inputs_offloaded(setting):
    """The blocks both checkpointed (policy full) and offloaded."""
    groups = setting.get("checkpoint", [])
    groups = [groups] if isinstance(groups, dict) else groups
    full = {m for g in groups if g.get("policy", "full") == "full" for m in g["modules"]}
    return sorted(full & set((setting.get("offload") or {}).get("modules") or []))


def test_checkpoint_with_offloaded_inputs_ranked_printed_verified(mhc_exe, tmp_path):
    model = tmp_path / "net.py"
    model.write_text(MODEL)
    base = str(tmp_path / "net.db")
    assert main(["capture", str(model), "-o", base, "--steps", "1"]) == 0
    (row,) = _advise(mhc_exe, base, "--setting", json.dumps({"checkpoint": {"modules": ALL}}))["rows"]
    capacity = row["reserved_bytes"] - (4 << 20)   # one block's input less than every block checkpointed
    doc = _advise(mhc_exe, base, "--capacity", f"{capacity}B", "--top", "1", "--verify", "--model", str(model))
    (first,) = doc["rows"]
    setting = first["setting"]
    assert _inputs_offloaded(setting), setting
    assert "checkpointed: their saved inputs" in first["description"], first["description"]
    v = first["verify"]
    assert (v["peak_bytes"], v["reserved_bytes"], v["host_peak_bytes"]) == \
        (first["peak_bytes"], first["reserved_bytes"], first["host_peak_bytes"])
    assert first["host_peak_bytes"] > 0 and first["peak_bytes"] < row["peak_bytes"]

    # the printed code, pasted into the model file, is the step --verify captured (the optimizer's
    # part through --setting, as --verify applies it)
    printed = first["code"].split("# or, the same in one line")[0]
    assert "# after the checkpoint wrapper" in printed
    pasted = tmp_path / "pasted.py"
    pasted.write_text(MODEL + textwrap.dedent(f"""
        _build = build_model

        def build_model():
            model = _build()
            exec({printed!r}, {{"model": model, "optimizer": None, "torch": torch}})
            return model
    """))
    out = str(tmp_path / "pasted.db")
    rest = {k: v for k, v in setting.items() if k in ("optimizer", "allocator")}
    assert main(["capture", str(pasted), "-o", out, "--steps", "1", "--setting", json.dumps(rest)]) == 0
    (again,) = _advise(mhc_exe, out, "--setting", "{}")["rows"]
    assert (again["peak_bytes"], again["reserved_bytes"]) == (first["peak_bytes"], first["reserved_bytes"])
    assert int(mhc_torch.read_meta(out)["capture.host_peak_bytes"]) == first["host_peak_bytes"]
