"""mhc-torch's store writes the C++ store's v2 content digest (docs/trace-format.md, "Content
digest"): `mhc check` recomputes it from the rows and accepts it; the order of the rows does not
change it; one changed value does, and check reports a row changed behind the triggers' back.
The Python digest of a trace `mhc generate` wrote is the one the C++ writer summed."""
import random
import sqlite3
import subprocess

import pytest

from mhc_torch import digest, store


def _rows(shuffle: int = 0, bump: int = 0):
    allocations = [store.Allocation(id=i, bytes=256 * i + (bump if i == 7 else 0), t_alloc=i,
                                    t_free=None if i % 4 == 0 else 100000 + i, category=i % 7,
                                    label=f"tensor {i % 9} " + "é" * (i % 13), stream=i % 2)
                   for i in range(1, 400)]
    kernels = [store.Kernel(id=i, name=f"aten::op{i % 11}", t_start=20 * i, t_end=20 * i + 4, step=i // 100,
                            accesses={1 + (i * 7 + j) % 399: 1 + j % 3 for j in range(5)},
                            module="model.layer" if i % 2 else "", phase=i % 5, flops=1000 * i, moved_bytes=64 * i)
               for i in range(1, 300)]
    modules = [store.Module(name="model", parent="", type="Model"),
               store.Module(name="model.layer", parent="model", type="Linear")]
    saved = [(i, 1 + i % 299, 1 + i % 2) for i in range(1, 50)]
    copies = [store.Copy(id=i, kind=i % 2, bytes=4096, t_start=5 * i, t_end=5 * i + 2) for i in range(1, 10)]
    markers = [store.Marker(name="step", t_start=0, t_end=8000, kind=store.MARKER_STEP, idx=0)]
    if shuffle:
        rng = random.Random(shuffle)
        for rows in (saved, copies):   # (the other tables' order decides the strings' ids)
            rng.shuffle(rows)
    return allocations, kernels, markers, modules, saved, copies


def _write(path, shuffle=0, bump=0):
    allocations, kernels, markers, modules, saved, copies = _rows(shuffle, bump)
    store.write_trace(str(path), allocations, kernels, markers, {"source": "test"}, modules=modules,
                      saved=saved, copies=copies)
    return store.read_meta(str(path))["content_digest"]


def test_check_accepts_the_python_digest_and_one_value_changes_it(tmp_path, mhc_exe):
    value = _write(tmp_path / "a.db")
    assert value.startswith("v2:") and len(value) == 35
    out = subprocess.run([mhc_exe, "check", str(tmp_path / "a.db")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # The same rows in another order: the same digest; and the file's rows give it.
    assert _write(tmp_path / "b.db", shuffle=5) == value
    assert digest.of_file(str(tmp_path / "a.db")) == value
    # One value changed when written: another digest.
    assert _write(tmp_path / "c.db", bump=1) != value
    # One value changed behind the triggers' back: check recomputes the digest and says so.
    db = sqlite3.connect(tmp_path / "a.db")
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'content_digest_%'").fetchall():
        db.execute(f"DROP TRIGGER {name}")
    db.execute("UPDATE kernels SET t_end = t_end + 1 WHERE id = 17")
    db.commit()
    db.close()
    out = subprocess.run([mhc_exe, "check", str(tmp_path / "a.db")], capture_output=True, text=True)
    assert out.returncode != 0 and "content-digest" in out.stdout + out.stderr, out.stdout + out.stderr
    assert digest.of_file(str(tmp_path / "a.db")) != value


def test_a_value_sqlite_stores_otherwise_is_summed_as_stored(tmp_path, mhc_exe):
    # A float time in an INTEGER column: SQLite stores 30.0 as the integer 30 and 30.5 as a REAL.
    allocations = [store.Allocation(id=1, bytes=64, t_alloc=30.0, t_free=None, category=store.OTHER),
                   store.Allocation(id=2, bytes=64, t_alloc=30.5, t_free=40, category=store.OTHER)]
    store.write_trace(str(tmp_path / "f.db"), allocations, [], [], {"source": "test"})
    value = store.read_meta(str(tmp_path / "f.db"))["content_digest"]
    assert value == digest.of_file(str(tmp_path / "f.db"))
    out = subprocess.run([mhc_exe, "-q", "check", str(tmp_path / "f.db")], capture_output=True, text=True)
    assert "content-digest" not in out.stdout + out.stderr


def test_the_python_digest_of_a_cpp_trace_is_the_cpp_writers(tmp_path, mhc_exe):
    path = tmp_path / "g.db"
    subprocess.run([mhc_exe, "-q", "generate", "--steps", "1", "--layers", "1", "-o", str(path)], check=True,
                   capture_output=True)
    assert digest.of_file(str(path)) == store.read_meta(str(path))["content_digest"]


@pytest.mark.parametrize("values", [[""], ["a" * 8, "b" * 9, "", "c" * 16, "d"], ["é" * 300, "x"]])
def test_text_words_do_not_depend_on_the_other_values(values):
    # The vectorised hash of many values is each one's hash alone.
    encoded = [v.encode() for v in values]
    together = digest._bytes_words(encoded)
    for i, v in enumerate(encoded):
        assert digest._bytes_words([v])[0] == together[i]
