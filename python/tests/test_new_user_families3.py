"""Model families a new user brought on 2026-12-05 (diffusers' UNet with EMA weights, ...): each
test fails without the fix it guards (docs/results.md, "More model families as a new user")."""
import subprocess
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.settings import SettingError  # noqa: E402

# diffusers' UNet blocks keep their layers in nn.ModuleLists side by side (resnets, attentions)
# and iterate them: the lists are never called.
LISTS = textwrap.dedent("""
    import torch
    from torch import nn

    class Res(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            return x + self.b(torch.relu(self.a(x)))

    class Stage(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.resnets = nn.ModuleList([Res(c), Res(c)])
            self.attentions = nn.ModuleList([Res(c), Res(c)])

        def forward(self, x):
            for r, a in zip(self.resnets, self.attentions):
                x = a(r(x))
            return x

    class Net(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.stage = Stage(c)
            self.head = nn.Linear(c, 1)

        def forward(self, x):
            return self.head(self.stage(x)).mean()

    def build_model():
        return Net()

    def make_batch():
        return (torch.randn(512, 64),)
""")


def _lists_model(tmp_path):
    path = tmp_path / "lists.py"
    path.write_text(LISTS)
    ns = {}
    exec(compile(LISTS, str(path), "exec"), ns)
    return path, ns


def test_a_module_list_is_no_block(tmp_path, mhc_exe):
    """mhc advise took the named nn.ModuleList children of a diffusers UNet block (resnets,
    attentions: one type, ModuleList) for a stack of blocks and checkpointed 'down_blocks.0.resnets',
    which the model iterates and never calls: the verify capture ran the step unchanged (DDPM UNet
    at 4 GiB: predicted 3.87 GiB, captured 4.64 GiB, 16.68% off) and the printed checkpoint_wrapper
    made the list a module the model cannot iterate."""
    path, _ = _lists_model(tmp_path)
    db = str(tmp_path / "lists.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--autocast", "none"]) == 0
    out = subprocess.run([mhc_exe, "advise", db, "--capacity", "1GiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if line.startswith("trace"))
    assert "4 blocks (Net.stage.attentions, Net.stage.resnets)" in header, header


@pytest.mark.parametrize("part", ["checkpoint", "offload"])
def test_apply_refuses_a_module_list(tmp_path, part):
    """mhc_torch.apply wrapped the forward of an nn.ModuleList, which never runs: the setting
    changed nothing and said nothing."""
    _, ns = _lists_model(tmp_path)
    model = ns["Net"]()
    opt = torch.optim.AdamW(model.parameters())
    setting = ({"checkpoint": {"modules": ["Net.stage.resnets"], "policy": "full"}} if part == "checkpoint" else
               {"offload": {"modules": ["Net.stage.resnets"], "mode": "sync"}})
    with pytest.raises(SettingError, match=r"'Net.stage.resnets' is an nn.ModuleList, which has no forward .*"
                                           r"name the modules inside it \('Net.stage.resnets.0', "
                                           r"'Net.stage.resnets.1'\)"):
        mhc_torch.apply(model, opt, setting)
    model, opt = mhc_torch.apply(model, opt, {"checkpoint": {"modules": ["Net.stage.resnets.0"], "policy": "full"}})
    model(torch.randn(4, 64)).backward()


GAN = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class GAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.netG = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
            self.netD = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def build_model():
        return GAN()

    def make_batch():
        return torch.randn(64, 32)

    def step(model, real, run):   # PyTorch's DCGAN example: D on real and detached fake, then G
        if "optD" not in run.state:
            run.state["optD"] = torch.optim.Adam(model.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
            run.state["optG"] = torch.optim.Adam(model.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
        model.netD.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(model.netD(real), ones).backward()
        fake = model.netG(torch.randn(64, 16))
        F.binary_cross_entropy_with_logits(model.netD(fake.detach()), zeros).backward()
        run.state["optD"].step()
        model.netG.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(model.netD(fake), ones).backward()
        run.state["optG"].step()
""")


def test_a_gans_two_optimizers_are_named_not_the_captures_adamw(tmp_path, mhc_exe):
    """A step with optimizers of its own (a GAN's two Adams) left meta capture.optimizer_class and
    capture.optimizer_defaults naming the capture's AdamW (weight decay 0.01), which nothing
    stepped; mhc advise called its three backward passes 'gradient accumulation'; and the modules
    the step calls (model.netD, never the model) were named by their class, so the verify capture of
    a setting naming them stopped ("GAN has no module 'Discriminator.main.8'")."""
    path = tmp_path / "gan.py"
    path.write_text(GAN)
    db = str(tmp_path / "gan.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--steps", "2", "--autocast", "none"]) == 0
    meta = mhc_torch.read_meta(db)
    assert meta["capture.optimizer"] == "step: Adam, Adam"
    assert meta["capture.optimizer_class"] == "torch.optim.adam.Adam, torch.optim.adam.Adam"
    assert "capture.optimizer_defaults" not in meta and "capture.optimizer_groups" not in meta
    assert meta["capture.micro_batches"] == "1"
    # modules the step calls directly are named from the model's root (ModTracker named netD
    # "Sequential", a name mhc_torch.apply refused in the verify capture)
    import sqlite3

    names = {n for (n,) in sqlite3.connect(db).execute(
        "SELECT s.text FROM modules m JOIN strings s ON s.id = m.name")}
    assert {"GAN", "GAN.netD", "GAN.netD.0", "GAN.netG.2"} <= names, names
    out = subprocess.run([mhc_exe, "advise", db, "--capacity", "1GiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "3 backward passes per step (the step function's, not gradient accumulation)" in out.stdout, out.stdout
    assert "(gradient accumulation)" not in out.stdout


DROP_PATH = textwrap.dedent("""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c, drop):
            super().__init__()
            self.fc, self.drop = nn.Linear(c, c), drop

        def forward(self, x):
            return x + self.fc(x) * (1.0 - self.drop)

    class Net(nn.Module):
        def __init__(self, depth=4, c=32):
            super().__init__()
            # timm's calculate_drop_path_rates: Python floats read from a CPU linspace
            dpr = [x.item() for x in torch.linspace(0, 0.1, depth, device="cpu")]
            scale = (torch.arange(depth) * 2 + 1).tolist()
            assert scale == [1, 3, 5, 7] and abs(dpr[-1] - 0.1) < 1e-6, (scale, dpr)
            self.blocks = nn.ModuleList([Block(c, d) for d in dpr])
            self.register_buffer("pos", torch.arange(c, dtype=torch.float32))

        def forward(self, x):
            x = x + self.pos
            for b in self.blocks:
                x = b(x)
            return x.sum()

    def build_model():
        return Net()

    def make_batch():
        return (torch.randn(8, 32),)
""")


def test_a_build_reads_numbers_from_small_factory_tensors(tmp_path):
    """timm builds every ViT, Swin, ConvNeXt with `[x.item() for x in torch.linspace(0, rate,
    depth, device="cpu")]`, which fake tensors refused: 'op aten._local_scalar_dense.default cannot
    run on fake tensors (at timm/layers/drop.py:219 ...)'."""
    path = tmp_path / "dp.py"
    path.write_text(DROP_PATH)
    db = str(tmp_path / "dp.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--autocast", "none"]) == 0
    a = mhc_torch.read_table(db, "allocations")
    assert (a.label == "buffer pos").sum() == 1 and int(a[a.label == "buffer pos"].bytes.iloc[0]) == 32 * 4


@pytest.mark.parametrize("name, package", [("timm_vit", "timm"), ("ddpm_ema", "diffusers"), ("dcgan", None)])
def test_new_user_model_files_capture_small(tmp_path, name, package, new_user_file):
    """The model files of bench/advise/new_user added here capture at their small size (a package a
    file needs and the environment lacks skips it: timm, diffusers)."""
    if package:
        pytest.importorskip(package)
    m = new_user_file(name)
    r = mhc_torch.capture(lambda: m.build_model(small=True), lambda: m.make_batch(small=True), steps=2,
                          path=str(tmp_path / f"{name}.db"), step=m.step)
    assert r.kernels > 0 and r.peak_bytes > 0


def test_memory_reserved_in_the_step_is_said(tmp_path, capsys, mhc_exe, monkeypatch):
    """A loop that logs torch.cuda.memory_reserved() read 0 during the capture, and nothing said
    why or what the reserve would be."""
    monkeypatch.setenv("MHC_EXE", mhc_exe)
    path = tmp_path / "log.py"
    path.write_text(textwrap.dedent("""
        import torch
        def build_model(): return torch.nn.Linear(256, 256)
        def make_batch(): return torch.randn(64, 256)
        def step(model, x, run):
            model(x.cuda()).sum().backward()
            run.optimizer_step()
            run.zero_grad()
            run.state["log"] = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved(),
                                torch.cuda.max_memory_reserved())
    """))
    db = str(tmp_path / "log.db")
    from mhc_torch.cli import main

    assert main(["capture", str(path), "-o", db, "--autocast", "none"]) == 0
    err = capsys.readouterr().err
    assert mhc_torch.read_meta(db)["capture.reserved_asked"] == "memory_reserved, max_memory_reserved"
    assert ("note: the step's torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved() answered 0: a capture "
            "runs no caching allocator; the caching allocator's reserved peak for this step is ") in err, err


def test_ema_weights_are_labelled_by_their_parameter(tmp_path):
    """An EMA of the weights (torch's AveragedModel, diffusers' EMAModel) keeps a copy of every
    parameter on the GPU, made in the step; each was labelled 'aten::clone' like any temporary."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    def step(model, x, run):
        if "ema" not in run.state:
            run.state["ema"] = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
        model(x).sum().backward()
        run.optimizer_step()
        run.state["ema"].update_parameters(model)
        run.zero_grad()

    db = str(tmp_path / "ema.db")
    mhc_torch.capture(lambda: nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 8)), lambda: torch.randn(16, 64),
                      steps=2, path=db, step=step, autocast_dtype=None)
    a = mhc_torch.read_table(db, "allocations")
    copies = a[a.label.str.startswith("aten::clone of ")].set_index("label").bytes.to_dict()
    assert copies == {"aten::clone of 0.weight": 64 * 64 * 4, "aten::clone of 0.bias": 64 * 4,
                      "aten::clone of 1.weight": 8 * 64 * 4, "aten::clone of 1.bias": 8 * 4}, copies


def test_a_value_dependent_op_in_a_package_names_the_users_line_too(tmp_path, capsys, monkeypatch):
    """torchvision's Faster R-CNN stops the capture in its own code (a random resize picked by
    .item(), then NMS); the line named was torchvision's alone, not the user's that called it."""
    pkg = tmp_path / "site-packages"
    pkg.mkdir()
    (pkg / "detlib.py").write_text("import torch\ndef pick(k):\n    return k[int(torch.empty(1).uniform_(0, len(k)).item())]\n")
    monkeypatch.syspath_prepend(str(pkg))
    model = tmp_path / "det.py"
    model.write_text(textwrap.dedent("""
        import torch
        import detlib
        class Det(torch.nn.Linear):
            def forward(self, x):
                size = detlib.pick([32, 64])
                return super().forward(x[:, :size])
        def build_model(): return Det(32, 4)
        def make_batch(): return (torch.randn(2, 64),)
    """))
    from mhc_torch.cli import main

    assert main(["capture", str(model), "-o", str(tmp_path / "d.db")]) == 2
    err = capsys.readouterr().err
    assert "detlib.py:3 in pick, called from " in err and "det.py:6 in forward): its result depends on tensor values" in err, err
