"""Data-parallel wrappers in a capture (docs/advise.md "Data parallelism"): DDP on a process group
of fake ranks runs and its gradient bucket is in the trace; FSDP2's trace is one rank's memory
(shards, unsharded parameters between FSDP2's resizes, its collectives as kernels), which `mhc
advise` searches and verifies. Each capture runs in a process of its own (a process group is
global state)."""
import json
import os
import sqlite3
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
        fully_shard(b, mesh=MESH, reshard_after_forward=RESHARD)
    fully_shard(m, mesh=MESH)
    return m
""".replace("RESHARD", "True")

PARAM_BYTES = 2 * (64 * 256 + 256 + 256 * 64 + 64) * 4   # two blocks of fp32 Linear(64, 256), Linear(256, 64)


def _env():
    return dict(os.environ, PYTHONPATH=os.path.abspath(PY) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _capture(shared_run, tmp_path, text, name, *extra):
    """The model file NAME.py and its capture NAME.db in tmp_path; a capture of the same text, name
    and options that another test made is copied (conftest.py's shared_run)."""
    def make(folder):
        model = folder / f"{name}.py"
        model.write_text(textwrap.dedent(text))
        autocast = [] if "--autocast" in extra else ["--autocast", "none"]   # an option is given once
        return subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(model), "-o",
                               str(folder / f"{name}.db"), *autocast, "--steps", "2", *extra],
                              capture_output=True, text=True, env=_env(), timeout=600)

    return shared_run((text, name, extra), make, tmp_path), tmp_path / f"{name}.db"


@pytest.mark.parametrize("as_view", [False, True])
def test_ddp_on_fake_ranks_is_captured_with_its_bucket(shared_run, tmp_path, as_view):
    """Without the capture's own all-reduce hook the fake group's future stopped the backward
    ("expected the hook result is either a Tensor or a TensorList found None"), and the second
    step's bucket rebuild read a tensor's values ("its data is not allocated yet")."""
    r, out = _capture(shared_run, tmp_path, DDP.replace("AS_VIEW", str(as_view)), "ddp")
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


def _kernels(path):
    """Per kernel of the trace: (id, name, step, phase name, module name, live device bytes at its
    start: allocations made at or before it, less those freed at or before it)."""
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT k.id, n.text, k.step, p.name, COALESCE(m.text, ''), k.t_start FROM kernels k "
        "JOIN strings n ON n.id = k.name JOIN kernel_info i ON i.kernel = k.id JOIN phases p ON p.id = i.phase "
        "LEFT JOIN modules mo ON mo.id = i.module LEFT JOIN strings m ON m.id = mo.name ORDER BY k.id").fetchall()
    allocs = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall()
    db.close()
    return [(kid, name, step, phase, module,
             sum(b for b, ta, tf in allocs if ta <= t and (tf is None or tf > t))) for kid, name, step, phase, module, t in rows]


SHARDS = PARAM_BYTES // 4            # 66,176 B: a rank's quarter of every parameter (no padding: every dim-0 divides by 4)
GROUP = PARAM_BYTES // 2             # 132,352 B: one block's parameters unsharded, = its all-gather output (4 x its shards)
CUBLAS = 2 * 32 * 2**20 + 2**20      # the capture's cuBLAS workspaces on an H100 (main and autograd threads) and the
                                     # main thread's cuBLASLt workspace (the forward's addmm with a bias; docs/torch.md)


@pytest.mark.parametrize("reshard", [True, False])
def test_fsdp2_capture_is_a_ranks_memory(shared_run, tmp_path, reshard):
    """One rank of 4, worked out by hand (fp32, no autocast, AdamW foreach, batch 32 x 64), at the
    last kernel of blocks.1's forward in the second step (its second Linear):
      shards 66,176 + AdamW's exp_avg and exp_avg_sq of the shards 132,352 + 8 step counters 32
      + batch 8,192 + CUBLAS
      + blocks.0's saved Linear(64, 256) output 32,768, GELU output 32,768, residual sum 8,192
      + blocks.1's all-gather output 132,352 (FSDP2 keeps it until the next all-gather) and its
        unsharded parameters 132,352
      + blocks.1's Linear(64, 256) output 32,768, GELU output 32,768, Linear(256, 64) output 8,192
    and, with reshard_after_forward=False, blocks.0's unsharded parameters too (132,352). Before
    FSDP2's resizes were followed every parameter was unsharded for the whole step; before its
    collectives were kernels no all-gather or reduce-scatter was in the trace."""
    # named as test_advise_keeps_fsdp2_parameters_unsharded_when_it_fits names the same model
    # unsharded ("kept"), so that the session captures it once
    r, out = _capture(shared_run, tmp_path, FSDP2.replace("reshard_after_forward=True", f"reshard_after_forward={reshard}"),
                      "fsdp2" if reshard else "kept")
    assert r.returncode == 0, r.stderr
    meta = mhc_torch.read_table(str(out), "meta").set_index("key").value.to_dict()
    assert meta["capture.data_parallel"] == "fsdp2"
    assert meta["capture.fsdp2"] == (f"world 4, modules 3, reshard_after_forward {str(reshard).lower()}, "
                                     "cpu_offload false")
    # the parameters are a rank's shards (a DTensor's own storage has the global shape: it
    # counted 4 times the bytes)
    a = mhc_torch.read_table(str(out), "allocations")
    assert a[(a.category_name == "param") & ~a.label.str.endswith("(unsharded)")].bytes.sum() == SHARDS
    # each weight's unsharded memory (64 KiB) is an allocation per gather, freed with
    # untyped_storage().resize_(0) after the forward (when resharding) and after the backward, and
    # made again with resize_(size): 2 blocks x 2 weights x 2 steps x 2 gathers a step (1 without
    # resharding after the forward); it was one allocation from the first gather to the end
    grown = a[a.label.str.endswith(".weight (unsharded)")]
    assert list(grown.bytes) == [64 * 256 * 4] * (16 if reshard else 8) and grown.t_free.notna().all()
    assert (grown.category_name == "param").all()
    acts = 32768 + 32768 + 8192
    expected = SHARDS + 2 * SHARDS + 8 * 4 + 8192 + CUBLAS + acts + GROUP + GROUP + acts + (0 if reshard else GROUP)
    ks = _kernels(str(out))
    block1 = [k for k in ks if k[2] == 1 and k[3] == "forward" and k[4].startswith("FSDPNet.blocks.1")]
    assert block1[-1][1] == "aten::addmm"
    assert max(k[5] for k in block1) == block1[-1][5] == expected
    # the collectives of one step: an all-gather per block before its forward, again before its
    # backward when it resharded after the forward; a reduce-scatter per block after its backward
    step1 = [k[1] for k in ks if k[2] == 1]
    assert step1.count("c10d::_allgather_base_") == (4 if reshard else 2)
    assert step1.count("fsdp::all_gather_copy_in") == step1.count("c10d::_allgather_base_")
    assert step1.count("c10d::_reduce_scatter_base_") == 2
    db = sqlite3.connect(str(out))
    touched = db.execute(
        "SELECT n.text, a.bytes, c.name, x.mode FROM kernels k JOIN strings n ON n.id = k.name "
        "JOIN accesses x ON x.kernel = k.id JOIN allocations a ON a.id = x.allocation "
        "JOIN categories c ON c.id = a.category WHERE k.step = 1 AND n.text LIKE 'c10d::%'").fetchall()
    # an all-gather reads its input (this rank's slice of the output) and writes the output:
    # 4 x the block's shards; a reduce-scatter reads the block's unsharded gradients (4 x its
    # shards) and writes this rank's shard of them (the sharded gradients)
    assert set(touched) == {("c10d::_allgather_base_", GROUP, "comm", 3),
                            ("c10d::_reduce_scatter_base_", GROUP, "comm", 1),
                            ("c10d::_reduce_scatter_base_", GROUP // 4, "grad", 2)}
    # DTensor's sharding propagation runs each op of the optimizer once more on global-shape fake
    # tensors: left out, nothing the optimizer allocates is larger than a shard (16 KiB)
    opt = db.execute("SELECT MAX(a.bytes) FROM allocations a JOIN kernels k ON k.t_start = a.t_alloc "
                     "JOIN kernel_info i ON i.kernel = k.id JOIN phases p ON p.id = i.phase "
                     "WHERE p.name = 'optimizer'").fetchone()[0]
    db.close()
    assert opt == 64 * 64 * 4


def test_fsdp2_unsharded_parameters_are_not_offloaded(shared_run, tmp_path):
    """FSDP2 swaps a group's unsharded parameters into its module only when its forward begins, so
    they are not among the model's parameters when the offload's forward starts: blocks.1's
    weights (2 x 64 KiB) were copied to the host too. What a sync offload of both blocks keeps on
    the host is their saved activations: each block's input (8,192 B), Linear(64, 256) output and
    GELU output (32,768 B each)."""
    setting = {"offload": {"mode": "sync", "modules": ["FSDPNet.blocks.0", "FSDPNet.blocks.1"]}}
    r, out = _capture(shared_run, tmp_path, FSDP2, "fsdp2", "--setting", json.dumps(setting))
    assert r.returncode == 0, r.stderr
    meta = mhc_torch.read_table(str(out), "meta").set_index("key").value.to_dict()
    assert int(meta["capture.host_peak_bytes"]) == 2 * (8192 + 32768 + 32768)


def test_advise_says_what_it_models_of_ddp_and_fsdp2(shared_run, tmp_path, mhc_exe):
    r, ddp = _capture(shared_run, tmp_path, DDP.replace("AS_VIEW", "False"), "ddp")
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
    r, fsdp = _capture(shared_run, tmp_path, FSDP2, "fsdp2", "--autocast", "bf16")
    assert r.returncode == 0, r.stderr
    h = subprocess.run([mhc_exe, "advise", str(fsdp), "--setting", '{"optimizer": {"state": "host"}}'],
                       capture_output=True, text=True)
    assert h.returncode == 2 and len(h.stderr.strip().splitlines()) == 1 and "FSDP2" in h.stderr, h.stderr
    # a block setting and the fused optimizer, predicted and captured again with the setting applied
    setting = {"checkpoint": {"modules": ["FSDPNet.blocks.0"], "policy": "full"}, "optimizer": {"impl": "fused"}}
    v = subprocess.run([mhc_exe, "advise", str(fsdp), "--setting", json.dumps(setting), "--verify", "--json",
                        "--model", str(tmp_path / "fsdp2.py")],
                       capture_output=True, text=True, env=dict(_env(), MHC_TORCH=f"{sys.executable} -m mhc_torch.cli"))
    assert v.returncode == 0, v.stderr
    doc = json.loads(v.stdout)
    assert "FSDP2 (world 4" in doc["data_parallel"]
    (row,) = doc["rows"]
    assert row["verify"]["peak_bytes"] == row["peak_bytes"] and row["verify"]["reserved_bytes"] == row["reserved_bytes"]
    # Under autocast the checkpointed block's bf16 copies of its unsharded weights are autocast's
    # cache: they live to the end of the forward, in the prediction as in the capture (they were
    # taken as freed at their last use: the gradients of FSDP2's parameters are its reduce-scatter
    # buffer, not "<name>.grad", so the weights were taken as frozen): the forward's live bytes at
    # each kernel of the second step, predicted and captured
    setting = {"checkpoint": {"modules": ["FSDPNet.blocks.0"]}}
    predicted = tmp_path / "predicted.db"
    p = subprocess.run([mhc_exe, "advise", str(fsdp), "--setting", json.dumps(setting), "--trace-out", str(predicted)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r, captured = _capture(shared_run, tmp_path, FSDP2, "fsdp2_checkpointed", "--autocast", "bf16", "--setting", json.dumps(setting))
    assert r.returncode == 0, r.stderr

    def forward(path):   # live bytes at the kernels of the second step before its backward's seed
        db = sqlite3.connect(str(path))
        ks = db.execute("SELECT n.text, k.t_start FROM kernels k JOIN strings n ON n.id = k.name "
                        "WHERE k.step = 1 ORDER BY k.t_start").fetchall()
        allocs = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall()
        db.close()
        ks = ks[:[name for name, _ in ks].index("aten::ones_like")]
        return [sum(b for b, ta, tf in allocs if ta <= t and (tf is None or tf > t)) for _, t in ks]

    assert forward(predicted) == forward(captured)


def test_advise_refuses_fsdp2_with_cpu_offload(shared_run, tmp_path, mhc_exe):
    r, out = _capture(shared_run, tmp_path, FSDP2.replace("reshard_after_forward=True", "reshard_after_forward=True, offload_policy="
                                              "__import__('torch').distributed.fsdp.CPUOffloadPolicy(pin_memory=False)"), "offload")
    if r.returncode != 0:
        pytest.skip(f"FSDP2 with CPUOffloadPolicy does not run in a capture: {r.stderr.strip().splitlines()[-1]}")
    f = subprocess.run([mhc_exe, "advise", str(out), "--capacity", "1GiB"], capture_output=True, text=True)
    assert f.returncode == 2, f.stdout
    assert len(f.stderr.strip().splitlines()) == 1 and "CPUOffloadPolicy" in f.stderr, f.stderr


def test_advise_keeps_fsdp2_parameters_unsharded_when_it_fits(shared_run, tmp_path, mhc_exe):
    """reshard_after_forward=False is a setting mhc advise chooses (docs/advise.md, "Data
    parallelism"): with room to spare, every answer keeps the blocks' gathered parameters from the
    forward to the backward (no all-gather in the backward: faster by the ring model), and each is
    captured again through mhc_torch.apply's set_reshard_after_forward: the predicted peaks are the
    captured ones to the byte, and equal those of the model sharded with
    fully_shard(..., reshard_after_forward=False). Before, the setting did not exist and each
    all-gather lasted a launch on the compute stream."""
    r, fsdp = _capture(shared_run, tmp_path, FSDP2, "fsdp2")
    assert r.returncode == 0, r.stderr
    env = dict(_env(), MHC_TORCH=f"{sys.executable} -m mhc_torch.cli")
    a = subprocess.run([mhc_exe, "advise", str(fsdp), "--capacity", "1GiB", "--top", "1", "--verify", "--json",
                        "--model", str(tmp_path / "fsdp2.py")],
                       capture_output=True, text=True, env=env)
    assert a.returncode == 0, a.stderr
    doc = json.loads(a.stdout)
    assert doc["comm"].startswith("ring, world 4, 450.0 GB/s bus bandwidth"), doc["comm"]
    assert doc["baseline"]["comm_ns"] > 0
    (row,) = doc["rows"]
    assert row["setting"]["reshard_after_forward"] == {"FSDPNet.blocks.0": False, "FSDPNet.blocks.1": False}
    assert row["step_time_ns"] < doc["baseline"]["step_time_ns"]
    assert 'model.get_submodule("blocks.1").set_reshard_after_forward(False, recurse=False)' in row["code"]
    assert row["verify"]["peak_bytes"] == row["peak_bytes"]
    assert row["verify"]["reserved_bytes"] == row["reserved_bytes"]
    # the same step sharded with reshard_after_forward=False: the same peaks, and 2 all-gathers a
    # step where the prediction removed the backward's
    r, kept = _capture(shared_run, tmp_path, FSDP2.replace("reshard_after_forward=True", "reshard_after_forward=False"), "kept")
    assert r.returncode == 0, r.stderr
    k = subprocess.run([mhc_exe, "advise", str(kept), "--setting", "{}", "--json"], capture_output=True, text=True)
    assert k.returncode == 0, k.stderr
    both = {"reshard_after_forward": {"FSDPNet.blocks.0": False, "FSDPNet.blocks.1": False}}
    p = subprocess.run([mhc_exe, "advise", str(fsdp), "--setting", json.dumps(both), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    (captured,), (predicted,) = json.loads(k.stdout)["rows"], json.loads(p.stdout)["rows"]
    assert (predicted["peak_bytes"], predicted["reserved_bytes"]) == (captured["peak_bytes"], captured["reserved_bytes"])
    assert predicted["step_time_ns"] == captured["step_time_ns"]


def test_ddp_all_reduce_is_a_kernel_and_timed(shared_run, tmp_path, mhc_exe):
    """The capture's all-reduce hook records the bucket's all-reduce (one per step: the capture's
    single bucket), which mhc advise times by the ring model on its own stream."""
    r, ddp = _capture(shared_run, tmp_path, DDP.replace("AS_VIEW", "False"), "ddp")
    assert r.returncode == 0, r.stderr
    names = [k[1] for k in _kernels(str(ddp))]
    assert names.count("c10d::allreduce_") == 2
    a = subprocess.run([mhc_exe, "advise", str(ddp), "--setting", "{}", "--json"], capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    doc = json.loads(a.stdout)
    # 264,704 B over 4 ranks on 450 GB/s: 2 x 3 steps, 6/4 x 264,704 B / 450e9 = 882.3 ns + 8.4 us + 6 x 3.4 us
    # = 29,682.35 -> 29,683 ns a step (a bucket smaller than DDP's first 1 MiB: not split)
    assert doc["baseline"]["comm_ns"] == 2 * 29683
