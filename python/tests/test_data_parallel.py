"""Data-parallel wrappers in a capture (docs/advise.md "Data parallelism"): DDP on a process group
of fake ranks runs and its gradient bucket is in the trace; FSDP2 is recorded as such, so that
`mhc advise` says what it does not model instead of answering from a trace that is not a rank's
memory. Each capture runs in a process of its own (a process group is global state)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch built without torch.distributed", allow_module_level=True)

import mhc_torch  # noqa: E402

PY = os.path.join(os.path.dirname(__file__), "..")

MODEL = """
import torch
import torch.distributed as dist
from torch import nn
from torch.testing._internal.distributed.fake_pg import FakeStore

if not dist.is_initialized():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
                                    for _ in range(2))
    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return x.square().mean()

def make_batch():
    return (torch.randn(32, 64),)

def loss_fn(model, batch):
    return model(*batch)
"""

DDP = MODEL + """
def build_model():
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(Net(), init_sync=False, gradient_as_bucket_view=AS_VIEW)
"""

FSDP2 = MODEL + """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
MESH = init_device_mesh("cpu", (4,))

def build_model():
    m = Net()
    for b in m.blocks:
        fully_shard(b, mesh=MESH)
    fully_shard(m, mesh=MESH)
    return m
"""

PARAM_BYTES = 2 * (64 * 256 + 256 + 256 * 64 + 64) * 4   # two blocks of fp32 Linear(64, 256), Linear(256, 64)


def _capture(tmp_path, text, name, *extra):
    model = tmp_path / f"{name}.py"
    model.write_text(textwrap.dedent(text))
    out = tmp_path / f"{name}.db"
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PY) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(model), "-o", str(out),
                        "--autocast", "none", "--steps", "2", *extra],
                       capture_output=True, text=True, env=env, timeout=600)
    return r, out


@pytest.mark.parametrize("as_view", [False, True])
def test_ddp_on_fake_ranks_is_captured_with_its_bucket(tmp_path, as_view):
    """Without the capture's own all-reduce hook the fake group's future stopped the backward
    ("expected the hook result is either a Tensor or a TensorList found None"), and the second
    step's bucket rebuild read a tensor's values ("its data is not allocated yet")."""
    r, out = _capture(tmp_path, DDP.replace("AS_VIEW", str(as_view)), "ddp")
    assert r.returncode == 0, r.stderr
    meta = mhc_torch.read_table(str(out), "meta").set_index("key").value.to_dict()
    assert meta["capture.data_parallel"] == "ddp"
    assert meta["capture.ddp"] == (f"world 4, bucket_cap_mb 25, gradient_as_bucket_view {str(as_view).lower()}, "
                                   "modules 1")
    a = mhc_torch.read_table(str(out), "allocations")
    bucket = a[a.label.str.startswith("DDP gradient bucket")]
    # DDP's first step has one bucket of every gradient (it rebuilds them by bucket_cap_mb after
    # the first step, which the capture skips): the parameters' bytes, made with DDP (t 0).
    assert list(bucket.bytes) == [PARAM_BYTES]
    assert list(bucket.t_alloc) == [0]
    # Gradients live apart from the bucket unless they are its views: then each new gradient
    # (zero_grad sets them to None) is copied into its view and dropped at once.
    g = a[a.category_name == "grad"]
    events = sorted([(t, b) for t, b in zip(g.t_alloc, g.bytes)] + [(t, -b) for t, b in zip(g.t_free, g.bytes)])
    live = most = 0
    for _, b in events:
        live += b
        most = max(most, live)
    if as_view:
        assert most <= 256 * 64 * 4 * 2   # at most two of the largest gradient at once
    else:
        assert most >= PARAM_BYTES


def test_fsdp2_is_recorded_as_such(tmp_path):
    """FSDP2's parameters are recorded as a rank's shards (the DTensor wrapper's storage has the
    global shape: it counted four times the bytes), and its unsharded parameters, freed with
    untyped_storage().resize_(0) after each block's forward and backward and made again with
    resize_(size), as allocations that end and begin there (they were one allocation alive from
    the first all-gather to the end)."""
    r, out = _capture(tmp_path, FSDP2, "fsdp2")
    assert r.returncode == 0, r.stderr
    meta = mhc_torch.read_table(str(out), "meta").set_index("key").value.to_dict()
    assert meta["capture.data_parallel"] == "fsdp2"
    assert meta["capture.fsdp2"] == "world 4, modules 3, reshard_after_forward true, cpu_offload false"
    a = mhc_torch.read_table(str(out), "allocations")
    assert a[(a.category_name == "param") & ~a.label.str.endswith("(unsharded)")].bytes.sum() == PARAM_BYTES // 4
    # blocks.0's unsharded weight of Linear(64, 256): 64 KiB, gathered for the forward and again
    # for the backward in each of the two steps, each time freed again: 2 blocks x 2 weights x 4
    grown = a[a.label.str.endswith(".weight (unsharded)")]
    assert list(grown.bytes) == [64 * 256 * 4] * 16 and grown.t_free.notna().all()
    assert (grown.category_name == "param").all()


def test_advise_says_what_it_models_of_ddp_and_refuses_fsdp2(tmp_path, mhc_exe):
    r, ddp = _capture(tmp_path, DDP.replace("AS_VIEW", "False"), "ddp")
    assert r.returncode == 0, r.stderr
    a = subprocess.run([mhc_exe, "advise", str(ddp), "--setting",
                        json.dumps({"checkpoint": {"modules": ["DistributedDataParallel.module.blocks.0"]}})],
                       capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    notes = [ln for ln in a.stdout.splitlines() if ln.startswith("note") and "DDP" in ln]
    assert len(notes) == 1, a.stdout
    h = subprocess.run([mhc_exe, "advise", str(ddp), "--setting", '{"optimizer": {"state": "host"}}'],
                       capture_output=True, text=True)
    assert h.returncode == 2 and len(h.stderr.strip().splitlines()) == 1 and "DDP" in h.stderr, h.stderr
    r, fsdp = _capture(tmp_path, FSDP2, "fsdp2")
    assert r.returncode == 0, r.stderr
    f = subprocess.run([mhc_exe, "advise", str(fsdp), "--capacity", "1GiB"], capture_output=True, text=True)
    assert f.returncode == 2, f.stdout
    assert len(f.stderr.strip().splitlines()) == 1 and "FSDP2" in f.stderr, f.stderr
