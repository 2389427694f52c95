"""Training steps written as a new user writes them for the GPU (bench/advise/new_user, 2026-12-05):
the model's own autocast, sparse gradients, ... Each test fails without the fix it guards."""
import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))


def _batch():
    return (torch.randn(512, 256),)


def _capture(tmp_path, name, step):
    return mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / f"{name}.db"), step=step)


def _step_with(region):
    def step(model, batch, run):
        with region():
            loss = model(*batch).float().pow(2).mean()
        loss.backward()
        run.optimizer_step()
        run.zero_grad()
    return step


def test_torch_autocast_cuda_in_the_users_step_casts_as_on_a_gpu(tmp_path):
    """`with torch.autocast("cuda", dtype=torch.bfloat16)` in a step of one's own was disabled by
    torch without a GPU ("CUDA is not available ... Disabling autocast"): DeiT's accumulation loop
    (bench/advise/new_user/deit_accum.py) was captured in fp32. Now it is the capture's autocast:
    the same peak and kernels as the step with run.autocast(); fp16 where torch.cuda.amp.autocast()
    gives no dtype (CUDA's default), the keyword form too, and enabled=False is an fp32 island."""
    ref = _capture(tmp_path, "ref", lambda m, b, run: _step_with(run.autocast)(m, b, run))
    fp32 = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "fp32.db"), autocast_dtype=None)
    # working: the first Linear's output is 512 x 1024 activations; bf16 (2 B) under autocast,
    # fp32 (4 B) without: the two peaks differ, and the user's autocast must give the bf16 one
    assert ref.peak_bytes != fp32.peak_bytes
    user = _capture(tmp_path, "user", _step_with(lambda: torch.autocast("cuda", dtype=torch.bfloat16)))
    assert (user.peak_bytes, user.kernels) == (ref.peak_bytes, ref.kernels)
    keyword = _capture(tmp_path, "kw", _step_with(lambda: torch.amp.autocast(device_type="cuda",
                                                                              dtype=torch.bfloat16)))
    assert (keyword.peak_bytes, keyword.kernels) == (ref.peak_bytes, ref.kernels)
    fp16_ref = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "fp16.db"), autocast_dtype=torch.float16,
                                 step=lambda m, b, run: _step_with(run.autocast)(m, b, run))
    with pytest.warns(FutureWarning):  # torch.cuda.amp.autocast is deprecated; it still runs
        legacy = _capture(tmp_path, "legacy", _step_with(lambda: torch.cuda.amp.autocast()))
    assert (legacy.peak_bytes, legacy.kernels) == (fp16_ref.peak_bytes, fp16_ref.kernels)

    def island():
        stack = __import__("contextlib").ExitStack()
        stack.enter_context(torch.autocast("cuda", dtype=torch.bfloat16))
        stack.enter_context(torch.autocast("cuda", enabled=False))
        return stack
    off = _capture(tmp_path, "off", _step_with(island))
    plain = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "plain.db"), autocast_dtype=None,
                              step=lambda m, b, run: _step_with(run.autocast)(m, b, run))
    assert (off.peak_bytes, off.kernels) == (plain.peak_bytes, plain.kernels)
    assert not torch.is_autocast_enabled("cpu")  # nothing left switched on after the capture


def test_captures_register_their_kernels_where_torch_has_its_own(monkeypatch):
    """torch 2.11 (the H200 machine's) refuses to override a kernel registered from Python
    (torch's own meta kernel of _cudnn_rnn, aten's Meta kernel of _ctc_loss) unless asked:
    `Library.impl` and `register_fake` default to allow_override=False there, True in 2.15. Every
    capture then stopped at its start ('already a kernel registered from python overriding
    _cudnn_rnn's behavior for Meta'), and a user's fp16 autocast inside a capture's bf16 kernels
    at its first op. Here 2.11's defaults are put on the installed torch."""
    from mhc_torch import ctc_loss, cudnn_rnn

    impl, fake = torch.library.Library.impl, torch.library.register_fake

    def strict_impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=False):
        key = self.ns + "/" + str(op_name).split("::")[-1] + "/" + dispatch_key
        if not allow_override and key in torch.library._impls:
            raise RuntimeError(f"{key}: already a kernel registered from python")
        return impl(self, op_name, fn, dispatch_key, with_keyset=with_keyset, allow_override=True)

    def strict_fake(op, func=None, /, *, lib=None, _stacklevel=1, allow_override=False):
        if not allow_override and torch._C._dispatch_has_kernel_for_dispatch_key(op, "Meta"):
            raise RuntimeError(f"register_fake(...): {op} already has a Meta implementation")
        return fake(op, func, lib=lib, _stacklevel=_stacklevel + 1, allow_override=True)

    monkeypatch.setattr(torch.library.Library, "impl", strict_impl)
    monkeypatch.setattr(torch.library, "register_fake", strict_fake)
    # torch's own Python meta kernel of _cudnn_rnn (an earlier capture's end may have dropped its key)
    monkeypatch.setattr(torch.library, "_impls", set(torch.library._impls) | {"aten/_cudnn_rnn/Meta"})
    from mhc_torch.autocast_cuda import cuda_autocast, cuda_autocast_kernels
    with cudnn_rnn.rnn_as_on_gpu(True), ctc_loss.ctc_on_fake(), cuda_autocast_kernels(torch.bfloat16, "cpu"):
        with cuda_autocast(torch.float16, "cpu"):  # a user's fp16 region inside the capture's bf16 kernels
            pass


def test_sparse_embedding_gradients_and_sparse_adam(tmp_path):
    """nn.Embedding(sparse=True) trained by SparseAdam (DLRM's tables,
    bench/advise/new_user/sparse_embed.py) stopped the capture in the backward: 'Cannot access
    storage of SparseTensorImpl'. A sparse gradient's memory is its indices and values; fake
    tensors' clone of it (the autograd engine's, into .grad) had no entries at all."""
    def build():
        return torch.nn.Embedding(1000, 16, sparse=True)

    def batch():
        return (torch.randint(0, 1000, (64,)),)

    r = mhc_torch.capture(build, batch, steps=2, path=str(tmp_path / "sparse.db"), autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b).pow(2).sum(),
                          build_optimizer=lambda m: torch.optim.SparseAdam(m.parameters(), lr=1e-3))
    a = mhc_torch.read_table(r.path, "allocations")
    # working: 64 lookups of a 16-wide fp32 row; the gradient's indices are 1 x 64 int64 = 512 B,
    # its values 64 x 16 x 4 = 4,096 B, in each of the 2 steps
    grads = a[a["label"] == "weight.grad"]
    assert sorted(grads["bytes"]) == [512, 512, 4096, 4096], grads
    # SparseAdam's moments are dense, as the table: 1000 x 16 x 4 = 64,000 B each
    state = a[a["category_name"] == "optimizer"]
    assert sorted(state["bytes"])[-2:] == [64000, 64000], state


@pytest.mark.parametrize("write", ["torch.zeros_like(x).index_add_(0, idx, h)",
                                   "torch.zeros_like(x).index_copy(0, idx, h)",
                                   "x.new_zeros(x.shape).index_put_((idx,), h)"])
def test_a_write_of_another_dtype_that_a_gpu_refuses_is_refused(tmp_path, capsys, write):
    """A hand-written mixture-of-experts router index_add_s the experts' bf16 matmul outputs (autocast)
    into an fp32 buffer (bench/advise/new_user/moe_scatter.py before its .to(tokens.dtype)): every
    device refuses it ('index_add_(): self (Float) and source (BFloat16) must have the same scalar
    type'), but fake tensors' meta kernels do not check, and the capture wrote a trace of a step
    that cannot run. It is now one line naming the user's line."""
    from mhc_torch.cli import main
    model = tmp_path / "router.py"
    model.write_text(
        "import torch\n"
        "class R(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        idx = torch.arange(x.shape[0])\n"
        "        h = self.lin(x)\n"
        f"        return {write}\n"
        "def build_model(): return R()\n"
        "def make_batch(): return (torch.randn(4, 8),)\n"
        "def loss_fn(model, batch): return model(*batch).float().sum()\n")
    assert main(["capture", str(model), "-o", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "router.py:9 in forward" in err and "must have the same dtype" in err, err
    # the same step with the source cast as the line says captures
    model.write_text(model.read_text().replace("h = self.lin(x)", "h = self.lin(x).to(x.dtype)"))
    assert main(["capture", str(model), "-o", str(tmp_path / "r.db")]) == 0, capsys.readouterr().err


def test_an_autocast_decorator_made_as_the_model_file_loads(tmp_path):
    """`@torch.autocast("cuda", enabled=False)` on a method (an fp32 island) is made when the file
    loads, before the capture: torch disabled it then for lack of a GPU and kept nothing of what
    was asked, so the capture's autocast went on inside it. As a `with` inside the step it was
    right (test above); as a decorator it must capture the same."""
    from mhc_torch.cli import main
    body = (
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a, self.b = torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256)\n"
        "    DECORATOR\n"
        "    def island(self, h):\n"
        "        WITH\n"
        "            return self.b(torch.relu(self.a(h.float())))\n"
        "    def forward(self, x):\n"
        "        return self.island(x)\n"
        "def build_model(): return M()\n"
        "def make_batch(): return (torch.randn(512, 256),)\n"
        "def loss_fn(model, batch): return model(*batch).float().sum()\n")
    peaks = []
    for decorator, with_ in (("@torch.autocast('cuda', enabled=False)", "if True:"),
                             ("", "with torch.autocast('cuda', enabled=False):")):
        model = tmp_path / "island.py"
        model.write_text(body.replace("DECORATOR", decorator).replace("WITH", with_))
        out = tmp_path / f"island{len(peaks)}.db"
        assert main(["capture", str(model), "-o", str(out)]) == 0
        meta = mhc_torch.read_table(str(out), "meta").set_index("key")["value"]
        peaks.append((meta["capture.peak_bytes"], len(mhc_torch.read_table(str(out), "kernels"))))
    # the island casts nothing: 33 kernels, where the bf16 autocast that went on inside it made 44 (its casts)
    assert peaks[0] == peaks[1] and peaks[0][1] == 33, peaks


def test_a_training_loops_torch_cuda_calls_in_the_step(tmp_path):
    """A loop that logs its memory (torch.cuda.reset_peak_memory_stats(), synchronize(),
    max_memory_allocated(), get_device_name()) stopped the capture without a GPU: 'invalid argument
    to reset_peak_memory_stats', 'Found no NVIDIA driver'. They now act on the capture's device;
    max_memory_allocated() is the capture's peak device memory since the reset."""
    seen = []

    def step(model, batch, run):
        torch.cuda.reset_peak_memory_stats()
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        with torch.autocast("cuda", dtype=dtype):
            loss = model(*batch).float().pow(2).mean()
        loss.backward()
        run.optimizer_step()
        run.zero_grad()
        torch.cuda.synchronize()
        seen.append((torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated(), dtype,
                     torch.cuda.get_device_name()))

    r = _capture(tmp_path, "loop", step)
    ref = _capture(tmp_path, "ref", lambda m, b, run: _step_with(run.autocast)(m, b, run))
    assert r.peak_bytes == ref.peak_bytes  # bf16, as the modelled H100 answers is_bf16_supported()
    (peak, live, dtype, name), = seen
    assert dtype == torch.bfloat16 and name == "NVIDIA H100 80GB HBM3"
    assert peak == r.peak_bytes and 0 < live < peak, (seen, r.peak_bytes)


def test_a_step_that_moves_its_batch_to_the_gpu(tmp_path):
    """A training loop moves each batch to the GPU in its step (`x.to("cuda", non_blocking=True)`,
    `.cuda()`, a mask made with device="cuda"): the capture stopped with 'Expected all tensors to be
    on the same device, but found at least two devices, cuda:0 and cpu'. Such tensors are now made
    on the capture's device, as in build_model() and make_batch(): the same step as one that uses
    the batch where it is."""
    def moving(model, batch, run):
        x = batch[0].to("cuda", non_blocking=True).cuda()
        mask = torch.ones(512, 256, device=torch.device("cuda", 0))
        with run.autocast():
            loss = (model(x) * mask).float().pow(2).mean()
        loss.backward()
        run.optimizer_step()
        run.zero_grad()

    def staying(model, batch, run):
        mask = torch.ones(512, 256)
        with run.autocast():
            loss = (model(batch[0]) * mask).float().pow(2).mean()
        loss.backward()
        run.optimizer_step()
        run.zero_grad()

    moved, stayed = _capture(tmp_path, "moved", moving), _capture(tmp_path, "stayed", staying)
    assert (moved.peak_bytes, moved.kernels) == (stayed.peak_bytes, stayed.kernels)


def test_a_value_check_in_a_model_without_experts_is_not_blamed_on_experts(tmp_path, capsys):
    """Hugging Face Wav2Vec2ForCTC checks its labels by value (labels.max() >= vocab_size), which
    fake tensors cannot answer: the line said 'the mixture-of-experts layer Wav2Vec2ForCTC runs
    its experts with experts_implementation="eager"' (transformers sets that on every model's
    config, experts or not) and told the user to build it with grouped_mm experts, which it has
    none of. Only an experts module gets that advice now."""
    pytest.importorskip("transformers")
    from mhc_torch.cli import main
    model = tmp_path / "w2v.py"
    model.write_text(
        "import torch\n"
        "from transformers import Wav2Vec2Config, Wav2Vec2ForCTC\n"
        "def build_model():\n"
        "    return Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=8, hidden_size=16, num_hidden_layers=1,\n"
        "        num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2),\n"
        "        conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2))\n"
        "def make_batch():\n"
        "    return {'input_values': torch.randn(2, 1600), 'labels': torch.randint(1, 8, (2, 10))}\n")
    assert main(["capture", str(model), "-o", str(tmp_path / "w.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert "op aten._local_scalar_dense.default cannot run on fake tensors" in err, err
    assert "experts" not in err, err


def test_a_mask_that_stops_the_backward_is_named(tmp_path, capsys):
    """Hugging Face Wav2Vec2's SpecAugment writes through a boolean mask in the forward
    (hidden_states[mask] = embed), which fake tensors run; its backward selects by the mask, which
    they cannot. The line named no place at all (no line of the model's is on the stack in the
    backward) and advised on a loss over masked rows, which had nothing to do with it. It now names
    the backward's node and the forward's form that captures, and that form does. (The mask is
    computed from the input's values here: a boolean mask the batch holds keeps its values in the
    capture, batch_values.py, and its backward runs.)"""
    from mhc_torch.cli import main
    body = ("import torch\n"
            "class M(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.lin, self.embed = torch.nn.Linear(8, 8), torch.nn.Parameter(torch.zeros(8))\n"
            "    def forward(self, x, score):\n"
            "        h, mask = self.lin(x), score < 0.5\n"
            "        WRITE\n"
            "        return h\n"
            "def build_model(): return M()\n"
            "def make_batch(): return (torch.randn(4, 8), torch.rand(4))\n"
            "def loss_fn(model, batch): return model(*batch).float().sum()\n")
    model = tmp_path / "masked_write.py"
    model.write_text(body.replace("WRITE", "h[mask] = self.embed.to(h.dtype)"))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert "(in the backward, in IndexPutBackward0)" in err and "torch.where(mask, v, x)" in err, err
    assert "cross_entropy" not in err, err
    model.write_text(body.replace("WRITE", "h = torch.where(mask[:, None], self.embed.to(h.dtype), h)"))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 0, capsys.readouterr().err
