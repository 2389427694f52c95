"""Training setups a new user brought on 2026-12-06, ninth round (bench/advise/new_user: a Fourier
neural operator, DLRM with EmbeddingBag, a decoder with its own op-level selective checkpointing,
NeRF, DGCNN, Glow, DANN with gradient hooks, ViT with a Lion optimizer of its own): each test
fails without the fix it guards (docs/results.md, "Eight more training setups as a new user,
ninth round", 2026-12-06)."""
import json
import sqlite3
import subprocess
from functools import partial

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def meta(path, key, default=None):
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return default if row is None else row[0]


def kernel_count(path, like):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name WHERE s.text LIKE ?",
                          (like,)).fetchone()[0]


class Spectral(nn.Module):
    """A Fourier layer as FNO writes it: complex weights over the lowest modes of an rfft2."""

    def __init__(self, width=8, modes=4, blocks=2):
        super().__init__()
        self.lift = nn.Linear(1, width)
        self.weights = nn.ParameterList(nn.Parameter(torch.rand(width, width, modes, modes, dtype=torch.cfloat))
                                        for _ in range(blocks))
        self.modes = modes

    def forward(self, a):
        x = self.lift(a).permute(0, 3, 1, 2)
        m = self.modes
        for w in self.weights:
            ft = torch.fft.rfft2(x)
            out = torch.zeros(*ft.shape[:2], x.shape[2], x.shape[3] // 2 + 1, dtype=torch.cfloat, device=x.device)
            out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", ft[:, :, :m, :m], w)
            x = F.gelu(x + torch.fft.irfft2(out, s=x.shape[2:]))
        return x.mean()


def spectral_batch():
    return torch.randn(2, 16, 16, 1)


def test_fused_adamw_is_not_offered_for_complex_weights(tmp_path, mhc_exe):
    """torch.optim refuses fused=True when a parameter is not floating point (complex weights of a
    Fourier neural operator), on every device. mhc advise offered 'fused AdamW' for FNO-2d and its
    --verify stopped on torch's error; the capture now says why (meta capture.fused_refused), the
    search leaves the fused optimizer out and a setting asking for it is refused in one line."""
    path = str(tmp_path / "fno.db")
    mhc_torch.capture(Spectral, spectral_batch, steps=1, path=path, loss_fn=lambda m, b: m(b), autocast_dtype=None)
    why = meta(path, "capture.fused_refused")
    assert why is not None and "weights.0 and 1 more are complex64" in why
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "100GiB", "--top", "10", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = [r["description"] for r in json.loads(out.stdout)["rows"]]
    assert "as captured" in rows and not any("fused" in r for r in rows), rows
    out = subprocess.run([mhc_exe, "advise", path, "--setting", json.dumps({"optimizer": {"impl": "fused"}})],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "floating-point parameters only" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_bf16_fft_runs_as_on_the_gpu(tmp_path):
    """torch.fft refuses bf16 on a CPU and takes it on CUDA (complex64 out): under the capture's
    bf16 autocast the Fourier layer's rfft2 of a Linear's output stopped the capture ('Unsupported
    dtype BFloat16'). It runs on a float32 copy now, as the GPU's fallback does."""
    path = str(tmp_path / "fno_bf16.db")
    mhc_torch.capture(Spectral, spectral_batch, steps=1, path=path, loss_fn=lambda m, b: m(b))
    assert kernel_count(path, "aten::_fft_r2c") >= 2
    assert meta(path, "capture.autocast") == "bfloat16"
    # fp16 (complex32 on a GPU) is said in one line naming the model's line and what to do
    with pytest.raises(Exception, match=r"fft.rfft2 of a float16 tensor .* --autocast bf16 or none"):
        mhc_torch.capture(Spectral, spectral_batch, steps=1, path=str(tmp_path / "fp16.db"),
                          loss_fn=lambda m, b: m(b), autocast_dtype=torch.float16)
    # real CPU tensors keep torch's own check
    with pytest.raises(Exception, match="Unsupported dtype"):
        torch.fft.rfft2(torch.randn(4, 4, dtype=torch.bfloat16))


def test_distribution_argument_checks_pass_on_fake_tensors(tmp_path):
    """torch.distributions validates its arguments by default (Normal's scale > 0, a sample in the
    support) with bool(tensor): a normalising flow's, a VAE's or a policy's log-likelihood stopped
    the capture ('op aten._local_scalar_dense.default cannot run on fake tensors'). The check
    passes as on the GPU; its shape checks still run."""
    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(8, 16)

        def forward(self, x):
            mean, log_sd = self.net(x).chunk(2, -1)
            return -torch.distributions.Normal(mean, log_sd.exp()).log_prob(x).sum()

    path = str(tmp_path / "flow.db")
    r = mhc_torch.capture(Flow, lambda: torch.randn(4, 8), steps=1, path=path, loss_fn=lambda m, b: m(b),
                          autocast_dtype=None)
    assert r.kernels > 0

    class BadShape(Flow):
        def forward(self, x):
            mean, log_sd = self.net(x).chunk(2, -1)
            return -torch.distributions.Normal(mean, log_sd.exp()).log_prob(x[:, :3]).sum()

    with pytest.raises(Exception, match="shape|size"):
        mhc_torch.capture(BadShape, lambda: torch.randn(4, 8), steps=1, path=str(tmp_path / "bad.db"),
                          loss_fn=lambda m, b: m(b), autocast_dtype=None)


def test_a_models_own_sac_policy_is_asked_about_the_gpus_attention(tmp_path):
    """torchtitan's op-level selective checkpointing saves aten._scaled_dot_product_flash_attention
    (the GPU's kernel); the capture runs the CPU flash kernel in its place, which such a policy did
    not name: every checkpointed block ran its attention again in the backward (2 forwards a
    block), where a GPU keeps it. The policy is asked about the GPU's kernel now."""
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    asked = set()
    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention.default}

    def policy(ctx, op, *args, **kwargs):
        asked.add(str(op))
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(64, 192, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(x).view(2, 32, 3, 4, 16).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            return x + a.transpose(1, 2).reshape(2, 32, 64)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(3))

        def forward(self, x):
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=False,
                               context_fn=partial(create_selective_checkpoint_contexts, policy))
            return x.float().pow(2).mean()

    path = str(tmp_path / "sac.db")
    mhc_torch.capture(Model, lambda: torch.randn(2, 32, 64), steps=1, path=path, loss_fn=lambda m, b: m(b))
    assert "aten._scaled_dot_product_flash_attention.default" in asked
    assert kernel_count(path, "aten::_scaled_dot_product_flash_attention_for_cpu") == 3


def test_embedding_bag_keeps_what_a_gpu_keeps(tmp_path):
    """nn.EmbeddingBag(mode="sum") on a CUDA tensor keeps offset2bag (an int64 per index) and
    bag_size (one per bag) for the backward, and no max_indices; torch's meta kernel took the CPU
    kernel's tensors for the capture's CPU device (no offset2bag, max_indices one per bag), so a
    DLRM's tables kept 1.3 MB less each than a GPU. The GPU's tensors are kept now; fake tensors
    outside a capture keep torch's own kernel."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    class Bags(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(1000, 32, mode="sum")

        def forward(self, ids, offsets):
            return self.bag(ids, offsets).pow(2).mean()

    def batch():
        return {"ids": torch.randint(0, 1000, (4096,)), "offsets": torch.arange(0, 4096, 16)}

    path = str(tmp_path / "bags.db")
    mhc_torch.capture(Bags, batch, steps=1, path=path, loss_fn=lambda m, b: m(b["ids"], b["offsets"]),
                      autocast_dtype=None)
    with sqlite3.connect(path) as db:
        sizes = sorted(b for (b,) in db.execute(
            "SELECT a.bytes FROM allocations a JOIN strings s ON s.id = a.label "
            "WHERE s.text LIKE '%aten::_embedding_bag' AND a.bytes > 0"))
    assert sizes == [256 * 8, 256 * 32 * 4, 4096 * 8]   # bag_size, output, offset2bag
    with FakeTensorMode():
        out = torch.ops.aten._embedding_bag.default(torch.randn(1000, 32), torch.randint(0, 1000, (64,)),
                                                    torch.arange(0, 64, 16))
    assert out[1].numel() == 0   # torch's CPU kernel: the sum's fast path makes no offset2bag


@pytest.mark.parametrize("name, package", [
    ("fno", "torch"), ("dlrm", "torch"), ("user_sac", "torch"), ("nerf", "torch"), ("dgcnn", "torch"),
    ("glow", "torch"), ("dann_hooks", "torchvision"), ("lion_vit", "torchvision")])
def test_new_user_model_files_capture_small(tmp_path, name, package, new_user_file, capture_small):
    """The model files of bench/advise/new_user added here capture at their small size (fno through
    the bf16 FFT, glow through the distribution's checks, dlrm through the GPU's EmbeddingBag)."""
    pytest.importorskip(package)
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0
