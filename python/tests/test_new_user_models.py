"""Kinds of training a new user brings (docs/results.md "More kinds of training as a new user"):
model files that import their own modules, models converted with Module.to or initialised with
trunc_normal_ inside build_model (peft's LoRA, ViT), torch.compile'd models, BatchNorm under
activation checkpointing. Each test fails without the fix it guards."""
import copy
import json
import subprocess
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.capturing import CaptureError  # noqa: E402


def _allocs(path):
    return mhc_torch.read_table(path, "allocations")


def test_a_model_file_imports_the_modules_beside_it(tmp_path, capsys):
    (tmp_path / "my_blocks.py").write_text("import torch\nclass Block(torch.nn.Linear):\n    pass\n")
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent("""
        import torch
        from my_blocks import Block       # as `python model.py` would find it
        def build_model(): return Block(8, 4)
        def make_batch(): return (torch.randn(2, 8),)
    """))
    from mhc_torch.cli import main

    assert main(["capture", str(model), "-o", str(tmp_path / "m.db"), "--autocast", "none"]) == 0, \
        capsys.readouterr().err


class _Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 1)

    def forward(self, x):
        return self.b(self.a(x))


def test_module_to_inside_build_model(tmp_path):
    """Module.to under fake tensors swapped tensors, which fake tensors refuse: `_apply(): Couldn't
    swap Linear.weight` (peft's get_peft_model moves its adapters so; so does model.to(bf16))."""
    path = str(tmp_path / "bf16.db")
    mhc_torch.capture(lambda: _Lin().to(torch.bfloat16), lambda: torch.randn(4, 16, dtype=torch.bfloat16),
                      path=path, autocast_dtype=None)
    a = _allocs(path)
    params = a[a.category_name == "param"].set_index("label").bytes.to_dict()
    assert params == {"a.weight": 16 * 16 * 2, "a.bias": 16 * 2, "b.weight": 16 * 2, "b.bias": 2}


def test_trunc_normal_init_inside_build_model(tmp_path):
    """torch's trunc_normal_ samples by rejection (values asked of fake tensors): ViT's and timm's
    initialisation could not be built."""
    def build():
        m = _Lin()
        nn.init.trunc_normal_(m.a.weight, std=0.02)
        return m
    path = str(tmp_path / "tn.db")
    mhc_torch.capture(build, lambda: torch.randn(4, 16), path=path, autocast_dtype=None)
    w = torch.empty(1000)
    nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)  # real tensors keep torch's sampling
    assert w.abs().max() <= 0.5 and w.std() < 0.4


def test_a_compiled_model_is_refused_in_one_line(tmp_path):
    """torch.compile'd models crashed the capture (a segmentation fault inside Dynamo)."""
    with pytest.raises(CaptureError, match=r"the model \(OptimizedModule\) is torch.compile'd: .*return the module "
                                           r"without torch.compile from build_model\(\)") as e:
        mhc_torch.capture(lambda: torch.compile(_Lin()), lambda: torch.randn(4, 16), path=str(tmp_path / "c.db"))
    assert "\n" not in str(e.value)
    assert "TORCHDYNAMO_DISABLE=1" in str(e.value)
    inner = _Lin()
    inner.a.compile()  # compiled in place, one submodule
    with pytest.raises(CaptureError, match="module 'a' is torch.compile'd"):
        mhc_torch.capture(lambda: inner, lambda: torch.randn(4, 16), path=str(tmp_path / "c.db"))


class _BnBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return x + torch.relu(self.bn(self.conv(x)))


class _BnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(_BnBlock(), _BnBlock())
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.blocks(x).mean((2, 3)))


def _bn_step(model, x):
    model(x).sum().backward()
    return {n.replace("_checkpoint_wrapped_module.", ""): b.clone() for n, b in model.named_buffers()}


@pytest.mark.parametrize("policy", ["full", "save_matmuls"])
def test_checkpointed_batchnorm_updates_its_running_stats_once(policy):
    """The recompute in the backward ran BatchNorm's training forward again: running mean and
    variance were updated twice per step (and the batch count) with checkpointing applied."""
    torch.manual_seed(0)
    plain = _BnNet()
    mine = copy.deepcopy(plain)
    mhc_torch.apply(mine, torch.optim.SGD(mine.parameters(), lr=0.1),
                    {"checkpoint": {"modules": ["_BnNet.blocks.0", "_BnNet.blocks.1"], "policy": policy}})
    x = torch.randn(2, 4, 6, 6)
    b0, b1 = _bn_step(plain, x), _bn_step(mine, x)
    assert b0.keys() == b1.keys()
    for n in b0:
        assert torch.equal(b0[n], b1[n]), n
    for (n, p0), (_, p1) in zip(plain.named_parameters(), mine.named_parameters()):
        assert torch.equal(p0.grad, p1.grad), n


def _bn_step_unpacked_first(model, x):
    """A step whose recompute also runs outside the backward: a saved tensor of the last
    checkpointed block read by hand (grad_fn._saved_result) before backward() runs."""
    y = model.blocks(x)
    node = y.grad_fn.next_functions[1][0]  # relu's backward, inside the checkpointed block
    assert node._saved_result.shape == y.shape
    model.head(y.mean((2, 3))).sum().backward()
    return {n.replace("_checkpoint_wrapped_module.", ""): b.clone() for n, b in model.named_buffers()}


def test_batchnorm_stats_kept_when_recomputed_outside_the_backward():
    """The hooks told the recompute by the autograd graph task (torch._C._current_graph_task_id,
    private): a recompute outside a backward (a saved tensor unpacked by hand) looked like the
    forward and updated the running statistics again. Checkpoint's context_fn tells it. (Selective
    checkpointing refuses a second recompute: 'Trying to backward an extra time'.)"""
    policy = "full"
    torch.manual_seed(0)
    plain = _BnNet()
    mine = copy.deepcopy(plain)
    mhc_torch.apply(mine, None, {"checkpoint": {"modules": ["_BnNet.blocks.0", "_BnNet.blocks.1"], "policy": policy}})
    x = torch.randn(2, 4, 6, 6)
    b0, b1 = _bn_step(plain, x), _bn_step_unpacked_first(mine, x)
    for n in b0:
        assert torch.equal(b0[n], b1[n]), n


@pytest.mark.parametrize("policy", ["full", "save_matmuls"])
def test_printed_checkpoint_code_keeps_batchnorm_stats(mhc_exe, tmp_path, policy):
    """The code `mhc advise` prints for a model with BatchNorm in the checkpointed blocks carries
    the same hooks, on public PyTorch API only: run as printed, the running statistics equal the
    plain step's, also when a recompute runs outside the backward."""
    path = str(tmp_path / "bn.db")
    mhc_torch.capture(_BnNet, lambda: torch.randn(2, 4, 6, 6), path=path, autocast_dtype=None)
    setting = {"checkpoint": {"modules": ["_BnNet.blocks.0", "_BnNet.blocks.1"], "policy": policy}}
    out = subprocess.run([mhc_exe, "advise", path, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    code = json.loads(out.stdout)["rows"][0]["code"].split("# or, the same in one line")[0]
    assert "keep_running_stats" in code and "context_fn=marking(" in code
    assert "torch._C" not in code and "._buffers" not in code and "_BatchNorm" not in code
    for step in (_bn_step, _bn_step_unpacked_first) if policy == "full" else (_bn_step,):
        torch.manual_seed(0)
        plain = _BnNet()
        ns = {"model": copy.deepcopy(plain), "torch": torch}
        ns["optimizer"] = torch.optim.SGD(ns["model"].parameters(), lr=0.1)
        exec(code, ns)  # noqa: S102 - the printed code under test
        x = torch.randn(2, 4, 6, 6)
        b0, b1 = _bn_step(plain, x), step(ns["model"], x)
        for n in b0:
            assert torch.equal(b0[n], b1[n]), (step.__name__, n)


def test_grad_scaler_runs_in_the_capture(tmp_path):
    """fp16 with torch.amp.GradScaler("cuda"): without a GPU the scaler disabled itself, so the
    step captured had no unscaling or infinity check (and on the CPU its step asked a fake tensor
    for a value)."""
    def step(model, batch, run):
        scaler = run.state.setdefault("scaler", torch.amp.GradScaler("cuda"))
        with run.autocast():
            loss = model(*batch).float().sum()
        scaler.scale(loss).backward()
        scaler.step(run.optimizer)
        scaler.update()
        run.zero_grad()

    path = str(tmp_path / "fp16.db")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error", UserWarning)  # "CUDA is not available. Disabling."
        mhc_torch.capture(_Lin, lambda: (torch.randn(4, 16),), path=path, steps=2, step=step,
                          autocast_dtype=torch.float16)
    names = mhc_torch.read_table(path, "kernels").name.tolist()
    assert names.count("aten::_amp_foreach_non_finite_check_and_unscale_") == 2
    assert names.count("aten::_amp_update_scale_") == 2
    assert sum(n.startswith("aten::_foreach_add") for n in names) >= 2  # AdamW stepped both times


def _predicted_peak(mhc_exe, path, setting):
    out = subprocess.run([mhc_exe, "advise", path, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["rows"][0]["peak_bytes"]


def test_selective_checkpointing_keeps_convolutions(mhc_exe, tmp_path):
    """A CNN's selective checkpoint ("keep matmuls") kept nothing (its matmuls are convolutions):
    the same step as the full checkpoint, offered as a second answer. Convolution outputs are now
    kept, in the prediction and in the step apply runs alike."""
    make = lambda: torch.randn(8, 4, 32, 32)  # noqa: E731
    base = str(tmp_path / "base.db")
    mhc_torch.capture(_BnNet, make, path=base, autocast_dtype=None)
    blocks = ["_BnNet.blocks.0", "_BnNet.blocks.1"]
    peaks = {}
    for policy in ("full", "save_matmuls"):
        setting = {"checkpoint": {"modules": blocks, "policy": policy}}
        path = str(tmp_path / f"{policy}.db")
        r = mhc_torch.capture(_BnNet, make, path=path, autocast_dtype=None, setting=setting)
        peaks[policy] = r.peak_bytes
        # the recompute's copies of BatchNorm's buffers (2 x 3 x 16 B here) are not predicted
        assert abs(_predicted_peak(mhc_exe, base, setting) - r.peak_bytes) <= 96, policy
        recomputed = mhc_torch.read_table(path, "kernels").merge(
            mhc_torch.read_table(path, "kernel_info"), left_on="id", right_on="kernel")
        convs = (recomputed.phase == 3) & (recomputed.name == "aten::convolution")
        assert convs.sum() == (2 if policy == "full" else 0), policy  # one conv per block, one step
    # 8 x 4 x 32 x 32 fp32 = 128 KiB per conv output kept while both blocks are held
    assert peaks["save_matmuls"] > peaks["full"]


def test_a_compiled_function_in_the_forward_is_refused_in_one_line(tmp_path):
    """A torch.compile'd helper called in the forward: Dynamo compiling on fake tensors inside the
    capture killed the process (segmentation fault)."""
    @torch.compile
    def mlp(x, w):
        return torch.relu(x @ w)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 16))

        def forward(self, x):
            return mlp(x, self.w).sum()

    with pytest.raises(CaptureError, match=r"function '.*mlp' is torch.compile'd: .*TORCHDYNAMO_DISABLE=1"):
        mhc_torch.capture(M, lambda: torch.randn(4, 16), path=str(tmp_path / "f.db"))
    with pytest.raises(CaptureError):  # and again: nothing left patched or half-compiled
        mhc_torch.capture(M, lambda: torch.randn(4, 16), path=str(tmp_path / "f.db"))


def test_a_step_that_clips_gradients_is_advised(mhc_exe, tmp_path):
    """A step of one's own that clips the gradients between the backward and the optimizer step:
    the search's host-optimizer candidate dropped each device gradient after the backward, so the
    clipping read freed memory and `mhc advise` stopped with an access-outside-lifetime line. The
    search now leaves the host optimizer out for such a step, and asking for it is one line."""
    def step(model, batch, run):
        with run.autocast():
            loss = model(*batch).float().sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        run.optimizer_step()
        run.zero_grad()

    path = str(tmp_path / "clip.db")
    mhc_torch.capture(lambda: nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)),
                      lambda: (torch.randn(32, 64),), path=path, steps=2, step=step)
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB", "--json", "--top", "20"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert rows and not any(r["setting"].get("optimizer", {}).get("state") == "host" for r in rows)
    out = subprocess.run([mhc_exe, "advise", path, "--setting", '{"optimizer": {"state": "host"}}'],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "reads the gradients on the GPU between the backward and the optimizer step" in out.stderr
    assert "aten::_foreach_norm" in out.stderr   # clip_grad_norm_'s kernel on a GPU (foreach)


def test_compiling_is_refused_where_torch_has_no_nested_compile_question():
    """torch 2.11's compile wrapper has no _is_eager_on_nested_compile to answer; it still picks
    the callback to install (_callback_from_stance) before compiling, and inside a capture that
    refuses, where it died with a segmentation fault. "Run eagerly" callbacks pass."""
    import torch._dynamo.eval_frame as eval_frame

    from mhc_torch.compiled_refused import _compiled_functions_refused

    original = eval_frame._callback_from_stance
    with _compiled_functions_refused():
        with pytest.raises(CaptureError, match="torch.compile'd"):
            eval_frame._callback_from_stance(lambda *a: None)
        assert eval_frame._callback_from_stance(None) is None
    assert eval_frame._callback_from_stance is original
