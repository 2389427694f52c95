"""read_run_table finds a run's events by their rowid range (new traces keep no index on run) and
gives the same rows as a read by run: on several runs, after a middle run is deleted and the file
vacuumed (which renumbers the rows after it), and with the ranges gone."""
import shutil
import sqlite3
import subprocess

import mhc_torch
from mhc_torch import store


def _events_by_run(path, run):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT * FROM run_events WHERE run = ? ORDER BY rowid", (run,)).fetchall()


def _as_rows(df):
    return [tuple(int(v) for v in row) for row in df.drop(columns=["kind_name"]).itertuples(index=False)]


def test_run_events_read_by_range_equal_those_read_by_run(tmp_path, mhc_exe):
    trace = str(tmp_path / "t.db")
    subprocess.run([mhc_exe, "generate", "--layers", "2", "--steps", "2", "-o", trace], check=True, capture_output=True)
    for capacity in ("60%", "70%", "80%"):
        subprocess.run([mhc_exe, "simulate", trace, "--capacity", capacity], check=True, capture_output=True)
    with sqlite3.connect(trace) as db:
        runs = [r for (r,) in db.execute("SELECT run FROM run_event_rows ORDER BY run")]
    assert len(runs) == 3
    for run in runs:
        got = _as_rows(mhc_torch.read_run_table(trace, "run_events", run=run))
        assert got and got == _events_by_run(trace, run)
        with sqlite3.connect(trace) as db:
            assert _as_rows(store._run_events_by_range(db, run).assign(kind_name=0)) == got  # the range was used
    # The middle run deleted and the file vacuumed: the last run's range no longer fits its rows.
    with sqlite3.connect(trace) as db:
        db.execute("DELETE FROM run_events WHERE run = ?", (runs[1],))
        db.execute("DELETE FROM runs WHERE id = ?", (runs[1],))
    with sqlite3.connect(trace) as db:
        db.execute("VACUUM")
    gone = str(tmp_path / "no-ranges.db")
    shutil.copy(trace, gone)
    with sqlite3.connect(gone) as db:
        db.execute("DELETE FROM run_event_rows")
    for run in (runs[0], runs[2]):
        want = _events_by_run(trace, run)
        assert want
        assert _as_rows(mhc_torch.read_run_table(trace, "run_events", run=run)) == want
        assert _as_rows(mhc_torch.read_run_table(gone, "run_events", run=run)) == want
    with sqlite3.connect(trace) as db:
        assert store._run_events_by_range(db, runs[0]) is not None
        assert store._run_events_by_range(db, runs[2]) is None  # renumbered: read by run instead
