"""The code `mhc advise` prints, executed as printed, is the step `--verify` captures: a capture of
a model built by pasting the printed lines holds, to the byte, the peak, host peak and copies of
the capture with `mhc_torch.apply` (what --verify runs). Before
2026-12-06 the printed selective checkpointing passed no `respect_saved_tensors_hooks`, so under
an offload what it keeps bypassed the hooks (PyTorch's default) and stayed on the device; the
printed `marking()` (BatchNorm inside) hid selective checkpointing's mode from checkpoint as
apply's did before ab001520; and the printed offload was torchtune's class, which no test could run
(it needs torchao and CUDA) and which copies per saved tensor, not per storage as predicted."""
import json
import sqlite3
import subprocess
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from tiny_models import gpt2 as _gpt2, gpt2_batch as _gpt2_batch  # noqa: E402


class Block(nn.Module):
    def __init__(self, d=64, norm="layer"):
        super().__init__()
        self.norm = nn.LayerNorm(d) if norm == "layer" else nn.BatchNorm1d(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.tanh(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, norm="layer"):
        super().__init__()
        self.blocks = nn.ModuleList(Block(norm=norm) for _ in range(3))
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class BnNet(Net):
    def __init__(self):
        super().__init__(norm="batch")


def _batch():
    return (torch.randn(8192, 64),)


def _loss(model, batch):
    return model(*batch).square().mean()


BLOCKS = ["blocks.0", "blocks.1", "blocks.2"]
GPT2_BLOCKS = ["transformer.h.0", "transformer.h.1"]
CASES = {
    "selective+offload": (Net, _batch, _loss,
                          {"checkpoint": {"modules": BLOCKS[:2], "policy": "save_matmuls"},
                           "offload": {"mode": "sync", "modules": None}}),
    "selective+streamed": (Net, _batch, _loss,
                           {"checkpoint": {"modules": BLOCKS, "policy": "save_matmuls"},
                            "offload": {"mode": "streamed", "modules": BLOCKS[1:]}}),
    "batchnorm-selective+offload": (BnNet, _batch, _loss,
                                    {"checkpoint": [{"modules": BLOCKS[:1]},
                                                    {"modules": BLOCKS[1:], "policy": "save_matmuls"}],
                                     "offload": {"mode": "sync", "modules": None}}),
    "gpt2-selective+offload": (_gpt2, _gpt2_batch, None,
                               {"checkpoint": {"modules": GPT2_BLOCKS, "policy": "save_matmuls"},
                                "offload": {"mode": "streamed", "modules": None}}),
}


def _copies(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT kind, stream, count(*), sum(bytes) FROM copies GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    finally:
        db.close()


def _capture(path, build, batch, loss, setting=None):
    kw = {"loss_fn": loss} if loss else {}
    return mhc_torch.capture(build, batch, steps=1, path=path, autocast_dtype=None, setting=setting,
                             optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True), **kw)


@pytest.mark.parametrize("case", list(CASES))
def test_printed_code_captures_as_apply(mhc_exe, tmp_path, case):
    build, batch, loss, setting = CASES[case]
    if build is _gpt2:
        pytest.importorskip("transformers")
    base = str(tmp_path / "base.db")
    _capture(base, build, batch, loss)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    printed = row["code"].split("# or, the same in one line")[0]
    assert "torchtune" not in printed and "respect_saved_tensors_hooks" in printed

    def build_pasted():
        model = build()
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)   # PyTorch's warning that SAC bypasses the hooks
            exec(printed, {"model": model, "optimizer": None, "torch": torch})  # noqa: S102 - the code under test
        return model

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        pasted = _capture(str(tmp_path / "pasted.db"), build_pasted, batch, loss)
    applied = _capture(str(tmp_path / "applied.db"), build, batch, loss, setting)
    # What a user pastes is what --verify captured, and what was predicted: the checkpoint's saves
    # (its inputs, selective checkpointing's cached outputs) go through the offload's hooks.
    assert pasted.peak_bytes == applied.peak_bytes == row["peak_bytes"]
    host = [int(r.meta["capture.host_peak_bytes"]) for r in (pasted, applied)]
    assert host[0] == host[1] == row["host_peak_bytes"] > 0
    moved = _copies(str(tmp_path / "pasted.db"))
    assert moved and moved == _copies(str(tmp_path / "applied.db"))


# Checkpointing with an offload around (or beside) the checkpointed module: checkpoint packs the
# call's inputs through the offload's hooks before the forward (full and selective alike) and
# unpacks them when its recomputation starts; selective checkpointing's cached outputs are packed
# after their op and unpacked where the recomputation replays it, or, past the early stop, never
# (a streamed offload's prefetch may still bring them back). Until 2026-12-06 the prediction kept
# all of them on the device: 10-11% over the captured peak on this model, the host bytes under.
AROUND = {
    "full+offload-all": {"checkpoint": {"modules": ["blocks.1"]}, "offload": {"mode": "sync", "modules": None}},
    "full+offload-it": {"checkpoint": {"modules": ["blocks.1"]}, "offload": {"mode": "sync", "modules": ["blocks.1"]}},
    "full+offload-other": {"checkpoint": {"modules": ["blocks.1"]},
                           "offload": {"mode": "sync", "modules": ["blocks.2"]}},
    "selective+offload-all": {"checkpoint": {"modules": ["blocks.1"], "policy": "save_matmuls"},
                              "offload": {"mode": "sync", "modules": None}},
    "selective+offload-it": {"checkpoint": {"modules": ["blocks.1"], "policy": "save_matmuls"},
                             "offload": {"mode": "sync", "modules": ["blocks.1"]}},
    "selective+streamed-it": {"checkpoint": {"modules": ["blocks.1", "blocks.2"], "policy": "save_matmuls"},
                              "offload": {"mode": "streamed", "modules": ["blocks.1", "blocks.2"]}},
}


class CondBlock(Block):
    """A block called with two positional tensors, as a UNet's ResBlock(x, temb)."""

    def forward(self, x, cond):
        return super().forward(x) + self.fc2(torch.tanh(self.fc1(cond)))


class CondNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(64, 64)
        self.blocks = nn.ModuleList(CondBlock() for _ in range(2))

    def forward(self, x):
        cond = self.embed(x).relu()
        for b in self.blocks:
            x = b(x, cond)
        return x


def test_checkpoint_inputs_as_captured(mhc_exe, tmp_path):
    """checkpoint packs every tensor its call is passed positionally; the capture records them
    (meta capture.call_args), and the prediction packs those: a block's second input (the condition,
    made before the block and read after its hidden states) was left on the device when the inputs
    were taken as what the call's first kernel reads."""
    setting = {"checkpoint": {"modules": ["blocks.1"]}, "offload": {"mode": "sync", "modules": None}}
    base, applied = str(tmp_path / "base.db"), str(tmp_path / "applied.db")
    _capture(base, CondNet, _batch, _loss)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    captured = _capture(applied, CondNet, _batch, _loss, setting)
    assert (row["peak_bytes"], row["host_peak_bytes"]) == \
        (captured.peak_bytes, int(captured.meta["capture.host_peak_bytes"]))


@pytest.fixture(scope="module")
def mlp_base(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("around") / "base.db")
    _capture(path, Net, _batch, _loss)
    return path


@pytest.mark.parametrize("case", list(AROUND))
def test_checkpoint_under_offload_predicted_as_captured(mhc_exe, mlp_base, tmp_path, case):
    setting = AROUND[case]
    out = subprocess.run([mhc_exe, "advise", mlp_base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        applied = _capture(str(tmp_path / "applied.db"), Net, _batch, _loss, setting)
    assert (row["peak_bytes"], row["host_peak_bytes"]) == \
        (applied.peak_bytes, int(applied.meta["capture.host_peak_bytes"]))


def test_printed_selective_checkpoint_under_offload_trains_as_plain(mhc_exe, tmp_path):
    """On real CPU tensors the printed lines (selective checkpointing with BatchNorm inside, under
    the printed offload) train as the plain step does: the same loss, gradients bitwise equal, and
    BatchNorm's running statistics updated once."""
    build, batch, loss, setting = CASES["batchnorm-selective+offload"]
    base = str(tmp_path / "base.db")
    _capture(base, build, batch, loss)
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)["rows"][0]["code"].split("# or, the same in one line")[0]
    torch.manual_seed(0)
    plain, mine = build(), build()
    mine.load_state_dict(plain.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        exec(printed, {"model": mine, "optimizer": None, "torch": torch})  # noqa: S102
    x = batch()
    results = []
    for model in (plain, mine):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            value = loss(model, x)
            value.backward()
        grads = {n.replace("_checkpoint_wrapped_module.", ""): p.grad for n, p in model.named_parameters()}
        stats = {n.replace("_checkpoint_wrapped_module.", ""): b.clone() for n, b in model.named_buffers()}
        results.append((value.item(), grads, stats))
    (l0, g0, s0), (l1, g1, s1) = results
    assert l0 == l1 and g0.keys() == g1.keys() and s0.keys() == s1.keys()
    for n in g0:
        assert torch.equal(g0[n], g1[n]), n
    for n in s0:
        assert torch.equal(s0[n], s1[n]), n


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(norm="batch") for _ in range(3))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Encoder(Stack):
    pass


class Decoder(Stack):
    pass


class EncoderDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = Encoder(), Decoder()

    def forward(self, x):
        return self.decoder(self.encoder(x))


def test_short_module_names_print_as_the_traces(mhc_exe, tmp_path):
    """`--setting` takes a module as model.get_submodule spells it (`encoder.blocks.0`) or as the
    trace does (`EncoderDecoder.encoder.blocks.0`), and --verify passes it on as given; the printer
    looked names up as the trace spells them only, so a short name printed no BatchNorm hooks (the
    recompute updated the running statistics twice) and described blocks of two stacks as
    "checkpoint 2 of 6 blocks ()". Both spellings now print and describe the same."""
    base = str(tmp_path / "base.db")
    _capture(base, EncoderDecoder, lambda: (torch.randn(256, 64),), _loss)
    rows = []
    for prefix in ("", "EncoderDecoder."):
        setting = {"checkpoint": {"modules": [f"{prefix}encoder.blocks.0", f"{prefix}decoder.blocks.1"]}}
        out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        rows.append(json.loads(out.stdout)["rows"][0])
    short, full = rows
    assert short["description"] == full["description"] == \
        "checkpoint 2 of 6 blocks (encoder.blocks 1 of 3, decoder.blocks 1 of 3)"
    strip = lambda code: code.split("# or, the same in one line")[0]   # noqa: E731 (the apply line names the setting)
    assert strip(short["code"]) == strip(full["code"]) and "keep_running_stats(m)" in strip(short["code"])


@pytest.fixture(scope="module")
def qat_capture(tmp_path_factory):
    """A capture of torchvision's quantizable MobileNetV2 prepared for QAT (one step)."""
    pytest.importorskip("torchvision")
    import torch.nn.functional as F
    from test_new_user_families8 import qat_model

    path = str(tmp_path_factory.mktemp("qat") / "qat.db")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mhc_torch.capture(qat_model, lambda: (torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))), steps=1,
                          path=path, autocast_dtype=None, loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1]))
    return path


@pytest.mark.parametrize("policy", ["full", "save_matmuls"])
def test_printed_qat_checkpoint_trains_as_plain(mhc_exe, qat_capture, policy):
    """Quantization-aware training inside checkpointed blocks: the printed lines install the hooks
    that mhc_torch.apply installs (keep_forward_start on the fake quantizers, their observers' moving
    min and max, and the fused conv + BatchNorm), so two training steps of the pasted model equal
    the plain steps bit for bit, buffers included. Until 2026-12-06 the printed long form had no
    such hooks (only the apply line was complete): 27 gradients and 19 buffers differed."""
    import copy
    import torch.nn.functional as F
    from test_new_user_families8 import qat_model

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = qat_model()
    x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))
    setting = {"checkpoint": {"modules": ["features.3", "features.5"], "policy": policy}}
    out = subprocess.run([mhc_exe, "advise", qat_capture, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)["rows"][0]["code"].split("# or, the same in one line")[0]
    assert "mhc_torch" not in printed

    def run(paste):
        model = copy.deepcopy(base)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if paste:
            exec(printed, {"model": model, "optimizer": opt, "torch": torch})  # noqa: S102 - the code under test
        torch.manual_seed(1)   # the classifier's dropout
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                F.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
        return {n.replace("_checkpoint_wrapped_module.", ""): t for n, t in model.state_dict().items()}

    plain, pasted = run(False), run(True)
    assert plain.keys() == pasted.keys()
    assert [n for n in plain if not torch.equal(plain[n], pasted[n])] == []
