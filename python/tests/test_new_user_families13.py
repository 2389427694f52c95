"""Training setups a new user brought on 2026-12-07, thirteenth round (bench/advise/new_user:
magnitude pruning with torch.nn.utils.prune, STFT speech enhancement, Stable Diffusion fine-tuning
with diffusers' checkpointing, RAFT optical flow, Hugging Face's Trainer with Adafactor and
checkpointing): each test fails without the fix it guards, but the one of a fill written in place,
which guards the fix's limit (docs/results.md, "Five more training
setups as a new user, thirteenth round", 2026-12-07)."""
import json
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.errors import CaptureError  # noqa: E402


def allocations(path):
    """(bytes, label, t_alloc, t_free) of the device's allocations."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text, a.t_alloc, a.t_free FROM allocations a "
                          "JOIN strings s ON s.id = a.label WHERE a.device = 0 ORDER BY a.id").fetchall()


class SelectsByOnes(nn.Module):
    """What torch.nn.utils.prune's PruningContainer does: a mask of ones as large as the weights
    (here more than the 4M elements a batch's values may have), its places equal to 1 selected."""

    def __init__(self, n, written=False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.n, self.written = n, written

    def forward(self, x):
        mask = torch.ones(self.n, device=x.device)
        if self.written:
            mask[:10] = 0        # a write the one value does not follow: the values are gone
        kept = x.new_zeros(self.n)[mask == 1]
        return self.lin(x).sum() + kept.sum()


@pytest.mark.parametrize("n", [1000, 5_000_000])
def test_a_fill_keeps_its_one_value_whatever_its_size(tmp_path, n):
    """torch.nn.utils.prune.global_unstructured selects `t[mask == 1]` over a mask of ones the
    size of all the pruned weights (11.7M for a ResNet-18): a fill's values were not kept (a float
    factory, or ones_like of a parameter), so the selection stopped the capture (`op
    aten.nonzero.default cannot run on fake tensors`). Where values are kept (a batch with labels),
    a fill keeps its one value, expanded to any size without host memory, through pointwise ops
    and copies: the selection has all n places."""
    path = str(tmp_path / "ones.db")
    mhc_torch.capture(lambda: SelectsByOnes(n), lambda: (torch.randn(2, 4), torch.randint(0, 9, (2,))), steps=1,
                      path=path, autocast_dtype=None, loss_fn=lambda m, b: m(b[0]))
    kept = [b for b, label, _, _ in allocations(path) if label.endswith("aten::index")]
    assert kept == [n * 4], kept


def test_a_fill_written_in_place_has_values_no_more(tmp_path):
    """A write the kept value does not follow (a slice set to 0) ends it: the selection by the
    written mask is refused as before, not given the fill's size."""
    with pytest.raises(CaptureError, match="nonzero"):
        mhc_torch.capture(lambda: SelectsByOnes(1000, written=True), lambda: (torch.randn(2, 4), torch.arange(2)),
                          steps=1, path=str(tmp_path / "w.db"), autocast_dtype=None, loss_fn=lambda m, b: m(b[0]))


def test_global_magnitude_pruning_captures(tmp_path, new_user_file, capture_small):
    """prune_resnet.py: every convolution and linear weight of a ResNet-18 pruned by
    prune.global_unstructured in build_model() stopped the capture there. Each pruned module now
    keeps weight_orig (a parameter: its gradient and momentum) and weight_mask (a buffer of the
    weight's size), and its forward pre-hook makes the masked weight (`mul`) each forward."""
    m = new_user_file("prune_resnet")
    path = tmp_path / "prune.db"
    capture_small(m, path)
    model = m.build_model(small=True)
    pruned = [mod for mod in model.modules() if isinstance(mod, (nn.Conv2d, nn.Linear))]
    allocs = allocations(str(path))
    masks = sorted(b for b, label, _, _ in allocs if label.startswith("buffer ") and label.endswith("weight_mask"))
    assert masks == sorted(mod.weight_mask.numel() * 4 for mod in pruned), masks
    origs = [label for _, label, _, _ in allocs if label.endswith("weight_orig.momentum_buffer")]
    assert len(origs) == len(pruned), origs


class Enhancer(nn.Module):
    """A spectral mask: stft, a linear layer over the magnitudes, istft back to the waveform."""

    def __init__(self, n_fft=64, hop=16):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.lin = nn.Linear(n_fft // 2 + 1, n_fft // 2 + 1)
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, wav):
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
        mask = torch.sigmoid(self.lin(spec.abs().transpose(1, 2))).transpose(1, 2)
        out = torch.istft(spec * mask, self.n_fft, self.hop, window=self.window, length=wav.shape[-1])
        return (out - wav).square().mean()


def test_istft_captures_with_cuffts_input_copy(tmp_path):
    """torch.istft checks the window's overlap-add envelope by value (NOLA) inside its C++
    kernel: the capture stopped at `op aten.equal.default cannot run on fake tensors`. The check
    passes as on the GPU, and the inverse transform, cuFFT's C2R, takes a copy of its complex
    input for the kernel's length, as PyTorch's CUDA code clones it (cuFFT may overwrite the
    input): 3 x 33 bins x 63 frames of complex64 here, once in the forward."""
    path = str(tmp_path / "istft.db")
    mhc_torch.capture(Enhancer, lambda: torch.randn(3, 1000), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(b))
    copies = [(b, ta, tf) for b, label, ta, tf in allocations(path) if label == "cuFFT C2R input copy"]
    frames = 1000 // 16 + 1
    assert [b for b, _, _ in copies] == [3 * 33 * frames * 8], copies
    assert all(tf is not None and tf > ta for _, ta, tf in copies)


def test_an_irfft_takes_the_input_copy(tmp_path):
    """torch.fft.irfft on the GPU clones its complex input before cuFFT's C2R transform (the
    CPU's kernel does not): the copy is in the trace, freed when the kernel ends."""
    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 65, dtype=torch.cfloat))

        def forward(self, x):
            return torch.fft.irfft(torch.fft.rfft(x) * self.w, n=128).square().mean()

    path = str(tmp_path / "irfft.db")
    mhc_torch.capture(Spectral, lambda: torch.randn(4, 128), steps=1, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(b))
    copies = [b for b, label, _, _ in allocations(path) if label == "cuFFT C2R input copy"]
    # the forward's irfft, and the backward's (rfft's backward runs a C2R transform too)
    assert copies and copies[0] == 4 * 65 * 8, copies


class BF16ComplexMask(nn.Module):
    """A complex mask made of an autocast Linear's bf16 outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        re, im = self.lin(x).chunk(2, dim=-1)
        return torch.view_as_real(torch.complex(re, im)).float().square().mean()


def test_complex_of_bf16_parts_is_refused_as_on_every_device(tmp_path):
    """torch.complex of bf16 parts fails on every device (`Expected both inputs to be Half, Float
    or Double tensors but got BFloat16 and BFloat16`), where fake tensors' meta kernel made a
    bcomplex32 tensor and the capture recorded a step no GPU runs (stft_enhance.py's mask under
    bf16 autocast). It is one line naming the model's line now; in fp32 it captures."""
    with pytest.raises(Exception, match="Half, Float or Double tensors but got BFloat16"):
        mhc_torch.capture(BF16ComplexMask, lambda: torch.randn(2, 8), steps=1, path=str(tmp_path / "bf.db"),
                          autocast_dtype=torch.bfloat16, loss_fn=lambda m, b: m(b))
    r = mhc_torch.capture(BF16ComplexMask, lambda: torch.randn(2, 8), steps=1, path=str(tmp_path / "fp.db"),
                          autocast_dtype=None, loss_fn=lambda m, b: m(b))
    assert r.kernels > 0


class FeatureConvs(nn.Module):
    """stft_enhance.py's shape: an fp32 feature map kept by the root forward's frame (`feat`),
    read by a convolution under bf16 autocast through a bf16 copy (so autograd never saves the
    fp32 map itself), the convolution checkpointed and its saved inputs offloaded."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv1d(64, 64, 3, padding=1))
        self.head = nn.Linear(64, 64)

    def forward(self, x):
        feat = torch.log1p(x.abs())
        h = self.conv(feat)
        out = self.head(h.transpose(1, 2)).float()
        return out.square().mean()


def test_a_frame_held_input_of_a_checkpointed_module_offloaded_is_predicted_as_captured(tmp_path, mhc_exe):
    """A module input that autograd does not save but the model's frame holds (feat) is saved by
    the module's checkpoint: offloading the checkpoint's saved inputs leaves it on the device until
    the forward returns. The capture recorded frame holds only for storages autograd saves, so
    `mhc advise` freed it after its read: stft_enhance.py checkpointing and offloading its convs
    was predicted 300.81 MiB where the capture held 308.67 MiB (2.55%). The inputs of modules'
    forwards are recorded too now, and the prediction frees it where the capture does."""
    import subprocess

    setting = {"checkpoint": {"modules": ["FeatureConvs.conv"], "policy": "full"},
               "offload": {"mode": "sync", "min_bytes": 1024, "modules": ["FeatureConvs.conv"]}}

    def capture(path, s=None):
        mhc_torch.capture(FeatureConvs, lambda: torch.randn(16, 64, 4096), steps=1, path=str(path),
                          autocast_dtype=torch.bfloat16, setting=s, loss_fn=lambda m, b: m(b))

    def feat_freed(path):
        """The kernels that start while the log1p output (feat) is alive on the device."""
        with sqlite3.connect(str(path)) as db:
            t_alloc, t_free = db.execute("SELECT a.t_alloc, a.t_free FROM allocations a JOIN strings s ON "
                                         "s.id = a.label WHERE a.device = 0 AND s.text LIKE '%aten::log1p'").fetchone()
            return db.execute("SELECT COUNT(*) FROM kernels WHERE device = 0 AND t_start >= ? AND t_start < ?",
                              (t_alloc, t_free)).fetchone()[0]

    base, captured, predicted = tmp_path / "base.db", tmp_path / "captured.db", tmp_path / "predicted.db"
    capture(base)
    capture(captured, setting)
    r = subprocess.run([mhc_exe, "advise", str(base), "--setting", json.dumps(setting), "--trace-out",
                        str(predicted)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert feat_freed(predicted) == feat_freed(captured), (feat_freed(predicted), feat_freed(captured))
