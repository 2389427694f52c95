"""Model families a new user brought on 2026-12-05, fourth round (bench/advise/new_user: timm
EfficientNet-B0 in channels_last with RMSprop, DeBERTa-v2 classification with a linear LR schedule
and clipping, diffusers' AutoencoderKL, torchvision DeepLabV3 with its auxiliary head and a poly
LR, transformers' ViT-MAE pre-training, a LLaVA vision-language model): each test fails without
the fix it guards (docs/results.md, "More model families as a new user")."""
import subprocess
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402

# LLaVA's image tokens against its image features: transformers' torch_compilable_check, which
# ends in torch._check_tensor_all_with (164 of transformers' models call it).
VALUE_CHECK = textwrap.dedent("""
    import torch
    from torch import nn

    IMAGE = 7

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.vision, self.head = nn.Embedding(16, 32), nn.Linear(12, 32), nn.Linear(32, 16)

        def forward(self, ids, pixels):
            x = self.emb(ids)
            feats = self.vision(pixels)
            mask = ids == IMAGE
            torch._check_tensor_all_with(ValueError, mask.sum() * x.shape[-1] == feats.numel(),
                                         lambda: "image tokens and features differ")
            x = x.masked_scatter(mask.unsqueeze(-1), feats)
            return self.head(x).logsumexp(-1).mean()

    def build_model():
        return Net()

    def make_batch():
        ids = torch.randint(0, 7, (2, 16))
        ids[:, 1:5] = IMAGE
        return ids, torch.randn(2, 4, 12)
""")


def test_a_value_check_passes_in_the_capture(tmp_path):
    """transformers' LLaVA checks that its image tokens match its image features with
    torch._check_tensor_all_with, which reads the answer with .item(): 'op
    aten._local_scalar_dense.default cannot run on fake tensors (at .../import_utils.py:2011 in
    torch_compilable_check)' stopped the capture. Real tensors are still checked."""
    path = tmp_path / "vl.py"
    path.write_text(VALUE_CHECK)
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", str(tmp_path / "vl.db"), "--autocast", "none"]) == 0
    k = mhc_torch.read_table(str(tmp_path / "vl.db"), "kernels")
    assert k.name.str.contains("_is_all_true").any(), sorted(set(k.name))
    with pytest.raises(ValueError, match="differ"):
        torch._check_tensor_all_with(ValueError, torch.tensor([True, False]), lambda: "differ")


def test_a_depthwise_convolutions_weight_gradient_is_counted_once(tmp_path):
    """torch's flop formula for convolution_backward leaves out `groups` in the weight's gradient:
    a depthwise convolution of C channels counted C times its FLOPs (EfficientNet-B0 in
    bench/advise/new_user/efficientnet_cl.py: backward 3.02 TFLOP against a forward of 74 GFLOP),
    and the roofline timed its backward kernels by that count."""
    n, c, s = 4, 96, 32
    r = mhc_torch.capture(lambda: nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False),
                          lambda: (torch.randn(n, c, s, s),), steps=1, path=str(tmp_path / "dw.db"),
                          loss_fn=lambda m, b: m(b[0]).sum(), autocast_dtype=None)
    forward = 2 * n * s * s * c * 9   # each output: 9 multiply-adds over its own channel
    assert r.flops_per_step[0]["forward"] == forward, r.flops_per_step
    assert r.flops_per_step[0]["backward"] == forward, r.flops_per_step   # the weight's gradient only


SCHEDULED = textwrap.dedent("""
    import torch

    def build_model():
        return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))

    def make_batch():
        return (torch.randn(32, 64),)

    def step(model, batch, run):   # run_glue.py's loop: AdamW, a linear warmup from lr 0, clipping off
        if "optimizer" not in run.state:
            decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
            rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
            run.state["optimizer"] = torch.optim.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}],
                                                       lr=2e-5, weight_decay=0.01, foreach=True)
            run.state["scheduler"] = torch.optim.lr_scheduler.LambdaLR(run.state["optimizer"], lambda s: s / 100)
        model(*batch).square().mean().backward()
        run.state["optimizer"].step()
        run.state["scheduler"].step()
        run.state["optimizer"].zero_grad()
""")


def test_an_lr_scheduler_is_named_and_its_warmup_is_not_the_learning_rate(tmp_path, mhc_exe):
    """DeBERTa fine-tuned with get_linear_schedule_with_warmup (bench/advise/new_user/deberta_cls.py):
    the capture recorded the warmup's lr 0.0 as the parameter group's learning rate
    (capture.optimizer_groups [{"lr": 0.0, ...}]), so the DeepSpeed groups mhc advise prints
    trained at lr 0; and the printed `optimizer = torch.optim.AdamW(..., fused=True)` left the
    user's scheduler stepping the old optimizer (the new one kept a constant lr), without a word."""
    path = tmp_path / "sched.py"
    path.write_text(SCHEDULED)
    db = str(tmp_path / "sched.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--autocast", "none", "--steps", "2"]) == 0
    meta = mhc_torch.read_meta(db)
    assert meta["capture.lr_schedulers"] == "LambdaLR", meta
    assert meta["capture.optimizer_groups"] == '[{"params": 2}, {"params": 2, "weight_decay": 0.0}]', meta

    def printed(setting):
        out = subprocess.run([mhc_exe, "advise", db, "--setting", setting], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    fused = printed('{"optimizer": {"impl": "fused"}}')
    assert ("# your LR scheduler (LambdaLR) steps the optimizer it was built on: build it after this line, "
            "on this optimizer") in fused, fused
    host = printed('{"optimizer": {"state": "host"}}')
    assert '| {"lr": g.get("initial_lr", g["lr"])} for g in optimizer.param_groups]' in host, host
    assert "lr_scheduler=a function" in host, host
    # the printed groups, run on the optimizer as the step left it, carry the user's learning rate
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=2e-5)
    torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / 100)
    line = next(x for x in host.splitlines() if x.startswith("groups = "))
    ns = {"optimizer": opt}
    exec(line.split("   #")[0], ns)
    assert opt.param_groups[0]["lr"] == 0.0 and ns["groups"][0]["lr"] == 2e-5


@pytest.mark.parametrize("name, package", [("efficientnet_cl", "timm"), ("deberta_cls", "transformers"),
                                           ("vae_kl", "diffusers"), ("deeplabv3", "torchvision"),
                                           ("vitmae", "transformers"), ("llava", "transformers")])
def test_new_user_model_files_capture_small(tmp_path, name, package, new_user_file, capture_small):
    """The model files of bench/advise/new_user added here capture at their small size (a package a
    file needs and the environment lacks skips it)."""
    pytest.importorskip(package)
    m = new_user_file(name)
    r = capture_small(m, tmp_path / f"{name}.db")
    assert r.kernels > 0 and r.peak_bytes > 0
    if name == "deberta_cls":   # its get_linear_schedule_with_warmup (LambdaLR) on its AdamW
        assert r.meta["capture.lr_schedulers"] == "LambdaLR" and "capture.optimizer_groups" not in r.meta


TWO_STACKS = textwrap.dedent("""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.a, self.b = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            return x + self.b(torch.relu(self.a(x)))

    class Net(nn.Module):   # an encoder's and a decoder's layers, as ViT-MAE's
        def __init__(self):
            super().__init__()
            self.enc = nn.ModuleList([Block(), Block()])
            self.dec = nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for b in [*self.enc, *self.dec]:
                x = b(x)
            return x.square().mean()

    def build_model():
        return Net()

    def make_batch():
        return (torch.randn(256, 64),)
""")


def test_answers_over_two_stacks_say_how_many_of_each(tmp_path, mhc_exe):
    """ViT-MAE at 3.5 GiB (bench/advise/new_user/vitmae.py): rows 1 and 2 both read 'checkpoint 10
    of 20 blocks + fused AdamW + expandable_segments:True' with different peaks (3.28 and 3.15
    GiB): 4 + 6 and 3 + 7 of the encoder's and decoder's layers, which only the code told apart."""
    path = tmp_path / "stacks.py"
    path.write_text(TWO_STACKS)
    db = str(tmp_path / "stacks.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--autocast", "none"]) == 0
    setting = '{"checkpoint": {"modules": ["Net.enc.0", "Net.dec.0", "Net.dec.1"], "policy": "full"}}'
    out = subprocess.run([mhc_exe, "advise", db, "--setting", setting], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "checkpoint 3 of 4 blocks (enc 1 of 2, dec 2 of 2)" in out.stdout, out.stdout
