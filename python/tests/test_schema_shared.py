"""One schema for both writers: the C++ store embeds trace/schema.sql and mhc_torch ships it, so a
trace written by `mhc generate` and one written by mhc_torch.store have the same tables, indexes
and lookup rows, and an installed mhc_torch (not only the source tree) finds the file."""
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile

from mhc_torch import store

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOOKUPS = ("categories", "access_modes", "copy_kinds", "marker_kinds", "event_kinds", "phases")


def _schema(path):
    db = sqlite3.connect(path)
    try:
        master = sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        rows = {t: db.execute(f"SELECT id, name FROM {t} ORDER BY id").fetchall() for t in LOOKUPS}
        return master, rows
    finally:
        db.close()


def test_cpp_and_python_traces_have_one_schema(tmp_path, mhc_exe):
    cpp = tmp_path / "cpp.db"
    subprocess.run([mhc_exe, "-q", "generate", "--steps", "1", "--layers", "1", "-o", str(cpp)], check=True)
    py = tmp_path / "py.db"
    store.write_trace(str(py), [store.Allocation(id=1, bytes=64, t_alloc=0, t_free=None, category=store.OTHER)],
                      [], [], {"source": "test"})
    cpp_master, cpp_rows = _schema(cpp)
    py_master, py_rows = _schema(py)
    assert py_master == cpp_master
    assert py_rows == cpp_rows
    names = {name for _, name, _, _ in cpp_master}
    assert {"segments", "saved_tensors", "kernel_info", "run_memory", "run_memory_by_run"} <= names
    # Neither writer builds an index of accesses by allocation (docs/trace-format.md, "Indexes").
    assert "accesses_by_allocation" not in names
    # The Python codes are the lookup rows' (capture writes them as plain integers).
    assert store.CATEGORY_NAMES == [n for _, n in cpp_rows["categories"]]
    assert (store.WRITE, store.READ_WRITE) == (2, 3) and (store.H2D, store.D2H) == (0, 1)
    assert store.PHASE_NAMES[store.BACKWARD] == "backward" and store.MARKER_LAYER == 1


def test_an_installed_package_finds_the_schema(tmp_path):
    # A copy of the package (the links to trace/schema.sql and datasets/gpus.tsv resolved, as a
    # release tree would hold them) built into a wheel and installed elsewhere: the schema and the
    # GPU table travel as package data.
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "python", "mhc_torch"), src / "mhc_torch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "python", "pyproject.toml"), src)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "wheel"), str(src)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").iterdir()
    assert {"mhc_torch/schema.sql", "mhc_torch/gpus.tsv"} <= set(zipfile.ZipFile(wheel).namelist())
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    out = subprocess.run([sys.executable, "-c", "from mhc_torch import gpus, store; print(store.__file__, store._TABLES.count('CREATE TABLE'), len(gpus.GPUS))"],
                         env={**os.environ, "PYTHONPATH": str(site)}, cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    path, tables, gpu_rows = out.stdout.split()
    assert path.startswith(str(site)) and int(tables) == 17 and int(gpu_rows) == 6
