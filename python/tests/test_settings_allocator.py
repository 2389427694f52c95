"""Allocator settings: those a script sets (in time, or too late) are captured or said, a
setting's allocator is recorded and the environment kept, and max_split_size's answer verified."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402
from settings_net import (  # noqa: E402
    _advise_json, _capture, _cli_here, LOSS_INSIDE_FILE,
)

PASTED_ALLOCATOR = 'import os                          # before torch touches the GPU\n' \
                   'os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n'


def test_allocator_settings_the_script_sets_are_captured(tmp_path, mhc_exe, monkeypatch):
    """`mhc advise` prints `os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ...` to paste at the top of the
    script; PyTorch reads it when CUDA initialises. The capture did not see it: the step captured
    again after pasting was simulated with the default allocator (here 94,371,840 B reserved
    where expandable segments reserve less). The settings in the environment when build_model()
    returns are recorded (meta allocator.conf, which the caching model follows)."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    plain, pasted = tmp_path / "plain.py", tmp_path / "pasted.py"
    plain.write_text(LOSS_INSIDE_FILE)
    pasted.write_text(PASTED_ALLOCATOR + LOSS_INSIDE_FILE)
    for f in (plain, pasted):
        r = _cli_here("capture", f, "--autocast", "none", "-o", tmp_path / f"{f.stem}.db")
        assert r.returncode == 0, r.stderr
        assert "PYTORCH_CUDA_ALLOC_CONF" not in r.stderr
    assert store.read_meta(tmp_path / "pasted.db")["allocator.conf"] == "expandable_segments:True"
    assert "allocator.conf" not in store.read_meta(tmp_path / "plain.db")
    expandable = _advise_json(mhc_exe, tmp_path / "plain.db", {"allocator": "expandable_segments:True"})
    default = _advise_json(mhc_exe, tmp_path / "plain.db", {})["baseline"]["reserved_bytes"]
    captured = _advise_json(mhc_exe, tmp_path / "pasted.db", {})["baseline"]["reserved_bytes"]
    assert captured == expandable["rows"][0]["reserved_bytes"] < default


LATE_ALLOCATOR_FILE = LOSS_INSIDE_FILE.replace('''def make_batch():
''', '''def make_batch():
    import os

    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"   # after the model is on the GPU
''')


def test_allocator_settings_set_too_late_are_said(tmp_path, monkeypatch):
    """Set after the model is built (CUDA initialised), PyTorch ignores the variable: the step
    runs with the default settings, as captured, and the capture says so."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    f = tmp_path / "late.py"
    f.write_text(LATE_ALLOCATOR_FILE)
    r = _cli_here("capture", f, "--autocast", "none", "-o", tmp_path / "late.db")
    assert r.returncode == 0, r.stderr
    meta = store.read_meta(tmp_path / "late.db")
    assert "allocator.conf" not in meta
    assert meta["capture.allocator_conf_late"] == "expandable_segments:True"
    assert "warning: PYTORCH_CUDA_ALLOC_CONF was set to 'expandable_segments:True' after build_model()" in r.stderr
    assert "captured with the default settings; set it at the top of the script" in r.stderr


def test_setting_allocator_recorded_and_environment_kept(tmp_path, monkeypatch):
    """A setting's allocator (mhc_torch.apply sets it at run time) is recorded over the
    environment's, and the capture leaves the process's environment as it found it (a later
    capture in the same process is not run with it)."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64")
    path = tmp_path / "s.db"
    _capture(tmp_path, {"allocator": "expandable_segments:True"}, name="s.db")
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:64"
    meta = store.read_meta(path)
    assert meta["allocator.conf"] == "max_split_size_mb:64,expandable_segments:True"
    assert "capture.allocator_conf_late" not in meta


def test_max_split_size_answer_verified_by_capture(tmp_path, mhc_exe):
    """bench/advise/new_user/speech_gru.py made smaller (3 bidirectional GRU layers of 512, batch 16
    x 800 frames; AdamW foreach, 2 steps): cuDNN's reserve space for the backward gets a segment of
    its own and is freed in the backward; AdamW's state, made by the first optimizer.step(), splits
    its free block, and step 2's reserve takes a new segment: 931,135,488 B reserved for a live peak
    of 704,319,408, 868,220,928 with expandable segments. mhc advise reads the step's large requests,
    tries max_split_size_mb from their sizes and keeps 256 (761,266,176 B: the reserve's block is
    never split, AdamW's state takes segments of its own). At 800 MiB the first answer is the fused
    AdamW with it (722 MiB; with the allocator as captured or expandable segments the fused AdamW
    reserves the same 931,135,488 and 868,220,928 B), then max_split_size_mb:256 alone at no loss;
    before, the search tried only the other two and answered the optimizer on the host (+360%).
    --verify captures the step again with PYTORCH_CUDA_ALLOC_CONF set by mhc_torch.apply, as the
    printed code sets it: its peak and reserved peak equal the prediction."""
    source = open(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "advise", "new_user",
                               "speech_gru.py")).read()
    source = source.replace("FEATS, HIDDEN, LAYERS, CHARS, BATCH, FRAMES, TARGET = 80, 1024, 5, 29, 32, 1600, 200",
                            "FEATS, HIDDEN, LAYERS, CHARS, BATCH, FRAMES, TARGET = 80, 512, 3, 29, 16, 800, 200")
    assert "512, 3, 29, 16, 800" in source
    (tmp_path / "gru.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..") + os.pathsep +
               os.environ.get("PYTHONPATH", ""), MHC_TORCH=f"{sys.executable} -m mhc_torch.cli")
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(tmp_path / "gru.py"), "--steps", "2",
                        "-o", str(tmp_path / "gru.db")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    a = subprocess.run([mhc_exe, "advise", str(tmp_path / "gru.db"), "--capacity", "800MiB", "--top", "1", "--verify",
                        "--model", str(tmp_path / "gru.py"), "--json"], capture_output=True, text=True, env=env)
    assert a.returncode == 0, a.stderr
    doc = json.loads(a.stdout)
    assert doc["baseline"]["reserved_bytes"] == 931135488
    # the captured step's value first; one that does best under another global setting alone follows it
    assert doc["search"]["allocator_confs"][:3] == ["", "expandable_segments:True", "max_split_size_mb:256"]
    assert doc["search"]["split_conf"] == "max_split_size_mb:256"
    # the fused AdamW under a value searched: 256, or one that does best under the fused AdamW alone
    # (24: as fast, no release; the ranking's shorter setting)
    (row,) = doc["rows"]
    conf = row["setting"].get("allocator")
    assert row["setting"] == {"allocator": conf, "optimizer": {"impl": "fused"}}, row["setting"]
    assert conf in doc["search"]["allocator_confs"][2:] and conf.startswith("max_split_size_mb:"), conf
    assert f'os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "{conf}"' in row["code"]
    assert row["verify"]["peak_bytes"] == row["peak_bytes"]
    assert row["verify"]["reserved_bytes"] == row["reserved_bytes"] <= 800 << 20
    alone = subprocess.run([mhc_exe, "advise", str(tmp_path / "gru.db"), "--setting",
                            '{"allocator": "max_split_size_mb:256"}', "--json"], capture_output=True, text=True)
    assert json.loads(alone.stdout)["rows"][0]["reserved_bytes"] == 761266176


@pytest.mark.parametrize("env, want", [
    ({}, "expandable_segments:True"),
    ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}, "max_split_size_mb:64,expandable_segments:True"),
    ({"PYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.6"},
     "garbage_collection_threshold:0.6,expandable_segments:True"),
])
def test_apply_keeps_the_users_allocator_settings(monkeypatch, env, want):
    """mhc_torch.apply sets PYTORCH_CUDA_ALLOC_CONF to the user's settings and the answer's after them,
    as mhc advise prints and predicts them (a later key wins); it set the answer's alone, so a user's
    max_split_size_mb:64 was dropped from the step the advice was predicted for."""
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    mhc_torch.apply(nn.Linear(4, 4), None, {"allocator": "expandable_segments:True"})
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == want
