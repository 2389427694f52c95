#!/usr/bin/env python3
"""Compares traces (captured by mhc-torch or written by `mhc generate`) on the figures of
docs/torch.md: peak live bytes, saved activation bytes per layer, kernels per step, estimated step
time, and the peak's split by category.

    python3 bench/torch/compare_traces.py TRACE.db [TRACE.db ...]

Only the standard library: the figures are plain SQL over the documented schema.
"""
import sqlite3
import sys


def figures(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    q = lambda sql, *a: db.execute(sql, a).fetchall()  # noqa: E731
    meta = dict(q("SELECT key, value FROM meta"))
    # Peak of live bytes over time (frees before allocations at one instant, as the simulator does).
    events = []
    for b, ta, tf in q("SELECT bytes, t_alloc, t_free FROM allocations"):
        events.append((ta, 1, b))
        if tf is not None:
            events.append((tf, 0, -b))
    live = peak = 0
    at = {}
    for t, _, d in sorted(events):
        live += d
        if live > peak:
            peak = live
    # Split of the peak: bytes per category live at the peak instant.
    t_peak = None
    live = 0
    for t, _, d in sorted(events):
        live += d
        if live == peak:
            t_peak = t
            break
    for cat, b in q("SELECT c.name, sum(a.bytes) FROM allocations a JOIN categories c ON c.id = a.category "
                    "WHERE a.t_alloc <= ? AND (a.t_free IS NULL OR a.t_free > ?) GROUP BY 1", t_peak, t_peak):
        at[cat] = b
    steps = q("SELECT idx, t_start, t_end FROM markers WHERE kind = 0 ORDER BY idx")
    s0 = steps[-1]
    kernels_step = q("SELECT count(*) FROM kernels WHERE t_start >= ? AND t_end <= ?", s0[1], s0[2])[0][0]
    fwd = q("SELECT m.t_start, m.t_end FROM markers m JOIN strings s ON s.id = m.name WHERE m.kind = 1 "
            "AND s.text LIKE '%forward' AND m.t_start >= ? AND m.t_end <= ?", s0[1], s0[2])
    layers = len({(a, b) for a, b in fwd})
    act = 0
    for a, b in fwd:
        act += q("SELECT coalesce(sum(bytes), 0) FROM allocations WHERE category = 3 AND t_alloc >= ? AND t_alloc < ?",
                 a, b)[0][0]
    db.close()
    return {
        "trace": path,
        "source": meta.get("source", "?"),
        "peak_gib": peak / 2**30,
        "act_per_layer_mib": act / max(layers, 1) / 2**20,
        "layers": layers,
        "kernels_per_step": kernels_step,
        "step_ms": (s0[2] - s0[1]) / 1e6,
        "at_peak_gib": {k: v / 2**30 for k, v in sorted(at.items())},
        # meta torch_version / transformers_version, as `mhc info` prints them ("" if none)
        "versions": (f"torch {meta['torch_version']}" + (f", transformers {meta['transformers_version']}"
                                                          if "transformers_version" in meta else ""))
                    if "torch_version" in meta else "",
    }


def main(paths):
    print("| trace | source | peak GiB | activations / layer MiB | kernels / step | est. step ms | at the peak (GiB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    seen = {}
    for p in paths:
        f = figures(p)
        if f["versions"] and seen and f["versions"] not in seen.values():
            first = next(iter(seen.items()))
            print(f"warning: traces captured with different versions are compared: {first[0]} ({first[1]}) "
                  f"and {p} ({f['versions']})", file=sys.stderr)
        if f["versions"]:
            seen.setdefault(p, f["versions"])
        split = ", ".join(f"{k} {v:.1f}" for k, v in f["at_peak_gib"].items() if v >= 0.05)
        print(f"| {p} | {f['source']} | {f['peak_gib']:.2f} | {f['act_per_layer_mib']:.1f} | {f['kernels_per_step']} "
              f"| {f['step_ms']:.1f} | {split} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
