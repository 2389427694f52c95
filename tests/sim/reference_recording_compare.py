#!/usr/bin/env python3
"""`mhc allocator --json` against reference_recording.py (an outside reading of docs/simulator.md
"Comparing with a recording"), on random recordings (reference_allocator_compare_run.py's generator:
a caching model's segments under recorded settings, segments held before recording, empty_cache()
calls, two streams, private pools, a second device, 2^61 ns gaps) and the public snapshots, under
the recorded settings and under what-if `--allocator-conf` settings (so that model and recording
part). Compared: the recording's figures always; where the section says the model replays as
`mhc simulate --allocator caching --capacity unlimited` does (no warm start, no empty_cache() call,
no pool given back, a span of at most 10^6 ns), also the model's reserved peak, max and mean |diff|,
the first divergence's time and the cold start's peak, with the model's reserved bytes taken from
that run's memory timeline at one sample per nanosecond.

    python3 tests/sim/reference_recording_compare.py MHC WORK [--runs=N] [--seed=S] [--public=DIR] [-v]
"""
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_recording as ref  # noqa: E402
import reference_allocator_compare_run as gen  # noqa: E402  (the generator only)


class _Sqlite:
    """The generator's sqlite3, writing without waiting for the disk (a recording is rewritten
    whole each time: a second a file on a loaded disk otherwise)."""
    def __getattr__(self, name):
        return getattr(sqlite3, name)

    @staticmethod
    def connect(*a, **k):
        con = sqlite3.connect(*a, **k)
        con.execute("PRAGMA synchronous = OFF")
        con.execute("PRAGMA journal_mode = MEMORY")
        return con


gen.sqlite3 = _Sqlite()
random_recording = gen.random_recording

WHATIF = ["", "", "expandable_segments:True", "expandable_segments:False", "max_split_size_mb:40",
          "roundup_power2_divisions:4", "garbage_collection_threshold:0.5"]


def flat(out):
    got = dict(out)
    for key in ("recorded", "model", "cold_start"):
        for k, v in (out.get(key) or {}).items():
            got[f"{key}.{k}"] = v
    return got


def model_timeline(mhc, trace, dev, conf, work):
    """The caching model's reserved bytes after each nanosecond's events, from simulate's memory
    timeline (one bucket per nanosecond: N = span + 1); None where the span is too long."""
    rec = ref.Recording(trace)
    times = [t for a in rec.alloc_rows(dev) for t in (a[4], a[5]) if t is not None]
    # the device's recorded events: its allocations (a memory snapshot has no kernels)
    span = max(times) - min(times)
    if span + 1 > 1_000_000:
        return None, None
    runs = work / "runs.db"
    if runs.exists():
        runs.unlink()
    cmd = [mhc, "simulate", str(trace), "--allocator", "caching", "--capacity", "unlimited", "--device", str(dev),
           "--memory-samples", str(span + 1), "--runs-db", str(runs), "--json"]
    if conf:
        cmd += ["--allocator-conf", conf]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[:300]}")
    # the run's own peak (the baseline's is under the recorded settings whatever --allocator-conf says)
    peak = int(json.loads(p.stdout)["metrics"]["simulated_peak_bytes"])
    con = sqlite3.connect(str(runs))
    samples = dict(con.execute("SELECT t, device_bytes FROM run_memory").fetchall())
    con.close()
    after, value = {}, 0
    for t in sorted(set(times)):
        value = samples.get(t, value)
        after[t] = value
    return after, peak


def without_warm_start_or_calls(src, dst):
    """A copy of a recording without what the model's side cannot be taken from simulate for: the
    segments held before recording, the blocks made then and the segments freed where no allocation
    is made (the empty_cache() calls) go. False when nothing had to change."""
    rec = ref.Recording(src)
    changed = False
    dst.write_bytes(src.read_bytes())
    con = sqlite3.connect(str(dst))
    for dev in rec.devices():
        made = {a[4] for a in rec.alloc_rows(dev)}
        for s in rec.seg_rows(dev):
            if s[7] or s[4] <= 0:
                con.execute("DELETE FROM segments WHERE id = ?", (s[0],))
                changed = True
            elif s[5] is not None and s[5] not in made:
                con.execute("DELETE FROM segments WHERE id = ?", (s[0],))
                changed = True
    changed |= con.execute("DELETE FROM allocations WHERE t_alloc <= 0").rowcount > 0
    # blocks of the segments taken out lie in none now: the recording no longer claims they do
    con.execute("DELETE FROM meta WHERE key = 'segments.hold_allocations'")
    con.commit()
    con.close()
    return changed


def tie_blocks(db, rng):
    """Blocks alive only at the instant a segment is freed, inside it (docs/trace-format.md: a segment
    freed at t still holds a block made at t), one made at the instant a segment is made, and one at
    address 0 (not known)."""
    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT device, address, bytes, t_alloc, t_free FROM segments").fetchall()
    nid = con.execute("SELECT coalesce(max(id), 0) FROM allocations").fetchone()[0]
    for dev, addr, n, ta, tf in rng.sample(rows, min(len(rows), rng.randint(1, 3))):
        nid += 1
        at = tf if tf is not None and rng.random() < 0.7 else ta
        con.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                    "VALUES (?,?,?,?,?,?,0,6)", (nid, dev, addr + n - 512, 512, at, at))
    if rows and rng.random() < 0.5:   # a block whose address is not known (0): not judged
        nid += 1
        at = rng.choice(rows)[3] + 1
        con.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                    "VALUES (?,?,0,4096,?,?,0,6)", (nid, rows[0][0], at, at + 1))
    con.commit()
    con.close()


def check(mhc, trace, work, conf, device=None):
    """Problems (text) of one comparison, and whether the model's side was compared."""
    cmd = [mhc, "allocator", str(trace), "--json"] + (["--allocator-conf", conf] if conf else []) + (
        ["--device", str(device)] if device is not None else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(cmd[2:])
    rec = ref.Recording(trace)
    dev = rec.device() if device is None else device
    if dev is None:
        return ([] if p.returncode == 2 and "no segments recorded" in p.stderr
                else [f"{label}: no segments, mhc exit {p.returncode}"]), False
    if p.returncode != 0:
        return [f"{label}: exit {p.returncode}: {p.stderr.strip()[:300]}"], False
    got = flat(json.loads(p.stdout))
    problems = []
    mine = rec.figures(dev)
    for k, v in mine.items():
        if k == "seeded_blocks" and conf and got.get(k) is not None and got[k] <= v:
            # what-if settings may round a block held before recording larger than the room at its
            # recorded offset: the model places it itself then (the reading has no rounding)
            continue
        if got.get(k) != v:
            problems.append(f"{k}: mhc {got.get(k)}, the reading {v}")
    pools_back = "snapshot.pools_from" in rec.meta and any(s[5] is not None for s in rec.seg_rows(dev))
    if mine["seeded_segments"] or mine["seeded_blocks"] or mine["empty_cache_calls"] or pools_back:
        return [f"{label}: {x}" for x in problems], False
    after, peak = model_timeline(mhc, trace, dev, conf, work)
    if after is None:
        return [f"{label}: {x}" for x in problems], False
    mx, mean, first = rec.compare(dev, after)
    want = {"model.reserved_peak": peak, "cold_start.reserved_peak": peak, "reserved_diff.max_abs": mx}
    got["reserved_diff.max_abs"] = got["reserved_diff"]["max_abs"]
    for k, v in want.items():
        if got.get(k) != v:
            problems.append(f"{k}: mhc {got.get(k)}, the reading {v}")
    calls = None if rec.expandable(dev, conf) else rec.model_calls(dev, after)
    for k, v in (calls or {}).items():
        if got.get(k) != v:
            problems.append(f"{k}: mhc {got.get(k)}, the reading {v}")
    gm = got["reserved_diff"]["mean_abs"]
    if abs(gm - mean) > 1e-9 * max(1.0, abs(mean)):
        problems.append(f"reserved_diff.mean_abs: mhc {gm}, the reading {mean}")
    fd = got.get("first_divergence")
    gfirst = fd.get("time_ns", fd.get("t")) if isinstance(fd, dict) else None
    if (fd is None) != (first is None) or (fd is not None and gfirst != first):
        problems.append(f"first_divergence: mhc {fd}, the reading {first}")
    return [f"{label}: {x}" for x in problems], True


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    verbose = "-v" in sys.argv
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(opts.get("seed", 1)))
    cases = []
    if opts.get("public"):
        for f in sorted(Path(opts["public"]).glob("torch-snapshot/*.pickle*")):
            db = work / (f.name.split(".")[0] + ".db")
            if not db.exists():
                subprocess.run([mhc, "import", str(f), "-o", str(db)], check=True, capture_output=True)
            cases += [(db, "", f.name), (db, "expandable_segments:True", f.name)]
    for i in range(int(opts.get("runs", 40))):
        db = work / f"rec{i}.db"
        what = random_recording(rng, db)
        if rng.random() < 0.3:
            tie_blocks(db, rng)
            what += " +blocks at segment events' instants"
        cases.append((db, rng.choice(WHATIF), what))
        plain = work / f"rec{i}-plain.db"
        if without_warm_start_or_calls(db, plain):
            cases.append((plain, rng.choice(WHATIF), what + " (warm start and empty_cache calls taken out)"))
    differ = model_side = 0
    for db, conf, what in cases:
        devs = ref.Recording(db).devices()
        device = rng.choice(devs) if len(devs) > 1 and rng.random() < 0.5 else None   # --device N
        problems, both = check(mhc, db, work, conf, device)
        model_side += both
        if verbose:
            print(f"{db.name} [{conf}] {what}: {'model too' if both else 'recording'}: {len(problems)} problems")
        if problems:
            differ += 1
            print(f"{db.name} ({what}):")
            for x in problems[:6]:
                print("  " + x)
    print(f"{len(cases)} comparisons ({model_side} with the model's side too): {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
