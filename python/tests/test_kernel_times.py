"""`mhc-torch capture --kernel-times PROFILE`: each captured kernel takes the device time a PyTorch
profiler trace of the same step measured for its op (name and input shapes), the roofline where
the profile lacks the op. Without a GPU the profile is a real CPU profile of the step (real
cpu_op events, shapes, External ids, threads) with a kernel added under each innermost op, of a
known duration: the expected times are worked out here by interval containment, independently of
kernel_times.py's stack walk."""
import gzip
import os
import json
import sqlite3
import statistics
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from mhc_torch.cli import main  # noqa: E402
from mhc_torch.kernel_times import KernelTimes, KernelTimesError  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(16, 32)
            self.b = nn.Linear(32, 8)

        def forward(self, x):
            return self.b(torch.relu(self.a(x))).square().mean()

    def build_model():
        return Net()

    def make_batch():
        return (torch.randn(ROWS, 16),)
""")


def _model(tmp_path, rows):
    path = tmp_path / f"model{rows}.py"
    path.write_text(MODEL.replace("ROWS", str(rows)))
    return path


def _cpu_profile(tmp_path, rows, shapes=True):
    """The model's step (as the capture runs it with --autocast none) under torch.profiler on the CPU."""
    from torch.profiler import ProfilerActivity, profile

    ns = {}
    exec(compile(MODEL.replace("ROWS", str(rows)), "model", "exec"), ns)  # noqa: S102 - the test's own model
    torch.manual_seed(0)
    model = ns["build_model"]()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    batch = ns["make_batch"]()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        model(*batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    path = tmp_path / f"cpu{rows}{'' if shapes else '-noshapes'}.json"
    prof.export_chrome_trace(str(path))
    return path


def _kernel_us(name):
    return 10 + 3 * len(name)


def _with_kernels(cpu_path, out_path):
    """The CPU profile with one kernel under each innermost cpu_op, as CUDA's profile has them;
    returns {(name, shapes): expected ns}: the op's own kernels and those of the ops it holds,
    the median over its occurrences."""
    doc = json.loads(cpu_path.read_text())
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]

    def holds(a, b):
        return a is not b and a["tid"] == b["tid"] and a["ts"] <= b["ts"] and b["ts"] + b["dur"] <= a["ts"] + a["dur"]

    leaves = [o for o in ops if not any(holds(o, c) for c in ops)]
    for o in leaves:
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": o["ts"],
                                   "dur": _kernel_us(o["name"]),
                                   "args": {"External id": o["args"]["External id"], "device": 0, "stream": 7}})
    with gzip.open(out_path, "wt") as f:
        json.dump(doc, f)
    totals = {}
    for o in ops:
        ns = sum(_kernel_us(c["name"]) * 1000 for c in leaves if c is o or holds(o, c))
        dims = o["args"].get("Input Dims", [])
        shapes = tuple(tuple(d) for d in dims if d and all(isinstance(x, int) for x in d)) + tuple(
            tuple(x) for d in dims if d and isinstance(d[0], list) for x in d if x)
        totals.setdefault(o["name"], {}).setdefault(shapes, []).append(ns)
    return {name: {statistics.median(v) for v in by_shape.values()} for name, by_shape in totals.items()}


def _kernels(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT s.text, k.t_end - k.t_start FROM kernels k JOIN strings s ON s.id = k.name "
                         "ORDER BY k.id").fetchall()


def _meta(db):
    with sqlite3.connect(db) as c:
        return dict(c.execute("SELECT key, value FROM meta"))


def _capture(tmp_path, model, out, *extra):
    assert main(["capture", str(model), "-o", str(out), "--autocast", "none", *extra]) == 0


def test_every_kernel_takes_its_ops_measured_time(tmp_path, capsys):
    profile = tmp_path / "gpu.json.gz"
    expected = _with_kernels(_cpu_profile(tmp_path, 4), profile)
    _capture(tmp_path, _model(tmp_path, 4), tmp_path / "t.db", "--kernel-times", str(profile))
    out = capsys.readouterr().out
    rows = _kernels(tmp_path / "t.db")
    meta = _meta(tmp_path / "t.db")
    assert meta["capture.kernel_times.matched"] == f"{len(rows)} of {len(rows)} kernels", meta
    assert meta["capture.kernel_times.unmatched"] == "none" and f"{len(rows)} of {len(rows)} kernels measured" in out
    assert meta["timing"] == "estimated" and "measured by the PyTorch profiler" in meta["timing_model"]
    names = {n for n, _ in rows}
    assert {"aten::addmm", "aten::mm", "aten::threshold_backward", "aten::_foreach_addcdiv_"} <= names
    for name, dur in rows:
        assert dur in expected[name], (name, dur, expected[name])


def test_ops_the_profile_lacks_keep_the_roofline(tmp_path):
    """A profile of another batch size: the ops whose shapes changed keep the roofline (the same
    times as a capture without --kernel-times); the optimizer's, whose shapes did not, are measured."""
    profile = tmp_path / "gpu5.json.gz"
    expected = _with_kernels(_cpu_profile(tmp_path, 5), profile)
    model = _model(tmp_path, 4)
    _capture(tmp_path, model, tmp_path / "roofline.db")
    _capture(tmp_path, model, tmp_path / "t.db", "--kernel-times", str(profile))
    before, after = _kernels(tmp_path / "roofline.db"), _kernels(tmp_path / "t.db")
    assert [n for n, _ in before] == [n for n, _ in after]
    kept = [(n, b) for (n, b), (_, a) in zip(before, after) if a == b]
    measured = [(n, a) for (n, b), (_, a) in zip(before, after) if a != b]
    on_rows = {"aten::addmm", "aten::relu", "aten::threshold_backward"}   # every input has the batch's rows
    assert on_rows <= {n for n, _ in kept} and not on_rows & {n for n, _ in measured}, measured
    assert any(n.startswith("aten::_foreach") for n, _ in measured)
    assert all(d in expected[n] for n, d in measured)
    meta = _meta(tmp_path / "t.db")
    assert meta["capture.kernel_times.matched"] == f"{len(measured)} of {len(after)} kernels"
    assert "aten::addmm 2" in meta["capture.kernel_times.unmatched"]


def _doc(events):
    return {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": events}


def test_an_op_holds_the_time_of_the_ops_inside_it_on_its_thread(tmp_path):
    def op(name, ts, dur, ext, tid=1, dims=([4, 4],)):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                "args": {"External id": ext, "Input Dims": list(dims), "Input type": ["c10::BFloat16"]}}

    def kernel(ext, dur):
        return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": dur,
                "args": {"External id": ext}}

    path = tmp_path / "p.json"
    path.write_text(json.dumps(_doc([
        op("outer", 0, 100, 1), op("inner", 10, 20, 2), op("inner", 40, 20, 3),
        op("other_thread", 5, 10, 4, tid=2),  # inside outer's time, not its thread: not held
        kernel(1, 3), kernel(2, 5), kernel(3, 7), kernel(4, 11), kernel(99, 13)])))
    kt = KernelTimes(str(path))
    assert kt.duration("outer", ((4, 4),), "bfloat16", -1) == 15_000   # 3 + 5 + 7 us
    assert kt.duration("inner", ((4, 4),), "bfloat16", -1) == 6_000    # median of 5 and 7
    assert kt.duration("other_thread", ((4, 4),), None, -1) == 11_000  # found without its dtype
    assert kt.duration("inner", ((4, 5),), "bfloat16", -1) == -1       # other shapes: the roofline
    m = kt.meta()
    assert m["capture.kernel_times.matched"] == "3 of 4 kernels" and m["capture.kernel_times.unmatched"] == "inner 1"
    assert m["capture.kernel_times.device"] == "NVIDIA H200" and m["capture.kernel_times.profile_unattributed"] == "1"


@pytest.mark.parametrize("what", ["missing", "not json", "no traceEvents", "no kernels", "no shapes"])
def test_a_profile_that_cannot_give_times_is_one_line(tmp_path, capsys, what):
    path = tmp_path / "p.json"
    if what == "not json":
        path.write_text("{")
    elif what == "no traceEvents":
        path.write_text(json.dumps({"segments": [], "device_traces": []}))   # a memory snapshot's keys
    elif what == "no kernels":
        path = _cpu_profile(tmp_path, 4)
    elif what == "no shapes":
        doc = json.loads(_cpu_profile(tmp_path, 4, shapes=False).read_text())
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "args": {}})
        path.write_text(json.dumps(doc))
    with pytest.raises(KernelTimesError):
        KernelTimes(str(path))
    code = main(["capture", str(_model(tmp_path, 4)), "-o", str(tmp_path / "t.db"), "--kernel-times", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"mhc-torch: --kernel-times: {path}"), err
    assert {"missing": "No such file", "not json": "not JSON", "no traceEvents": "no traceEvents",
            "no kernels": "no GPU kernels", "no shapes": "record_shapes=True"}[what] in err[0]
    assert not (tmp_path / "t.db").exists()


def test_a_profile_that_cannot_give_times_is_refused_before_torch_is_imported(tmp_path):
    """The refusal comes before torch's import (about 4 s of CPU, the whole of a refused capture's
    cost): the capture runs where importing torch stops the process."""
    stub = tmp_path / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise SystemExit('torch imported')\n")
    path = tmp_path / "p.json"
    path.write_text("{")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "stub"), os.path.join(REPO, "python")]))
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", "tiny-gpt2", "-o", str(tmp_path / "t.db"),
                        "--kernel-times", str(path)], env=env, capture_output=True, text=True, timeout=60)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith(f"mhc-torch: --kernel-times: {path}"), r.stderr
    assert "not JSON" in err[0] and not (tmp_path / "t.db").exists()


# --- a real GPU's profile: the TensorBoard plugin's ResNet-50 sample on a V100 -----------------
# tests/data/public/kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz (BSD-3-Clause,
# SOURCES.md): torchvision's ResNet-50 trained at batch 32 on 224 x 224 fp32 images with
# SGD(lr=0.001, momentum=0.9), PyTorch 1.9's profiler (capitalised categories, `external id` on
# kernels, cuDNN's batch norm and convolution backward), six steps profiled.
V100 = os.path.join(REPO, "tests", "data", "public", "kineto", "tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz")


class _Bottleneck(torch.nn.Module):
    """torchvision's ResNet-50 block (stride on the 3 x 3 convolution), written out here."""

    def __init__(self, cin, width, stride):
        super().__init__()
        nn = torch.nn
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != width * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


def _resnet50():
    nn = torch.nn
    layers, cin = [], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(_Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


def test_a_v100_profile_of_resnet50_times_the_captured_step(tmp_path):
    """The second captured step (momentum buffers made) timed by the V100's kernels: within 5% of
    the device time the profile measured per step (603.6 ms over 6 steps: 100.6 ms); the roofline
    of an A100 said 53 ms. Every convolution and batch norm, forward and backward, is found (under
    cuDNN's names for the GPU's), and only the first step's momentum clones, the batch-norm step
    counters and two small ops keep the roofline."""
    from mhc_torch.capturing import capture

    kt = KernelTimes(V100)
    assert kt.device_name == "Tesla V100-DGXS-32GB" and kt.unattributed == 0
    per_step_ns = kt.device_ns / 6
    r = capture(_resnet50, lambda: (torch.randn(32, 3, 224, 224), torch.randint(0, 1000, (32,))), steps=2,
                gpu="a100-40g", path=str(tmp_path / "r50.db"),
                loss_fn=lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
                # PyTorch 1.9's SGD (the profile's) stepped parameter by parameter; torch >= 2.0 picks
                # foreach on a GPU when left to choose, and so does the capture
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.001, momentum=0.9, foreach=False), autocast_dtype=None,
                kernel_times=kt)
    assert abs(r.step_time_ns[1] / per_step_ns - 1) < 0.05, (r.step_time_ns, per_step_ns)
    unmatched = dict((n, int(c)) for n, c in (x.rsplit(" ", 1) for x in r.meta["capture.kernel_times.unmatched"].split(", ")))
    assert not {"aten::convolution", "aten::convolution_backward", "aten::native_batch_norm",
                "aten::native_batch_norm_backward", "aten::addmm", "aten::max_pool2d_with_indices"} & set(unmatched)
    assert set(unmatched) <= {"aten::clone", "aten::add_", "aten::_log_softmax_backward_data"}, unmatched
