#!/usr/bin/env python3
"""Runs `mhc simulate --allocator caching`, `mhc info` and reference_profiler_reserved.py (a reading of
docs/simulator.md "Start from a profiler's figure" and "Said where it matters", written from the
documents alone) on random memory traces carrying a profiler's reserved figures (meta
`kineto.reserved_peak.device0` and `kineto.reserved_first.device0`, as a Kineto import writes them;
each absent, 0 or set), with recorded allocator settings or none, and compares:

* the baseline (unlimited reserved) peak, which starts from the first figure, and a capacity of 70%;
* which of the document's warnings the run prints: the first figure moving the model's peak by more
  than 5% of the recorded peak (with the first figure, the empty cache's peak and its ratio); the model
  more than 5% off the recorded peak (its ratio and cause: above, with the expandable-segments what-if
  when that comes within 5%; below on a trace without the first figure: import again; below with it:
  the allocator grew);
* that `--allocator-conf` does not change them, and that `--allocator ideal` prints none;
* `mhc info --json`'s `profiler_reserved_peak_bytes` and `profiler_reserved_first_bytes`.

The recorded peak is drawn at and beside each 5% boundary (a byte either side, and on it where it is
a whole number of bytes), so that every warning's condition is met, missed and touched.

Usage: reference_profiler_reserved_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose] [--keep]
Exit 0 when all agree, 1 otherwise (each difference printed with its trace's settings)."""
import json
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_profiler_reserved as ref  # noqa: E402

MIB = 1 << 20
CONFS = ["", "", "", "roundup_power2_divisions:4", "max_split_size_mb:40", "expandable_segments:True",
         "garbage_collection_threshold:0.6"]
ASKED = ["", "", "expandable_segments:True", "max_split_size_mb:24", "roundup_power2_divisions:[2:8,>:2]"]


def write_trace(path, allocs, meta):
    if path.exists():
        path.unlink()
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA synchronous = OFF")
    db.executescript((HERE.parent.parent / "trace" / "schema.sql").read_text())
    db.execute("PRAGMA user_version = 1")
    rows = {"format": "mhc-trace", "schema_version": "1", "source": "pytorch-kineto"}
    rows.update(meta)
    db.executemany("INSERT INTO meta VALUES (?, ?)", list(rows.items()))
    db.executemany("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                   "VALUES (?,0,0,?,?,?,?,3)", [(i, *a) for i, a in enumerate(allocs, 1)])
    db.commit()
    db.close()


def random_allocs(rng):
    """A few steps that grow and shrink the cache: rows at t = 0 (live before recording) and later."""
    sizes = [512, 4096, MIB - 1, MIB + 1, 3 * MIB, 9 * MIB, 11 * MIB, 21 * MIB, 40 * MIB, 100 * MIB]
    streams = rng.choice([[0], [0], [0, 7]])
    out, t = [], 0
    for _ in range(rng.choice([0, 0, 1, 3])):   # the bytes live before recording
        out.append([rng.choice(sizes) if rng.random() < 0.5 else rng.randint(1, 64 * MIB), 0, None, 0])
    for _ in range(rng.randint(1, 4)):
        live = []
        for _ in range(rng.randint(1, 12)):
            t += rng.choice([0, 1, rng.randint(1, 500)])
            n = rng.choice(sizes) if rng.random() < 0.5 else int(2 ** rng.uniform(9, 28))
            live.append([n, t, None, rng.choice(streams)])
            if rng.random() < 0.3 and live:
                victim = rng.choice(live)
                victim[2] = t + rng.choice([0, 1, 5])
        for a in live:
            if a[2] is None and rng.random() < 0.85:
                t += rng.choice([0, 1, 30])
                a[2] = t
        out += live
        t += rng.randint(1, 100)
    for a in out:
        if a[2] is not None and a[2] < a[1]:
            a[2] = a[1]
    out.sort(key=lambda a: a[1])
    return [tuple(a) for a in out]


def boundaries(model, empty, expandable):
    """Recorded peaks R at which a condition changes: |x - R| = R/20 for x the model or the what-if
    (R = 20x/21 or 20x/19), and model - empty = R/20 (R = 20 (model - empty))."""
    out = []
    for x in (model, expandable):
        out += [20 * x / 21, 20 * x / 19]
    if model > empty:
        out.append(20 * (model - empty))
    return [r for r in out if r >= 1]


def choose_recorded(rng, model, empty, expandable):
    r = rng.random()
    if r < 0.6:
        b = rng.choice(boundaries(model, empty, expandable) or [model])
        return max(1, int(b) + rng.choice([-1, 0, 0, 1, 2]))
    if r < 0.8:
        return max(1, int(model * rng.choice([0.5, 0.8, 0.96, 1.0, 1.04, 1.2, 2.5])))
    return rng.randint(1, 2 * model + 1)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


SIZE = r"(\d+(?:\.\d\d)? (?:B|KiB|MiB|GiB|TiB))"
FIRST = re.compile(r"starts from the " + SIZE + r" the profiler recorded reserved at its first memory event.*?"
                   r"from an empty cache the model reserves " + SIZE + r" \(x(\d+\.\d{3})\)")
OFF = re.compile(r"reserves " + SIZE + r" at unlimited capacity where the profiler recorded a reserved peak of "
                 + SIZE + r" \(Total Reserved, x(\d+\.\d{3})\)")
EXPANDABLE = re.compile(r"with expandable segments it reserves " + SIZE + r" \(x(\d+\.\d{3})\)")


def said(warnings):
    """The facts the run's warnings state about the profiler's figures (one warning may state both)."""
    out = []
    for w in warnings:
        m = FIRST.search(w)
        if m:
            out.append({"kind": "first", "first": m[1], "empty": m[2], "ratio": m[3], "text": w})
        m = OFF.search(w)
        if m:
            rest = w[m.end():]
            f = {"kind": "off", "model": m[1], "recorded": m[2], "ratio": m[3], "text": w,
                 "cause": ("import again" if "import it again" in rest else
                           "grew" if "reserved more during the trace" in rest else
                           "settings" if "took more segments" in rest else "?")}
            x = EXPANDABLE.search(rest)
            if x:
                f["expandable"], f["expandable_ratio"] = x[1], x[2]
            out.append(f)
        elif ("Total Reserved" in w or "first memory event" in w) and not FIRST.search(w):
            out.append({"kind": "unread", "text": w})
    return out


def compare_warnings(mine, got):
    problems = []
    kinds = sorted(w["kind"] for w in mine["warnings"])
    gkinds = sorted(w["kind"] for w in got)
    if kinds != gkinds:
        return [f"warnings {gkinds}, the document's {kinds}: {sorted({w['text'] for w in got})}"]
    for w in mine["warnings"]:
        g = next(x for x in got if x["kind"] == w["kind"])
        if w["kind"] == "first":
            want = (ref.size_text(w["first"]), ref.size_text(w["empty"]), f"{w['ratio']:.3f}")
            if (g["first"], g["empty"], g["ratio"]) != want:
                problems.append(f"first-figure warning: {(g['first'], g['empty'], g['ratio'])}, the document's {want}")
        else:
            want = (ref.size_text(mine["model"]), ref.size_text(mine["recorded"]), f"{w['ratio']:.3f}", w["cause"],
                    ref.size_text(w["expandable"]) if "expandable" in w else None,
                    f"{w['expandable_ratio']:.3f}" if "expandable" in w else None)
            have = (g["model"], g["recorded"], g["ratio"], g["cause"], g.get("expandable"), g.get("expandable_ratio"))
            if have != want:
                problems.append(f"off warning: {have}, the document's {want}: {g['text']}")
    return problems


def one(mhc, work, rng, i, verbose):
    allocs = random_allocs(rng)
    conf = rng.choice(CONFS)
    meta = {"allocator.conf": conf} if conf else {}
    empty = ref.reserved_peak(allocs, conf)
    fr = rng.random()
    if fr < 0.15:
        first = None
    elif fr < 0.3:
        first = 0
    else:   # under, at or over the model's own peak
        first = max(1, int(empty * rng.choice([0.3, 0.9, 1.0, 1.04, 1.06, 1.3, 2.0])) + rng.choice([0, 1, 512]))
    if first is not None:
        meta["kineto.reserved_first.device0"] = str(first)
    model = ref.reserved_peak(allocs, conf, first or None)
    c = ref.ra.Conf(conf)
    c.update("expandable_segments:True")
    expandable = ref.reserved_peak(allocs, c, first or None)
    pr = rng.random()
    if pr < 0.08:
        recorded = None
    elif pr < 0.12:
        recorded = 0
    else:
        recorded = choose_recorded(rng, model, empty, expandable)
    if recorded is not None:
        meta["kineto.reserved_peak.device0"] = str(recorded)
    trace = work / f"t{i}.db"
    write_trace(trace, allocs, meta)
    asked = rng.choice(ASKED)
    mine = ref.predict(allocs, meta, 0, asked)
    label = f"run {i}: {len(allocs)} allocations, conf '{conf}', first {first}, recorded {recorded}"
    problems = []

    cmd = [mhc, "simulate", str(trace), "--capacity", "unlimited", "--json", "--no-store"]
    rc, out, err = run(cmd + (["--allocator-conf", asked] if asked else []))
    if rc != 0:
        return label, [f"simulate exit {rc}: {err.strip()[:300]}"]
    res = json.loads(out)
    if not asked and res["metrics"]["baseline_peak_bytes"] != mine["model"]:
        problems.append(f"baseline peak {res['metrics']['baseline_peak_bytes']:.0f}, the document's {mine['model']}")
    problems += compare_warnings(mine, said(res.get("warnings", [])))
    if asked:
        label += f", --allocator-conf {asked}"

    rc, out, err = run([mhc, "simulate", str(trace), "--capacity", "70%", "--json", "--no-store"])
    if rc not in (0, 3):
        problems.append(f"simulate 70%: exit {rc}: {err.strip()[:200]}")
    else:
        cap = json.loads(out)["metrics"]["capacity_bytes"]
        if cap != mine["model"] * 70 // 100:
            problems.append(f"70% is {cap} B, the document's {mine['model'] * 70 // 100} (of {mine['model']})")

    if rng.random() < 0.3:
        rc, out, err = run([mhc, "simulate", str(trace), "--capacity", "unlimited", "--json", "--no-store",
                            "--allocator", "ideal"])
        extra = said(json.loads(out).get("warnings", [])) if rc == 0 else [{"text": err}]
        if extra:
            problems.append(f"--allocator ideal says {[w['text'] for w in extra]}")

    rc, out, err = run([mhc, "info", str(trace), "--json"])
    if rc != 0:
        problems.append(f"info exit {rc}: {err.strip()[:200]}")
    else:
        info = next((m for m in json.loads(out)["memory"] if m["device"] == 0), {})
        for key, want in (("profiler_reserved_peak_bytes", mine["recorded"]),
                          ("profiler_reserved_first_bytes", mine["info_first"])):
            have = info.get(key)
            if have != want:
                problems.append(f"mhc info {key} {have}, the document's {want}")
    if verbose:
        print(label, [w["kind"] + ":" + w.get("cause", "") for w in mine["warnings"]])
    return label, problems


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(opts.get("seed", 1)))
    runs = int(opts.get("runs", 100))
    bad = 0
    for i in range(runs):
        label, problems = one(mhc, work, rng, i, "verbose" in opts)
        if problems:
            bad += 1
            print(f"DIFFER {label}")
            for p in problems[:6]:
                print(f"  {p}")
        elif "keep" not in opts:
            (work / f"t{i}.db").unlink(missing_ok=True)
    print(f"{runs - bad} of {runs} traces agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
