#!/usr/bin/env python3
"""Which allocations a prediction lacks or adds against a capture, at each one's peak.

    mhc advise BASE.db --setting S --trace-out predicted.db
    mhc-torch capture --recipe R --setting S -o captured.db
    python3 bench/advise/alloc_diff.py predicted.db captured.db [--step N] [--top 20]

For each trace: its device live-bytes peak (allocations made at an instant before those freed
then are counted, as docs/simulator.md states), and the storages live at that moment grouped by
(category, label, bytes). Then the groups whose counts differ, largest bytes first: '+' live in
the prediction's peak and not the capture's, '-' the reverse. With --step, only the peak within
that step (the kernels' step numbers bound it in time). Reads the trace files with sqlite3 only.
"""
from __future__ import annotations

import argparse
import collections
import sqlite3

MiB = 1 << 20


def load(path: str, step: int | None):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, text FROM strings"))
    cats = dict(db.execute("SELECT id, name FROM categories"))
    rows = db.execute("SELECT id, bytes, t_alloc, t_free, category, label FROM allocations WHERE device >= 0").fetchall()
    lo, hi = None, None
    if step is not None:
        lo, hi = db.execute("SELECT MIN(t_start), MAX(t_end) FROM kernels WHERE step = ?", (step,)).fetchone()
    events = []
    for aid, size, t0, t1, cat, label in rows:
        events.append((t0, 1, size, aid))
        if t1 is not None:
            events.append((t1, 0, -size, aid))
    events.sort()  # at one instant frees (0) before allocations (1)
    live, peak, at = 0, -1, None
    for t, kind, delta, _ in events:
        live += delta
        if kind == 1 and (lo is None or lo <= t <= hi) and live > peak:
            peak, at = live, t
    alive = [r for r in rows if r[2] <= at and (r[3] is None or r[3] > at)]
    groups = collections.Counter((cats.get(r[4], str(r[4])), strings.get(r[5], ""), r[1]) for r in alive)
    return peak, at, groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("predicted")
    ap.add_argument("captured")
    ap.add_argument("--step", type=int, default=None)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    pp, pt, pg = load(a.predicted, a.step)
    cp, ct, cg = load(a.captured, a.step)
    print(f"predicted peak {pp / MiB:,.1f} MiB at t={pt} ns; captured peak {cp / MiB:,.1f} MiB at t={ct} ns; "
          f"difference {(pp - cp) / MiB:+,.1f} MiB")
    diff = []
    for key in set(pg) | set(cg):
        n = pg.get(key, 0) - cg.get(key, 0)
        if n:
            diff.append((n * key[2], n, key))
    diff.sort(key=lambda d: -abs(d[0]))
    for total, n, (cat, label, size) in diff[:a.top]:
        print(f"{'+' if n > 0 else '-'} {abs(n):3d} x {size / MiB:10.2f} MiB = {total / MiB:+10.1f} MiB  {cat:10s} {label}")
    rest = sum(d[0] for d in diff[a.top:])
    if len(diff) > a.top:
        print(f"  ... {len(diff) - a.top} more groups, {rest / MiB:+,.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
