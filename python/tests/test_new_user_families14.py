"""Training setups a new user brought on 2026-12-07, fourteenth round (bench/advise/new_user: soft
actor-critic from pixels with a replay buffer on the GPU, DCNv2 segmentation, SimCLR with a LARS
of the user's own, a decoder whose saved activations the user's own hooks keep in fp8, DALL-E's
discrete VAE): each test fails without the fix it guards (docs/results.md, "Five more training
setups as a new user, fourteenth round", 2026-12-07)."""
import json
import sqlite3
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def allocations(path):
    """(bytes, label, t_alloc, t_free) of the device's allocations."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text, a.t_alloc, a.t_free FROM allocations a "
                          "JOIN strings s ON s.id = a.label WHERE a.device = 0 ORDER BY a.id").fetchall()


class WrittenBuffer(nn.Module):
    """A replay buffer's flags made with zeros when the model is built (one value: its values are
    kept, expanded), written at the batch's rows in the step, then selected by: how many rows are
    set decides the selection's shape."""

    def __init__(self, n=64):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.done = torch.zeros(n, dtype=torch.long)

    def forward(self, x, rows, flags):
        self.done[rows] = flags
        kept = torch.arange(self.done.shape[0], dtype=torch.float32, device=x.device)[self.done > 0]
        return self.lin(x).sum() + kept.sum()


def test_a_write_into_a_fill_keeps_the_written_values(tmp_path):
    """The zeros' kept values were one element expanded to the buffer's shape, and the write ran
    on it on the host: every place held the last value written (PyTorch warned of index_put_ on an
    expanded tensor), so the selection by `done > 0` took all 64 rows or none, where the GPU takes
    the 5 rows the batch sets. The shadow takes memory of its own before the write."""
    path = str(tmp_path / "buffer.db")

    def batch():
        return torch.randn(2, 4), torch.arange(8) * 3, torch.tensor([1, 0, 1, 1, 0, 1, 0, 1])   # 5 set
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        mhc_torch.capture(WrittenBuffer, batch, steps=1, path=path,
                          autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    kept = [b for b, label, _, _ in allocations(path) if label.endswith("aten::index")]
    assert kept == [5 * 4], kept
    assert not [w for w in said if "expanded" in str(w.message)], [str(w.message) for w in said]


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(16, 48), nn.Linear(48, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))).square().mean()


def pack_half(t):
    """A user's compression of the saved activations: a half-precision copy of each of 2,048
    elements or more that is not the batch (the weights, 768, are kept as they are)."""
    return t if t.is_leaf or t.numel() < 2048 else t.detach().to(torch.float16)


def unpack_half(t):
    return t if t.dtype != torch.float16 else t.float()


def saves(path):
    """(bytes, label, allocation id) of every saved storage."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text, a.id FROM saved_tensors t JOIN allocations a ON a.id = t.allocation "
                          "JOIN strings s ON s.id = a.label ORDER BY a.id").fetchall()


def test_a_users_own_saved_tensor_hooks_are_the_saves(tmp_path):
    """fp8_saved_acts.py: the forward inside `saved_tensors_hooks(pack, unpack)` of the user's
    own; autograd calls only the innermost pair, so the capture's recording hooks were never
    called there and the trace held no save of the forward (`mhc advise` found nothing to
    checkpoint or offload). What the user's pack returns is the save now: the fp16 copies of the
    ReLU's output (its own save) and of the down projection's input (4 x 16 x 48, 2 bytes each),
    the batch, the down projection's weight and output (below 2,048 elements) as they are, and
    their unpacks are noted as the capture's own hooks note them."""
    def loss(m, x):
        with torch.autograd.graph.saved_tensors_hooks(pack_half, unpack_half):
            return m(x)

    path = str(tmp_path / "hooks.db")
    mhc_torch.capture(TwoLayers, lambda: torch.randn(4, 16, 16), steps=1, path=path, autocast_dtype=None,
                      loss_fn=loss)
    saved = saves(path)
    copies = [b for b, label, _ in saved if label.endswith("aten::_to_copy")]
    assert copies == [4 * 16 * 48 * 2] * 2, saved
    assert {label for _, label, _ in saved} >= {"down.weight", "batch", "TwoLayers.down:aten::addmm"}, saved
    with sqlite3.connect(path) as db:
        unpacks = json.loads(db.execute("SELECT value FROM meta WHERE key = 'capture.unpacks'").fetchone()[0])
    assert {a for _, _, a in saved} == {a for a, _ in unpacks}, (saved, unpacks)



MODEL_FILE = """
import torch
from torch import nn


def build_model():
    return nn.Sequential(nn.Linear(16, 48), nn.ReLU(), nn.Linear(48, 16))


def make_batch():
    return torch.randn(4, 16, 16)


def pack(t):
    return t if t.is_leaf or t.numel() < 2048 else t.detach().to(torch.float16)


def unpack(t):
    return t if t.dtype != torch.float16 else t.float()


def loss_fn(model, x):
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return model(x).square().mean()
"""


def test_the_hooks_of_a_model_file_are_the_users(tmp_path):
    """mhc-torch loads a model file as the module "mhc_torch_user_model", which the first form of
    the rule took for the capture's own code (a name starting "mhc_torch"): `mhc-torch capture
    fp8_saved_acts.py` recorded 4 saves where the same file captured from Python recorded 483.
    A model file's hooks are the user's however it is loaded."""
    from mhc_torch.cli_model_file import _load_model_file
    (tmp_path / "hooked.py").write_text(MODEL_FILE)
    build, batch, loss, _, _ = _load_model_file(str(tmp_path / "hooked.py"))
    path = str(tmp_path / "file.db")
    mhc_torch.capture(build, batch, steps=1, path=path, autocast_dtype=None, loss_fn=loss)
    copies = [b for b, label, _ in saves(path) if label.endswith("aten::_to_copy")]
    assert copies == [4 * 16 * 48 * 2] * 2, saves(path)

class Deformable(nn.Module):
    """DCNv2 as dcn_seg.py has it: offsets and mask from one convolution (bf16 under autocast)."""

    def __init__(self):
        super().__init__()
        from torchvision.ops import DeformConv2d
        self.offset = nn.Conv2d(8, 27, 3, padding=1)
        self.conv = DeformConv2d(8, 16, 3, padding=1)

    def forward(self, x):
        offset, mask = self.offset(x).split([18, 9], dim=1)
        return self.conv(x, offset, torch.sigmoid(mask)).float().square().mean()


def test_deform_conv2d_runs_as_on_the_gpu(tmp_path):
    """dcn_seg.py: torchvision's deform_conv2d autocasts on CUDA only (fp32 arguments, the output
    back to the input's dtype): under the capture's bf16 it took the bf16 offsets and mask as they
    were, where the GPU saves fp32 copies of them (6 x 18 x 10 x 10 and 6 x 9 x 10 x 10, 4 bytes
    each). Its CUDA kernels take columns of 8 x 3 x 3 input channels by 6 images x 100 places and
    two output-sized buffers in the forward, columns and a copy of the incoming gradient in the
    backward, none of which fake tensors see; and its GEMMs count FLOPs (they counted 0)."""
    pytest.importorskip("torchvision")
    path = str(tmp_path / "dcn.db")
    mhc_torch.capture(Deformable, lambda: torch.randn(6, 8, 10, 10), steps=1, path=path, loss_fn=lambda m, b: m(b))
    allocs = allocations(path)
    casts = [b for b, label, _, _ in allocs if label == "Deformable.conv:aten::_to_copy"]
    assert casts[:2] == [6 * 18 * 100 * 4, 6 * 9 * 100 * 4], allocs
    out = 6 * 16 * 100 * 4
    own = sorted((label, b) for b, label, _, _ in allocs if label.startswith("deform_conv2d"))
    cols = 8 * 9 * 6 * 100 * 4
    assert own == [("deform_conv2d backward columns", cols), ("deform_conv2d backward grad_out copy", out),
                   ("deform_conv2d columns", cols), ("deform_conv2d output buffer", out),
                   ("deform_conv2d zeroed output", out)], own
    with sqlite3.connect(path) as db:
        flops = db.execute("SELECT i.flops FROM kernel_info i JOIN kernels k ON k.id = i.kernel JOIN strings s "
                           "ON s.id = k.name WHERE s.text LIKE 'torchvision::%' ORDER BY k.id").fetchall()
    gemm = 2 * 16 * 8 * 9 * 6 * 100
    assert flops == [(gemm,), (2 * gemm,)], flops


class SharedLinear(nn.Module):
    """One Linear called on two inputs (a first draft of sac_drq.py ran the critic's encoder for the
    actor and for the critic in one loss): its weight's two gradients are transposes of mm outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32, bias=False)

    def forward(self, x):
        return self.lin(x).sum() + self.lin(x * 2).sum()


def test_two_gradients_of_a_weight_used_twice_are_summed_out_of_place(tmp_path):
    """The capture took the engine's sum of the two gradients for an add into one of them (its
    input freed right after), but each is a view (mm's output transposed) whose storage its base
    shares, and the engine adds views out of place: a real CPU step keeps both gradients while the
    sum is made (that draft: 8,629,620 B measured by torch's profiler, 7,981,124 B captured; now
    8,629,620). Here the sum (the weight's .grad) is made while both are alive."""
    path = str(tmp_path / "twice.db")
    mhc_torch.capture(SharedLinear, lambda: torch.randn(8, 64), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(b))
    allocs = allocations(path)
    grads = [(ta, tf) for b, label, ta, tf in allocs if b == 32 * 64 * 4 and label == "SharedLinear.lin:aten::mm"]
    summed = [ta for b, label, ta, _ in allocs if label == "lin.weight.grad"]
    assert len(grads) == 2 and len(summed) == 1, allocs
    assert all(summed[0] < tf for _, tf in grads), allocs   # the sum is made before either input is freed
