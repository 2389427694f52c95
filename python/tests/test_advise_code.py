"""The code `mhc advise` prints is code a user can paste: for each setting, the printed PyTorch
lines run on a real (CPU) instance of the captured model and its optimizer, keep the user's
optimizer class and hyperparameters, and train exactly as the plain step does where the setting
does not change the math (checkpointing: gradients bitwise equal; a fused optimizer: within
rounding). A Hugging Face model gets its own checkpointing call only when it is one (whatever its
class is named) and that call's current name in the installed transformers."""
import contextlib
import copy
import io
import json
import subprocess
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from tiny_models import gpt2 as _gpt2, gpt2_batch as _gpt2_batch  # noqa: E402


class Block(nn.Module):
    def __init__(self, d=16, h=64):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class NetForCausalLM(nn.Module):
    """A plain module whose class name looks like a Hugging Face one."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _net_loss(model, batch):
    return torch.nn.functional.mse_loss(model(batch[0]), batch[1])


def _net_batch():
    return (torch.randn(32, 16), torch.randn(32, 1))


def _sgd(ps):
    return torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.001, foreach=True)


def _gpt2_loss(model, batch):
    return model(**batch).loss


def _adamw(ps):
    return torch.optim.AdamW(ps, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)


def _printed(mhc_exe, trace, setting):
    out = subprocess.run([mhc_exe, "advise", trace, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    code = json.loads(out.stdout)["rows"][0]["code"]
    compile(code, "<printed by mhc advise>", "exec")  # all of it is Python, the third-party parts too
    return code.split("# or, the same in one line")[0]


def _train_step(model, optimizer, batch, loss_fn):
    loss = loss_fn(model, batch)
    loss.backward()
    grads = {n.replace("_checkpoint_wrapped_module.", ""): p.grad.clone()
             for n, p in model.named_parameters() if p.grad is not None}
    optimizer.step()
    optimizer.zero_grad()
    return loss.item(), grads


def _run_printed(code, build, make_batch, loss_fn, make_optimizer):
    """The plain step and the step with the printed code applied, from the same weights and batch."""
    torch.manual_seed(0)
    plain = build()
    mine = copy.deepcopy(plain)
    batch = make_batch()
    opt0, opt1 = make_optimizer(plain.parameters()), make_optimizer(mine.parameters())
    ns = {"model": mine, "optimizer": opt1, "torch": torch}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # a deprecated call is not advice
        warnings.simplefilter("error", DeprecationWarning)
        exec(code, ns)  # noqa: S102 - the code under test
    torch.manual_seed(1)
    l0, g0 = _train_step(plain, opt0, batch, loss_fn)
    torch.manual_seed(1)
    l1, g1 = _train_step(ns["model"], ns["optimizer"], batch, loss_fn)
    params0 = dict(plain.named_parameters())
    params1 = {n.replace("_checkpoint_wrapped_module.", ""): p for n, p in ns["model"].named_parameters()}
    return (l0, g0, params0, opt0), (l1, g1, params1, ns["optimizer"])


@pytest.fixture(scope="module")
def net_trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("code") / "net.db")
    mhc_torch.capture(NetForCausalLM, _net_batch, steps=1, path=path, autocast_dtype=None, loss_fn=_net_loss,
                      optimizer=_sgd)
    return path


@pytest.fixture(scope="module")
def gpt2_trace(tmp_path_factory):
    pytest.importorskip("transformers")
    path = str(tmp_path_factory.mktemp("code") / "gpt2.db")
    mhc_torch.capture(_gpt2, _gpt2_batch, steps=1, path=path, autocast_dtype=None, optimizer=_adamw)
    return path


NET_BLOCKS = [f"NetForCausalLM.blocks.{i}" for i in range(3)]


@pytest.mark.parametrize("setting", [
    {"checkpoint": {"modules": NET_BLOCKS}},
    {"checkpoint": {"modules": NET_BLOCKS[:2], "policy": "save_matmuls"}},
    {"checkpoint": [{"modules": NET_BLOCKS[:1]}, {"modules": NET_BLOCKS[1:], "policy": "save_matmuls"}]},
], ids=["full", "selective", "two-groups"])
def test_plain_model_checkpoint_code_runs_bitwise(mhc_exe, net_trace, setting):
    code = _printed(mhc_exe, net_trace, setting)
    assert "gradient_checkpointing_enable" not in code and "activation_checkpointing_enable" not in code
    (l0, g0, p0, _), (l1, g1, p1, _) = _run_printed(code, NetForCausalLM, _net_batch, _net_loss, _sgd)
    assert l0 == l1
    assert g0.keys() == g1.keys()
    for n in g0:
        assert torch.equal(g0[n], g1[n]), n
    wrapped = sum(type(m).__name__ == "CheckpointWrapper" for m in _modules_after(code))
    assert wrapped == sum(len(g["modules"]) for g in (setting["checkpoint"] if isinstance(setting["checkpoint"], list)
                                                       else [setting["checkpoint"]]))


def _modules_after(code):
    m = NetForCausalLM()
    ns = {"model": m, "optimizer": _sgd(m.parameters()), "torch": torch}
    exec(code, ns)  # noqa: S102
    return list(ns["model"].modules())


def test_fused_is_not_predicted_for_an_optimizer_it_is_not_modelled_for(mhc_exe, net_trace):
    """The fused kernel's model is AdamW's: for SGD it is refused in one line (it made a trace
    that failed its own checks), and the search never offers it."""
    out = subprocess.run([mhc_exe, "advise", net_trace, "--setting", '{"optimizer": {"impl": "fused"}}'],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "'optimizer.impl'" in out.stderr and "torch.optim.sgd.SGD" in out.stderr
    out = subprocess.run([mhc_exe, "advise", net_trace, "--capacity", "1GiB", "--json", "--top", "20"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert rows and not any("impl" in r["setting"].get("optimizer", {}) for r in rows)


def test_host_optimizer_code_names_the_users_optimizer(mhc_exe, net_trace):
    code = _printed(mhc_exe, net_trace, {"optimizer": {"state": "host"}})
    # DeepSpeed is not installed here: the config must not swap the user's SGD for AdamW
    assert '"type": "AdamW"' not in code and "optimizer=optimizer" in code and "zero_force_ds_cpu_optimizer" in code
    ns = {}
    exec(code.replace("import deepspeed", "").split("model, optimizer, _, _")[0], {"MICRO_BATCH": 32}, ns)  # noqa: S102
    assert ns["ds_config"]["train_micro_batch_size_per_gpu"] == 32
    assert ns["ds_config"]["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


MODEL_FILE = """
import torch
from torch import nn


def build_model(small=False):
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))


def make_batch(small=False):
    return torch.randn(24, 16), torch.randn(24, 1)


def loss_fn(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()
"""


def test_host_optimizer_code_for_a_model_file_says_its_batch_size(mhc_exe, tmp_path):
    """A model file makes its own batch: the capture records the batch's leading dimension (meta
    capture.batch_size) and the printed DeepSpeed config says it. It printed the name MICRO_BATCH
    for the user to fill in, a NameError when pasted as it is."""
    from mhc_torch.cli import main

    model = tmp_path / "tiny_model.py"
    model.write_text(MODEL_FILE)
    path = str(tmp_path / "file.db")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["capture", str(model), "-o", path, "--autocast", "none"]) == 0
    assert mhc_torch.read_meta(path)["capture.batch_size"] == "24"
    code = _printed(mhc_exe, path, {"optimizer": {"state": "host"}})
    assert "MICRO_BATCH" not in code
    ns = {}
    exec(code.replace("import deepspeed", "").split("model, optimizer, _, _")[0], {}, ns)  # noqa: S102
    assert ns["ds_config"]["train_micro_batch_size_per_gpu"] == 24


def test_host_optimizer_code_keeps_adamw_hyperparameters(mhc_exe, gpt2_trace):
    code = _printed(mhc_exe, gpt2_trace, {"optimizer": {"state": "host"}})
    ns = {}
    exec(code.replace("import deepspeed", "").split("model, optimizer, _, _")[0], {"MICRO_BATCH": 2}, ns)  # noqa: S102
    assert ns["ds_config"]["optimizer"] == {"type": "AdamW", "params": {"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8,
                                                                        "weight_decay": 0.1}}


def test_host_optimizer_code_says_the_weights_are_bf16(mhc_exe, gpt2_trace, tmp_path):
    """DeepSpeed keeps 16-bit weights (fp32 masters in the offloaded optimizer) only when its config
    says so: for a step captured with bf16 weights (--weights bf16) the printed config enables bf16;
    with the model's fp32 weights it enables neither (before 2026-12-04 it never did)."""
    def config(trace):
        code = _printed(mhc_exe, trace, {"optimizer": {"state": "host"}})
        ns = {}
        exec(code.replace("import deepspeed", "").split("model, optimizer, _, _")[0], {"MICRO_BATCH": 2}, ns)  # noqa: S102
        return ns["ds_config"]

    bf16 = str(tmp_path / "bf16.db")
    mhc_torch.capture(_gpt2, _gpt2_batch, steps=1, path=bf16, autocast_dtype=None, optimizer=_adamw,
                      param_dtype=torch.bfloat16)
    assert config(bf16)["bf16"] == {"enabled": True}
    built = str(tmp_path / "built.db")   # the model made bf16 by its own code (meta capture.weights_dtype)
    mhc_torch.capture(lambda: _gpt2().to(torch.bfloat16), _gpt2_batch, steps=1, path=built, autocast_dtype=None,
                      optimizer=_adamw)
    assert config(built)["bf16"] == {"enabled": True}
    fp32 = config(gpt2_trace)
    assert "bf16" not in fp32 and "fp16" not in fp32


def test_hf_model_gets_its_own_checkpointing_call(mhc_exe, gpt2_trace):
    blocks = [f"GPT2LMHeadModel.transformer.h.{i}" for i in range(2)]
    code = _printed(mhc_exe, gpt2_trace, {"checkpoint": {"modules": blocks}})
    from transformers import PreTrainedModel

    call = ("activation_checkpointing_enable" if hasattr(PreTrainedModel, "activation_checkpointing_enable")
            else "gradient_checkpointing_enable")
    assert f"model.{call}(" in code and "apply_activation_checkpointing" not in code
    (l0, g0, _, _), (l1, g1, _, _) = _run_printed(code, _gpt2, _gpt2_batch, _gpt2_loss, _adamw)
    assert l0 == l1
    for n in g0:
        assert torch.equal(g0[n], g1[n]), n
    # one block of two: PyTorch's wrapper, not the model's call (which would checkpoint both)
    code = _printed(mhc_exe, gpt2_trace, {"checkpoint": {"modules": blocks[:1]}})
    assert "apply_activation_checkpointing" in code and call not in code
    (l0, g0, _, _), (l1, g1, _, _) = _run_printed(code, _gpt2, _gpt2_batch, _gpt2_loss, _adamw)
    for n in g0:
        assert torch.equal(g0[n], g1[n]), n


def test_fused_code_keeps_the_hyperparameters(mhc_exe, gpt2_trace):
    code = _printed(mhc_exe, gpt2_trace, {"optimizer": {"impl": "fused"}})
    (_, _, p0, opt0), (_, _, p1, opt1) = _run_printed(code, _gpt2, _gpt2_batch, _gpt2_loss, _adamw)
    assert type(opt1) is torch.optim.AdamW and opt1.defaults["fused"]
    for key in ("lr", "eps", "weight_decay"):
        assert opt1.defaults[key] == opt0.defaults[key], key
    assert tuple(opt1.defaults["betas"]) == (0.9, 0.95)
    for n in p0:
        torch.testing.assert_close(p1[n], p0[n], rtol=1e-5, atol=1e-6)


def _grouped_adamw(model):   # nanoGPT's groups, and a smaller learning rate for the head
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not n.startswith("head")]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and not n.startswith("head")]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0},
                              {"params": list(model.head.parameters()), "lr": 3e-5}],
                             lr=3e-2, betas=(0.9, 0.95), foreach=True)


def test_printed_optimizer_code_keeps_parameter_groups(mhc_exe, tmp_path):
    """A capture whose optimizer has parameter groups of its own (a model file's build_optimizer):
    the printed fused AdamW was `AdamW(model.parameters(), lr=..., fused=True)` with the defaults'
    hyperparameters, so pasted as printed it trained every group with one learning rate and weight
    decay (the parameters after one step 2.7e-4 off on the bench's param_groups.py, where
    mhc_torch.apply's were 1.5e-8 off); the DeepSpeed configuration dropped the groups too."""
    path = str(tmp_path / "groups.db")
    mhc_torch.capture(NetForCausalLM, _net_batch, steps=1, path=path, autocast_dtype=None, loss_fn=_net_loss,
                      build_optimizer=_grouped_adamw)
    code = _printed(mhc_exe, path, {"optimizer": {"impl": "fused"}})
    assert "for g in optimizer.param_groups" in code
    torch.manual_seed(0)
    plain = NetForCausalLM()
    mine = copy.deepcopy(plain)
    opt0, opt1 = _grouped_adamw(plain), _grouped_adamw(mine)
    ns = {"model": mine, "optimizer": opt1, "torch": torch}
    exec(code, ns)  # noqa: S102 - the code under test
    assert ns["optimizer"].defaults["fused"] and all(g["fused"] and not g["foreach"] for g in ns["optimizer"].param_groups)
    assert [(g["lr"], g["weight_decay"]) for g in ns["optimizer"].param_groups] == [(3e-2, 0.1), (3e-2, 0.0),
                                                                                   (3e-5, 0.01)]
    batch = _net_batch()
    for model, opt in ((plain, opt0), (mine, ns["optimizer"])):
        _train_step(model, opt, batch, _net_loss)
    for (n, p0), p1 in zip(plain.named_parameters(), mine.parameters()):
        torch.testing.assert_close(p1, p0, rtol=1e-5, atol=1e-6, msg=n)
    # the DeepSpeed lines: the same groups as model_parameters (deepspeed itself is not installed)
    code = _printed(mhc_exe, path, {"optimizer": {"state": "host"}})
    ns = {"optimizer": _grouped_adamw(NetForCausalLM())}
    exec(code.replace("import deepspeed", "").split("model, optimizer, _, _")[0], {"MICRO_BATCH": 2}, ns)  # noqa: S102
    assert [(g["lr"], g["weight_decay"], len(g["params"])) for g in ns["groups"]] == [(3e-2, 0.1, 6), (3e-2, 0.0, 12),
                                                                                     (3e-5, 0.01, 2)]
    assert "model_parameters=groups" in code
