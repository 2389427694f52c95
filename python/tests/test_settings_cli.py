"""mhc-torch's --setting and recipe options: a setting and a recipe round trip through a capture,
the recipe reproduces the step's options, and a bad setting or recipe is one line."""
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")

from mhc_torch import store  # noqa: E402
from settings_net import (  # noqa: E402
    A, _activations_at_backward, BASELINE, _cli, _cli_here, LOSS, NET_FILE, _recomputed, _rows,
)

@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "net.py"
    path.write_text(NET_FILE)
    return str(path)


def test_cli_setting_and_recipe_round_trip(tmp_path, net_file, mhc_exe):
    """`--recipe` with a trace's meta capture.recipe captures the same step again (a model file
    by its absolute path); `--setting` applies a setting to it, as `mhc advise --verify` runs them."""
    a = str(tmp_path / "a.db")
    r = _cli_here("capture", net_file, "--autocast", "none", "-o", a)
    assert r.returncode == 0, r.stderr
    recipe = store.read_meta(a)["capture.recipe"]
    # (a model file makes its own model and batch: no batch, seq, layers or hc)
    assert json.loads(recipe) == {"model": net_file, "steps": 1, "gpu": "h100-sxm", "autocast": "none", "autocast_policy": "cuda",
                                  "weights": "as-built", "forward_only": False, "micro_batches": 1,
                                  "zero_grad": "none", "optimizer": "adamw"}
    setting = tmp_path / "s.json"
    setting.write_text('{"checkpoint": {"modules": ["Net.blocks.1"]}}')
    b = str(tmp_path / "b.db")
    r = _cli_here("capture", "--recipe", recipe, "--setting", str(setting), "-o", b)
    assert r.returncode == 0, r.stderr
    assert store.read_meta(b)["capture.recipe"] == recipe
    assert _activations_at_backward(a) == BASELINE - LOSS + 4  # the model returns the sum itself
    assert _activations_at_backward(b) == BASELINE - A
    assert _recomputed(b) == [("aten::mm", "Net.blocks.1.fc1"), ("aten::relu", "Net.blocks.1")]
    assert subprocess.run([mhc_exe, "check", b], capture_output=True).returncode == 0


@pytest.mark.parametrize("flags", [
    ["--weights", "bf16", "--micro-batches", "2", "--zero-grad", "zeros", "--autocast-policy", "cpu", "--steps", "2"],
    ["--forward-only", "--autocast", "bf16"],
])
def test_cli_recipe_reproduces_the_step_options(tmp_path, net_file, flags):
    """Every option of the step goes into the recipe and comes back from it: the capture that
    --recipe runs (--force replacing its output) is the same trace, op for op and byte for byte."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    r = _cli_here("capture", net_file, *flags, "-o", a)
    assert r.returncode == 0, r.stderr
    recipe = store.read_meta(a)["capture.recipe"]
    open(b, "w").close()
    r = _cli_here("capture", "--recipe", recipe, "--force", "-o", b)
    assert r.returncode == 0, r.stderr
    meta_a, meta_b = store.read_meta(a), store.read_meta(b)
    for key in ("capture.recipe", "capture.autocast", "capture.autocast_policy", "capture.param_dtype",
                "capture.step", "capture.micro_batches", "capture.zero_grad", "capture.peak_bytes", "capture.steps"):
        assert meta_a[key] == meta_b[key], key
    ka, kb = (store.read_table(p, "kernels")[["name", "t_start", "t_end"]] for p in (a, b))
    assert ka.equals(kb)
    # (a storage freed as the capture ends counts as alive at the end: the garbage collector says when)
    end = "(SELECT max(t_end) FROM markers)"
    allocations = f"SELECT bytes, t_alloc, min(coalesce(t_free, {end}), {end}), category FROM allocations ORDER BY id"
    assert _rows(a, allocations) == _rows(b, allocations)


@pytest.mark.parametrize("args, message", [
    (["--setting", '{"checkpoint": {"modules": ["Net.blocks.3"]}}'],
     "mhc-torch: NET: setting: checkpoint.modules: Net has no module 'Net.blocks.3' "
     "(did you mean 'Net.blocks.1' or 'Net.blocks.2'?)"),
    (["--setting", '{"offload": 3}'], "mhc-torch: setting: offload: expected an object, got a number"),
    (["--setting", "missing.json"], "mhc-torch: setting: missing.json: No such file or directory"),
    # the simulator's model refuses these (torch 2.15: less than 20; earlier releases: 20 and less)
    (["--setting", '{"allocator": "max_split_size_mb:19"}'],
     "mhc-torch: setting: allocator: max_split_size_mb:19: too small: it must be at least 20 (MiB)"),
    (["--setting", '{"allocator": "expandable_segments:True,max_split_size_mb:4"}'],
     "mhc-torch: setting: allocator: max_split_size_mb:4: too small: it must be at least 20 (MiB)"),
])
def test_cli_bad_setting_one_line(tmp_path, net_file, args, message):
    out = tmp_path / "x.db"
    r = _cli("capture", net_file, *args, "-o", str(out))
    assert r.returncode == 2 and r.stderr.strip() == message.replace("NET", net_file), r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--recipe", '{"model": "tiny-llama", "bath": 2}'],
     "mhc-torch: recipe: unknown key 'bath'; valid: model, gpu, steps, batch, seq, layers, hc, autocast, "
     "autocast_policy, weights, forward_only, micro_batches, zero_grad, optimizer"),
    (["--recipe", '{"batch": 2}'], 'mhc-torch: recipe: expected a JSON object with a "model"'),
    (["--recipe", "none.json"], "mhc-torch: recipe: none.json: No such file or directory"),
    (["tiny-llama", "--recipe", '{"model": "tiny-llama"}'], "mhc-torch: give either MODEL with its options or --recipe"),
    ([], "mhc-torch: capture needs MODEL (a preset or FILE.py) or --recipe"),
])
def test_cli_bad_recipe_one_line(tmp_path, args, message):
    out = tmp_path / "x.db"
    r = _cli("capture", *args, "-o", str(out))
    assert r.returncode == 2 and r.stderr.strip() == message, r.stderr
    assert not out.exists()
