"""CUDA autocast's policy on the capture's fake CPU tensors, checked against real CUDA autocast:
fake *CUDA* tensors run the C++ CUDA autocast kernels in the forward (only their backward needs a
GPU), so every op and every tensor saved for the backward can be compared one to one."""
import contextlib
import os
import re
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch import autocast_cuda  # noqa: E402

F = torch.nn.functional


@contextlib.contextmanager
def _real_cuda_autocast(dtype=torch.bfloat16):
    """torch.autocast("cuda") refuses to start without a GPU; the TLS switch it would flip works."""
    prev = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cuda", prev[0])
        torch.set_autocast_dtype("cuda", prev[1])


def _op_cases(dev):
    """One call per policy and per difference between the CPU and CUDA lists, with fp32 and bf16
    arguments mixed where the policy looks at several."""
    f32 = lambda *s: torch.randn(*s, device=dev)  # noqa: E731
    b16 = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16)  # noqa: E731
    idx = torch.randint(0, 4, (4,), device=dev)
    return {
        # lower_precision_fp (einsum: not cast on CPU)
        "mm": lambda: f32(4, 8) @ f32(8, 4),
        "einsum": lambda: torch.einsum("ij,jk->ik", f32(4, 8), f32(8, 4)),
        "linear": lambda: F.linear(f32(4, 8), f32(3, 8), f32(3)),
        "baddbmm": lambda: torch.baddbmm(f32(2, 4, 4), f32(2, 4, 8), f32(2, 8, 4)),
        "conv2d": lambda: F.conv2d(f32(1, 3, 8, 8), f32(4, 3, 3, 3)),
        "sdpa": lambda: F.scaled_dot_product_attention(f32(1, 2, 8, 16), f32(1, 2, 8, 16), f32(1, 2, 8, 16)),
        # fp32 (none of these on CPU's list)
        "exp": lambda: torch.exp(b16(4)),
        "pow": lambda: b16(4) ** 2,
        "rsqrt": lambda: torch.rsqrt(b16(4)),
        "layer_norm": lambda: F.layer_norm(b16(4, 8), (8,)),
        "rms_norm": lambda: F.rms_norm(b16(4, 8), (8,)),
        "logsumexp": lambda: torch.logsumexp(b16(4, 8), -1),
        "mse_loss": lambda: F.mse_loss(b16(4), b16(4)),
        # fp32_set_opt_dtype
        "softmax": lambda: torch.softmax(b16(4, 8), -1),
        "softmax dtype given": lambda: torch.softmax(b16(4, 8), -1, dtype=torch.bfloat16),
        "log_softmax": lambda: F.log_softmax(b16(4, 8), -1),
        "sum": lambda: b16(4, 8).sum(),
        "sum dim": lambda: b16(4, 8).sum(-1),
        "cumsum": lambda: b16(4, 8).cumsum(-1),
        "prod": lambda: b16(4, 8).prod(),
        "vector_norm": lambda: torch.linalg.vector_norm(b16(4, 8)),
        # fp32_append_dtype
        "norm": lambda: b16(4, 8).norm(),
        "norm dim": lambda: b16(4, 8).norm(dim=-1),
        # promote
        "addcmul mixed": lambda: torch.addcmul(b16(4), b16(4), f32(4)),
        "addcmul bf16": lambda: torch.addcmul(b16(4), b16(4), b16(4)),
        "index_put": lambda: f32(4).index_put((idx,), b16(4), accumulate=True),
        # not autocast by either, or by CPU only (CUDA: plain type promotion, or a composite
        # whose parts are autocast: cross_entropy = log_softmax (fp32) + nll_loss)
        "mean": lambda: b16(4, 8).mean(-1),
        "gelu": lambda: F.gelu(b16(4)),
        "cat": lambda: torch.cat([b16(4), f32(4)]),
        "cross_entropy": lambda: F.cross_entropy(b16(4, 8), idx),
        "avg_pool3d": lambda: F.avg_pool3d(b16(1, 1, 4, 4, 4), 2),
        # refused by CUDA autocast
        "binary_cross_entropy": lambda: F.binary_cross_entropy(torch.rand(4, device=dev), torch.rand(4, device=dev)),
    }


def _dtypes(dev, ctx):
    out = {}
    with FakeTensorMode():
        cases = _op_cases(dev)
        with ctx():
            for name, f in cases.items():
                try:
                    out[name] = f().dtype
                except RuntimeError as e:
                    out[name] = "refused" if "autocast" in str(e) else f"error: {e}"
    return out


def test_each_op_as_cuda_autocast_casts_it():
    cuda = _dtypes("cuda", _real_cuda_autocast)
    emulated = _dtypes("cpu", lambda: autocast_cuda.cuda_autocast(torch.bfloat16))
    cpu = _dtypes("cpu", lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    assert emulated == cuda
    # What the emulation is for: CPU autocast differs on these.
    differs = {k for k in cuda if cpu[k] != cuda[k]}
    assert {"exp", "pow", "softmax", "sum", "layer_norm", "avg_pool3d", "binary_cross_entropy"} <= differs
    assert cuda["softmax"] == torch.float32 and cuda["einsum"] == torch.bfloat16 and cpu["softmax"] == torch.bfloat16


class _Block(torch.nn.Module):
    """A small pre-norm transformer block: attention as einsums with a hand-written softmax,
    RMSNorm by hand, LayerNorm, a GELU MLP, cross-entropy. (scaled_dot_product_attention picks a
    different kernel per device, whose saved tensors differ for that reason alone; its output
    dtype is compared op by op above.)"""

    def __init__(self, d=16, heads=2, vocab=32):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.out = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)
        self.w = torch.nn.Parameter(torch.ones(d))
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.heads = heads

    def rms(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))

    def forward(self, ids, labels):
        x = self.emb(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(self.rms(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (d // self.heads) ** 0.5
        p = torch.exp(scores - scores.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        a = torch.einsum("bhqk,bhkd->bhqd", p, v)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        x = x + self.down(F.gelu(self.up(self.ln(x))))
        return F.cross_entropy(self.head(x).view(-1, self.head.out_features), labels.view(-1))


def _saved(dev, ctx):
    """(dtype, shape) of every tensor the forward saves for the backward, in order."""
    saved = []

    def pack(t):
        saved.append((t.dtype, tuple(t.shape)))
        return t

    with FakeTensorMode():
        with torch.device(dev):
            m = _Block()
        ids = torch.randint(0, 32, (2, 8), device=dev)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx():
            m(ids, ids)
    return saved


def test_every_saved_tensor_of_a_small_model_has_cudas_dtype():
    cuda = _saved("cuda", _real_cuda_autocast)
    emulated = _saved("cpu", lambda: autocast_cuda.cuda_autocast(torch.bfloat16))
    cpu = _saved("cpu", lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    assert emulated == cuda
    # By hand: the attention probabilities (2 x 2 x 8 x 8) are saved in fp32 by the softmax's
    # fp32 ops (exp, then the division by its fp32 sum) and cast to bf16 for the einsum with v;
    # CPU autocast keeps the whole softmax in bf16.
    probs = (2, 2, 8, 8)
    assert (torch.float32, probs) in emulated and (torch.bfloat16, probs) in emulated
    assert (torch.float32, probs) not in cpu
    # 36 saved: embedding ids 1; hand RMSNorm 6 (fp32: pow, rsqrt, two muls); qkv mm 2 (bf16);
    # q.k einsum 2, amax 2 (bf16: its input is the einsum's output); exp 1, division 2 (fp32);
    # p.v einsum 2 (bf16); out addmm 2; LayerNorm 5 (fp32); up addmm 2, gelu 1, down addmm 2 and
    # head mm 2 (bf16); cross-entropy 4 (its bf16 logits, fp32 log-probabilities, targets, weight).
    assert len(cuda) == 36 and sum(dt == torch.bfloat16 for dt, _ in cuda) == 18


def _header_lists():
    """The AT_FORALL_* lists of the installed torch's ATen/autocast_mode.h, or None."""
    path = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
    if not os.path.exists(path):
        return None
    text = open(path).read()
    lists = {}
    for name in ("LOWER_PRECISION_FP", "FP32", "FP32_SET_OPT_DTYPE", "PROMOTE"):
        body = re.search(rf"#define AT_FORALL_{name}\(_\)((?:.*\\\n)*.*)", text).group(1)
        entries = re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", body)
        lists[name] = {f"{op}.{ov}" if ov else op for op, ov in entries}
    return lists


def test_policy_table_is_the_installed_torchs():
    table = autocast_cuda.policy_table()
    registered = autocast_cuda._registered("AutocastCUDA")
    assert set(table) == registered  # every op CUDA autocast has a kernel for, and no other
    assert autocast_cuda.unmodelled_ops() == []
    lists = _header_lists()
    if lists is None:
        pytest.skip("this torch ships no ATen headers")
    for name, policy in (("LOWER_PRECISION_FP", "lower_precision_fp"), ("FP32", "fp32"),
                         ("FP32_SET_OPT_DTYPE", "fp32_set_opt_dtype"), ("PROMOTE", "promote")):
        assert lists[name] == {op for op, p in table.items() if p == policy} - {
            "cudnn_convolution", "cudnn_convolution_transpose", "linalg_matrix_sqrth"}, name


def _attention_model():
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(32, 32, bias=False)

        def forward(self, x):
            s = torch.einsum("bqd,bkd->bqk", self.q(x), x)
            return torch.softmax(s, -1).float().sum()

    return Attn()


def test_capture_applies_cudas_policy_by_default(tmp_path):
    sizes = {}
    for policy in ("cuda", "cpu"):
        path = str(tmp_path / f"{policy}.db")
        mhc_torch.capture(_attention_model, lambda: (torch.randn(4, 64, 32),), path=path, autocast_policy=policy,
                          loss_fn=lambda m, b: m(*b))
        db = sqlite3.connect(path)
        sizes[policy] = [b for (b,) in db.execute(
            "SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label WHERE s.text LIKE '%aten::_softmax' "
            "ORDER BY a.id")]
        meta = dict(db.execute("SELECT key, value FROM meta"))
        db.close()
        assert meta["capture.autocast_policy"] == policy and meta["capture.autocast"] == "bfloat16"
    probs = 4 * 64 * 64
    assert sizes == {"cuda": [4 * probs], "cpu": [2 * probs]}  # softmax in fp32 on a GPU, bf16 on a CPU


def test_replacing_torchs_autocast_kernels_is_not_warned(monkeypatch, recwarn):
    """torch 2.11 warns, once per process, when a kernel replaces another for the same operator
    and dispatch key: 8 lines on every capture's stderr. Emulated here (torch 2.15 does not warn),
    with torch 2.11's words; the registration keeps it quiet, and other warnings still pass."""
    import warnings

    real = torch.library.Library.impl

    def impl_as_in_2_11(self, op_name, fn, dispatch_key="", **kw):
        warnings.warn("Warning only once for all operators,  other operators may also be overridden.\n"
                      "  Overriding a previously registered kernel for the same operator and the same dispatch key\n"
                      "  dispatch key: AutocastCPU", UserWarning)
        return real(self, op_name, fn, dispatch_key, **kw)

    monkeypatch.setattr(torch.library.Library, "impl", impl_as_in_2_11)
    with autocast_cuda.cuda_autocast_kernels(torch.bfloat16):
        warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in recwarn] == ["something else"]


def test_ops_this_torch_does_not_autocast_on_cuda_fall_through(monkeypatch):
    """A torch whose CUDA autocast has no kernel for an op the lists name (torch 2.11: rms_norm)
    runs it in its input's dtype; the emulation follows the installed torch, not the lists."""
    real = autocast_cuda._registered
    monkeypatch.setattr(autocast_cuda, "_registered",
                        lambda key: real(key) - {"rms_norm"} if key == "AutocastCUDA" else real(key))
    assert "rms_norm" not in autocast_cuda.policy_table()
    x = torch.randn(4, 8)
    with autocast_cuda.cuda_autocast(torch.bfloat16):
        y = torch.nn.functional.rms_norm(x.to(torch.bfloat16), (8,))
    assert y.dtype == torch.bfloat16
