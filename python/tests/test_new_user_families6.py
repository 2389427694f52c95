"""Training setups a new user brought on 2026-12-06, sixth round (bench/advise/new_user: per-sample
gradients with torch.func for DP-SGD, a diffusers DiT with EMA, a GradCache two-tower retriever,
PPO with generate() rollouts, peft's DoRA, torchvision's Mask R-CNN): each test fails without the
fix it guards (docs/results.md, "Six more training setups as a new user", 2026-12-06)."""
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402


def meta(path, key, default=None):
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return default if row is None else row[0]


class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(3)))
        self.head = nn.Linear(d, 4)

    def forward(self, x):
        return self.head(self.blocks(x))


def per_sample_step(model, batch, run, own_hooks=False):
    """DP-SGD as Opacus's functorch mode computes it: vmap(grad(loss)) over the batch through
    functional_call, each sample's gradient clipped, summed and noised into .grad; no backward()."""
    from torch.func import functional_call, grad, vmap

    if "opt" not in run.state:
        run.state["opt"] = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = batch
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    if own_hooks:   # a user's own saved-tensor hooks around the transform: PyTorch refuses them
        with torch.autograd.graph.save_on_cpu():
            grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    else:
        grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
    scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    for name, p in model.named_parameters():
        g = torch.einsum("i,i...->...", scale, grads[name])
        p.grad = (g + torch.randn_like(g)) / x.shape[0]
    run.state["opt"].step()
    run.state["opt"].zero_grad(set_to_none=True)


def test_per_sample_gradients_with_torch_func_capture(tmp_path, mhc_exe):
    """torch.func's grad refuses to run under saved-tensor hooks, and the capture records saves
    through hooks of its own around the whole step: a DP-SGD step stopped the capture ("torch.func.
    {grad, vjp, jacrev, hessian} don't yet support saved tensor hooks"), then, past that, on
    functorch's wrappers, which have no storage ("Cannot access storage of TensorWrapper"). It
    captures; the per-sample gradients (batch x every parameter) are device memory at once; the
    modules that ran inside the transform are named (meta capture.torch_func_modules) and mhc
    advise neither offers nor predicts checkpointing or offloading them, which PyTorch stops there
    with the same message; the global settings are searched."""
    batch = lambda: (torch.randn(256, 32), torch.randint(0, 4, (256,)))  # noqa: E731
    path = str(tmp_path / "dp.db")
    r = mhc_torch.capture(Net, batch, steps=1, path=path, step=per_sample_step)
    assert json.loads(meta(path, "capture.torch_func_modules")) == ["Net"]
    params = sum(p.numel() for p in Net().parameters())
    assert r.peak_bytes >= 256 * params * 4   # every sample's gradient of every parameter
    assert r.kernels > 0
    for setting in ('{"checkpoint": {"modules": ["blocks.1"]}}', '{"offload": {"modules": ["Net.blocks.0"]}}'):
        out = subprocess.run([mhc_exe, "advise", path, "--setting", setting], capture_output=True, text=True)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert "torch.func" in out.stderr and "saved tensor hooks" in out.stderr, out.stderr
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "optimizer on host" not in out.stdout, out.stdout   # the step sets .grad itself: no backward sends it
    out = subprocess.run([mhc_exe, "advise", path, "--setting", '{"optimizer": {"state": "host"}}'],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "torch.func" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    # the optimizer the step builds is adopted at the model's first forward, here inside grad: what
    # a setting makes for it (host copies) is the optimizer's, not functorch's wrappers
    mhc_torch.capture(Net, batch, steps=1, path=str(tmp_path / "host.db"), step=per_sample_step,
                      setting={"optimizer": {"state": "host"}})

    # PyTorch's refusal of the user's own hooks around the transform is kept
    with pytest.raises(Exception, match="saved tensor hooks"):
        mhc_torch.capture(Net, batch, steps=1, path=str(tmp_path / "own.db"),
                          step=lambda m, b, run: per_sample_step(m, b, run, own_hooks=True))


def test_generate_rollouts_in_a_step_capture(tmp_path):
    """A PPO step samples rollouts from the policy with Hugging Face generate() under no_grad before
    its update. On fake tensors generate() stopped at its first look at a value (its right-padding
    check, `op aten._local_scalar_dense.default cannot run on fake tensors (at
    transformers/generation/utils.py ... in generate`), then at (mask == 1).all(), at its check for
    dummy ids, and after each token at whether every sequence had finished. It captures now: the
    rollout runs to its length limit (prompt + max_new_tokens: the sequences have that length) and
    each call's limit is meta capture.generate."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    lengths = []

    def step(model, prompts, run):
        if "opt" not in run.state:
            run.state["opt"] = torch.optim.AdamW(model.parameters(), lr=1e-5)
        with torch.no_grad():
            seqs = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, top_k=10,
                                  pad_token_id=0, max_new_tokens=6)
        lengths.append(seqs.shape[1])
        loss = model(input_ids=seqs, labels=seqs).loss
        loss.backward()
        run.state["opt"].step()
        run.state["opt"].zero_grad(set_to_none=True)

    path = str(tmp_path / "ppo.db")
    prompts = lambda: torch.randint(1, 128, (4, 10))  # noqa: E731
    r = mhc_torch.capture(lambda: transformers.GPT2LMHeadModel(cfg), prompts, steps=1, path=path, step=step)
    assert lengths == [16] and json.loads(meta(path, "capture.generate")) == [16]
    assert r.kernels > 0


@pytest.mark.parametrize("name, package", [("dpsgd_func", "torch"), ("ppo_rlhf", "transformers")])
def test_new_user_model_files_capture_small(tmp_path, name, package, new_user_file, capture_small):
    """Two of the model files added here, at their small size, through the two fixes above (the
    others are checked through the small models above that do what they do)."""
    pytest.importorskip(package)
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0


def test_fused_optimizer_of_a_step_that_steps_per_mini_batch(tmp_path, mhc_exe):
    """PPO's update steps the optimizer once per mini-batch (backward, step, zero_grad, next
    mini-batch) inside one captured step. The fused-optimizer setting replaced every foreach kernel
    of the step with one fused kernel at the last optimizer step over every step's gradients: the
    first mini-batch's update was lost and its gradients, freed by zero_grad, were read again (mhc
    advise stopped on its own prediction, access-outside-lifetime, at every capacity). One fused
    kernel per optimizer.step() now; the prediction is the capture with fused=True."""
    def step(model, x, run):
        if "opt" not in run.state:
            run.state["opt"] = torch.optim.AdamW(model.parameters(), lr=1e-4)
        opt = run.state["opt"]
        for part in x.split(x.shape[0] // 2):
            model(part).float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    base, fused, predicted = (str(tmp_path / f"{n}.db") for n in ("base", "fused", "pred"))
    batch = lambda: torch.randn(512, 32)  # noqa: E731
    mhc_torch.capture(Net, batch, steps=1, path=base, step=step)
    setting = {"optimizer": {"impl": "fused"}}
    mhc_torch.capture(Net, batch, steps=1, path=fused, step=step, setting=setting)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--trace-out", predicted],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr

    def fused_kernels(path):
        with sqlite3.connect(path) as db:
            return db.execute("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name "
                              "WHERE s.text LIKE '%fused_adam%'").fetchone()[0]

    assert fused_kernels(fused) == fused_kernels(predicted) == 2

    def device_allocations(path):
        with sqlite3.connect(path) as db:
            return db.execute("SELECT count(*), sum(bytes) FROM allocations WHERE device = 0").fetchone()

    assert device_allocations(predicted) == device_allocations(fused)


def test_checkpointing_a_hf_model_inside_the_users_turns_its_cache_off():
    """PPO's policy is the user's module around a Hugging Face causal LM (`lm`) with a value head;
    mhc_torch.apply turned the key/value cache off only when the root was the Hugging Face model, so
    --verify of checkpointing `lm`'s layers stopped in the update's forward ("Attempting to broadcast
    a dimension of length 160 ... [8, 12, 160, 320]": the recomputed layers wrote their keys again).
    The cache of the Hugging Face model that holds the checkpointed layers is turned off."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = transformers.GPT2LMHeadModel(cfg)
            self.v_head = nn.Linear(32, 1)

        def forward(self, ids):
            out = self.lm(input_ids=ids, output_hidden_states=True)
            return out.logits, self.v_head(out.hidden_states[-1])

    model = Policy()
    assert model.lm.config.use_cache
    mhc_torch.apply(model, torch.optim.AdamW(model.parameters()),
                    {"checkpoint": {"modules": ["Policy.lm.transformer.h.0"]}})
    assert model.lm.config.use_cache is False
    logits, values = model(torch.randint(0, 128, (2, 16)))
    (logits.float().logsumexp(-1).mean() + values.mean()).backward()
    assert model.lm.transformer.h[0].attn.c_attn.weight.grad is not None
