"""The torch and transformers versions a capture was made with: in the trace's meta, printed by
`mhc info`, and a warning when traces of different versions are simulated together."""
import shutil
import sqlite3
import subprocess
from importlib import metadata

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402


def _capture(path):
    mhc_torch.capture(lambda: torch.nn.Linear(8, 8), lambda: (torch.randn(4, 8),), path=str(path),
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b).sum())


def test_versions_in_meta_info_and_a_mismatch_warned(tmp_path, mhc_exe):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _capture(a)
    meta = mhc_torch.read_meta(str(a))
    assert meta["torch_version"] == torch.__version__
    assert meta["transformers_version"] == metadata.version("transformers")
    info = subprocess.run([mhc_exe, "info", str(a)], capture_output=True, text=True)
    assert info.returncode == 0
    assert (f"captured    with torch {torch.__version__}, transformers {meta['transformers_version']}"
            in info.stdout.splitlines())

    ranks = [mhc_exe, "simulate", "--ranks", str(a), str(b), "--capacity", "100%", "--no-store"]
    shutil.copy(a, b)
    same = subprocess.run(ranks, capture_output=True, text=True)
    # Captures have no job identity: the coupled run says what it assumed, in a line of its own.
    assert same.returncode == 0 and "different versions" not in same.stderr, same.stderr
    assert [line for line in same.stderr.splitlines() if "no meta job.id" not in line] == [], same.stderr
    db = sqlite3.connect(b)
    db.execute("UPDATE meta SET value = '2.14.0' WHERE key = 'torch_version'")
    db.commit()
    db.close()
    mixed = subprocess.run(ranks, capture_output=True, text=True)
    assert mixed.returncode == 0
    assert [line for line in mixed.stderr.splitlines() if "no meta job.id" not in line] == [
        f"mhc: warning: traces captured with different versions are compared: {a} (torch {torch.__version__}, "
        f"transformers {meta['transformers_version']}) and {b} (torch 2.14.0, transformers "
        f"{meta['transformers_version']})"]
