"""`mhc-torch capture --kernel-times PROFILE`: each captured kernel takes the device time a PyTorch
profiler trace of the same step measured for its op (name and input shapes), the roofline where
the profile lacks the op. Without a GPU the profile is a real CPU profile of the step (real
cpu_op events, shapes, External ids, threads) with a kernel added under each innermost op, of a
known duration: the expected times are worked out here by interval containment, independently of
kernel_times.py's stack walk."""
import gzip
import json
import sqlite3
import statistics
import textwrap

import pytest

torch = pytest.importorskip("torch")

from mhc_torch.cli import main  # noqa: E402
from mhc_torch.kernel_times import KernelTimes, KernelTimesError  # noqa: E402

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
