"""mhc-torch reads PYTORCH_CUDA_ALLOC_CONF as mhc's caching model reads it (sim/src/caching_allocator.cpp,
parse_allocator_conf): a setting's "allocator" and the environment's settings, which a capture records
as meta allocator.conf, are refused when `mhc` could not read them. mhc-torch took
"max_split_size_mb:٣٣" (Arabic-Indic digits: str.isdigit() and int() read them) and
"garbage_collection_threshold:0.5_0" (float() reads the '_'), recorded them, and mhc simulate then
refused the trace; "max_split_size_mb:²" (isdigit() True, int() fails) and a NUL byte ended in a
traceback (exit 1); "roundup_power2_divisions:[64:8,>:4]", PyTorch's list form, was refused (split
at the list's comma) and any other roundup value taken ("abc", 3)."""
import subprocess

import pytest

from mhc_torch.cli import main
from mhc_torch.settings import SettingError, allocator_conf_problem, load_setting

# Each is tried against `mhc simulate --allocator caching --allocator-conf`: mhc-torch refuses exactly
# what mhc refuses (mhc-torch is stricter only where PyTorch is: a bool option's True or False).
CONFS = [
    "max_split_size_mb:\u0663\u0663", "max_split_size_mb:\u00b2", "max_split_size_mb:0021", "max_split_size_mb:20",
    "max_split_size_mb:21", "max_split_size_mb:1073741824", "max_split_size_mb:1073741825", "max_split_size_mb:+64",
    "max_split_size_mb:9999999999999999999", "roundup_power2_divisions:3", "roundup_power2_divisions:abc",
    "roundup_power2_divisions:0", "roundup_power2_divisions:2097152", "roundup_power2_divisions:[64:8,>:4]",
    "roundup_power2_divisions:[ 64 : 8 , > : 4 ]", "roundup_power2_divisions:[]", "roundup_power2_divisions:[0:4]",
    "roundup_power2_divisions:[2097152:4]", "roundup_power2_divisions:[64:8,]", "roundup_power2_divisions:[64:8",
    "roundup_power2_divisions:[64:3]", "garbage_collection_threshold:0.5_0", "garbage_collection_threshold:.5",
    "garbage_collection_threshold:5e-1", "garbage_collection_threshold:0x0.8p0", "garbage_collection_threshold:1.",
    "garbage_collection_threshold:nan", "garbage_collection_threshold:inf", "garbage_collection_threshold:1e-400",
    "garbage_collection_threshold:+0.5", "garbage_collection_threshold:-0.5", "garbage_collection_threshold:0,5",
    "per_process_memory_fraction:0.5", "pinned_reserve_segment_size_mb:64", "backend:native", "backend:cudaMallocAsync",
    "expandable_segments:True,", ",expandable_segments:True", " expandable_segments : True ", "expandable_segments",
    "expandable_segments:true", "expandable_segments:True,,max_split_size_mb:64", "foo:1", "[expandable_segments:True]",
]


@pytest.mark.parametrize("conf", CONFS)
def test_refused_as_mhc_refuses(mhc_exe, tmp_path, conf):
    trace = tmp_path / "t.db"
    subprocess.run([mhc_exe, "-q", "generate", "--preset", "gpt2-small", "--steps", "1", "--layers", "1", "--hidden",
                    "64", "--heads", "2", "--seq", "32", "--micro-batch", "1", "--vocab", "1000", "-o", str(trace)],
                   check=True, capture_output=True)
    r = subprocess.run([mhc_exe, "simulate", str(trace), "--capacity", "90%", "--no-store", "--allocator", "caching",
                        "--allocator-conf", conf], capture_output=True, text=True)
    assert r.returncode in (0, 2, 3), r.stderr   # 3: out of memory at 90%, the settings read
    why = allocator_conf_problem(conf)
    assert (why is None) == (r.returncode != 2), f"mhc-torch: {why}; mhc: {r.stderr.strip()}"


@pytest.mark.parametrize("conf, message", [
    ("max_split_size_mb:\u00b2", "setting: allocator: max_split_size_mb:\u00b2: expected a whole number"),
    ("max_split_size_mb:\u0663\u0663", "setting: allocator: max_split_size_mb:\u0663\u0663: expected a whole number"),
    ("roundup_power2_divisions:\u0000", "setting: allocator: 'roundup_power2_divisions:?': holds a control character"),
    ("garbage_collection_threshold:0.5_0",
     "setting: allocator: garbage_collection_threshold:0.5_0: expected a number between 0 and 1"),
    ("roundup_power2_divisions:3", "setting: allocator: roundup_power2_divisions:3: expected a power of 2 (or 0), or "
     "a list [MiB:divisions,...,>:divisions] of them"),
])
def test_one_line_no_traceback(capsys, tmp_path, conf, message):
    """Refused before torch is imported, in one line, exit 2 (a traceback, exit 1, for ² and NUL)."""
    with pytest.raises(SettingError) as e:
        load_setting({"allocator": conf})
    assert str(e.value) == message
    code = main(["capture", "tiny-gpt2", "-o", str(tmp_path / "o.db"), "--setting",
                 '{"allocator": "%s"}' % conf.replace("\u0000", "\\u0000")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"mhc-torch: {message}\n".replace("\u0000", "?")
    assert not (tmp_path / "o.db").exists()


def test_list_form_taken():
    assert load_setting({"allocator": "roundup_power2_divisions:[64:8,>:4]"})["allocator"] == \
        "roundup_power2_divisions:[64:8,>:4]"


def test_environment_settings_mhc_cannot_read(tmp_path, capsys, monkeypatch):
    """PYTORCH_CUDA_ALLOC_CONF that mhc cannot read: the capture refuses it rather than record it."""
    pytest.importorskip("torch")
    model = tmp_path / "net.py"
    model.write_text("import torch\ndef build_model():\n    return torch.nn.Linear(4, 4)\n"
                     "def make_batch():\n    return torch.randn(2, 4)\n")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:\u0663\u0663")
    code = main(["capture", str(model), "-o", str(tmp_path / "o.db")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.endswith("PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb:\u0663\u0663: expected a whole number; the trace "
                        "records these settings (meta allocator.conf) and mhc could not read them\n"), err
    assert not (tmp_path / "o.db").exists()
