"""`mhc export --format csv` read back with pandas: every table of a captured trace (modules,
kernel_info and saved_tensors included) and its simulated runs, row for row against the trace
as mhc_torch reads it."""
import os
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")
import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402


def _capture(path):
    def build():
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    return mhc_torch.capture(build, lambda: (torch.randn(2, 8),), steps=2, gpu="h100-sxm", path=path,
                             autocast_dtype=None, loss_fn=lambda m, b: m(*b).sum())


def _table(path, table):
    """The table as stored, codes and string ids as their names (the CSV's convention)."""
    db = sqlite3.connect(path)
    try:
        df = pd.read_sql(f"SELECT * FROM {table}", db)
        names = {"strings": dict(db.execute("SELECT id, text FROM strings"))}
        for lookup in ("categories", "access_modes", "copy_kinds", "marker_kinds", "event_kinds", "phases"):
            names[lookup] = dict(db.execute(f"SELECT id, name FROM {lookup}"))
    finally:
        db.close()
    names["strings"][0] = ""
    resolved = {("allocations", "label"): "strings", ("allocations", "category"): "categories",
                ("kernels", "name"): "strings", ("accesses", "mode"): "access_modes",
                ("copies", "kind"): "copy_kinds", ("markers", "name"): "strings", ("markers", "kind"): "marker_kinds",
                ("modules", "name"): "strings", ("modules", "type"): "strings", ("kernel_info", "phase"): "phases",
                ("run_events", "kind"): "event_kinds"}
    for col in df.columns:
        if (table, col) in resolved:
            df[col] = df[col].map(names[resolved[(table, col)]])
    return df.rename(columns={c: c + "_ns" for c in df.columns if c == "t" or c.startswith("t_")})


def test_every_table_round_trips_through_pandas(tmp_path, mhc_exe):
    path = str(tmp_path / "mlp.db")
    _capture(path)
    subprocess.run([mhc_exe, "simulate", path, "--capacity", "60%", "--allocator", "ideal"], check=True,
                   capture_output=True)
    out = tmp_path / "csv"
    p = subprocess.run([mhc_exe, "export", path, "--format", "csv", "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")]
    db.close()
    lookups = {"strings", "categories", "access_modes", "copy_kinds", "marker_kinds", "event_kinds", "phases"}
    # trace_cache (binary copies of the other tables, written by simulate) and run_event_rows
    # (rowids of run_events in this file) have no CSV
    assert "trace_cache" in tables and "run_event_rows" in tables
    want = [t for t in tables if t not in lookups and t not in ("trace_cache", "run_event_rows")]
    assert sorted(os.listdir(out)) == sorted(t + ".csv" for t in want)
    for table in want:
        got = pd.read_csv(out / f"{table}.csv", keep_default_na=False, na_values=[""])
        ref = _table(path, table)
        assert list(got.columns) == list(ref.columns), table
        assert len(got) == len(ref), table
        if table in ("allocations", "kernels", "accesses", "kernel_info", "run_metrics", "run_events"):
            assert len(got) > 0, f"the capture wrote no {table}"
        key = [c for c in ref.columns if c in ("id", "run", "kernel", "allocation", "key", "t_ns", "t_start_ns")]
        got = got.sort_values(key, kind="stable").reset_index(drop=True)
        ref = ref.sort_values(key, kind="stable").reset_index(drop=True)
        for col in ref.columns:
            a, b = got[col], ref[col]
            if pd.api.types.is_float_dtype(b) or pd.api.types.is_float_dtype(a):
                assert a.astype(float).equals(b.astype(float)) or ((a - b).abs().max() == 0), (table, col)
            else:
                assert a.astype(str).tolist() == b.astype(str).tolist(), (table, col)
    runs = store.read_runs(path)
    assert pd.read_csv(out / "runs.csv")["name"].tolist() == runs["name"].tolist()
