#!/usr/bin/env python3
"""Figures gpu-check prints about its recordings (standard library only).

    record_stats.py overhead BASE.json BASE2.json REC.json NOACC.json NATIVE_BASE.json NATIVE_REC.json
        median step times (after the warm-up steps) and the overhead of recording; a missing or
        empty file counts as "n/a"
    record_stats.py trace TRACE.db [LOOP.json]
        what the recorder wrote: allocations (tensor- or segment-level?), labels, kernels with
        a step, accesses, marker kinds, the recorder's meta entries; with the recorded loop's
        JSON line (train_loop.py), the trace's live and reserved peaks against the allocator's
        own max_memory_allocated and max_memory_reserved

With FIGURES=FILE in the environment, the same figures are also merged into that JSON file
(gpu-check's summary.json takes them from there).
"""
import os
import json
import sqlite3
import statistics
import sys


def step_ms(path):
    """The loop's median step time: its own median_ms (train_loop.py: after its warm-up steps),
    else the median of step_s after 5."""
    try:
        lines = [l for l in open(path) if l.startswith("{")]
        r = json.loads(lines[-1])
        if r.get("median_ms") is not None:
            return r["median_ms"]
        return statistics.median(r["step_s"][5:]) * 1e3
    except (OSError, IndexError, KeyError, ValueError, statistics.StatisticsError):
        return None


def add_figures(key, value):
    """Merges {key: value} into $FIGURES (written whole and renamed: never half a file)."""
    path = os.environ.get("FIGURES")
    if not path:
        return
    try:
        with open(path) as f:
            figures = json.load(f)
    except (OSError, ValueError):
        figures = {}
    figures[key] = value
    with open(path + ".part", "w") as f:
        json.dump(figures, f, indent=1)
    os.replace(path + ".part", path)


def overhead(paths):
    names = ["baseline cudaMallocAsync", "baseline, after the recordings", "record --torch",
             "record --torch --no-accesses", "baseline native allocator", "record (native allocator)"]
    ms = [step_ms(p) for p in paths]
    print("median step time (ms, after the warm-up steps):")
    for n, m in zip(names, ms):
        print(f"  {n:30s} {'n/a' if m is None else f'{m:.3f}'}")
    b1, b2, r1, r2, bn, rn = ms
    add_figures("median_step_ms", dict(zip(names, ms)))
    if None not in (b1, b2, r1, r2):
        base = (b1 + b2) / 2
        print(f"overhead vs the mean cudaMallocAsync baseline {base:.3f} ms:")
        print(f"  kernels + memory + accesses: {100 * (r1 / base - 1):+.2f}%")
        print(f"  kernels + memory only:       {100 * (r2 / base - 1):+.2f}%")
        print(f"  access inference alone:      {100 * (r1 - r2) / base:+.2f}% of a step")
        print(f"  baseline drift between runs: {100 * abs(b2 - b1) / base:.2f}%")
        add_figures("overhead", {"all": r1 / base - 1, "no_accesses": r2 / base - 1,
                                 "access_inference_share_of_step": (r1 - r2) / base, "baseline_drift": abs(b2 - b1) / base})
    if bn and rn:
        print(f"  native allocator, all on:    {100 * (rn / bn - 1):+.2f}%")
        add_figures("overhead_native", rn / bn - 1)


def _peak(rows):
    """Peak of the sum of live rows (bytes, t_alloc, t_free): frees before allocations at one time."""
    events = sorted([(ta, 1, b) for b, ta, _ in rows] + [(tf, 0, -b) for b, _, tf in rows if tf is not None])
    live = peak = 0
    for _, _, d in events:
        live += d
        peak = max(peak, live)
    return peak


def _loop_peaks(path):
    try:
        r = json.loads([l for l in open(path) if l.startswith("{")][-1])
        return r.get("peak_allocated"), r.get("peak_reserved")
    except (OSError, IndexError, ValueError):
        return None, None


def trace(path, loop=None):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sizes = [r[0] for r in c.execute("SELECT bytes FROM allocations")]
    if sizes:
        print(f"  allocations {len(sizes)}, median {statistics.median(sizes):.0f} B, max {max(sizes)} B")
    for label, n in c.execute("SELECT s.text, count(*) FROM allocations a JOIN strings s ON s.id = a.label "
                              "GROUP BY 1 ORDER BY 2 DESC LIMIT 12"):
        print(f"    {label}: {n}")
    n_acc = c.execute("SELECT count(*) FROM accesses").fetchone()[0]
    n_k = c.execute("SELECT count(*) FROM kernels").fetchone()[0]
    n_ks = c.execute("SELECT count(*) FROM kernels WHERE step >= 0").fetchone()[0]
    print(f"  kernels {n_k} ({n_ks} with a step), accesses {n_acc}")
    for k, n in c.execute("SELECT kind, count(*) FROM markers GROUP BY 1"):
        print(f"    marker kind {k}: {n}")
    meta = {}
    for k, v in c.execute("SELECT key, value FROM meta WHERE key LIKE 'record.%' OR key IN ('complete', "
                          "'dropped_records', 'cupti_overhead_ns', 'cupti_overhead_records', 'device_name', "
                          "'driver_cuda_version')"):
        print(f"    {k} = {v}")
        meta[k] = v
    figures = {"allocations": len(sizes), "kernels": n_k, "kernels_with_step": n_ks, "accesses": n_acc, "meta": meta}
    # The recorder's peaks against the allocator's own (docs/recording.md, "Reserved memory"):
    # live bytes from the allocation rows, reserved from the segments rows, on the GPU (device 0).
    live = _peak(c.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall())
    has_segments = c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'segments'").fetchone()[0]
    reserved = _peak(c.execute("SELECT bytes, t_alloc, t_free FROM segments WHERE device = 0").fetchall()) \
        if has_segments else 0
    allocated, loop_reserved = _loop_peaks(loop) if loop else (None, None)
    def vs(mine, theirs):
        return f"{mine} B" + ("" if not theirs else f" (the loop's own {theirs} B: {100 * (mine / theirs - 1):+.2f}%)")
    print(f"  peak live {vs(live, allocated)}; peak reserved (segments) {vs(reserved, loop_reserved)}")
    figures.update(peak_live=live, peak_reserved=reserved, loop_peak_allocated=allocated, loop_peak_reserved=loop_reserved)
    add_figures("trace " + os.path.basename(path), figures)


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "overhead":
        overhead(sys.argv[2:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "trace":
        trace(*sys.argv[2:])
    else:
        sys.exit(__doc__)
