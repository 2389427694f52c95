"""The capture against a real GPU: GPT-2 small's training step as an H200 recorded it
(datasets/recorded/README.md: torch 2.11, transformers 5.17, bf16 autocast, AdamW foreach,
batch 8 x 1024, expandable segments) and as the capture models it from the same preset. Before
2026-12-04 the capture held 370,147,728 B (+2.8%) more at the step's peak; the three causes each
have a small test below: dropout's mask, transformers' causal mask on fake tensors, and the
cuBLASLt workspace (test_workspaces.py)."""
import gzip
import os
import pickle
import sqlite3

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import mhc_torch  # noqa: E402
from mhc_torch.models import preset  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOT = os.path.join(REPO, "datasets", "recorded", "h200-gpt2-small-expandable-segments.pickle.gz")
needs_snapshot = pytest.mark.skipif(not os.path.exists(SNAPSHOT),
                                    reason="the recorded snapshot is not in this checkout")


class _Loader(pickle.Unpickler):
    def find_class(self, module, name):  # a snapshot holds plain containers only
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a snapshot")


def step_peaks(path):
    """Peak of live bytes (the alloc events' sizes, as requested) in each training step; a step
    ends at the END of the optimizer's zero_grad (the snapshot's external annotations)."""
    with gzip.open(path, "rb") as f:
        snap = _Loader(f).load()
    ends = sorted(a["time_us"] for a in snap["external_annotations"]
                  if a["name"].startswith("Optimizer.zero_grad") and a["stage"] == "END")
    peaks = [0] * len(ends)
    live = step = 0
    for e in snap["device_traces"][0]:
        while step < len(ends) - 1 and e["time_us"] > ends[step]:
            step += 1
        if e["action"] == "alloc":
            live += e["size"]
        elif e["action"] == "free_completed":
            live -= e["size"]
        peaks[step] = max(peaks[step], live)
    return peaks


def _last_step_peak(path):
    """Peak of live device bytes in the capture's last step (frees before allocations at one
    instant, what bench/torch/compare_snapshot.py counts)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        t0, t1 = db.execute("SELECT t_start, t_end FROM markers WHERE kind = 0 ORDER BY idx DESC LIMIT 1").fetchone()
        rows = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall()
    finally:
        db.close()
    live = sum(b for b, ta, tf in rows if ta < t0 and (tf is None or tf > t0))
    events = [(ta, 1, b) for b, ta, _ in rows if t0 <= ta <= t1]
    events += [(tf, 0, -b) for b, ta, tf in rows if tf is not None and (t0 < tf <= t1 or (tf == t0 and ta >= t0))]
    peak = live
    for _, _, d in sorted(events):
        live += d
        peak = max(peak, live)
    return peak


def _capture_gpt2(path, layers, batch=8, seq=1024):
    build, make_batch, loss_fn, _ = preset("gpt2-small", batch=batch, seq=seq, layers=layers)
    mhc_torch.capture(build, make_batch, steps=2, gpu="h200", path=path, loss_fn=loss_fn,
                      optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True))
    return _last_step_peak(path)


@needs_snapshot
def test_recorded_steps():
    """What the fixture holds (README.md): step 0 has no optimizer state yet; steps 1-19 peak alike."""
    peaks = step_peaks(SNAPSHOT)
    assert len(peaks) == 20
    assert peaks[0] == 12_263_209_672
    assert set(peaks[1:]) == {13_292_282_568}


@pytest.fixture(scope="module")
def gpt2_12_layers(tmp_path_factory):
    """GPT-2 small's whole 12 layers at 8 x 1024 captured once for the two tests that read it (the
    step's peak and the reserved memory): 15-60 s of CPU each time."""
    path = str(tmp_path_factory.mktemp("gpt2") / "gpt2.db")
    return path, _capture_gpt2(path, 12)


@needs_snapshot
def test_capture_matches_the_h200_step_peak(gpt2_12_layers):
    """The capture's steady step (its second) against the recorded steps 1-19, of the 12-layer
    capture the reserved memory's test reads too (it came from 1 and 2 layers carried to 12 while
    that capture was not shared: the peak is a + b x layers, the same 13,292,282,968 B).

    Remaining gap +400 B, none of it modelling of note: the capture puts AdamW's 148 `step`
    counters (4 B each) on the device, where AdamW(foreach, not capturable) keeps them on the host
    (both hold the loss and nll_loss's total weight, 4 B each), and it does not model the CUDA
    attention kernel's random seed and offset (2 x 8 B a layer, kept for the backward):
    148 x 4 - 12 x 2 x 8 = 400. Tolerance 4 KiB; before the fixes the capture was +370,147,728 B."""
    captured = gpt2_12_layers[1]
    recorded = step_peaks(SNAPSHOT)[1]
    assert abs(captured - recorded) <= 4096, (captured, recorded, captured - recorded)


@needs_snapshot
def test_capture_predicts_the_h200_reserved_memory_to_the_byte(gpt2_12_layers, mhc_exe):
    """The 12-layer capture (about 10 s here; shared with the step peak's test) through the
    caching-allocator model gives the H200 run's max_memory_reserved to the byte under both
    allocator settings (datasets/recorded/README.md, docs/logs/h200-2026-12-04): 14,971,568,128 B
    by default, 14,250,147,840 B with expandable segments. The order in which the GPU allocates decides where blocks land: before autocast's casts
    went last argument first and dropout's mask before its output (2026-12-04), the default figure
    was 14,921,236,480 B (-0.34%); with the casts alone 14,946,402,304 B."""
    import json
    import subprocess

    path = gpt2_12_layers[0]
    for conf, measured in (("", 14_971_568_128), ("expandable_segments:True", 14_250_147_840)):
        cmd = [mhc_exe, "simulate", path, "--capacity", "unlimited", "--allocator", "caching", "--json", "--no-store"]
        r = subprocess.run(cmd + (["--allocator-conf", conf] if conf else []), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["metrics"]["simulated_peak_bytes"] == measured, conf


def _allocation_order(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT s.text, a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
                          "ORDER BY a.t_alloc, a.id").fetchall()
    finally:
        db.close()


class _Conv1D(torch.nn.Module):
    """GPT-2's Conv1D: addmm(bias, x, weight), three arguments for autocast to cast."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 96))
        self.bias = torch.nn.Parameter(torch.randn(96))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight).float().sum()


def test_autocast_casts_the_last_argument_first(tmp_path):
    """CUDA autocast casts an op's arguments inside one call's argument list, which GCC evaluates
    right to left: the H200 allocated Conv1D's weight cast, then the input's, then the bias's."""
    path = str(tmp_path / "c.db")
    mhc_torch.capture(_Conv1D, lambda: (torch.randn(32, 64),), steps=1, path=path, autocast_dtype=torch.bfloat16,
                      loss_fn=lambda m, b: m(*b))
    casts = [b for lab, b in _allocation_order(path) if lab == "_Conv1D:aten::_to_copy"]
    assert casts[:3] == [64 * 96 * 2, 32 * 64 * 2, 96 * 2], casts


class _Dropped(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.fc = torch.nn.Linear(256, 256)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.fc(x)).float().sum()


def _peak_and_labels(path, before=None):
    """Labels and sizes of the capture's allocations (made before the first one labelled `before`)."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT s.text, a.bytes, a.t_alloc FROM allocations a JOIN strings s ON s.id = a.label "
                          "ORDER BY a.id").fetchall()
    finally:
        db.close()
    end = next((t for lab, _, t in rows if lab == before), None)
    rows = [(lab, b) for lab, b, t in rows if end is None or t < end]
    return [lab for lab, _ in rows], [b for _, b in rows]


@pytest.mark.parametrize("autocast", [None, torch.bfloat16], ids=["fp32", "bf16"])
def test_dropout_keeps_a_bool_mask_as_on_the_gpu(tmp_path, autocast):
    """A GPU fuses dropout (native_dropout): its output and a bool mask, 1 B an element, which the
    backward keeps. CPU's composite path makes a noise tensor of the input's dtype (4 B an element
    in fp32, 2 under bf16 autocast: the linear's output) and the output, and the backward keeps the
    noise: the capture held that until 2026-12-04."""
    path = str(tmp_path / "d.db")
    mhc_torch.capture(lambda: _Dropped(0.1), lambda: (torch.randn(64, 256),), steps=1, path=path,
                      autocast_dtype=autocast, loss_fn=lambda m, b: m(*b))
    labels, sizes = _peak_and_labels(path, before="aten::ones_like")  # the forward's (ones_like: the backward's seed)
    made = sorted(b for lab, b in zip(labels, sizes) if lab.startswith("_Dropped.drop:"))
    elem = 2 if autocast else 4
    assert made == sorted([64 * 256, 64 * 256 * elem]), list(zip(labels, sizes))
    assert "_Dropped.drop:aten::native_dropout" in labels


from torch.nn.functional import dropout as _bound_dropout  # noqa: E402  bound before any capture


class _DroppedBy(torch.nn.Module):
    """Dropout reached another way than nn.Dropout: torch.dropout, or a name bound at import."""
    def __init__(self, how):
        super().__init__()
        self.fc = torch.nn.Linear(256, 256)
        self.how = how

    def forward(self, x):
        y = self.fc(x)
        y = torch.dropout(y, 0.1, True) if self.how == "torch.dropout" else _bound_dropout(y, 0.1, True)
        return y.float().sum()


def test_dropout_allocates_its_mask_before_its_output(tmp_path):
    """CUDA's native_dropout makes the bool mask, then the output (dropout_cuda); the H200's
    snapshot has them in that order, which the caching allocator's placement follows."""
    path = str(tmp_path / "d.db")
    mhc_torch.capture(lambda: _Dropped(0.1), lambda: (torch.randn(64, 256),), steps=1, path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    made = [b for lab, b in _allocation_order(path) if lab == "_Dropped.drop:aten::native_dropout"]
    assert made[:2] == [64 * 256, 64 * 256 * 4], made


@pytest.mark.parametrize("how", ["torch.dropout", "bound"])
def test_dropout_reached_any_way_keeps_a_bool_mask(tmp_path, how):
    """The GPU's kernel is chosen in the dispatcher, so torch.dropout and a name bound before the
    capture take it too (replacing F.dropout missed both: a noise tensor of the input's dtype)."""
    path = str(tmp_path / "d.db")
    mhc_torch.capture(lambda: _DroppedBy(how), lambda: (torch.randn(64, 256),), steps=1, path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    labels, sizes = _peak_and_labels(path, before="aten::ones_like")
    made = sorted(b for lab, b in zip(labels, sizes) if lab.startswith("_DroppedBy:"))
    assert "_DroppedBy:aten::native_dropout" in labels, labels
    assert made.count(64 * 256) == 1 and "_DroppedBy:aten::bernoulli_" not in labels, list(zip(labels, sizes))


def test_dropout_of_real_tensors_left_alone_after_a_capture(tmp_path):
    """The dispatcher's kernels go with the capture: real CPU dropout is CPU's composite again."""
    mhc_torch.capture(lambda: _Dropped(0.1), lambda: (torch.randn(64, 256),), steps=1,
                      path=str(tmp_path / "d.db"), autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    x = torch.randn(8, 8, requires_grad=True)
    assert type(torch.dropout(x, 0.5, True).grad_fn).__name__ == "MulBackward0"
    q = torch.randn(1, 2, 8, 4, requires_grad=True)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert "Flash" not in type(out.grad_fn).__name__  # CPU's math path for dropout, as before


def test_dropout_left_alone_where_the_gpu_does_not_fuse(tmp_path):
    """In place, p = 0 and eval: the composite path on a GPU too (aten's is_fused_kernel_acceptable)."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(256, 256)

        def forward(self, x):
            y = torch.nn.functional.dropout(self.fc(x), 0.1, training=True, inplace=True)
            y = torch.nn.functional.dropout(y, 0.1, training=False)
            return torch.nn.functional.dropout(y, 0.0, training=True).sum()

    path = str(tmp_path / "inplace.db")
    mhc_torch.capture(M, lambda: (torch.randn(64, 256),), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b))
    labels, _ = _peak_and_labels(path)
    assert not any("native_dropout" in lab for lab in labels)


def test_no_causal_mask_built_for_transformers_models(tmp_path):
    """transformers checks the position ids' values for packed sequences; on fake tensors it could
    not and built a batch x 1 x seq x seq mask (SDPA then made an additive one per layer, 2 B an
    element under bf16) where the GPU runs SDPA with is_causal and no mask."""
    b, s = 2, 128
    path = str(tmp_path / "gpt2.db")
    _capture_gpt2(path, 2, batch=b, seq=s)
    labels, sizes = _peak_and_labels(path)
    assert not any(lab.endswith("attn:aten::where") for lab in labels), [lab for lab in labels if "where" in lab]
    assert b * s * s not in sizes and b * s * s * 2 not in sizes
    import transformers.masking_utils as masking

    assert masking.find_packed_sequence_indices.__module__ == "transformers.masking_utils"
    assert not hasattr(masking.find_packed_sequence_indices, "__wrapped__")  # restored


# The allocator model fed this recording's allocations (both reserved peaks to the byte) is
# tests/sim/test_allocator_settings.cpp's ("GPT-2 small on an H200 with expandable segments").


@needs_snapshot
def test_compare_snapshot_reads_one_step_of_many(tmp_path, capsys):
    """bench/torch/compare_snapshot.py --step: a window per training step of a snapshot of 20 (its
    start: what lived at the end of the step before), and a snapshot recorded from an empty device
    (nothing live at the start) compared without a division by zero."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_snapshot",
                                                  os.path.join(REPO, "bench", "torch", "compare_snapshot.py"))
    cmp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cmp)
    start0, peak0, sizes0 = cmp.snapshot_step(SNAPSHOT, 0)
    start1, peak1, sizes1 = cmp.snapshot_step(SNAPSHOT, 1)
    assert (start0, peak0) == (0, step_peaks(SNAPSHOT)[0])
    # after step 0: parameters, AdamW's state, the batch, the workspaces, the loss
    assert (start1, peak1) == (1_561_566_212, 13_292_282_568) and len(sizes1) == 1_392
    path = str(tmp_path / "l1.db")
    _capture_gpt2(path, 1, batch=1, seq=64)
    assert cmp.main([path, SNAPSHOT]) == 0
    assert "peak in the window" in capsys.readouterr().out
