#!/usr/bin/env python3
"""Where a prediction's allocation stream first departs from a capture's.

    mhc advise BASE.db --setting S --trace-out predicted.db
    mhc-torch capture --recipe R --setting S -o captured.db
    python3 bench/advise/stream_diff.py predicted.db captured.db [--context 5]

The caching allocator sees a device's allocations and frees in time order (frees before
allocations at one instant, as docs/simulator.md states); two traces with the same stream of
(allocate or free, bytes) get the same reserved peak. This prints how many events the two streams
share from the start, then the events around the first that differs, each with its category,
label and the kernel that made or freed it (the latest kernel starting at or before it). Equal
streams print 'streams equal' and exit 0; different ones exit 1. Reads the files with sqlite3 only.
"""
from __future__ import annotations

import argparse
import bisect
import sqlite3
import sys


def load(path: str):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, text FROM strings"))
    cats = dict(db.execute("SELECT id, name FROM categories"))
    kern = db.execute("SELECT t_start, name FROM kernels ORDER BY t_start").fetchall()
    starts = [k[0] for k in kern]
    events = []
    for aid, size, t0, t1, cat, label in db.execute(
            "SELECT id, bytes, t_alloc, t_free, category, label FROM allocations WHERE device >= 0"):
        desc = (cats.get(cat, str(cat)), strings.get(label, ""))
        events.append((t0, 1, aid, size, desc))
        if t1 is not None:
            events.append((t1, 0, aid, size, desc))
    events.sort(key=lambda e: (e[0], e[1], e[2]))

    def kernel_at(t):
        i = bisect.bisect_right(starts, t) - 1
        return strings.get(kern[i][1], "?") if i >= 0 else "-"
    return [(("+" if k else "-") + str(size), desc, t, kernel_at(t)) for t, k, _, size, desc in events]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("predicted")
    ap.add_argument("captured")
    ap.add_argument("--context", type=int, default=5)
    a = ap.parse_args()
    p, c = load(a.predicted), load(a.captured)
    n = 0
    while n < len(p) and n < len(c) and p[n][0] == c[n][0]:
        n += 1
    if n == len(p) == len(c):
        print(f"streams equal: {n} events")
        return 0
    print(f"{n} events equal of {len(p)} predicted, {len(c)} captured; first difference at event {n}")
    lo = max(0, n - a.context)
    for name, ev in (("predicted", p), ("captured", c)):
        print(name)
        for i in range(lo, min(len(ev), n + a.context + 1)):
            e = ev[i]
            print(f"  {'>' if i == n else ' '} {i:7d} {e[0]:>14} {e[1][0]:<12} {e[1][1][-50:]:<50} t={e[2]} {e[3][:60]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
