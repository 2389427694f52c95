"""Kinds of training a new user brings, the second round (docs/results.md): parameter groups of
one's own (a model file's build_optimizer), optimizers of a step's own, mixture-of-experts layers
run by grouped matmuls, and the MFU of a checkpointed step. Each test fails without the fix it
guards."""
import json
import subprocess
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.capturing import CaptureError  # noqa: E402

GROUPS_MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    def build_model():
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))

    def make_batch():
        return (torch.randn(32, 64),)

    def loss_fn(model, batch):
        return model(*batch).float().pow(2).mean()

    def build_optimizer(model):   # nanoGPT's groups: no weight decay on biases; a smaller lr on the last layer
        w = [model[0].weight]
        b = [model[0].bias, model[2].bias]
        return torch.optim.AdamW([{"params": w, "weight_decay": 0.1}, {"params": b, "weight_decay": 0.0},
                                  {"params": [model[2].weight], "lr": 3e-5}], lr=3e-4, betas=(0.9, 0.95),
                                 foreach=True)
""")


def _allocs(path):
    return mhc_torch.read_table(path, "allocations")


def test_a_model_files_build_optimizer_is_the_captured_optimizer(tmp_path, capsys):
    """A model file could not say its optimizer: every capture stepped AdamW(lr=1e-4) over all
    parameters in one group, whatever the user trains with."""
    from mhc_torch.cli import main

    model = tmp_path / "groups.py"
    model.write_text(GROUPS_MODEL)
    out = str(tmp_path / "g.db")
    assert main(["capture", str(model), "-o", out, "--steps", "2", "--optimizer", "adamw-fused"]) == 0
    assert "--optimizer adamw-fused has no effect: " in capsys.readouterr().err
    meta = mhc_torch.read_meta(out)
    assert meta["capture.optimizer"] == "build_optimizer"
    assert meta["capture.optimizer_class"] == "torch.optim.adamw.AdamW"
    d = json.loads(meta["capture.optimizer_defaults"])
    assert d["lr"] == 3e-4 and d["betas"] == [0.9, 0.95] and d["foreach"] is True
    # the groups, as they differ from the defaults (weight decay 0.01 for AdamW)
    assert json.loads(meta["capture.optimizer_groups"]) == [{"params": 1, "weight_decay": 0.1},
                                                            {"params": 2, "weight_decay": 0.0},
                                                            {"lr": 3e-5, "params": 1}]
    a = _allocs(out)
    state = a[a.category_name == "optimizer"].label
    # exp_avg and exp_avg_sq of the four parameters (each group's), named after them
    assert sorted(state[state.str.endswith(".exp_avg")]) == ["0.bias.exp_avg", "0.weight.exp_avg", "2.bias.exp_avg",
                                                             "2.weight.exp_avg"]
    k = mhc_torch.read_table(out, "kernels")
    assert not k.name.str.contains("fused_adamw").any()   # the file's foreach AdamW, not --optimizer's


def test_build_optimizer_that_returns_no_optimizer_is_one_line(tmp_path):
    with pytest.raises(CaptureError, match=r"^build_optimizer\(model\) returned a list, not a torch.optim.Optimizer"):
        mhc_torch.capture(lambda: nn.Linear(8, 8), lambda: (torch.randn(2, 8),), path=str(tmp_path / "x.db"),
                          build_optimizer=lambda m: [torch.optim.SGD(m.parameters(), lr=0.1)])
    with pytest.raises(CaptureError, match=r"an optimizer over a tensor of shape \[8\] that is not a parameter"):
        mhc_torch.capture(lambda: nn.Linear(8, 8), lambda: (torch.randn(2, 8),), path=str(tmp_path / "x.db"),
                          build_optimizer=lambda m: torch.optim.SGD([nn.Parameter(torch.zeros(8))], lr=0.1))


def test_fused_adamw_is_predicted_for_parameter_groups(mhc_exe, tmp_path):
    """With parameter groups torch steps each group after the other and makes each group's state
    just before its kernels: the fused-AdamW prediction put its one kernel where the first group's
    was, reading the later groups' state before it existed, and `mhc advise` stopped on any such
    step with an access-outside-lifetime line (the search tries fused AdamW for every foreach
    AdamW). The prediction now equals the step captured with fused AdamW."""
    model = tmp_path / "groups.py"
    model.write_text(GROUPS_MODEL)
    base, fused = str(tmp_path / "g.db"), str(tmp_path / "f.db")
    from mhc_torch.cli import main

    setting = '{"optimizer": {"impl": "fused"}}'
    assert main(["capture", str(model), "-o", base, "--steps", "2"]) == 0
    assert main(["capture", str(model), "-o", fused, "--steps", "2", "--setting", setting]) == 0
    out = subprocess.run([mhc_exe, "advise", base, "--setting", setting, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    assert row["peak_bytes"] == int(mhc_torch.read_meta(fused)["capture.peak_bytes"])
    out = subprocess.run([mhc_exe, "advise", base, "--capacity", "1GiB", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_steps_own_optimizers_hold_optimizer_state(tmp_path):
    """Optimizers a step function builds and steps itself (two optimizers, fp32 masters): their
    state was recorded as the workspace of the op that made it (`zeros_like`), so `mhc info` showed
    no optimizer state at all for such a step."""
    def step(model, batch, run):
        if "opts" not in run.state:
            run.state["opts"] = (torch.optim.AdamW(model[0].parameters(), lr=1e-3, foreach=True),
                                 torch.optim.SGD(model[2].parameters(), lr=1e-2, momentum=0.9, foreach=True))
        with run.autocast():
            loss = model(*batch).float().sum()
        run.backward(loss)
        for opt in run.state["opts"]:
            opt.step()
            opt.zero_grad()

    path = str(tmp_path / "own.db")
    mhc_torch.capture(lambda: nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)),
                      lambda: (torch.randn(32, 64),), path=path, steps=2, step=step)
    a = _allocs(path)
    state = a[a.category_name == "optimizer"].groupby("label").bytes.sum().to_dict()
    # AdamW over Linear(64, 256): exp_avg and exp_avg_sq, fp32; SGD's momentum over Linear(256, 64)
    assert state == {"0.weight.exp_avg": 64 * 256 * 4, "0.weight.exp_avg_sq": 64 * 256 * 4,
                     "0.bias.exp_avg": 256 * 4, "0.bias.exp_avg_sq": 256 * 4, "0.weight.step": 4, "0.bias.step": 4,
                     "2.weight.momentum_buffer": 256 * 64 * 4, "2.bias.momentum_buffer": 64 * 4}


class _Experts(nn.Module):
    """Two experts of a mixture, run as transformers' "grouped_mm" experts do: tokens sorted by
    expert, one grouped matmul per projection over all of them."""
    def __init__(self, experts=2, d=32, hidden=64):
        super().__init__()
        self.up = nn.Parameter(torch.randn(experts, d, hidden) * 0.02)
        self.down = nn.Parameter(torch.randn(experts, hidden, d) * 0.02)

    def forward(self, x):
        offs = torch.tensor([48, 128], dtype=torch.int32)   # 48 tokens to expert 0, 80 to expert 1
        h = torch.nn.functional.grouped_mm(x, self.up, offs=offs).relu()
        return torch.nn.functional.grouped_mm(h, self.down, offs=offs)


@pytest.mark.skipif(not hasattr(torch.nn.functional, "grouped_mm"), reason="torch without F.grouped_mm")
def test_grouped_matmuls_count_their_flops(tmp_path):
    """torch's flop counter has no formula for aten._grouped_mm: a mixture-of-experts layer's
    expert matmuls counted 0 FLOPs and their time was their bytes' (OLMoE's shape: 4.32 TFLOP a
    step instead of 6.8, its estimated step 38.9 ms instead of 72.7)."""
    path = str(tmp_path / "moe.db")
    mhc_torch.capture(_Experts, lambda: (torch.randn(128, 32),), path=path, autocast_dtype=None)
    k = mhc_torch.read_table(path, "kernels").merge(mhc_torch.read_table(path, "kernel_info"),
                                                    left_on="id", right_on="kernel")
    g = k[k.name == "aten::_grouped_mm"]
    # 128 tokens: forward up 2*128*32*64 and down 2*128*64*32; backward, each projection's input
    # gradient (2-D x 3-D, the same count) and weight gradient (2-D x 2-D into 2 x K x N: the
    # same count again); the first layer's input needs no gradient.
    f = 2 * 128 * 32 * 64
    assert sorted(g[g.phase == 0].flops) == [f, f]
    assert sorted(g[g.phase == 1].flops) == [f, f, f]


def test_mfu_leaves_out_the_recompute():
    """MFU counted a checkpointed step's recomputation as model FLOPs (it is hardware FLOPs: HFU)."""
    from mhc_torch.cli_capture_notes import _flops_line

    class R:
        flops_per_step = [{"forward": 989e12, "backward": 2 * 989e12, "optimizer": 0, "recompute": 989e12, "other": 0}]
        step_time_ns = [6e9]

    line = _flops_line(R(), "h100-sxm")   # 989.4 TFLOP/s bf16: 3 s of model FLOPs, 4 s with the recompute
    assert "so MFU = 2.999 s / a measured step time (50.0% at the estimated 6.000 s)" in line
    assert line.endswith("; with the recompute (HFU) 3.998 s")


def test_accumulation_in_a_step_function_is_micro_batches(mhc_exe, tmp_path):
    """Gradient accumulation written in the loop (a step function with N backward passes, one
    optimizer step) was captured as 1 micro-batch a step: the DeepSpeed configuration `mhc advise`
    printed for the host optimizer had no gradient_accumulation_steps, so DeepSpeed would step the
    optimizer after every micro-batch."""
    def accumulate(model, batch, run):
        for x in batch[0].chunk(3):
            with run.autocast():
                loss = model(x).float().pow(2).mean() / 3
            run.backward(loss)
        run.optimizer_step()
        run.zero_grad()

    def gan_like(model, batch, run):   # two backward passes, the optimizer stepped after each
        for _ in range(2):
            with run.autocast():
                loss = model(*batch).float().pow(2).mean()
            loss.backward()
            run.optimizer_step()
            run.zero_grad()

    build = lambda: nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))  # noqa: E731
    paths = {}
    for name, step in (("acc", accumulate), ("gan", gan_like)):
        paths[name] = str(tmp_path / f"{name}.db")
        mhc_torch.capture(build, lambda: (torch.randn(48, 64),), path=paths[name], steps=2, step=step)
    assert mhc_torch.read_meta(paths["acc"])["capture.micro_batches"] == "3"
    assert mhc_torch.read_meta(paths["gan"])["capture.micro_batches"] == "1"
    out = subprocess.run([mhc_exe, "advise", paths["acc"], "--setting", '{"optimizer": {"state": "host"}}'],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"gradient_accumulation_steps": 3,' in out.stdout


def test_eager_experts_are_refused_with_what_to_capture_instead(tmp_path):
    """A Hugging Face mixture-of-experts model built with experts_implementation="eager" stops at
    `nonzero` (the experts a batch routes to); the line now says which experts implementation
    captures (transformers' default "grouped_mm")."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "OlmoeConfig"):
        pytest.skip("transformers without OLMoE")

    def build():
        cfg = transformers.OlmoeConfig(vocab_size=128, hidden_size=32, intermediate_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=2, num_experts=4,
                                       num_experts_per_tok=2, use_cache=False, experts_implementation="eager",
                                       eos_token_id=1, pad_token_id=0, bos_token_id=1)
        return transformers.OlmoeForCausalLM(cfg)

    ids = lambda: {"input_ids": torch.randint(0, 128, (2, 8)), "labels": torch.randint(0, 128, (2, 8))}  # noqa: E731
    with pytest.raises(CaptureError, match=r"op aten.nonzero.default cannot run on fake tensors .*; the "
                                           r"mixture-of-experts layer OlmoeExperts runs its experts with "
                                           r'experts_implementation="eager".*experts_implementation="grouped_mm"'):
        mhc_torch.capture(build, ids, path=str(tmp_path / "e.db"))
    # the default experts capture
    mhc_torch.capture(lambda: transformers.OlmoeForCausalLM(transformers.OlmoeConfig(
        vocab_size=128, hidden_size=32, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, use_cache=False, eos_token_id=1, pad_token_id=0,
        bos_token_id=1)), ids, path=str(tmp_path / "g.db"))
