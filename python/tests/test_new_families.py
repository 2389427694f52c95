"""Model families a new user brought in 2026-12-05 (bench/advise/new_user: an LSTM language model,
a GNN with a masked loss, ...): what the capture says of each. Each test fails without the fix it
guards."""
import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

def test_a_model_without_recurrent_layers_gets_no_such_warning(tmp_path, capsys):
    model = tmp_path / "mlp.py"
    model.write_text(textwrap.dedent("""
        import torch
        def build_model(): return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        def make_batch(): return (torch.randn(4, 8),)
        def loss_fn(model, batch): return model(*batch).float().mean()
    """))
    out = str(tmp_path / "mlp.db")
    assert main(["capture", str(model), "-o", out]) == 0
    assert "cuDNN" not in capsys.readouterr().err
    assert "capture.cudnn_rnn" not in set(mhc_torch.read_table(out, "meta")["key"])


def test_a_loss_over_a_boolean_mask_says_what_captures(tmp_path, capsys):
    """A GNN's loss over its training nodes, cross_entropy(logits[mask], y[mask]), stops the capture
    (nonzero: its shape depends on the mask's values), which the line said without a way out; it
    now says how to write the same loss with fixed shapes, and that form captures. (A mask the
    batch holds as a boolean tensor is captured with its values: batch_values.py; this one is
    computed from a float tensor of the batch, whose values the capture does not keep.)"""
    model = tmp_path / "masked.py"
    body = """
        import torch
        import torch.nn.functional as F
        def build_model(): return torch.nn.Linear(8, 3)
        def make_batch(): return {"x": torch.randn(6, 8), "y": torch.randint(0, 3, (6,)), "score": torch.rand(6)}
        def loss_fn(model, b):
            b = {**b, "mask": b["score"] < 0.5}
            return F.cross_entropy(model(b["x"])LOGITS, LABELS)
    """
    model.write_text(textwrap.dedent(body.replace("LOGITS", '[b["mask"]]').replace("LABELS", 'b["y"][b["mask"]]')))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "op aten.nonzero.default cannot run on fake tensors" in err and \
        "cross_entropy(logits, labels.masked_fill(~mask, -100))" in err, err
    model.write_text(textwrap.dedent(body.replace("LOGITS", "").replace("LABELS", 'b["y"].masked_fill(~b["mask"], -100)')))
    assert main(["capture", str(model), "-o", str(tmp_path / "m.db")]) == 0, capsys.readouterr().err


class _Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(torch.nn.functional.gelu(y.transpose(1, 2).reshape(2, 8, 16)))


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(_Attn() for _ in range(2))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.float().pow(2).mean()


def test_printed_selective_checkpoint_keeps_what_apply_keeps(mhc_exe, tmp_path):
    """The printed save_matmuls policy listed the GPU attention kernels only, where mhc_torch.apply
    (--verify) and the simulator keep any attention: the printed code, pasted and run on a CPU (a
    capture, a CPU test of the printed code), recomputed the attention (torchvision's ViT-B/16,
    bench/advise/new_user/tv_vit.py at 4GiB: reserved 0.50% off the prediction, 4,185,915,392 B
    captured against 4,206,886,912 predicted). The pasted printed code now captures the same step as
    the setting applied."""
    import subprocess

    batch = lambda: (torch.randn(2, 8, 16),)  # noqa: E731
    kw = dict(loss_fn=lambda m, b: m(*b), autocast_dtype=None)
    base = str(tmp_path / "base.db")
    mhc_torch.capture(_Net, batch, path=base, **kw)
    setting = {"checkpoint": {"modules": ["_Net.blocks.1"], "policy": "save_matmuls"}}
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True, check=True)
    printed = json.loads(out.stdout)["rows"][0]["code"].split("# or, the same in one line")[0]

    def pasted():
        ns = {"model": _Net(), "torch": torch}
        exec(printed, ns)  # noqa: S102 - the printed code, as a user pastes it
        return ns["model"]

    a = mhc_torch.capture(pasted, batch, path=str(tmp_path / "pasted.db"), **kw)
    b = mhc_torch.capture(_Net, batch, path=str(tmp_path / "applied.db"), setting=setting, **kw)
    assert (a.kernels, a.peak_bytes) == (b.kernels, b.peak_bytes)


def test_selective_checkpoint_of_a_compiled_module_caches_no_out_results():
    """mhc_torch.apply's save_matmuls kept every overload of a matmul; a torch.compile'd block runs
    its matmuls as aten.mm.out into buffers the compiled code reuses, so apply's selective
    checkpoint of such a block stopped in the backward ('Tensor cached during selective activation
    checkpoint has been mutated': bench/advise/new_user/mlp_compiled.py's small copy, every
    answer's one-line form), where the printed policy (`.default` overloads) runs. Now apply keeps
    the functional overloads only, as the printed code does."""
    from torch.utils.checkpoint import CheckpointPolicy

    from mhc_torch.checkpointing import _save_matmuls_policy

    aten = torch.ops.aten
    assert _save_matmuls_policy(None, aten.mm.default) == CheckpointPolicy.MUST_SAVE
    assert _save_matmuls_policy(None, aten.addmm.default) == CheckpointPolicy.MUST_SAVE
    assert _save_matmuls_policy(None, aten.mm.out) == CheckpointPolicy.PREFER_RECOMPUTE
    assert _save_matmuls_policy(None, aten.addmm.out) == CheckpointPolicy.PREFER_RECOMPUTE
    assert _save_matmuls_policy(None, aten.gelu.default) == CheckpointPolicy.PREFER_RECOMPUTE


def test_layers_cloned_with_deepcopy_capture(tmp_path):
    """nn.Transformer (and nn.TransformerEncoder, and the _get_clones pattern of many codebases)
    clones its layers with copy.deepcopy, which copied the fake tensors' mode: the capture stopped
    in build_model ('Mixing fake modes NYI', bench/advise/new_user/nn_transformer.py). Now each clone
    has parameters of its own on the capture's mode."""
    def build():
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    path = str(tmp_path / "enc.db")
    mhc_torch.capture(build, lambda: (torch.randn(2, 5, 16),), path=path, loss_fn=lambda m, b: m(*b).float().mean(),
                      autocast_dtype=None)
    a = mhc_torch.read_table(path, "allocations")
    params = a[a.category_name == "param"]
    # per layer: in_proj 3*16*16 + 3*16, out_proj 16*16 + 16, linear1 32*16 + 32, linear2 16*32 + 16,
    # two LayerNorms 2*(16 + 16): 2,224 floats = 8,896 bytes; two layers (the layer cloned from is
    # not the model's)
    assert params.bytes.sum() == 2 * 8896


class _Shared(torch.nn.Module):
    """ALBERT's way: one layer's weights, called 6 times a forward, one call after another."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64),
                                         torch.nn.LayerNorm(64))

    def forward(self, x):
        for _ in range(6):
            x = x + self.layer(x)
        return x.float().pow(2).mean()


def test_checkpoint_of_a_layer_called_many_times_is_one_checkpoint_per_call(mhc_exe, tmp_path):
    """A checkpointed module called several times one call after another (ALBERT's shared layer)
    is one checkpoint per call; advise took the calls for one run (their kernels follow one another
    without a break) and recomputed all of them at the start of the backward: ALBERT-base at batch
    32 x 512 was predicted at 14.21 GiB against 5.40 GiB captured, and `mhc advise --capacity 10GiB`
    answered only offloads at +743% (bench/advise/new_user/albert.py). The capture now lists where
    each call begins (meta capture.module_calls) and the prediction is the capture's."""
    import subprocess

    kw = dict(loss_fn=lambda m, b: m(*b), autocast_dtype=None, steps=2)
    batch = lambda: (torch.randn(512, 64),)  # noqa: E731
    base = str(tmp_path / "base.db")
    mhc_torch.capture(_Shared, batch, path=base, **kw)
    meta = dict(mhc_torch.read_table(base, "meta")[["key", "value"]].values)
    assert len(json.loads(meta["capture.module_calls"])["_Shared.layer"]) == 12   # 6 calls, 2 steps
    setting = {"checkpoint": {"modules": ["_Shared.layer"], "policy": "full"}}
    out = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--json"],
                         capture_output=True, text=True, check=True)
    predicted = json.loads(out.stdout)["rows"][0]
    captured = mhc_torch.capture(_Shared, batch, path=str(tmp_path / "ck.db"), setting=setting, **kw)
    assert predicted["peak_bytes"] == captured.peak_bytes
    # a malformed list is bad input: one line naming the key, exit status 2
    import shutil
    import sqlite3

    bad = str(tmp_path / "bad.db")
    shutil.copy(base, bad)
    with sqlite3.connect(bad) as db:
        db.execute("UPDATE meta SET value = '{\"_Shared.nope\": [1]}' WHERE key = 'capture.module_calls'")
    out = subprocess.run([mhc_exe, "advise", bad, "--setting", json.dumps(setting)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "meta capture.module_calls: names module '_Shared.nope', which the trace lacks" in out.stderr, out.stderr


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down, self.norm = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64), torch.nn.LayerNorm(64)

    def forward(self, x):
        return x + self.norm(self.down(torch.nn.functional.gelu(self.up(x))))


class _Albert(torch.nn.Module):
    """ALBERT's layout: one group of one layer, called 6 times a forward."""

    def __init__(self):
        super().__init__()
        self.groups = torch.nn.ModuleList([_Layer()])

    def forward(self, x):
        for _ in range(6):
            x = self.groups[0](x)
        return x.float().pow(2).mean()


def test_no_selective_checkpoint_of_a_shared_layer_under_autocast(mhc_exe, tmp_path):
    """Under autocast, selective checkpointing of a layer called several times a pass stops in the
    backward (autocast casts the shared weights in the first call only, each recomputation casts
    them again: 'aten._to_copy.default invocation index 6 encountered during backward but not
    found in storage', ALBERT at 10GiB, both the printed code and mhc_torch.apply); advise ranked
    it first. It is no longer offered for such a block; full checkpointing is."""
    import subprocess

    base = str(tmp_path / "base.db")
    r = mhc_torch.capture(_Albert, lambda: (torch.randn(512, 64),), path=base, loss_fn=lambda m, b: m(*b), steps=2)
    assert r.peak_bytes == 73757984   # baseline reserved 72 MiB; checkpointing the layer: 70 MiB
    out = subprocess.run([mhc_exe, "advise", base, "--capacity", "71MiB", "--top", "20", "--json"],
                         capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)["rows"]
    groups = [row["setting"].get("checkpoint", []) for row in rows]   # one group: an object; more: a list
    policies = {g["policy"] for gs in groups for g in ([gs] if isinstance(gs, dict) else gs)}
    assert "full" in policies and "save_matmuls" not in policies, rows
