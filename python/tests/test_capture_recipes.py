"""Recipes the standard step does not express: bf16 weights, forward-only steps, gradient
accumulation over micro-batches, where gradients are cleared, a step function of one's own; and
the FLOPs each kernel stores (kernel_info) and mhc-torch prints."""
import sqlite3
import textwrap

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402

M, K, N = 16, 64, 32  # batch rows, in features, out features


def _linear():
    return torch.nn.Linear(K, N)


def _batch():
    return (torch.randn(M, K),)


def _sum_loss(m, b):
    return m(*b).float().sum()


def _capture(tmp_path, name, **kw):
    path = str(tmp_path / f"{name}.db")
    kw.setdefault("loss_fn", _sum_loss)
    r = mhc_torch.capture(kw.pop("build", _linear), kw.pop("batch", _batch), path=path, **kw)
    return path, r


def _allocs(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT a.id, s.text, c.name, a.bytes, a.t_alloc, a.t_free FROM allocations a "
                          "JOIN categories c ON c.id = a.category LEFT JOIN strings s ON s.id = a.label "
                          "ORDER BY a.id").fetchall()
    finally:
        db.close()


def _kernels(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT k.id, s.text, p.name, k.step, k.t_start, k.t_end, i.flops FROM kernels k "
                          "JOIN strings s ON s.id = k.name JOIN kernel_info i ON i.kernel = k.id "
                          "JOIN phases p ON p.id = i.phase ORDER BY k.id").fetchall()
    finally:
        db.close()


def test_bf16_weights(tmp_path):
    """bf16 weights: parameters, gradients and AdamW's state in 2 bytes an element, and autocast
    has no weight to cast (only the fp32 input is cast)."""
    fp32, _ = _capture(tmp_path, "fp32")
    bf16, _ = _capture(tmp_path, "bf16", param_dtype=torch.bfloat16)
    sizes = lambda path: {lab: b for _, lab, _, b, _, _ in _allocs(path)}  # noqa: E731
    assert sizes(fp32)["weight"] == N * K * 4 and sizes(bf16)["weight"] == N * K * 2
    assert sizes(bf16)["weight.grad"] == sizes(bf16)["weight.exp_avg"] == sizes(bf16)["weight.exp_avg_sq"] == N * K * 2
    casts = lambda path: [b for _, lab, _, b, _, _ in _allocs(path) if lab == "Linear:aten::_to_copy"]  # noqa: E731
    assert sorted(casts(fp32)) == sorted([M * K * 2, N * K * 2, N * 2])  # input, weight, bias to bf16
    assert casts(bf16) == [M * K * 2]
    assert store.read_meta(bf16)["capture.param_dtype"] == "bfloat16"


def test_forward_only(tmp_path):
    path, r = _capture(tmp_path, "fwd", forward_only=True, steps=2, autocast_dtype=None)
    ks = _kernels(path)
    assert {phase for _, _, phase, _, _, _, _ in ks} == {"forward"}
    assert [name for _, name, _, s, _, _, _ in ks if s == 0] == ["aten::addmm", "aten::sum"]
    cats = {c for _, _, c, _, _, _ in _allocs(path)}
    assert cats == {"param", "other", "workspace"}  # nothing saved for a backward, no grads, no state
    # Peak: parameters, the batch, the output, the loss and the main thread's cuBLAS workspace
    # (32 MiB on an H100) and cuBLASLt workspace (1 MiB: the addmm with a bias), by hand.
    assert r.peak_bytes == (N * K + N) * 4 + M * K * 4 + M * N * 4 + 4 + (32 << 20) + (1 << 20)
    assert store.read_meta(path)["capture.step"] == "forward"


def test_micro_batches_accumulate_gradients(tmp_path):
    path, r = _capture(tmp_path, "mb", micro_batches=3, autocast_dtype=None)
    ks = _kernels(path)
    names = [(name, phase) for _, name, phase, _, _, _, _ in ks]
    assert names.count(("aten::addmm", "forward")) == 3 and names.count(("aten::div", "forward")) == 3
    assert names.count(("aten::mm", "backward")) == 3  # the weight's gradient, once per micro-batch
    # The gradients are made by the first backward and accumulated in place by the next two.
    assert names.count(("aten::add_", "backward")) == 2 * 2
    grads = [a for a in _allocs(path) if a[2] == "grad"]
    assert sorted(lab for _, lab, _, _, _, _ in grads) == ["bias.grad", "weight.grad"]
    # One optimizer step for the three.
    assert names.count(("aten::_foreach_addcdiv_", "optimizer")) == 1
    assert r.flops_per_step[0]["forward"] == 3 * 2 * M * N * K


@pytest.mark.parametrize("mode", ["none", "zeros", "never"])
def test_where_gradients_are_cleared(tmp_path, mode):
    path, _ = _capture(tmp_path, mode, zero_grad=mode, steps=2, autocast_dtype=None)
    ks = _kernels(path)
    step_end = {s: max(te for _, _, _, st, _, te, _ in ks if st == s) for s in (0, 1)}
    grads = [(t_alloc, t_free) for _, lab, _, _, t_alloc, t_free in _allocs(path) if lab == "weight.grad"]
    zeroing = [name for _, name, phase, _, _, _, _ in ks if name == "aten::_foreach_zero_"]
    accumulate = [name for _, name, phase, s, _, _, _ in ks if name == "aten::add_" and phase == "backward"]
    if mode == "none":  # set_to_none: freed at each step's end, made again by the next backward
        assert len(grads) == 2 and grads[0][1] == step_end[0] and not zeroing and not accumulate
    # kept gradients are alive after the last step: no free in the trace (docs/torch.md)
    elif mode == "zeros":  # kept (memory held through the next forward) and zeroed after each step
        assert len(grads) == 1 and grads[0][1] is None and len(zeroing) == 2 and len(accumulate) == 2
    else:  # never cleared: the next backward accumulates into them
        assert len(grads) == 1 and grads[0][1] is None and not zeroing and len(accumulate) == 2


def test_step_function_keeps_state_like_loop_variables(tmp_path):
    """A training loop's variables live until reassigned: the last step's output stays alive
    through the next forward, freed when the new one replaces it. No optimizer: gradients build up
    (a benchmark loop's warm-up, as in many profiling scripts)."""
    def step(model, batch, run):
        with run.autocast():
            run.state["out"] = model(*batch)
            run.state["loss"] = run.state["out"].float().sum()
        run.state["loss"].backward()  # plain backward: the phase comes from the autograd engine

    path, _ = _capture(tmp_path, "custom", step=step, steps=2, autocast_dtype=None)
    outs = [(t_alloc, t_free) for _, lab, _, b, t_alloc, t_free in _allocs(path) if lab == "Linear:aten::addmm"]
    ks = _kernels(path)
    made = [te for _, name, _, _, _, te, _ in ks if name == "aten::addmm"]
    assert outs[0][1] == made[1]  # step 0's output freed once step 1's is made
    phases = [(name, phase) for _, name, phase, _, _, _, _ in ks]
    assert phases.count(("aten::mm", "backward")) == 2 and not any(p == "optimizer" for _, p in phases)
    assert store.read_meta(path)["capture.step"] == "custom"
    cats = {lab: c for _, lab, c, _, _, _ in _allocs(path)}
    assert cats["Linear:aten::addmm"] == "activation" and cats["weight.grad"] == "grad"


def test_flops_stored_per_kernel_and_printed(tmp_path, capsys):
    """kernel_info.flops by hand: the forward addmm and the backward's weight-gradient mm each
    2 M N K; the input needs no gradient; sums and AdamW count none. mhc-torch prints the step's
    FLOPs by phase and their time at the GPU's bf16 peak."""
    model = tmp_path / "lin.py"
    model.write_text(textwrap.dedent(f"""
        import torch
        def build_model(): return torch.nn.Linear({K}, {N})
        def make_batch(): return (torch.randn({M}, {K}),)
        def loss_fn(m, b): return m(*b).sum()
    """))
    from mhc_torch.cli import main

    out = str(tmp_path / "lin.db")
    assert main(["capture", str(model), "-o", out, "--autocast", "none"]) == 0
    flops = {(name, phase): f for _, name, phase, _, _, _, f in _kernels(out) if f}
    assert flops == {("aten::addmm", "forward"): 2 * M * N * K, ("aten::mm", "backward"): 2 * M * N * K}
    line = capsys.readouterr().out.strip().splitlines()[-1]
    total = 4 * M * N * K  # 131,072
    at_peak_ns = total / mhc_torch.gpu("h100-sxm").bf16_flops * 1e9
    assert line.startswith("FLOPs per step 131 kFLOP (forward 65.5 kFLOP, backward 65.5 kFLOP); "
                           f"{mhc_torch.formatting.format_ns(at_peak_ns)} at h100-sxm's bf16 peak"), line


def test_cli_recipe_options_and_a_files_step_function(tmp_path):
    model = tmp_path / "stepper.py"
    model.write_text(textwrap.dedent(f"""
        import torch
        def build_model(): return torch.nn.Linear({K}, {N})
        def make_batch(): return (torch.randn({M}, {K}),)
        def step(model, batch, run):
            with run.autocast():
                loss = model(*batch).float().sum()
            run.backward(loss)
            run.optimizer_step()
            run.zero_grad(set_to_none=False)
    """))
    from mhc_torch.cli import main

    out = str(tmp_path / "s.db")
    assert main(["capture", str(model), "-o", out, "--weights", "bf16", "--steps", "2"]) == 0
    meta = store.read_meta(out)
    assert (meta["capture.step"], meta["capture.param_dtype"], meta["capture.autocast_policy"]) == (
        "custom", "bfloat16", "cuda")
    assert {lab: b for _, lab, _, b, _, _ in _allocs(out)}["weight.grad"] == N * K * 2
    assert main(["capture", "tiny-llama", "--seq", "8", "--layers", "1", "-o", str(tmp_path / "f.db"),
                 "--forward-only", "--micro-batches", "2"]) == 2  # a forward-only step has no micro-batches


class _Attention(torch.nn.Module):
    """One self-attention: q, k and v projections, then scaled_dot_product_attention."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(K, 3 * K)

    def forward(self, x):
        q, k, v = self.qkv(x).view(ATT_B, ATT_S, 3, ATT_H, K // ATT_H).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


ATT_B, ATT_S, ATT_H = 2, 32, 4


@pytest.mark.parametrize("registry", ["torch's", "without CPU attention (torch 2.11)"])
def test_attention_flops_whatever_torch_counts(tmp_path, monkeypatch, registry):
    """Fake tensors on the CPU run attention as the CPU's flash kernel; its FLOPs are the GPU
    kernel's whether or not torch's flop counter knows the CPU op (torch 2.11's does not)."""
    from mhc_torch import flops
    from torch.utils.flop_counter import flop_registry

    if registry != "torch's":
        drop = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu,
                torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward}
        monkeypatch.setattr(flops, "_flop_registry", {k: v for k, v in flop_registry.items() if k not in drop})
    path, _ = _capture(tmp_path, "att", build=_Attention, batch=lambda: (torch.randn(ATT_B, ATT_S, K),),
                       autocast_dtype=None, steps=1)
    att = {name: flops for _, name, _, _, _, _, flops in _kernels(path) if "attention" in name}
    # By hand: Q K^T and P V, each 2 * b * h * s * s * d (d = K / h). The backward as torch counts
    # the GPU's flash backward: dV, dP, dQ and dK (torch 2.11: twice the forward), plus the
    # recomputed scores since (torch 2.15: 2.5 times).
    from torch.utils.flop_counter import sdpa_backward_flop_count

    d = K // ATT_H
    fwd = 2 * (2 * ATT_B * ATT_H * ATT_S * ATT_S * d)
    shape = (ATT_B, ATT_H, ATT_S, d)
    assert sdpa_backward_flop_count(shape, shape, shape, shape) in (2 * fwd, 5 * fwd // 2)
    assert att == {"aten::_scaled_dot_product_flash_attention_for_cpu": fwd,
                   "aten::_scaled_dot_product_flash_attention_for_cpu_backward":
                       sdpa_backward_flop_count(shape, shape, shape, shape)}
