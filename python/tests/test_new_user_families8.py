"""Training setups a new user brought on 2026-12-06, eighth round (bench/advise/new_user: SAM
around SGD, T5 with Adafactor, second-order MAML, PCGrad multi-task, a VQ-VAE with an EMA
codebook, quantization-aware training, an accelerate loop): each test fails without the fix it
guards (docs/results.md, "Seven more training setups as a new user, eighth round", 2026-12-06)."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.func import functional_call  # noqa: E402

import mhc_torch  # noqa: E402


def meta(path, key, default=None):
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return default if row is None else row[0]


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def test_autocast_on_the_capture_device_is_the_gpus(tmp_path):
    """accelerate's Accelerator(mixed_precision="bf16") picks its device by
    torch.cuda.is_available(): in a capture that is the CPU, and it wraps the forward in
    torch.autocast("cpu", dtype=bfloat16) where a GPU gets torch.autocast("cuda"). The kernels were
    bf16 but the capture did not know the region: meta capture.autocast said "none" (and model code
    asking torch.is_autocast_enabled("cuda") got False). It is the capture's CUDA autocast now."""
    seen = {}

    def step(model, batch, run):
        if "opt" not in run.state:
            run.state["opt"] = torch.optim.AdamW(model.parameters())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            seen["cuda"] = torch.is_autocast_enabled("cuda")
            out = model(batch)
        seen["dtype"] = out.dtype
        out.float().pow(2).mean().backward()
        run.state["opt"].step()
        run.state["opt"].zero_grad()

    path = str(tmp_path / "cpu_autocast.db")
    mhc_torch.capture(mlp, lambda: torch.randn(8, 16), steps=1, path=path, step=step, autocast_dtype=None)
    assert meta(path, "capture.autocast") == "bfloat16"
    assert seen == {"cuda": True, "dtype": torch.bfloat16}


def test_checkpoint_recompute_autocasts_as_the_gpus(tmp_path):
    """checkpoint restores the forward's autocast in the recompute with torch.autocast("cpu"),
    the capture's device: model code there asking torch.is_autocast_enabled("cuda") got False
    where its forward got True (and on a GPU both are True)."""
    seen = []

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16)

        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cuda"))
            return self.lin(x).relu()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block, self.head = Block(), nn.Linear(16, 1)

        def forward(self, x):
            return self.head(self.block(x)).float().mean()

    mhc_torch.capture(Net, lambda: torch.randn(8, 16), steps=1, path=str(tmp_path / "ck.db"),
                      loss_fn=lambda m, b: m(b), setting={"checkpoint": {"modules": ["Net.block"], "policy": "full"}})
    assert seen == [True, True]   # the forward, then the recompute


def test_accelerate_mixed_precision_captured_as_autocast(tmp_path):
    accelerate = pytest.importorskip("accelerate")

    def step(model, batch, run):
        if "acc" not in run.state:
            acc = accelerate.Accelerator(mixed_precision="bf16")
            run.state["m"], run.state["opt"] = acc.prepare(model, torch.optim.AdamW(model.parameters()))
            run.state["acc"] = acc
        acc, m, opt = run.state["acc"], run.state["m"], run.state["opt"]
        acc.backward(m(batch.to(acc.device)).pow(2).mean())
        opt.step()
        opt.zero_grad()

    path = str(tmp_path / "acc.db")
    mhc_torch.capture(mlp, lambda: torch.randn(8, 16), steps=1, path=path, step=step, autocast_dtype=None)
    assert meta(path, "capture.autocast") == "bfloat16"


def maml_step(model, batch, run):
    """Second-order MAML: per task, inner steps by torch.autograd.grad(create_graph=True) on fast
    weights, then the outer loss's backward; one optimizer step over the tasks."""
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt = run.state["opt"]
    xs, ys = batch
    for t in range(xs.shape[0]):
        fast = dict(model.named_parameters())
        for _ in range(3):
            loss = F.cross_entropy(functional_call(model, fast, (xs[t],)), ys[t])
            grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
            fast = {n: w - 0.01 * g for (n, w), g in zip(fast.items(), grads)}
        (F.cross_entropy(functional_call(model, fast, (xs[t],)), ys[t]) / xs.shape[0]).backward()
    opt.step()
    opt.zero_grad()


def pcgrad_step(model, batch, run):
    """PCGrad's shape: one forward, one backward per task's loss over the same graph
    (retain_graph=True but the last), the gradients combined, one optimizer step."""
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt = run.state["opt"]
    out = model(batch[0][0])
    losses = [out[:, i].pow(2).mean() for i in range(3)]
    grads = []
    for i, loss in enumerate(losses):
        opt.zero_grad()
        loss.backward(retain_graph=i < 2)
        grads.append([p.grad.clone() for p in model.parameters()])
    for p, *g in zip(model.parameters(), *grads):
        p.grad = sum(g)
    opt.step()
    opt.zero_grad()


def test_micro_batches_are_backward_calls_that_free_their_graph(tmp_path):
    """A step's micro-batches were its backward passes: MAML's 4 tasks of 3 inner steps
    (torch.autograd.grad) were 16 micro-batches, PCGrad's 3 backward calls over one forward 3
    (meta capture.micro_batches; the printed DeepSpeed configuration's
    gradient_accumulation_steps). Only backward calls that free their graph count."""
    batch = lambda: (torch.randn(4, 8, 16), torch.randint(0, 4, (4, 8)))  # noqa: E731
    path = str(tmp_path / "maml.db")
    mhc_torch.capture(mlp, batch, steps=2, path=path, step=maml_step, autocast_dtype=None)
    assert meta(path, "capture.micro_batches") == "4"
    path = str(tmp_path / "pcgrad.db")
    mhc_torch.capture(mlp, batch, steps=2, path=path, step=pcgrad_step, autocast_dtype=None)
    assert meta(path, "capture.micro_batches") == "1"


def test_gradient_surgery_gets_no_host_optimizer(tmp_path, mhc_exe):
    """PCGrad reads each task's gradients after its backward (to flatten and project them) and sets
    .grad to the projected sum itself. A host optimizer takes each gradient from the backward as
    it is accumulated and drops the device one, so the step's code would read None and the
    optimizer would step the last task's gradient only: mhc advise offered it ("nothing fits
    2.00 GiB: the closest is optimizer on host" for the ResNet-50 PCGrad model), since only the
    gradients the optimizer steps (here the projected sum, which no backward wrote) were checked
    for reads after the backward."""
    import json
    import subprocess

    batch = lambda: (torch.randn(1, 64, 16),)  # noqa: E731
    path = str(tmp_path / "pcgrad.db")
    mhc_torch.capture(mlp, batch, steps=2, path=path, step=pcgrad_step, autocast_dtype=None)
    out = subprocess.run([mhc_exe, "advise", path, "--setting", '{"optimizer": {"state": "host"}}'],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stdout + out.stderr
    assert "reads the gradients on the GPU between the backward and the optimizer step" in out.stderr
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB", "--json", "--top", "20"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert rows and not any(r["setting"].get("optimizer", {}).get("state") == "host" for r in rows)



def qat_model():
    """torchvision's quantizable MobileNetV2 prepared for QAT as its reference script does: fused
    conv + BatchNorm (+ ReLU) modules, fake quantizers with moving-average observers."""
    from torch.ao.quantization import get_default_qat_qconfig, prepare_qat
    from torchvision.models.quantization import mobilenet_v2

    model = mobilenet_v2(weights=None, quantize=False, width_mult=0.25).train()
    model.fuse_model(is_qat=True)
    model.qconfig = get_default_qat_qconfig("x86")
    return prepare_qat(model, inplace=True)


@pytest.mark.parametrize("policy", ["full", "save_matmuls"])
def test_checkpointed_qat_block_recomputes_what_its_forward_computed(policy):
    """A checkpointed block of a QAT model recomputed with the statistics its forward had left: its
    fake quantizers' moving min and max moved twice a step, the recompute fake-quantized with
    another scale, and the fused conv + BatchNorm folded its weight with the running variance the
    forward had updated (one MobileNetV2 block: 27 gradients and 19 buffers differed from the plain
    step's). Where checkpoint stops the recompute early, inside the block's last fake quantizer,
    its buffers stayed the recompute's copies. Now the step equals the plain one bit for bit."""
    pytest.importorskip("torchvision")
    import copy
    import warnings

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = qat_model()
    x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))

    def run(setting):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if setting:
            model, opt = mhc_torch.apply(model, opt, setting)
        torch.manual_seed(1)   # the classifier's dropout
        for _ in range(2):
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        return model

    plain = run(None)
    ckpt = run({"checkpoint": {"modules": ["QuantizableMobileNetV2.features.3", "QuantizableMobileNetV2.features.5"],
                               "policy": policy}})
    for (n, a), (_, b) in zip(plain.state_dict().items(), ckpt.state_dict().items()):
        assert torch.equal(a, b), n


class Quantizer(nn.Module):
    """A VQ-VAE quantiser's core: nearest code by argmin, its one-hot encoding, the codes' use."""

    def __init__(self, codes=512, d=16):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.register_buffer("embedding", torch.randn(codes, d))

    def forward(self, z):
        flat = self.proj(z)
        idx = torch.cdist(flat, self.embedding).argmin(1)
        onehot = F.one_hot(idx, self.embedding.shape[0]).type(flat.dtype)
        return (onehot @ self.embedding - flat).pow(2).mean()


def test_one_hot_as_on_the_gpu(tmp_path):
    """F.one_hot on fake tensors took aten's functional version (arange, eq, then .to(long)), whose
    bool comparison, one byte per output element, lived beside the int64 result; CUDA makes the
    int64 zeros and scatters the ones into them (Onehot.cpp), with no such temporary."""
    path = str(tmp_path / "onehot.db")
    n, codes = 4096, 512
    mhc_torch.capture(Quantizer, lambda: torch.randn(n, 16), steps=1, path=path, loss_fn=lambda m, b: m(b),
                      autocast_dtype=None)
    with sqlite3.connect(path) as db:
        names = {r[0] for r in db.execute("SELECT s.text FROM kernels k JOIN strings s ON s.id = k.name")}
        bools = db.execute("SELECT count(*) FROM allocations WHERE bytes = ?", (n * codes,)).fetchone()[0]
        longs = db.execute("SELECT count(*) FROM allocations WHERE bytes = ?", (n * codes * 8,)).fetchone()[0]
    assert "aten::scatter_" in names and "aten::eq" not in names
    assert bools == 0 and longs == 1
