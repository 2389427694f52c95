"""Training setups a new user brought on 2026-12-06, twelfth round (bench/advise/new_user: Meta's
reference Llama with complex rotary embeddings, a word-level LM with PyTorch's adaptive softmax, a
reversible ViT, a packed-sequence BiLSTM tagger, fast style transfer with VGG features taken by
forward hooks): each test fails without the fix it guards (docs/results.md, "Five more training
setups as a new user, twelfth round", 2026-12-06)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def allocations(path):
    """(bytes, label) of the device's allocations."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT a.bytes, s.text FROM allocations a JOIN strings s ON s.id = a.label "
                          "WHERE a.device = 0 ORDER BY a.id").fetchall()


class SelectsByLabels(nn.Module):
    """The selection nn.AdaptiveLogSoftmaxWithLoss makes: the rows whose target falls in a cluster,
    (target >= low) & (target < high) then nonzero, on targets sliced from the batch's ids."""

    def __init__(self, write=None):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.write = write

    def forward(self, x, ids):
        if self.write == "forward":
            ids.add_(1)              # a write in place the kept values follow
        targets = ids[:, 1:].flatten()
        rows = ((targets >= 3) & (targets < 6)).nonzero().squeeze(1)
        return self.lin(x).sum() + self.lin(x.new_ones(rows.numel(), 4)).sum()


@pytest.mark.parametrize("where", ["make_batch", "forward"])
def test_values_kept_through_a_view_of_a_tensor_written_in_place(tmp_path, where):
    """A view of a batch tensor written in place once (make_batch's `ids.clamp_(max=...)`,
    `labels[pad] = -100`), or of one written in the forward by an op the kept values follow, lost
    its values: the op runs below autograd's kernel that bumps a written tensor's version and makes a
    view share its base's counter, so the values were kept under the version the tensor had during
    the op and were stale at the next one. nn.AdaptiveLogSoftmaxWithLoss on targets ids[:, 1:]
    stopped the capture (`op aten.nonzero.default cannot run on fake tensors`). The selection now has
    the rows the values give (here 5 of the 8 targets, fp32 rows of 4)."""
    values = [[0, 3, 4, 9, 5], [1, 2, 7, 3, 8]]
    expect = torch.tensor(values) + (1 if where == "forward" else 0)
    targets = expect[:, 1:].flatten()
    rows = int(((targets >= 3) & (targets < 6)).sum())

    def make_batch():
        t = torch.tensor(values)
        if where == "make_batch":
            t.clamp_(max=9)
        return torch.randn(3, 4), t

    path = str(tmp_path / f"{where}.db")
    mhc_torch.capture(lambda: SelectsByLabels("forward" if where == "forward" else None), make_batch, steps=1,
                      path=path, autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    ones = [b for b, label in allocations(path) if label.endswith("aten::new_ones")]
    assert ones == [rows * 4 * 4], (ones, rows)


class EmbedFirst(nn.Module):
    """A large embedding stepped first, then a small head: the host optimizer's peak is the
    embedding's step, while the head's host copy is not used yet."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 64)
        self.head = nn.Linear(64, 4)

    def forward(self, ids):
        return self.head(self.embed(ids)).square().mean()


def test_host_copies_of_an_optimizer_on_the_host_count_from_the_step_start(tmp_path):
    """With the optimizer state on the host, the fp32 host copies mhc_torch.apply makes of the
    parameters were recorded only when the host step first used each (`untracked input of
    aten::mul_`), so the host peak, at the embedding's step, lacked the copies of the parameters
    stepped after it: adaptive_lm.py's host peak was captured at 8.23 GiB where mhc advise predicted
    8.94 GiB, 0.71 GiB of copies of the encoder missing. Each copy is host memory from the step's
    start now, and the host peak holds them all: copies, gradients and both moments of every
    parameter (4 x 257,040 B), the step counters and the for-loop step's sqrt and quotient of the embedding (2 x 256,000 B)."""
    path = str(tmp_path / "host.db")
    r = mhc_torch.capture(EmbedFirst, lambda: torch.randint(0, 1000, (8, 16)), steps=1, path=path,
                          autocast_dtype=None, loss_fn=lambda m, b: m(b), setting={"optimizer": {"state": "host"}},
                          optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-4))   # foreach=None: the for-loop on the host
    with sqlite3.connect(path) as db:
        copies = db.execute("SELECT a.bytes, a.t_alloc FROM allocations a JOIN strings s ON s.id = a.label "
                            "WHERE a.device = -1 AND s.text LIKE '%(host copy)'").fetchall()
        first_kernel = db.execute("SELECT MIN(t_start) FROM kernels").fetchone()[0]
        host_peak = int(db.execute("SELECT value FROM meta WHERE key = 'capture.host_peak_bytes'").fetchone()[0])
    params = 1000 * 64 * 4 + 64 * 4 * 4 + 4 * 4
    assert sorted(b for b, _ in copies) == [16, 1024, 256000]
    assert all(t <= first_kernel for _, t in copies)
    assert host_peak == 4 * params + 3 * 4 + 2 * 256000, host_peak   # and three 4-byte step counters
    assert r.kernels > 0


class PackedTagger(nn.Module):
    """A bidirectional LSTM over padded sentences packed by their lengths, then padded back."""

    def __init__(self, emb=8, hidden=16):
        super().__init__()
        self.inp = nn.Linear(emb, emb)      # so the pack's backward runs
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.inp(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, out_lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        real = torch.arange(x.shape[1])[None, :] < out_lengths[:, None]   # the positions of real tokens
        return out[real].square().mean()


def test_packed_sequences_run_cudnns_packed_rnn(tmp_path):
    """pack_padded_sequence stopped the capture (`op aten._pack_padded_sequence.default cannot run
    on fake tensors`: its rows are the sum of the lengths), and an LSTM over a PackedSequence kept
    the CPU's path. From the lengths' kept values the packed data has sum(lengths) rows, the LSTM
    is cuDNN's packed kernel (its output packed alike, the states of the longest batch), and
    pad_packed_sequence and the pack's backward run PyTorch's own composite kernels (full, one copy
    per run of equal batch sizes; zeros, one copy per step). Lengths 7, 3, 5, 2 of 9 steps here:
    17 rows of 8 fp32 values packed, 17 x 32 out of the LSTM, padded to 4 x 9 x 32, and the 17
    real tokens selected by a mask of arange(9) against the lengths pad_packed_sequence returns
    (an op without tensor inputs, arange, keeps its values now too)."""
    lengths = [7, 3, 5, 2]

    def make_batch():
        return torch.randn(4, 9, 8), torch.tensor(lengths)

    path = str(tmp_path / "packed.db")
    mhc_torch.capture(PackedTagger, make_batch, steps=1, path=path, autocast_dtype=None, loss_fn=lambda m, b: m(*b))
    allocs = allocations(path)
    rows = sum(lengths)
    assert (rows * 8 * 4, "PackedTagger:aten::_pack_padded_sequence") in allocs, allocs
    rnn = [b for b, label in allocs if label.endswith("aten::_cudnn_rnn")]
    assert rows * 32 * 4 in rnn, rnn                    # the packed output
    assert 2 * 4 * 16 * 4 in rnn, rnn                   # hy and cy: 2 directions x the longest batch (4)
    assert (4 * 9 * 32 * 4, "PackedTagger:aten::full") in allocs, allocs
    # the pack's backward: zeros of the padded input (sequence-first), filled step by step
    assert any(b == 4 * 9 * 8 * 4 and label.endswith("aten::zeros") for b, label in allocs), allocs
    # the lengths pad_packed_sequence returns (and arange's positions) have values: the selection
    # of the real tokens is theirs
    assert (rows * 32 * 4, "PackedTagger:aten::index") in allocs, allocs
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT s.text FROM kernels k JOIN strings s ON s.id = k.name")}
    assert "aten::_cudnn_rnn_backward" in names and "aten::mkldnn_rnn_layer" not in names, names


class ClusterRows(nn.Module):
    """Rows selected by the values of random labels (an adaptive softmax's tail cluster)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, labels):
        rows = (labels >= 50).nonzero().squeeze(1)
        return self.lin(x).sum() + self.lin(x.new_ones(rows.numel(), 4)).sum()


def test_a_random_batchs_selection_has_the_same_rows_in_every_capture(tmp_path):
    """The batch made on the host for its values was drawn from torch's generator as the process
    left it, so labels drawn at random selected other rows in each capture: the capture of a
    setting that `mhc advise --verify` makes compared another batch than the baseline's (an
    adaptive softmax's clusters: a reserved error of 14.37% that was the batch's). Every capture of
    the same model now selects the same rows, whatever the process drew before."""
    def make_batch():
        return torch.randn(3, 4), torch.randint(0, 100, (4096,))

    sizes = []
    for i in range(2):
        torch.manual_seed(100 + i)   # the process's state differs between the captures
        path = str(tmp_path / f"r{i}.db")
        mhc_torch.capture(ClusterRows, make_batch, steps=1, path=path, autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b))
        sizes.append([b for b, label in allocations(path) if label.endswith("aten::new_ones")])
    assert sizes[0] == sizes[1] and len(sizes[0]) == 1, sizes


@pytest.mark.parametrize("batch_first", [True, False])
def test_the_packed_kernels_written_for_fake_tensors_are_pytorchs(monkeypatch, batch_first):
    """The capture's pad_packed_sequence and pack backward (cudnn_rnn.py), run on real tensors with
    real batch sizes, give what PyTorch's own kernels give: the values, lengths and strides."""
    from mhc_torch import cudnn_rnn

    monkeypatch.setattr(cudnn_rnn, "FakeTensor", torch.Tensor)
    monkeypatch.setattr(cudnn_rnn, "_sizes", lambda b: [int(v) for v in b.tolist()])
    monkeypatch.setattr(cudnn_rnn, "_keep_values", lambda fake, values: None)
    torch.manual_seed(0)
    lengths = torch.tensor([7, 3, 5, 2, 7])
    x = torch.randn(5, 9, 4) if batch_first else torch.randn(9, 5, 4)
    p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
    ref, ref_lengths = torch.ops.aten._pad_packed_sequence.default(p.data, p.batch_sizes, batch_first, -1.0, 9)
    out, out_lengths = cudnn_rnn._pad_packed(p.data, p.batch_sizes, batch_first, -1.0, 9)
    assert torch.equal(ref, out) and ref.stride() == out.stride() and torch.equal(ref_lengths, out_lengths)
    g = torch.randn_like(p.data)
    ref = torch.ops.aten._pack_padded_sequence_backward.default(g, list(x.shape), p.batch_sizes, batch_first)
    out = cudnn_rnn._pack_backward(g, list(x.shape), p.batch_sizes, batch_first)
    assert torch.equal(ref, out) and ref.stride() == out.stride()


class InferenceInside(nn.Module):
    """Positions made by arange under torch.inference_mode() inside a training forward."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.lin = nn.Linear(4, 4)

    def forward(self, ids):
        with torch.inference_mode():
            pos = torch.arange(ids.shape[1])
            side = self.lin(self.emb(ids + pos)).sum()
        return self.lin(self.emb(ids)).sum() + side.clone()


def test_values_are_not_kept_for_inference_tensors(tmp_path):
    """An integer factory's values are kept now (arange's), and an inference tensor has no version
    counter to keep them under: without the guard the capture stopped with PyTorch's `Inference
    tensors do not track version counter.` It captures, as before factories kept values."""
    r = mhc_torch.capture(InferenceInside, lambda: torch.randint(0, 5, (2, 4)), steps=1,
                          path=str(tmp_path / "inf.db"), autocast_dtype=None, loss_fn=lambda m, b: m(b))
    assert r.kernels > 0


def test_an_offloaded_checkpoint_input_another_checkpoint_also_takes_lives_to_its_backward(
        tmp_path, mhc_exe, new_user_file, capture_small):
    """style_hooks.py's VGG runs in-place ReLUs: vgg.k's output storage is vgg.k+1's input too.
    Checkpointing both and offloading only vgg.k, the offload let the storage die after its last
    forward read, though vgg.k+1's checkpoint (outside the hook) holds it in its frame and its
    recomputation and backward read it before the hook's unpack: the predicted step broke
    access-outside-lifetime, and `mhc advise --capacity 50MiB` stopped on the first such
    combination with a message that named the capture (which `mhc check` passes). Every such pair
    of blocks now predicts a step that passes the checks, and the search runs to its answer."""
    import subprocess

    path = tmp_path / "style.db"
    capture_small(new_user_file("style_hooks"), path)
    for k in range(22):
        first, second = f"StyleTransfer.vgg.{k}", f"StyleTransfer.vgg.{k + 1}"
        setting = ('{"checkpoint": {"modules": ["%s", "%s"], "policy": "full"}, '
                   '"offload": {"mode": "sync", "min_bytes": 1024, "modules": ["%s"]}}' % (first, second, first))
        out = tmp_path / f"pair{k}.db"
        r = subprocess.run([mhc_exe, "advise", str(path), "--setting", setting, "--trace-out", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, (k, r.stderr)
        r = subprocess.run([mhc_exe, "check", str(out)], capture_output=True, text=True)
        assert r.returncode == 0, (k, r.stdout, r.stderr)
    r = subprocess.run([mhc_exe, "advise", str(path), "--capacity", "50MiB"], capture_output=True, text=True)
    said = r.stdout + r.stderr
    assert "access-outside-lifetime" not in said and "left out of the search" not in said, said
    assert "nothing fits 50.00 MiB" in said or r.returncode == 0, said
