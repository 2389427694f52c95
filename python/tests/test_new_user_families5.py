"""Model families a new user brought on 2026-12-06, fifth round (bench/advise/new_user: a WGAN-GP
with its gradient penalty (a double backward), R(2+1)D video convolutions, DPO with a frozen
reference copy, DINO multi-crop self-distillation with an EMA teacher, Muon beside AdamW, a step
that already offloads with save_on_cpu): each test fails without the fix it guards
(docs/results.md, "More model families as a new user")."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import mhc_torch  # noqa: E402


class Critic(nn.Module):
    def __init__(self, d=32, reentrant=None):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.LeakyReLU(0.2)) for _ in range(3))
        self.out = nn.Linear(d, 1)
        self.reentrant = reentrant   # None: no checkpoint; else the middle block checkpointed so

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = checkpoint(b, x, use_reentrant=self.reentrant) if i == 1 and self.reentrant is not None else b(x)
        return self.out(x).view(-1)


def gp_step(model, real, run):
    """A WGAN-GP critic step: the critic's gradient at interpolates (a leaf made with
    requires_grad_), taken with create_graph=True, in the loss; fp32 (no autocast)."""
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.0, 0.9))
    fake = torch.randn_like(real)
    alpha = torch.rand(real.shape[0], 1, device=real.device)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    grad, = torch.autograd.grad(model(mixed).sum(), mixed, create_graph=True)
    loss = model(fake).mean() - model(real).mean() + 10 * ((grad.norm(2, dim=1) - 1) ** 2).mean()
    loss.backward()
    run.state["opt"].step()
    run.state["opt"].zero_grad(set_to_none=True)


def phases(path):
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT p.name, count(*) FROM kernel_info k JOIN phases p ON p.id = k.phase "
                               "GROUP BY p.name").fetchall())


def meta(path, key):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]


@pytest.mark.parametrize("reentrant", [None, False])
def test_a_gradient_penalty_is_a_backward_not_a_recompute(tmp_path, reentrant):
    """torch.autograd.grad(critic(x).sum(), x, create_graph=True) on a leaf x stopped the capture
    (PyTorch's ModTracker asked the engine about the leaf's node: "A leaf node was passed to
    _will_engine_execute_node but we are currently running autograd.grad()"), and once it ran, its
    backward, which records a graph of its own, was taken for a checkpoint's recompute (mhc advise
    then refused the trace: an access outside an allocation's lifetime). A checkpoint's recompute
    inside the same step is still one (a reentrant checkpoint refuses autograd.grad in PyTorch: below,
    with backward())."""
    path = str(tmp_path / "gp.db")
    mhc_torch.capture(lambda: Critic(reentrant=reentrant), lambda: torch.randn(8, 32), steps=1, path=path,
                      step=gp_step)
    p = phases(path)
    assert p["backward"] > 0 and p["forward"] > 0
    if reentrant is None:
        assert "recompute" not in p, p
    else:
        assert p["recompute"] > 0, p   # the middle block's Linear and LeakyReLU, once a backward that reaches them


def test_a_reentrant_checkpoints_recompute_is_one(tmp_path):
    path = str(tmp_path / "re.db")
    mhc_torch.capture(lambda: Critic(reentrant=True), lambda: torch.randn(8, 32), steps=1, path=path,
                      loss_fn=lambda m, x: m(x.requires_grad_(True)).float().mean())
    assert phases(path)["recompute"] > 0   # the middle block's Linear and LeakyReLU, rerun


def test_autocast_meta_is_what_the_step_ran(tmp_path):
    """A step of the user's own that never autocasts (the WGAN-GP, fp32) was recorded with the
    recipe's default bfloat16 (capture.autocast), so mhc advise withheld selective checkpointing of
    its critic (called several times a pass) for an autocast cache the step never had; a step whose
    own torch.autocast("cuda") is fp16 was recorded as bfloat16 too."""
    path = str(tmp_path / "fp32.db")
    mhc_torch.capture(lambda: Critic(), lambda: torch.randn(8, 32), steps=1, path=path, step=gp_step)
    assert meta(path, "capture.autocast") == "none" and meta(path, "capture.autocast_policy") == "none"

    def fp16_step(model, x, run):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).float().mean()
        loss.backward()

    path = str(tmp_path / "fp16.db")
    mhc_torch.capture(lambda: Critic(), lambda: torch.randn(8, 32), steps=1, path=path, step=fp16_step)
    assert meta(path, "capture.autocast") == "float16"
    path = str(tmp_path / "default.db")   # the capture's own step: its recipe's autocast
    mhc_torch.capture(lambda: Critic(), lambda: torch.randn(8, 32), steps=1, path=path,
                      loss_fn=lambda m, x: m(x).float().mean())
    assert meta(path, "capture.autocast") == "bfloat16"


def test_a_block_a_later_backward_reads_again_is_neither_checkpointed_nor_offloaded(tmp_path, mhc_exe):
    """The critic loss's backward goes through the gradient penalty's graph again (create_graph=True),
    reading what the critic's first call saved: mhc advise searched checkpointing and offloading of
    the critic's blocks and stopped on its own prediction (`accesses row ...: alive only over ...
    [access-outside-lifetime]`), and --setting predicted them (PyTorch recomputes a checkpoint once
    per backward; mhc_torch's offload refuses the second unpack). Now refused in one line and not
    searched; the search runs."""
    import subprocess

    path = str(tmp_path / "gp.db")
    mhc_torch.capture(lambda: Critic(), lambda: torch.randn(64, 32), steps=1, path=path, step=gp_step)
    for setting in ('{"checkpoint": {"modules": ["blocks.1"]}}', '{"offload": {"modules": ["Critic.blocks.0"]}}'):
        r = subprocess.run([mhc_exe, "advise", path, "--setting", setting], capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "is read again by a later backward" in r.stderr and "create_graph=True" in r.stderr, r.stderr
    r = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "blocks" not in "".join(line for line in r.stdout.splitlines() if line[:1].isdigit()), r.stdout


def test_a_frozen_copy_of_the_model_is_not_the_models_layers(tmp_path, mhc_exe):
    """DPO's reference model and DINO's EMA teacher are copy.deepcopy(model), called beside the model
    under no_grad. PyTorch's ModTracker names the copy's modules as the model's (the same class at the
    root), so their kernels were recorded in the model's own layers: every layer "called twice a
    pass" (capture.module_calls), and mhc advise then withheld selective checkpointing under
    autocast and counted the copy's forward in the layers' windows. The copy's modules are now none
    of the model's (its kernels are outside every module); the layers are called once a pass."""
    import copy
    import subprocess

    def loss_fn(model, x):
        ref = getattr(loss_fn, "ref", None)
        if ref is None:
            ref = loss_fn.ref = copy.deepcopy(model).eval().requires_grad_(False)
        with torch.no_grad():
            target = ref(x)
        return (model(x) - target).pow(2).mean()

    def forward_kernels(path):
        with sqlite3.connect(path) as db:
            return dict(db.execute(
                "SELECT s.text, count(*) FROM kernel_info k JOIN modules m ON m.id = k.module JOIN strings s "
                "ON s.id = m.name WHERE k.phase = 0 GROUP BY s.text").fetchall())

    path, alone = str(tmp_path / "ref.db"), str(tmp_path / "alone.db")
    r = mhc_torch.capture(lambda: Critic(), lambda: torch.randn(8, 32), steps=1, path=path, loss_fn=loss_fn)
    assert "capture.module_calls" not in r.meta, r.meta["capture.module_calls"]
    mhc_torch.capture(lambda: Critic(), lambda: torch.randn(8, 32), steps=1, path=alone,
                      loss_fn=lambda m, x: m(x).pow(2).mean())
    assert forward_kernels(path) == forward_kernels(alone)   # the model's own calls only
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_steps_own_save_on_cpu_is_captured_as_an_offload(tmp_path, mhc_exe):
    """A step that offloads its saves itself with torch.autograd.graph.save_on_cpu(pin_memory=True):
    on the capture's fake CPU tensors PyTorch's hooks made their "host" copies on the device (the
    peak rose above the step's without them; host peak 0) and hid every save (mhc advise: "no saved
    tensors recorded"). Now the capture's synchronous offload of the whole forward: host copies,
    a lower device peak, the saves recorded; mhc advise leaves the modules' saves alone."""
    import subprocess

    def plain(model, x):
        return model(x).pow(2).mean()

    def offloaded(model, x):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            return model(x).pow(2).mean()

    big = lambda: Critic(d=256)  # noqa: E731
    path, alone = str(tmp_path / "cpu.db"), str(tmp_path / "plain.db")
    r = mhc_torch.capture(big, lambda: torch.randn(4096, 256), steps=1, path=path, loss_fn=offloaded)
    p = mhc_torch.capture(big, lambda: torch.randn(4096, 256), steps=1, path=alone, loss_fn=plain)
    assert r.meta["capture.save_on_cpu"] == "true" and "capture.save_on_cpu" not in p.meta
    assert int(r.meta["capture.host_peak_bytes"]) > 4096 * 256 * 2 * 3   # the blocks' saves, at least
    assert r.peak_bytes < p.peak_bytes
    out = subprocess.run([mhc_exe, "advise", path, "--setting", '{"checkpoint": {"modules": ["blocks.0"]}}'],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "save_on_cpu" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_deep_copy_of_a_checkpointed_model_runs_its_own_layers(tmp_path):
    """mhc_torch.apply sets each checkpointed module's forward on the instance; a copy.deepcopy made
    afterwards (DPO's reference model, built from the policy after the setting was applied) kept a
    forward bound to the original module, so the copy ran the original's layers (--verify of DPO:
    transformers' attention stopped on a mask of another shape). The copy runs its own."""
    import copy

    model = Critic()
    opt = torch.optim.AdamW(model.parameters())
    mhc_torch.apply(model, opt, {"checkpoint": [{"modules": ["Critic.blocks.0"]},
                                                {"modules": ["Critic.blocks.1"], "policy": "save_matmuls"}]})
    ref = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p in ref.parameters():
            p.zero_()
    x = torch.randn(4, 32)
    assert torch.equal(ref(x), torch.zeros(4)) and not torch.equal(model(x), torch.zeros(4))
    assert ref.blocks[0].forward.module is ref.blocks[0]
    model(x).sum().backward()   # the original still checkpoints
    assert model.blocks[0][0].weight.grad is not None


def test_a_body_called_twice_a_pass_is_said_whatever_ran_first(tmp_path):
    """DINO runs its backbone once per crop size (twice a pass) and reads its weight_norm'd head's
    weight outside the forward, which runs the parametrization as a module before the model and as
    often: it was taken for the model's own calls ("once a pass"), so capture.module_calls was left
    out and mhc advise offered selective checkpointing of the blocks under autocast, which PyTorch
    stops in the backward ("aten._to_copy.default invocation index 2 encountered during backward
    but not found in storage")."""
    from torch.nn.utils.parametrizations import weight_norm

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Critic()
            self.head = weight_norm(nn.Linear(8, 4))

        def forward(self, a, b):
            return self.head(torch.cat([self.body(a), self.body(b)]).view(-1, 2).repeat(1, 4)).sum()

    def step(model, batch, run):
        width = model.head.weight.shape[0]   # the parametrization runs here, outside the forward
        with run.autocast():
            loss = model(*batch) * width
        loss.backward()

    r = mhc_torch.capture(Net, lambda: (torch.randn(8, 32), torch.randn(4, 32)), steps=1,
                          path=str(tmp_path / "twice.db"), step=step)
    import json
    calls = json.loads(r.meta["capture.module_calls"])
    assert len(calls["Net.body.blocks.0"]) == 2 and "Net" not in calls


class ConvBN(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
                                    for _ in range(3))
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = x + b(x)
        return self.head(x.mean((2, 3)))


@pytest.mark.parametrize("policy", ["full", "save_matmuls"])
def test_batchnorm_statistics_copies_are_predicted(tmp_path, mhc_exe, policy):
    """The running-statistics hooks mhc_torch.apply puts on a checkpointed BatchNorm (and the printed
    code) clone its buffers before each call, dropped at once in the forward and updated in the
    recompute: allocations the prediction lacked (DeepLabV3-R50, 16 blocks checkpointed: 312 of
    424,768 B; at 3 GiB the reserved bytes 0.07% to 1.32% off). The predicted step now makes the same
    allocations as the captured one, byte for byte, and lets them go together."""
    import subprocess

    setting = {"checkpoint": {"modules": ["ConvBN.blocks.0", "ConvBN.blocks.2"], "policy": policy}}
    batch = lambda: (torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,)))  # noqa: E731
    loss = lambda m, b: F.cross_entropy(m(b[0]), b[1])  # noqa: E731
    base, captured, predicted = (str(tmp_path / f"{n}.db") for n in ("base", "captured", "predicted"))
    mhc_torch.capture(ConvBN, batch, steps=1, path=base, loss_fn=loss)
    mhc_torch.capture(ConvBN, batch, steps=1, path=captured, loss_fn=loss, setting=setting)
    import json
    r = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--trace-out", predicted],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def allocations(path):
        with sqlite3.connect(path) as db:
            return db.execute("SELECT count(*), sum(bytes) FROM allocations WHERE device = 0").fetchone(), \
                db.execute("SELECT bytes FROM allocations WHERE device = 0 AND bytes <= 64 ORDER BY bytes").fetchall()

    (n_cap, b_cap), small_cap = allocations(captured)
    (n_pred, b_pred), small_pred = allocations(predicted)
    assert (n_pred, b_pred) == (n_cap, b_cap)
    assert small_pred == small_cap   # the 64 B statistics and 8 B batch counts: two calls' worth each


def test_checkpointing_some_hf_layers_turns_the_cache_off(tmp_path, mhc_exe):
    """transformers' own checkpointing turns the key/value cache off in the layers it checkpoints;
    mhc_torch.apply and the printed checkpoint_wrapper did not, so with the config's use_cache (a
    forward without labels, as DPO's) a recomputed layer wrote its keys and values into the cache
    again: the capture, whose attention mask is materialised as on the GPU, stopped in the backward
    ("Attempting to broadcast a dimension of length 512 ... [8, 16, 512, 1024]"), and where no mask
    is made the cache kept every checkpointed layer's keys and values alive (the results equal by
    causality, the memory not the predicted). Both turn it off now."""
    import subprocess

    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4)
    import copy

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    plain = copy.deepcopy(model)
    mhc_torch.apply(model, torch.optim.AdamW(model.parameters()),
                    {"checkpoint": {"modules": ["LlamaForCausalLM.model.layers.0"]}})
    ids = torch.randint(0, 128, (2, 16))
    for m in (model, plain):
        m(input_ids=ids).logits.float().logsumexp(-1).mean().backward()
    assert model.config.use_cache is False
    # the same step as without the setting (the cache being off changes no result here)
    for (name, a), b in zip(model.named_parameters(), plain.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name

    path = str(tmp_path / "llama.db")
    mhc_torch.capture(lambda: transformers.LlamaForCausalLM(cfg), lambda: torch.randint(0, 128, (2, 16)), steps=1,
                      path=path,
                      loss_fn=lambda m, x: m(input_ids=x).logits.float().logsumexp(-1).mean())
    r = subprocess.run([mhc_exe, "advise", path, "--setting", '{"checkpoint": {"modules": ["model.layers.0"]}}'],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "model.config.use_cache = False" in r.stdout


@pytest.mark.parametrize("name, package", [("muon_decoder", "torch"), ("save_on_cpu_decoder", "torch")])
def test_new_user_model_files_capture_small(tmp_path, name, package, new_user_file, capture_small):
    """Two of the model files of bench/advise/new_user added here capture at their small size; the
    others (wgan_gp, video_r2plus1d, dpo_llama, dino_multicrop: 12 to 27 s each at their small size
    on this machine) are checked through the small models above that do what they do."""
    pytest.importorskip(package)
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0
