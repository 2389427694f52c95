"""What fake tensors cannot see, modelled (workspaces.py), and the backward paths fake tensors run
out of place (inplace_backward.py): rules by hand, and a real GPU snapshot matched to the byte."""
import importlib.util
import os
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402
from mhc_torch import workspaces  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOT = os.path.join(REPO, "tests", "data", "public", "torch-snapshot", "stanford-cs336-training-step.pickle")


def _allocs(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT a.id, coalesce(s.text, ''), a.bytes, a.t_alloc, a.t_free FROM allocations a "
                          "LEFT JOIN strings s ON s.id = a.label ORDER BY a.id").fetchall()
    finally:
        db.close()


def _kernels(path):
    db = sqlite3.connect(path)
    try:
        ks = db.execute("SELECT k.id, s.text, k.t_start, k.t_end, i.phase FROM kernels k JOIN strings s ON s.id = k.name "
                        "JOIN kernel_info i ON i.kernel = k.id ORDER BY k.id").fetchall()
        acc = {}
        for k, a, m in db.execute("SELECT kernel, allocation, mode FROM accesses"):
            acc.setdefault(k, {})[a] = m
        return ks, acc
    finally:
        db.close()


def test_cublas_workspace_size_rules():
    assert workspaces.cublas_workspace_bytes((8, 0), env={}) == 4096 * 1024 * 2 + 16 * 1024 * 8 == 8_519_680
    assert workspaces.cublas_workspace_bytes((8, 9), env={}) == 8_519_680
    for cc in ((9, 0), (10, 0), (12, 0)):
        assert workspaces.cublas_workspace_bytes(cc, env={}) == 32 << 20
    assert workspaces.cublas_workspace_bytes((9, 0), env={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}) == 32 << 20
    assert workspaces.cublas_workspace_bytes((8, 0), env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == 128 << 10
    assert workspaces.cublas_workspace_bytes((8, 0), env={"CUBLAS_WORKSPACE_CONFIG": ":4096:2:16:8"}) == 8_519_680


def test_one_cublas_workspace_per_thread_that_runs_matmuls(tmp_path):
    for gpu, size in (("a100-80g", 8_519_680), ("h100-sxm", 32 << 20)):
        path = str(tmp_path / f"{gpu}.db")
        mhc_torch.capture(lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)),
                          lambda: (torch.randn(4, 8),), steps=2, gpu=gpu, path=path, autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b).sum())
        ws = [(lab, b, ta, tf) for _, lab, b, ta, tf in _allocs(path) if lab.startswith("cuBLAS")]
        ks, acc = _kernels(path)
        first_fwd = next(k for k in ks if k[1] == "aten::addmm")
        first_bwd = next(k for k in ks if k[1] == "aten::mm" and k[4] == 1)
        # Taken at each thread's first matmul, kept to the end, whatever the number of steps; the
        # forward's addmm with a bias runs cuBLASLt, which takes its own 1 MiB at the first (the
        # backward's mm run plain cuBLAS: no cuBLASLt workspace on the autograd thread).
        assert [(lab, b, ta) for lab, b, ta, _ in ws] == [("cuBLAS workspace (main thread)", size, first_fwd[2]),
                                                          ("cuBLASLt workspace (main thread)", 1 << 20, first_fwd[2]),
                                                          ("cuBLAS workspace (autograd thread)", size, first_bwd[2])]
        assert all(tf is None for *_, tf in ws)


def test_cublaslt_workspace_rules():
    assert workspaces.cublaslt_workspace_bytes(env={}) == 1 << 20
    assert workspaces.cublaslt_workspace_bytes(env={"CUBLASLT_WORKSPACE_SIZE": "4096"}) == 4 << 20
    addmm = torch.ops.aten.addmm.default
    bias, x, w = torch.empty(16, device="meta"), torch.empty(4, 8, device="meta"), torch.empty(8, 16, device="meta")
    assert workspaces.uses_cublaslt(addmm, (bias, x, w), {})
    assert not workspaces.uses_cublaslt(addmm, (bias, x, w), {"beta": 0.5})  # cuBLAS, bias scaled apart
    assert not workspaces.uses_cublaslt(addmm, (torch.empty(4, 16, device="meta"), x, w), {})  # 2-D self
    assert not workspaces.uses_cublaslt(addmm, (bias, torch.empty(1, 8, device="meta"), w), {})  # one row
    assert not workspaces.uses_cublaslt(addmm, (bias.long(), x.long(), w.long()), {})  # integers


def test_reduction_staging_by_hand():
    # The RMSNorm weight gradient of the CS336 model: (32, 256, 768) summed over the first two
    # dimensions. Reduced dims first: 8,192 rows of stride 3,072 B, outputs 768 of stride 4 B, so
    # not along the fastest dimension; output vector 4, dim0 = 768 / 4 = 192; blocks of 32 x 4
    # threads (512 / 4 threads at most); 8,192 inputs per output over 4 warps = 2,048 values per
    # thread >= 256, grid.x = 192 / 32 = 6 <= 108 SMs x 16 blocks; blocks per output
    # max(min(1728 / 6, 2048 / 16), 2048 / 256) = 128: 4 B x 768 x 128 x (32 x 4) and 6 ints.
    t = torch.empty(32, 256, 768, device="meta")
    assert workspaces.reduction_staging(t, {0, 1}, 4, 108, 2048) == (50_331_648, 24)
    # The same on an L40S (142 SMs, 1,536 threads each): the bound is the values per thread.
    assert workspaces.reduction_staging(t, {0, 1}, 4, 142, 1536) == (50_331_648, 24)
    # Along the last dimension (RMSNorm's mean): one block row per output, no staging.
    assert workspaces.reduction_staging(t, {2}, 4, 108, 2048) == (0, 0)
    # A full sum of 2^24 fp32 on an H100: vectorised input, 512-thread blocks, 32,768 values per
    # thread, blocks per output max(min(132 x 4 / 1, 32768 / 16), 32768 / 256) = 528: 4 B x 528.
    assert workspaces.reduction_staging(torch.empty(1 << 24, device="meta"), {0}, 4, 132, 2048) == (2112, 4)
    # A loss's mean over 8,192 values: 16 values per thread, no staging.
    assert workspaces.reduction_staging(torch.empty(32, 256, 1, device="meta"), {0, 1, 2}, 4, 132, 2048) == (0, 0)


class _Indexed(torch.nn.Module):
    """An embedding by advanced indexing, `w[ids]`, as hand-written models do."""

    def __init__(self, vocab=1000, d=64):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(vocab, d))

    def forward(self, ids):
        return self.w[ids].float().sum()


def test_attention_backward_accumulators_by_hand():
    """flash_api.cpp's mha_bwd: dq_accum (seq rounded to 128, head dim to 32, or 64 above 128)
    and softmax_d in fp32; GQA adds dk and dv expanded to the query's heads; fp32 runs another
    kernel (not modelled)."""
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default

    def sizes(q_shape, k_shape=None, dtype=torch.bfloat16):
        q = torch.empty(q_shape, dtype=dtype, device="meta")
        k = torch.empty(k_shape or q_shape, dtype=dtype, device="meta")
        return [b for b, _ in workspaces.attention_backward_buffers(op, (q, q, k, k, q, q, 0.0, True), {})]

    # GPT-2 small at 8 x 1024: 25,559,040 B, where the H200 took one buffer of 25,559,296 B
    assert sizes((8, 12, 1024, 64)) == [8 * 1024 * 12 * 64 * 4, 8 * 12 * 1024 * 4]
    assert sum(sizes((8, 12, 1024, 64))) == 25_559_296 - 256
    assert sizes((2, 4, 1000, 80)) == [2 * 1024 * 4 * 96 * 4, 2 * 4 * 1024 * 4]
    assert sizes((1, 2, 128, 192)) == [1 * 128 * 2 * 192 * 4, 2 * 128 * 4]
    assert sizes((1, 8, 256, 64), (1, 2, 256, 64), torch.float16) == \
        [256 * 8 * 64 * 4, 8 * 256 * 4, 256 * 8 * 64 * 2, 256 * 8 * 64 * 2]
    assert sizes((8, 12, 1024, 64), dtype=torch.float32) == []
    assert sizes((1, 1, 16, 512)) == []  # head dim above 256: not the flash kernel


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(256, 768)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 512, 3, 4, 64).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).float().sum()


def test_attention_backward_takes_its_accumulators_for_the_kernel(tmp_path):
    path = str(tmp_path / "attn.db")
    mhc_torch.capture(_Attention, lambda: (torch.randn(2, 512, 256),), path=path, loss_fn=lambda m, b: m(*b))
    allocs = _allocs(path)
    ks, acc = _kernels(path)
    bwd = next(k for k in ks if k[1] == "aten::_scaled_dot_product_flash_attention_for_cpu_backward")
    made = {lab: (b, ta, tf, i) for i, lab, b, ta, tf in allocs if lab.startswith("attention backward")}
    assert made["attention backward: dq accumulator"][:3] == (2 * 512 * 4 * 64 * 4, bwd[2], bwd[3])
    assert made["attention backward: softmax_d"][:3] == (2 * 4 * 512 * 4, bwd[2], bwd[3])
    assert all(acc[bwd[0]][i] == 3 for *_, i in made.values())


def test_index_put_sort_temporaries_and_the_in_place_backward(tmp_path):
    path = str(tmp_path / "idx.db")
    mhc_torch.capture(_Indexed, lambda: (torch.randint(0, 1000, (8, 512)),), gpu="a100-80g", path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    allocs = _allocs(path)
    ks, acc = _kernels(path)
    put = next(k for k in ks if k[1] == "aten::index_put")
    n = 8 * 512
    sort = sorted(b for _, lab, b, ta, tf in allocs if lab.startswith("index_put sort") and (ta, tf) == put[2:4])
    assert sort == sorted([n * 8] * 4 + [n * 16])
    # The gradient is built in the zeros the backward made (index_put_), which become w.grad;
    # no second table.
    tables = [(i, lab) for i, lab, b, _, _ in allocs if b == 1000 * 64 * 4 and lab in ("w", "w.grad")]
    assert [lab for _, lab in tables] == ["w", "w.grad"]
    assert acc[put[0]][tables[1][0]] == 3  # read-write
    assert not any(lab.endswith("aten::index_put") for _, lab, *_ in allocs)


def test_out_of_place_in_the_forward_stays_out_of_place(tmp_path):
    """Only the backward's formulas are folded: user code that scatters out of place keeps both."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x):
            z = torch.zeros(64, 16)
            return z.scatter_add(0, torch.zeros(4, 16, dtype=torch.long), self.lin(x)).sum()

    path = str(tmp_path / "fwd.db")
    mhc_torch.capture(M, lambda: (torch.randn(4, 16),), path=path, autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    labels = [lab for _, lab, *_ in _allocs(path)]
    assert "M:aten::zeros" in labels and "M:aten::scatter_add" in labels


def test_gradient_accumulation_in_place(tmp_path):
    """h is used twice: its two gradients meet in the backward. A GPU adds one into the other; the
    capture ends one input's allocation where the add begins its output, so they never overlap.
    (h is computed once: calling the Linear twice, as this test did before 2026-12-07, meets the
    weight's two gradients, transposed views that the engine adds out of place.)"""
    def loss(m, b):
        h = m(*b)
        return (torch.sin(h) + torch.cos(h)).sum()

    path = str(tmp_path / "acc.db")
    mhc_torch.capture(lambda: torch.nn.Linear(256, 256), lambda: (torch.randn(64, 256),), path=path,
                      autocast_dtype=None, loss_fn=loss)
    ks, acc = _kernels(path)
    adds = [k for k in ks if k[1] == "aten::add" and k[4] == 1 and any(m == 3 for m in acc[k[0]].values())]
    assert adds, "no gradient accumulation folded"
    allocs = {i: (b, ta, tf) for i, _, b, ta, tf in _allocs(path)}
    for k in adds:
        out = next(a for a, m in acc[k[0]].items() if m == 3)
        assert allocs[out][1] == k[2]
        assert any(tf == k[2] and b == allocs[out][0] for b, _, tf in allocs.values())


def _compare_snapshot():
    spec = importlib.util.spec_from_file_location("compare_snapshot",
                                                  os.path.join(REPO, "bench", "torch", "compare_snapshot.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not os.path.exists(SNAPSHOT), reason="the public snapshot is not in this checkout")
def test_real_gpu_snapshot_of_the_same_model_matched_to_the_byte(tmp_path):
    """The CS336 transformer's training step as a GPU recorded it (tests/data/public/SOURCES.md)
    and as the capture models it, from the same model code: bytes alive when the recording began,
    and the peak in the recorded step, from the snapshot's own events and end state."""
    import runpy

    model = runpy.run_path(os.path.join(os.path.dirname(__file__), "models", "cs336_basics.py"))
    path = str(tmp_path / "cs336.db")
    mhc_torch.capture(model["build_model"], model["make_batch"], steps=2, gpu="a100-80g", path=path,
                      autocast_dtype=None, step=model["step"])
    cmp = _compare_snapshot()
    snap_start, snap_peak, _ = cmp.snapshot_window(SNAPSHOT)
    cap_start, cap_peak, _ = cmp.capture_window(path)
    assert (snap_start, snap_peak) == (1_373_919_236, 13_923_997_700)
    assert (cap_start, cap_peak) == (snap_start, snap_peak)
