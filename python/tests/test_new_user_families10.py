"""Training setups a new user brought on 2026-12-06, tenth round (bench/advise/new_user: a Conformer
with CTC over tensor lengths, a graph transformer on torch.sparse, a HiFi-GAN vocoder with
weight_norm, FlexAttention with document masking, Transformer-XL's memory across steps, nested
checkpointing in the user's code): each test fails without the fix it guards (docs/results.md,
"Six more training setups as a new user, tenth round", 2026-12-06)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def kernels(path, like):
    """(name, phase, flops) of the kernels whose name is LIKE `like`."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT s.text, i.phase, i.flops FROM kernels k JOIN strings s ON s.id = k.name "
                          "JOIN kernel_info i ON i.kernel = k.id WHERE s.text LIKE ? ORDER BY k.id", (like,)).fetchall()


def allocation_sizes(path, kernel_like):
    """The sizes of the allocations the kernels named LIKE `kernel_like` write first."""
    with sqlite3.connect(path) as db:
        return sorted(r[0] for r in db.execute(
            "SELECT a.bytes FROM allocations a JOIN accesses x ON x.allocation = a.id JOIN kernels k ON k.id = x.kernel "
            "JOIN strings s ON s.id = k.name WHERE s.text LIKE ? AND x.kernel = (SELECT min(kernel) FROM accesses "
            "WHERE allocation = a.id)", (kernel_like,)))


class SparseGCN(nn.Module):
    """Two GCN layers over a sparse adjacency (a buffer) passed to each layer positionally."""

    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.lin = nn.Linear(d, d)

        def forward(self, x, adj):
            return x + torch.sparse.mm(adj, self.lin(x))

    def __init__(self, n=64, d=16, nnz=200):
        super().__init__()
        idx = torch.randint(0, n, (2, nnz))
        self.register_buffer("adj", torch.sparse_coo_tensor(idx, torch.rand(nnz), (n, n)))
        self.layers = nn.ModuleList(self.Layer(d) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.adj)
        return x.square().mean()


def test_sparse_tensor_passed_to_a_module_is_captured_with_its_flops(tmp_path):
    """A sparse COO tensor has no storage ('Cannot access storage of SparseTensorImpl'): a graph
    model passing its torch.sparse adjacency to each layer stopped the capture at the first call
    (the call's arguments, the frames' holds and the saves asked for its storage). Its indices
    and values are its storages now. torch's flop counter counted the backward's mm of the
    transposed sparse matrix as a dense one (N x N x d): the graph transformer's estimated step
    was 481 ms, 460 of them six such mms; now 2 x nnz x d, and the forward's _sparse_addmm too.
    The transpose itself, a clone of the indices and values on a GPU, made an empty sparse
    tensor on fake tensors (no entries: no memory, no FLOPs for the mm)."""
    path = str(tmp_path / "gcn.db")
    r = mhc_torch.capture(SparseGCN, lambda: torch.randn(64, 16), steps=1, path=path,
                          loss_fn=lambda m, b: m(b), autocast_dtype=None)
    assert r.kernels > 0
    sparse = [(name, phase, flops) for name, phase, flops in kernels(path, "%mm") if flops and "sparse" in name
              or name == "aten::mm" and phase == 1 and flops == 2 * 200 * 16]
    forward = [k for k in sparse if k[1] == 0]
    assert [f for _, _, f in forward] == [2 * 200 * 16] * 2, sparse
    # the backward's two mms with the sparse adjacency (2 x nnz x d each), not 2 x 64 x 64 x 16
    assert len([k for k in sparse if k[1] == 1]) == 2, kernels(path, "%mm")
    # its transpose (a clone of the indices and values, rows swapped) had no entries on fake tensors
    assert sorted(set(allocation_sizes(path, "aten::t"))) == [200 * 4, 2 * 200 * 8]


def test_sparse_matmul_of_an_autocast_output_is_refused_as_on_the_gpu(tmp_path):
    """torch.sparse.mm has no autocast rule and its kernels read the dense operand as the sparse
    values' dtype on every device: an fp32 adjacency times a Linear's bf16 output under autocast
    fails on the GPU ('expected scalar type Float but found BFloat16'), where the capture took it.
    It is refused in one line (mhc-torch names the model's line); cast to the adjacency's dtype,
    it runs."""
    with pytest.raises(RuntimeError, match=r"^torch.sparse.mm: the sparse matrix is torch.float32 and the dense one "
                                           r"torch.bfloat16: the GPU refuses it") as e:
        mhc_torch.capture(SparseGCN, lambda: torch.randn(64, 16), steps=1, path=str(tmp_path / "bf16.db"),
                          loss_fn=lambda m, b: m(b))
    assert "\n" not in str(e.value)

    class Cast(SparseGCN.Layer):
        def forward(self, x, adj):
            return x + torch.sparse.mm(adj, self.lin(x).to(adj.dtype))

    class CastGCN(SparseGCN):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Cast(16) for _ in range(2))

    r = mhc_torch.capture(CastGCN, lambda: torch.randn(64, 16), steps=1, path=str(tmp_path / "cast.db"),
                          loss_fn=lambda m, b: m(b))
    assert r.kernels > 0


class CTCHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 3, stride=2)
        self.head = nn.Linear(8, 12)

    def forward(self, feats, lengths):
        x = self.conv(feats.transpose(1, 2)).transpose(1, 2)
        return self.head(x).log_softmax(-1), (lengths - 3) // 2 + 1


def ctc_batch():
    return (torch.randn(3, 41, 8), torch.tensor([41, 30, 21]), torch.randint(1, 12, (3, 7)),
            torch.tensor([7, 5, 3]))


def ctc_loss(model, batch):
    feats, lengths, targets, target_lengths = batch
    log_probs, out_lengths = model(feats, lengths)
    return F.ctc_loss(log_probs.transpose(0, 1), targets, out_lengths, target_lengths, zero_infinity=True)


def test_ctc_loss_with_tensor_lengths_is_captured(tmp_path):
    """F.ctc_loss given its lengths as tensors (a Conformer's subsampled frame counts, as ESPnet
    and NeMo pass them) stopped the capture: log_alpha's size comes from the longest target, a
    value. The CUDA kernel's longest target is at most the padded targets' width, which is taken:
    log_alpha is batch x frames x (2 x 7 + 1) floats, and the backward's log_beta the same."""
    path = str(tmp_path / "ctc.db")
    mhc_torch.capture(CTCHead, ctc_batch, steps=1, path=path, loss_fn=ctc_loss, autocast_dtype=None)
    names = [k[0] for k in kernels(path, "aten::_ctc%")]
    assert names == ["aten::_ctc_loss", "aten::_ctc_loss_backward"]
    frames = (41 - 3) // 2 + 1
    assert 3 * frames * 15 * 4 in allocation_sizes(path, "aten::_ctc_loss")
    # concatenated 1-D targets give no bound: one line saying what to write instead
    def flat(model, batch):
        feats, lengths, targets, target_lengths = batch
        log_probs, out_lengths = model(feats, lengths)
        return F.ctc_loss(log_probs.transpose(0, 1), targets.flatten(), out_lengths, target_lengths)

    with pytest.raises(Exception, match=r"_ctc_loss.*as Python lists"):
        mhc_torch.capture(CTCHead, ctc_batch, steps=1, path=str(tmp_path / "flat.db"), loss_fn=flat,
                          autocast_dtype=None)


def test_flex_attention_is_refused_in_one_line_saying_why(tmp_path):
    """flex_attention on the capture's fake CPU tensors said 'FlexAttention does not support
    backward on CPU' of a model written for the GPU, where it runs: it is refused saying why."""
    from torch.nn.attention.flex_attention import flex_attention

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x):
            q, k, v = self.qkv(x).view(1, 128, 3, 2, 8).permute(2, 0, 3, 1, 4)
            return flex_attention(q, k, v).sum()

    with pytest.raises(Exception, match=r"^flex_attention is not captured: .*higher-order op") as e:
        mhc_torch.capture(Attn, lambda: torch.randn(1, 128, 16), steps=1, path=str(tmp_path / "flex.db"),
                          loss_fn=lambda m, b: m(b), autocast_dtype=None)
    assert "\n" not in str(e.value)


class FeatureDisc(nn.Module):
    """A discriminator returning its score and every layer's features (HiFi-GAN's, for feature
    matching)."""

    def __init__(self, d=256, layers=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))

    def forward(self, x):
        feats = []
        for layer in self.layers:
            x = F.leaky_relu(layer(x), 0.1)
            feats.append(x)
        return x.sum(-1), feats


class DiscNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = FeatureDisc()
        self.wide = nn.Linear(256, 4096)


def disc_loss(model, x):
    out, feats = model.d(x)
    with torch.no_grad():            # a statistic logged while the features are still referenced
        stat = model.wide(x).square().mean()
    del feats
    return out.mean() + 0 * stat


def test_features_a_checkpointed_module_returns_live_until_the_caller_drops_them(tmp_path, mhc_exe):
    """HiFi-GAN's discriminators return every layer's features in a list, which the step's loop
    keeps until the loss is summed. With a discriminator checkpointed the prediction freed them
    right after their last read inside it (the next layer), 5.4% under the captured peak, and the
    step predicted to fit 4 GiB did not. What a module's forward returns is now watched until the
    caller's code drops it (capture.frame_holds), and the prediction keeps it so long."""
    import json
    import subprocess

    batch = lambda: torch.randn(4096, 256)   # noqa: E731
    base = str(tmp_path / "disc.db")
    mhc_torch.capture(DiscNet, batch, steps=1, path=base, loss_fn=disc_loss, autocast_dtype=None)
    setting = {"checkpoint": {"modules": ["DiscNet.d"], "policy": "full"}}
    captured = mhc_torch.capture(DiscNet, batch, steps=1, path=str(tmp_path / "ckpt.db"), loss_fn=disc_loss,
                                 autocast_dtype=None, setting=setting)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    predicted = json.loads(out.stdout)["rows"][0]["peak_bytes"]
    assert predicted == captured.peak_bytes


@pytest.mark.parametrize("name", ["conformer_ctc", "graph_sparse"])
def test_new_user_model_files_capture_small(tmp_path, name, new_user_file, capture_small):
    """The model files of bench/advise/new_user added here that guard a fix capture at their
    small size (conformer_ctc through CTC with tensor lengths, graph_sparse through torch.sparse)."""
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0
