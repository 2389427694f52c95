"""Capture on fake tensors: the trace's contents, its validity by `mhc check`, the simulator's
identity on it, bad input. No GPU and no network: models are built in code."""
import contextlib
import glob
import io
import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402
from mhc_torch.gpus import gpu  # noqa: E402


def _rows(path, sql):
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def _linear_trace(path):
    def build():
        return torch.nn.Linear(4, 3)

    def batch():
        return (torch.randn(2, 4),)

    return mhc_torch.capture(build, batch, steps=1, gpu="h100-sxm", path=path, autocast_dtype=None,
                             loss_fn=lambda m, b: m(*b).sum())


def test_linear_every_storage_and_op(tmp_path):
    """A linear layer + sum loss + AdamW (foreach), fp32, one step: every allocation with its bytes
    and category, and every kernel with what it reads (R), writes (W) and mutates (RW)."""
    path = str(tmp_path / "linear.db")
    _linear_trace(path)
    allocs = _rows(path, "SELECT a.id, a.bytes, c.name, coalesce(s.text, '') FROM allocations a "
                         "JOIN categories c ON c.id = a.category LEFT JOIN strings s ON s.id = a.label ORDER BY a.id")
    label = {i: lab for i, _, _, lab in allocs}
    assert [(b, c, lab) for _, b, c, lab in allocs] == [
        (48, "param", "weight"),                     # 3 x 4 fp32
        (12, "param", "bias"),
        (32, "other", "batch"),                      # 2 x 4
        (24, "workspace", "Linear:aten::addmm"),     # y = x W^T + b: not saved (sum needs no input)
        (32 << 20, "workspace", "cuBLAS workspace (main thread)"),      # H100: 32 MiB, at the first matmul
        (1 << 20, "workspace", "cuBLASLt workspace (main thread)"),     # addmm with a bias runs cuBLASLt
        (4, "activation", "aten::sum"),              # the loss: alive when the backward starts
        (4, "workspace", "aten::ones_like"),         # d loss / d loss
        (48, "grad", "weight.grad"),
        (32 << 20, "workspace", "cuBLAS workspace (autograd thread)"),  # the backward's first matmul
        (12, "grad", "bias.grad"),
        (4, "optimizer", "weight.step"),
        (48, "optimizer", "weight.exp_avg"),
        (48, "optimizer", "weight.exp_avg_sq"),
        (4, "optimizer", "bias.step"),
        (12, "optimizer", "bias.exp_avg"),
        (12, "optimizer", "bias.exp_avg_sq"),
        (4, "workspace", "aten::lift_fresh"),        # torch.tensor(1.0): the step increment
        (48, "workspace", "aten::_foreach_sqrt"),    # sqrt(exp_avg_sq) / bias correction + eps
        (12, "workspace", "aten::_foreach_sqrt"),
    ]
    kernels = _rows(path, "SELECT k.id, s.text FROM kernels k JOIN strings s ON s.id = k.name ORDER BY k.id")
    acc = {}
    for k, a, m in _rows(path, "SELECT kernel, allocation, mode FROM accesses"):
        acc.setdefault(k, set()).add((label[a] + ("" if label[a] not in ("aten::_foreach_sqrt",) else f"#{a}"),
                                      {1: "R", 2: "W", 3: "RW"}[m]))
    s1, s2 = [f"aten::_foreach_sqrt#{i}" for i, _, _, lab in allocs if lab == "aten::_foreach_sqrt"]
    expected = [
        ("aten::addmm", {("bias", "R"), ("batch", "R"), ("weight", "R"), ("Linear:aten::addmm", "W"),
                         ("cuBLAS workspace (main thread)", "RW"), ("cuBLASLt workspace (main thread)", "RW")}),
        ("aten::sum", {("Linear:aten::addmm", "R"), ("aten::sum", "W")}),
        ("aten::ones_like", {("aten::ones_like", "W")}),  # takes the loss for its shape only
        ("aten::mm", {("aten::ones_like", "R"), ("batch", "R"), ("weight.grad", "W"),
                      ("cuBLAS workspace (autograd thread)", "RW")}),
        ("aten::sum", {("aten::ones_like", "R"), ("bias.grad", "W")}),
        ("aten::lift_fresh", {("weight.step", "W")}),
        ("aten::zeros_like", {("weight.exp_avg", "W")}),
        ("aten::zeros_like", {("weight.exp_avg_sq", "W")}),
        ("aten::lift_fresh", {("bias.step", "W")}),
        ("aten::zeros_like", {("bias.exp_avg", "W")}),
        ("aten::zeros_like", {("bias.exp_avg_sq", "W")}),
        ("aten::lift_fresh", {("aten::lift_fresh", "W")}),
        ("aten::_foreach_add_", {("weight.step", "RW"), ("bias.step", "RW"), ("aten::lift_fresh", "R")}),
        ("aten::_foreach_mul_", {("weight", "RW"), ("bias", "RW")}),  # decoupled weight decay
        ("aten::_foreach_lerp_", {("weight.exp_avg", "RW"), ("bias.exp_avg", "RW"),
                                  ("weight.grad", "R"), ("bias.grad", "R")}),
        ("aten::_foreach_mul_", {("weight.exp_avg_sq", "RW"), ("bias.exp_avg_sq", "RW")}),
        ("aten::_foreach_addcmul_", {("weight.exp_avg_sq", "RW"), ("bias.exp_avg_sq", "RW"),
                                     ("weight.grad", "R"), ("bias.grad", "R")}),
        ("aten::_foreach_sqrt", {("weight.exp_avg_sq", "R"), ("bias.exp_avg_sq", "R"), (s1, "W"), (s2, "W")}),
        ("aten::_foreach_div_", {(s1, "RW"), (s2, "RW")}),
        ("aten::_foreach_add_", {(s1, "RW"), (s2, "RW")}),
        ("aten::_foreach_addcdiv_", {("weight", "RW"), ("bias", "RW"), ("weight.exp_avg", "R"),
                                     ("bias.exp_avg", "R"), (s1, "R"), (s2, "R")}),
    ]
    assert [(name, acc.get(k, set())) for k, name in kernels] == expected
    # Lifetimes: the forward output dies once the loss is computed; the loss and the gradient
    # seed when the backward is done; grads at zero_grad (the step's end); params never.
    t = {lab: (ta, tf) for lab, ta, tf in _rows(path, "SELECT s.text, a.t_alloc, a.t_free FROM allocations a "
                                                    "JOIN strings s ON s.id = a.label")}
    kt = {k: (ts, te) for k, ts, te in _rows(path, "SELECT id, t_start, t_end FROM kernels")}
    assert t["Linear:aten::addmm"] == (kt[1][0], kt[2][1])
    assert t["weight"][1] is None or t["weight"][1] >= kt[21][1]
    assert t["weight.grad"][1] == kt[21][1]


def test_linear_trace_meta_and_check(tmp_path, mhc_exe):
    path = str(tmp_path / "linear.db")
    _linear_trace(path)
    meta = store.read_meta(path)
    assert meta["source"] == "captured" and meta["timing"] == "estimated" and meta["accesses"] == "exact"
    assert meta["format"] == "mhc-trace" and meta["schema_version"] == "1"
    assert _rows(path, "PRAGMA user_version")[0][0] == store.SCHEMA_VERSION
    r = subprocess.run([mhc_exe, "check", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_roofline_duration(tmp_path):
    """A bf16 matmul of 4096 x 4096 x 4096 is compute-bound on an H100: 2 M N K / 989.4 TFLOP/s
    + the launch overhead; an elementwise op is bandwidth-bound."""
    m = n = k = 4096

    def build():
        return torch.nn.Linear(k, n, bias=False)

    def batch():
        return (torch.randn(m, k),)

    path = str(tmp_path / "mm.db")
    mhc_torch.capture(build, batch, steps=1, gpu="h100-sxm", path=path, loss_fn=lambda mod, b: mod(*b).float().sum())
    rows = _rows(path, "SELECT s.text, k.t_end - k.t_start FROM kernels k JOIN strings s ON s.id = k.name ORDER BY k.id")
    spec = gpu("h100-sxm")
    mm = [d for name, d in rows if name == "aten::mm"]
    expect = round((2 * m * n * k / spec.bf16_flops + spec.launch_overhead_s) * 1e9)
    assert mm[0] == expect  # forward x W^T
    assert len(mm) == 2  # backward: grad of the weight only (the input needs none)
    # The fp32 -> bf16 cast of the 4096 x 4096 input reads 64 MiB and writes 32 MiB.
    casts = [d for name, d in rows if name == "aten::_to_copy"]
    assert round((m * k * 6 / spec.hbm_bw + spec.launch_overhead_s) * 1e9) in casts


def test_two_layer_model_two_steps_checks_and_simulates(tmp_path, mhc_exe):
    path = str(tmp_path / "two.db")
    # mhc-torch's main in this process (torch and transformers imported once); its process is
    # tested below (test_data_dependent_model_fails_with_one_line, test_missing_model_file_and_bad_options)
    from mhc_torch.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["capture", "tiny-llama", "--layers", "2", "--steps", "2", "--seq", "32", "--batch", "2", "-o", path])
    assert code == 0, err.getvalue()
    chk = subprocess.run([mhc_exe, "check", path], capture_output=True, text=True)
    assert chk.returncode == 0 and f"{path}: ok: " in chk.stdout, chk.stdout + chk.stderr
    # Step and layer markers from the module hierarchy: 2 steps x 2 layers x (forward, backward).
    markers = _rows(path, "SELECT s.text, kind, idx FROM markers m JOIN strings s ON s.id = m.name ORDER BY t_start, kind")
    assert sorted(x for x in markers if x[1] == store.MARKER_STEP) == [("step", 0, 0), ("step", 0, 1)]
    layers = [x for x in markers if x[1] == store.MARKER_LAYER]
    assert [x[0] for x in layers] == ["layer 0 forward", "layer 1 forward", "layer 1 backward", "layer 0 backward"] * 2
    cats = dict(_rows(path, "SELECT c.name, count(*) FROM allocations a JOIN categories c ON c.id = a.category GROUP BY 1"))
    assert cats["param"] > 0 and cats["grad"] > 0 and cats["optimizer"] > 0 and cats["activation"] > 0
    # Identity: with the whole peak as capacity nothing moves and the makespan is the trace's.
    # The ideal allocator: its baseline peak is the live bytes (the default, caching, rounds to segments).
    sim = subprocess.run([mhc_exe, "simulate", path, "--capacity", "100%", "--allocator", "ideal", "--check",
                          "--json", "--no-store"],
                         capture_output=True, text=True)
    assert sim.returncode == 0, sim.stdout + sim.stderr
    m = json.loads(sim.stdout)["metrics"]
    end = _rows(path, "SELECT max(t_end) FROM kernels")[0][0]
    assert m["stalls"] == 0 and m["swap_outs"] == 0 and m["drops"] == 0
    assert m["simulated_makespan_ns"] == m["baseline_makespan_ns"] == end
    # The capture's own peak of live bytes is the simulator's baseline peak.
    assert int(store.read_meta(path)["capture.peak_bytes"]) == m["baseline_peak_bytes"]


def test_mhc_streams_and_sinkhorn(tmp_path, mhc_exe, preset_capture):
    """n = 4 streams: the Sinkhorn-Knopp iterations are in the trace (20 x 2 normalisations per
    hyper-connection, two per layer), and the widened residual stream raises the peak over n = 1.
    Batch 1 x 16 tokens: the n = 4 step is the one test_frame_holds_mhc and test_settings_capture
    read (conftest.preset_capture); the counts do not depend on the batch's size."""
    peaks = {}
    for n in (1, 4):
        (tmp_path / f"n{n}").mkdir()
        path, res = preset_capture(tmp_path / f"n{n}", "tiny-mhc", batch=1, seq=16, layers=2, hc=n)
        peaks[n] = res.peak_bytes
        assert subprocess.run([mhc_exe, "check", path], capture_output=True).returncode == 0
        fwd_div = _rows(path, "SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name "
                              "JOIN markers m ON m.kind = 1 AND k.t_start >= m.t_start AND k.t_end <= m.t_end "
                              "JOIN strings ms ON ms.id = m.name AND ms.text LIKE '%forward' WHERE s.text = 'aten::div'")[0][0]
        assert fwd_div == (2 * 2 * 20 * 2 if n == 4 else 0)
    assert peaks[4] > peaks[1]


def test_data_dependent_model_fails_with_one_line(tmp_path):
    model = tmp_path / "bad_model.py"
    model.write_text(textwrap.dedent("""
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                idx = torch.nonzero(x > 0)       # data-dependent output shape
                return self.lin(x).sum() + idx.numel()

        def build_model():
            return M()

        def make_batch():
            return (torch.randn(4, 8),)
    """))
    out = tmp_path / "bad.db"
    out.write_bytes(b"previous contents")
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(model), "-o", str(out), "--force"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "aten.nonzero" in lines[0], r.stderr
    assert out.read_bytes() == b"previous contents"  # the old file is untouched
    assert glob.glob(str(out) + ".*tmp-*") == []


def test_missing_model_file_and_bad_options(tmp_path):
    for args in (["capture", str(tmp_path / "none.py"), "-o", str(tmp_path / "x.db")],
                 ["capture", "tiny-llama", "--steps", "0", "-o", str(tmp_path / "x.db")],
                 ["capture", "no-such-model", "-o", str(tmp_path / "x.db")],
                 ["runs", str(tmp_path / "none.db")]):
        r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", *args], capture_output=True, text=True)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert not os.path.exists(tmp_path / "x.db")
    # A missing model file is said before torch is imported (it took about 2 s first).
    code = ("import sys; from mhc_torch.cli import main; "
            f"rc = main(['capture', {str(tmp_path / 'none.py')!r}, '-o', {str(tmp_path / 'x.db')!r}]); "
            "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.split() == ["2", "False"], (r.stdout, r.stderr)
    assert r.stderr.strip() == f"mhc-torch: {tmp_path / 'none.py'}: no such file"


def test_runs_as_dataframes(tmp_path, mhc_exe):
    path = str(tmp_path / "linear.db")
    _linear_trace(path)
    assert len(mhc_torch.read_runs(path)) == 0
    for cap in ("100%", "80%"):
        # ideal: at 80% the caching model's 2 MiB segments leave a model this small out of memory.
        r = subprocess.run([mhc_exe, "simulate", path, "--capacity", cap, "--allocator", "ideal"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    runs = mhc_torch.read_runs(path)
    assert list(runs.index) == [1, 2]
    assert set(runs["kind"]) == {"simulated"} and "baseline_peak_bytes" in runs.columns
    assert "config.capacity_bytes" in runs.columns
    assert runs.loc[1, "stalls"] == 0
    mem = mhc_torch.read_run_table(path, "run_memory", run=2)
    assert len(mem) > 0 and set(mem["run"]) == {2}
    cli = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "runs", path], capture_output=True, text=True)
    assert cli.returncode == 0 and "lru+none@80%" in cli.stdout, cli.stdout + cli.stderr
    kernels = mhc_torch.read_table(path, "kernels")
    assert kernels["name"].iloc[0] == "aten::addmm"
    with pytest.raises(mhc_torch.TraceError):
        bad = tmp_path / "not.db"
        bad.write_text("not sqlite")
        mhc_torch.read_runs(str(bad))


def test_fused_adamw_has_no_optimizer_temporary(tmp_path):
    """foreach AdamW allocates sqrt(exp_avg_sq), the size of all parameters, during the step; the
    fused kernel updates in place: the captured peak shows the difference."""
    peaks = {}
    for fused in (False, True):
        path = str(tmp_path / f"adam-{fused}.db")
        r = mhc_torch.capture(lambda: torch.nn.Linear(256, 256), lambda: (torch.randn(4, 256),), steps=2, path=path,
                              autocast_dtype=None, loss_fn=lambda m, b: m(*b).sum(),
                              optimizer=lambda ps: torch.optim.AdamW(ps, fused=fused, foreach=None if fused else True))
        names = {n for (n,) in _rows(path, "SELECT DISTINCT s.text FROM kernels k JOIN strings s ON s.id = k.name")}
        assert ("aten::_fused_adamw_" in names) == fused and ("aten::_foreach_sqrt" in names) != fused
        peaks[fused] = r.peak_bytes
    param_bytes = (256 * 256 + 256) * 4
    # The two implementations also differ in a few scalar tensors (step counters, constants).
    assert abs(peaks[False] - peaks[True] - param_bytes) <= 64
