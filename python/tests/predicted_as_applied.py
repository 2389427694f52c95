"""An advise answer's predicted trace against the capture of the step with its setting applied,
allocation by allocation: the check the offload tests share."""
import json
import sqlite3
import subprocess


def device_events(path, group_frees=False):
    """The device's allocations and frees in time order: +bytes or -bytes each. group_frees: the
    frees between two allocations as one sorted tuple (frees at nearby instants are ordered by the
    estimated times, which the prediction's copies shift; their order does not change what the
    allocator holds)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, bytes, t_alloc, t_free FROM allocations WHERE device >= 0").fetchall()
    events = sorted([(t, 1, i, b) for i, b, t, _ in rows] + [(t, 0, i, -b) for i, b, _, t in rows if t is not None])
    if not group_frees:
        return [b for *_, b in events]
    out, frees = [], []
    for _, made, _, b in events:
        if not made:
            frees.append(b)
            continue
        out += [tuple(sorted(frees)), b] if frees else [b]
        frees = []
    return out + [tuple(sorted(frees))]


def assert_predicted_as_applied(mhc_exe, tmp_path, setting, capture, group_frees=False):
    """`mhc advise` of tmp_path/base.db with `setting` writes its predicted trace; `capture(path,
    setting)` captures the step with it applied: the same device events, peak and host peak.
    Returns advise's row."""
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--setting", json.dumps(setting), "--json",
                          "--trace-out", str(tmp_path / "predicted.db")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    applied = capture(tmp_path / "applied.db", setting)
    assert (device_events(tmp_path / "predicted.db", group_frees)
            == device_events(tmp_path / "applied.db", group_frees))
    assert row["peak_bytes"] == int(applied.meta["capture.peak_bytes"])
    assert row["host_peak_bytes"] == int(applied.meta["capture.host_peak_bytes"])
    return row
