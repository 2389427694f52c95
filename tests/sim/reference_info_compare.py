#!/usr/bin/env python3
"""Runs `mhc info TRACE --json [--top N]` beside reference_info.py (an outside reading of what the
documents say `mhc info` reports of a trace's rows) and compares every figure it reads: the row
counts, whether accesses are recorded, the span and duration, the kernel time, the peak (device,
bytes, time, bytes by category), each device's peak and requested peak, the steps and their
durations, the layer markers, the largest allocations and the kernels by total time.

Traces: random ones (reference_outside_compare.random_trace: one or two GPUs, a twin GPU with the
same peak, the program's host memory, step markers, edge shapes), each then changed at random:
categories and labels over every allocation, sizes made equal (ties in the largest allocations),
kernel names made equal and durations matched (ties in the kernels by total time), requested bytes
on some allocations, step and layer markers added; `mhc generate` traces of a few shapes; and five
special shapes (no rows, kernels without allocations, the host's memory alone or beside a GPU,
allocations on a GPU without kernels).

Usage: reference_info_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--generated=N] [--verbose]
Exit 0 when every trace agrees, 1 otherwise (each difference printed)."""
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference_info as ref  # noqa: E402
import reference_outside_compare as outside  # noqa: E402

LABELS = ["w", "act", "grad.x", "L0.qkv", "tmp"]


def shake(path, rng):
    """Changes a random trace so that the summary's ties and breakdowns are exercised."""
    db = sqlite3.connect(str(path))
    base = db.execute("SELECT coalesce(max(id), 0) + 1 FROM strings").fetchone()[0]   # ids run densely
    names = LABELS + ["tie_a", "tie_b"]
    db.executemany("INSERT INTO strings (id, text) VALUES (?, ?)", [(base + i, n) for i, n in enumerate(names)])
    rows = [r[0] for r in db.execute("SELECT id FROM allocations")]
    for aid in rows:
        db.execute("UPDATE allocations SET category = ?, label = ? WHERE id = ?",
                   (rng.randrange(7), rng.choice([0] + [base + i for i in range(len(LABELS))]), aid))
    if rows and rng.random() < 0.5:   # ties in size
        size = db.execute("SELECT max(bytes) FROM allocations").fetchone()[0]
        for aid in rng.sample(rows, min(len(rows), rng.randint(2, 12))):
            db.execute("UPDATE allocations SET bytes = ? WHERE id = ?", (size, aid))
    if rows and rng.random() < 0.4:   # a snapshot's requested bytes on some allocations
        for aid in rng.sample(rows, rng.randint(1, len(rows))):
            db.execute("UPDATE allocations SET requested_bytes = max(1, bytes - ?) WHERE id = ?",
                       (rng.choice([0, 1, 511]), aid))
    kern = db.execute("SELECT id, t_start, t_end FROM kernels").fetchall()
    pairs = [(a, b) for a in kern for b in kern if a[0] < b[0] and a[2] - a[1] == b[2] - b[1]]
    if pairs and rng.random() < 0.7:   # two names of equal total time (one kernel each, equally long)
        a, b = rng.choice(pairs)
        tie = base + len(LABELS)
        first = rng.randrange(2)   # the name that sorts first on the earlier kernel, or on the later
        db.execute("UPDATE kernels SET name = ? WHERE id = ?", (tie + first, a[0]))
        db.execute("UPDATE kernels SET name = ? WHERE id = ?", (tie + 1 - first, b[0]))
    if kern and rng.random() < 0.5:   # step and layer markers over the kernels
        ts = sorted({k[1] for k in kern} | {k[2] for k in kern})
        top = db.execute("SELECT coalesce(max(id), 0) FROM markers").fetchone()[0]
        for i in range(rng.randint(1, 4)):
            s = rng.choice(ts)
            e = rng.choice([t for t in ts if t >= s])
            db.execute("INSERT INTO markers (id, name, t_start, t_end, kind, idx) VALUES (?,100,?,?,?,?)",
                       (top + 1 + i, s, e, rng.choice([0, 0, 1, 2]), i))
    db.commit()
    db.close()


def special(path, blank, rng, i):
    """Shapes the random traces rarely reach: no rows at all, kernels without allocations, the host's
    memory alone (the peak is then the host's), a GPU tied with the host, allocations on a GPU
    without kernels beside a GPU with kernels only."""
    path.write_bytes(blank)
    db = sqlite3.connect(str(path))
    kind = i % 5
    allocs = []
    if kind in (2, 3):
        allocs += [(1, -1, 4096, 10, 50), (2, -1, 8192, 20, None)]
    if kind == 3:
        allocs += [(3, 2, 12288, 30, 40)]
    if kind == 4:
        allocs += [(1, 3, 512, 5, 5), (2, 3, 512, 5, None), (3, 3, 1024, 6, 9)]
    db.executemany("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category, label) "
                   "VALUES (?,?,0,?,?,?,0,6,0)", allocs)
    if kind in (1, 4):
        db.executemany("INSERT INTO kernels (id, device, stream, name, t_start, t_end, step, grid_x, grid_y, grid_z, "
                       "block_x, block_y, block_z, shared_mem, registers, correlation) "
                       "VALUES (?,?,7,1,?,?,-1,1,1,1,1,1,1,0,0,0)", [(1, 0, 100, 200), (2, 1, 150, 400)])
    db.commit()
    db.close()


def generated(mhc, work, rng, i):
    path = work / f"gen{i}.db"
    preset = rng.choice(["gpt2-small", "llama2-7b", "mhc-27b"])
    args = [mhc, "generate", "--preset", preset, "--layers", str(rng.randint(1, 3) * (4 if preset == "mhc-27b" else 1)), "--steps", str(rng.randint(1, 3)), "--seq", str(rng.choice([64, 128, 256])),
            "--seed", str(rng.randint(1, 99)), "--force", "-o", str(path)]
    if rng.random() < 0.3:
        args += ["--micro-batches", "2"]
    if rng.random() < 0.3:
        args += ["--recompute"]
    subprocess.run(args, check=True, capture_output=True)
    return path


def pick(got, key):
    """The figures of `mhc info --json` that the reading computes, under the reading's keys."""
    mem = [{"device": m["device"], "peak_bytes": m["peak_bytes"], "peak_time_ns": m.get("peak_time_ns"),
            "requested_peak_bytes": m.get("requested_peak_bytes")} for m in got.get("memory", [])]
    return {"memory": mem}.get(key, got.get(key))


def compare(mhc, path, top, verbose):
    args = [mhc, "info", str(path), "--json"] + (["--top", str(top)] if top != 10 else [])
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return [f"exit {p.returncode}: {p.stderr.strip()}"]
    got = json.loads(p.stdout)
    mine = ref.summarise(path, top)
    diffs = []
    for key, want in mine.items():
        if key == "memory":
            want = [{k: v for k, v in m.items() if k != "by_category"} for m in want]
        have = pick(got, key)
        if have != want:
            diffs.append(f"{key}: mhc {json.dumps(have)[:300]} reading {json.dumps(want)[:300]}")
    if verbose and not diffs:
        print(f"ok {path.name}")
    return diffs


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
    verbose = "--verbose" in sys.argv
    runs, seed, gens = int(opts.get("runs", 60)), int(opts.get("seed", 1)), int(opts.get("generated", 4))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    blank = outside.empty_trace(mhc, work)
    failed, tally = 0, {}
    cases = [("random", i) for i in range(runs)] + [("generated", i) for i in range(gens)] + \
        [("special", i) for i in range(5)]
    for kind, i in cases:
        if kind == "random":
            path = work / f"info{i}.db"
            outside.random_trace(path, blank, rng)
            shake(path, rng)
        elif kind == "special":
            path = work / f"special{i}.db"
            special(path, blank, rng, i)
        else:
            path = generated(mhc, work, rng, i)
        top = rng.choice([10, 10, 1, 3, 50])
        diffs = compare(mhc, path, top, verbose)
        for d in diffs:
            key = d.split(":", 1)[0]
            tally[key] = tally.get(key, 0) + 1
        if diffs:
            failed += 1
            print(f"DIFF {kind} {i} (seed {seed}, --top {top}, {path}):")
            for d in diffs:
                print("  " + d)
    print(f"{len(cases) - failed} of {len(cases)} traces agree" +
          (f"; figures that differed (traces): {tally}" if tally else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
