#!/usr/bin/env python3
"""Runs `mhc simulate` beside reference_outside.py (an outside reading of docs/simulator.md) on
random traces written here and on `mhc generate` traces, under random links (each direction's
own bandwidth and latency through a link profile, copy engines, duplex factor, contention
shares, a swap-operation cap), host buffers, capacities and memory sample counts, and compares
the run's figures, OOM report, kernel times and memory timeline.

Usage: reference_outside_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose] [--second-reading]
       [--edges=A,B] [--prefetchers=A,B]
--edges=A,B: every random trace of these shapes (EDGES: instant, one, frees_first, never_freed, ties,
huge, streams, leak); without it two random traces in five take one of them.
--move=far|wide: every random trace, whatever its shape, also with its times moved as --edges=far or
wide moves them (the learning prefetchers' steps, --edges=leak or markers, at the range's ends).
--prefetchers=A,B: with --second-reading, only these (none, lookahead, periodic, capuchin, forecast).
--second-reading: instead, the same traces and links through reference_sim.py (the first reading:
every policy and prefetcher, both allocators), compared by reference_compare.py.
--ranks: instead, generated jobs of up to 4 ranks through `simulate --ranks` and reference_coupled.py.
--random-ranks: instead, jobs of 2 to 4 ranks written here (random_job: collectives and point-to-point
kernels in one order, random compute, memory, timing and time origins) through the same two.
--public=DIR: instead, the public traces of DIR (tests/data/public: torch-snapshot, kineto, nsys) that
`mhc import` reads and that hold GPU memory, imported once into WORKDIR, each run on the next of them
(in name order) under a random configuration as for the random traces; --public-filter=A,B keeps
those whose file names contain A or B.
--step-time=DIR: instead, `mhc advise --step-time` on the captures in DIR (docs/advise.md, "A measured
step time"; those without copies or collectives), exit 77 when there are none.
Exit 0 when every run agrees, 1 otherwise (each difference printed).
"""
import json
import math
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_outside as ref  # noqa: E402
from reference_compare import public_traces  # noqa: E402

MiB = 1 << 20
TALLY = {}   # runs in which each figure was nonzero: what the fuzzing exercised
KINDS = ["swap_out", "swap_in", "evict_clean", "drop", "recompute", "stall", "oom", "prefetch"]   # run_events.kind
INT_METRICS = ["baseline_peak_bytes", "simulated_peak_bytes", "baseline_makespan_ns", "simulated_makespan_ns",
               "stall_ns", "stalls", "swap_ins", "swap_in_bytes", "swap_outs", "swap_out_bytes", "clean_evictions",
               "early_evictions", "prefetches", "host_peak_bytes", "kernels_reached", "last_kernel_reached",
               "capacity_bytes"]
FLOAT_METRICS = ["throughput_loss", "peak_reduction", "oom_slowdown"]
OOM_FIELDS = ["time_ns", "bytes_needed", "bytes_pinned", "bytes_short", "allocation", "kernel"]


def empty_trace(mhc, work):
    """A trace file with the schema and nothing in it: `mhc generate`'s, its rows deleted."""
    base = work / "empty.db"
    if not base.exists():
        subprocess.run([mhc, "generate", "--layers", "1", "--steps", "1", "--seq", "64", "-o", str(base)],
                       check=True, capture_output=True)
        db = sqlite3.connect(str(base))
        for table in ["allocations", "kernels", "accesses", "copies", "markers", "kernel_info", "modules",
                      "saved_tensors", "segments"]:
            db.execute(f"DELETE FROM {table}")
        db.execute("DELETE FROM meta WHERE key LIKE 'gen.%'")
        db.commit()
        db.execute("VACUUM")
        db.close()
    return base.read_bytes()


def random_trace(path, blank, rng, edges=None, skip=()):
    """Kernels on one or two streams, allocations alive over random spans (ties at instants on
    purpose), accesses of every mode, NCCL kernels, the trace's own memcpys both ways and host
    allocations (device -1); sometimes a second GPU (the simulator takes the larger peak) and
    sometimes no accesses at all (assumed)."""
    path.write_bytes(blank)
    db = sqlite3.connect(str(path))
    # rule 8's contention: any name containing "nccl" or "rccl", in any case ("RCCL_…", "…_NcCl_…")
    names = ["gemm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "elementwise", "ncclKernel_SendRecv", "softmax",
             "rcclKernel_AllGather", "fused_NcCl_wait", "RCCL_reduce"]
    db.executemany("INSERT OR REPLACE INTO strings (id, text) VALUES (?, ?)",
                   [(100 + i, n) for i, n in enumerate(names)])
    grid = rng.choice([1000, 5000, 20000])
    no_access = rng.random() < 0.15
    ids = {"k": 0, "a": 0, "c": 0}
    addr = [1 << 30]
    edge = (rng.choice(edges) if edges else rng.choice([e for e in EDGES if e not in skip]) if rng.random() < 0.4
            else None)
    devs = [0, 1] if rng.random() < 0.2 else [0]
    for dev in devs:   # "Accesses" are decided per device: sometimes only one of two has none
        device_rows(db, rng, dev, grid, no_access or (len(devs) == 2 and dev == 1 and rng.random() < 0.4), ids,
                    addr, edge)
    if len(devs) == 1 and rng.random() < 0.1:   # "Device": a GPU with the same peak, ties to the lowest number
        twin = rng.choice([1, 3])
        rows = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0 ORDER BY id").fetchall()
        for b, ta, tf in rows:
            ids["a"] += 1
            db.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category, "
                       "label) VALUES (?,?,?,?,?,?,0,3,0)", (ids["a"], twin, addr[0], b, ta, tf))
            addr[0] += b + 4096
    if rng.random() < 0.1:   # "Inputs", order-only timing: simulated as any other, said so
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('timing', 'order-only')")
    if edge == "far":   # every time near an end of the trace's range (+-2^62 ns, docs/trace-format.md)
        far_times(db, rng)
    if edge == "wide":   # a gap of 2^61 ns in the middle: a span near the range's width
        wide_times(db, rng)
    db.commit()
    db.close()


# Edge cases the random shapes rarely or never reach (docs/simulator.md, "Inputs"): every event at
# one instant (loss not defined), a single allocation (one or two events), frees tied with the
# allocations of the same instant (frees first), nothing ever freed, every time on a few
# instants (ties broken by kind, then row), one allocation larger than any share of the peak
# below 100% leaves room for, many streams, and steps that each keep what they made (a leak: the
# live bytes grow from step to step, a trend for `forecast`, and what an earlier step made is never
# used again), and steps from step markers ("Steps": fewer than half of the kernels carry a step;
# markers that overlap, start together, end at a kernel's start, leave kernels out, and layer
# markers beside them).
EDGES = ["instant", "one", "frees_first", "never_freed", "ties", "huge", "streams", "leak", "markers", "far", "wide"]


def far_times(db, rng):
    """Every recorded time moved by one offset, so that the trace lies just above -2^62 ns, around 0 on
    the negative side, or just below 2^62 ns less room for the stalls (a shift grows the times): a
    time range's end is no start of anything (the first transfer has no previous one, whatever the cap
    on swap operations)."""
    cols = [("allocations", "t_alloc"), ("allocations", "t_free"), ("kernels", "t_start"), ("kernels", "t_end"),
            ("copies", "t_start"), ("copies", "t_end"), ("markers", "t_start"), ("markers", "t_end")]
    lo = min(v for tb, c in cols for (v,) in db.execute(f"SELECT min({c}) FROM {tb}") if v is not None)
    hi = max(v for tb, c in cols for (v,) in db.execute(f"SELECT max({c}) FROM {tb}") if v is not None)
    limit = 1 << 62
    off = rng.choice([-limit - lo + rng.choice([0, 1, 977]), -hi - rng.choice([1, 10 ** 6]),
                      limit - hi - (1 << 50)])
    for tb, c in cols:
        db.execute(f"UPDATE {tb} SET {c} = {c} + ? WHERE {c} IS NOT NULL", (off,))


def wide_times(db, rng):
    """Every time after a random cut moved 2^61 ns later (the order of every event kept): a trace whose
    span is near the range's width, for the memory samples' buckets ((r - first) x N / (span + 1)
    with N up to 10^6) and the loss's ratio of makespans."""
    cols = [("allocations", "t_alloc"), ("allocations", "t_free"), ("kernels", "t_start"), ("kernels", "t_end"),
            ("copies", "t_start"), ("copies", "t_end"), ("markers", "t_start"), ("markers", "t_end")]
    times = sorted({v for tb, c in cols for (v,) in db.execute(f"SELECT {c} FROM {tb}") if v is not None})
    cut = rng.choice(times) if times else 0
    for tb, c in cols:
        db.execute(f"UPDATE {tb} SET {c} = {c} + ? WHERE {c} > ?", (1 << 61, cut))


def edge_allocs(rng, edge, kernels, end_t, grid, sizes):
    """(bytes, t_alloc, t_free) of an edge case, or None for the random shapes."""
    t0 = kernels[0][4] if kernels else 0
    if edge == "instant":
        return [(rng.choice(sizes), t0, rng.choice([None, t0])) for _ in range(rng.randint(1, 12))]
    if edge == "one":
        return [(rng.choice(sizes), t0, rng.choice([None, t0, t0 + rng.randint(1, 3 * grid)]))]
    if edge == "frees_first":   # a chain: each freed at the instant the next is made, and the rest at the end
        times = sorted({rng.choice([k[4], k[5]]) for k in kernels} | {t0})
        out = [(rng.choice(sizes), a, b) for a, b in zip(times, times[1:])]
        return out + [(rng.choice(sizes), times[-1], None)] + [(rng.choice(sizes), t0, times[-1])
                                                               for _ in range(rng.randint(0, 3))]
    if edge == "leak":   # at some kernel starts, kept to the end; others freed within a few kernels
        out = []
        for i, k in enumerate(kernels):
            if rng.random() < 0.5:
                out.append((rng.choice(sizes), k[4], None))
            if rng.random() < 0.5:
                later = kernels[min(len(kernels) - 1, i + rng.randint(0, 3))]
                out.append((rng.choice(sizes), k[4], rng.choice([later[4], later[5]])))
        return out or [(rng.choice(sizes), t0, None)]
    if edge == "huge":   # larger than 50% of the peak: an OOM at every share below its part of the peak
        out = [(rng.choice(sizes[:5]), rng.choice([k[4] for k in kernels]), None) for _ in range(rng.randint(2, 10))]
        ta = rng.choice([k[4] for k in kernels])
        return out + [(rng.choice([1 << 30, 3 << 30]), ta, rng.choice([None, ta, rng.randint(ta, end_t)]))]
    return None


def step_markers(db, rng, kernels, steps, ids):
    """Step markers over the kernels' step runs (and a few more), the step column mostly cleared."""
    keep = rng.choice([0, len(kernels) // 3])   # fewer than half keep their step: the markers decide
    firsts = {}
    for k in kernels:
        firsts.setdefault(k[6], k)
    rows = []
    for st, k in sorted(firsts.items()):
        nxt = firsts.get(st + 1)
        start = k[4]
        end = max(start + 1, nxt[4] if nxt else max(x[5] for x in kernels) + 1)
        r = rng.random()
        if r < 0.15 and nxt:   # ends before the next step's first start: kernels in no step
            end = max(start + 1, end - rng.randint(1, 3) * 500)
        elif r < 0.3:          # starts late: its first kernels take the previous marker, or none
            start = min(end - 1, start + rng.randint(1, 3) * 500)
        rows.append((start, end, 0))
        if rng.random() < 0.4:   # another step marker starting at the same instant, ending at a kernel's start
            inside = [x[4] for x in kernels if start < x[4] < end]
            rows.append((start, rng.choice(inside) if inside else end + 2000, 0))
        if rng.random() < 0.3:   # a layer marker: not a step
            rows.append((start, end, 1))
    rng.shuffle(rows)   # row order is not start order
    for start, end, kind in rows:
        ids["m"] = ids.get("m", 0) + 1
        db.execute("INSERT INTO markers (id, name, t_start, t_end, kind, idx) VALUES (?,100,?,?,?,?)",
                   (ids["m"], start, end, kind, ids["m"]))
    return [k[:6] + ((k[6] if i < keep else -1),) for i, k in enumerate(kernels)]


def device_rows(db, rng, dev, grid, no_access, ids, addr, edge=None):
    """One GPU's kernels, allocations, accesses and copies (ids continue in `ids`)."""
    big = rng.random() < 0.2 and edge is None   # sometimes a longer trace: more interplay between the rules
    nk = rng.randint(8, 150 if big else 40)
    if edge == "one":
        nk = rng.choice([0, 1])
    raw = []
    t = rng.randint(0, 3) * grid
    streams = rng.choice([4, 8, 16]) if edge == "streams" else rng.choice([1, 1, 2])
    for _ in range(nk):
        dur = rng.choice([0, grid, 2 * grid, 5 * grid, rng.randint(1, 10 * grid)])
        if edge == "instant":
            dur = 0
        elif edge == "ties":
            dur = rng.choice([0, grid, 2 * grid])
        raw.append((rng.randrange(streams), 100 + rng.choice([0, 0, 1, 2, 2, 4, 5, 6, 7]), t, dur))
        if edge == "instant":
            continue
        t += dur + rng.choice([0, 0, grid, rng.randint(0, 3 * grid)])
        if edge == "ties":
            t = raw[-1][2] + rng.choice([0, 0, grid, 2 * grid])   # often the same instant as the last start
        if streams >= 2 and rng.random() < 0.3:   # the next kernel overlaps this one (on another stream, or later)
            t = max(t - dur // 2, raw[-1][2])
    kernels, ends = [], {}
    steps = rng.choice([0, 0, 2, 3, 4])   # a step column (the learning prefetchers), in runs of kernels
    if edge in ("leak", "markers"):
        steps = rng.choice([4, 5, 6, 8])
    for i, (stream, name, start, dur) in enumerate(raw):   # kernels of one stream never overlap
        start = max(start, ends.get(stream, start))
        ends[stream] = start + dur
        ids["k"] += 1
        kernels.append((ids["k"], dev, stream, name, start, start + dur, i * steps // nk if steps else -1))
    end_t = max((k[5] for k in kernels), default=t) + grid
    if edge == "markers" and kernels:
        kernels = step_markers(db, rng, kernels, steps, ids)
    allocs = []
    sizes = [512, 4096, MiB, 3 * MiB + 512, 16 * MiB, 40 * MiB, 100 * MiB]
    if rng.random() < 0.1:   # a byte and a few: transfers of well under a nanosecond's worth (rule 8: at least 1 ns)
        sizes = sizes[:3] + [1, 7, 100]
    shaped = edge_allocs(rng, edge, kernels, end_t, grid, sizes)
    for i in range(len(shaped) if shaped is not None else rng.randint(6, 120 if big else 40)):
        if shaped is not None:
            b, ta, tf = shaped[i]
        else:
            b = rng.choice(sizes) if rng.random() < 0.6 else rng.randint(1, 200) * 512 * 1024
            if edge == "ties":   # on the kernels' instants only
                ta = rng.choice([rng.choice(kernels)[4], rng.choice(kernels)[5]])
            else:
                ta = rng.choice([rng.choice(kernels)[4], rng.choice(kernels)[5], rng.randint(0, end_t)])
            r = rng.random()
            tf = None if r < 0.15 else ta if r < 0.2 else rng.choice([rng.choice(kernels)[4], rng.choice(kernels)[5],
                                                                        rng.randint(ta, end_t + grid)])
        if edge == "never_freed":
            tf = None
        if tf is not None and tf < ta:
            tf = ta
        ids["a"] += 1
        allocs.append((ids["a"], dev, addr[0], b, ta, tf, rng.randrange(streams) if edge == "streams" else 0, 3, 0))
        addr[0] += b + 4096
    if dev == 0:
        for _ in range(rng.randint(0, 5)):   # the program's host memory
            ta = rng.randint(0, end_t)
            ids["a"] += 1
            allocs.append((ids["a"], -1, addr[0], rng.choice(sizes), ta,
                           rng.choice([None, ta, ta + rng.randint(1, end_t)]), 0, 2, 0))
            addr[0] += 200 * MiB
    db.executemany("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category, label) "
                   "VALUES (?,?,?,?,?,?,?,?,?)", allocs)
    db.executemany("INSERT INTO kernels (id, device, stream, name, t_start, t_end, step, grid_x, grid_y, grid_z, "
                   "block_x, block_y, block_z, shared_mem, registers, correlation) "
                   "VALUES (?,?,?,?,?,?,?,1,1,1,1,1,1,0,0,0)", kernels)
    acc = set()
    for kid, _, _, _, s, e, _ in ([] if no_access else kernels):
        live = [a for a in allocs if a[1] == dev and a[4] <= s and (a[5] is None or a[5] >= e)]
        for a in rng.sample(live, min(len(live), rng.randint(0, 6 if big else 4))):
            acc.add((kid, a[0], rng.choice([1, 2, 3])))
    db.executemany("INSERT INTO accesses (kernel, allocation, mode) VALUES (?,?,?)", sorted(acc))
    copies = []
    for _ in range(rng.randint(0, 6)):
        s = rng.randint(0, end_t)
        ids["c"] += 1
        copies.append((ids["c"], dev, 3, rng.choice([0, 1]), 8192, s, s + rng.randint(0, 5 * grid)))
    db.executemany("INSERT INTO copies (id, device, stream, kind, bytes, t_start, t_end) VALUES (?,?,?,?,?,?,?)",
                   copies)


def random_link(rng, work):
    """A link: a preset with overrides, or a profile file with each direction's own figures."""
    if rng.random() < 0.4:
        name = rng.choice(list(ref.PRESETS))
        link = ref.preset(name)
        args = ["--link", name]
        if rng.random() < 0.5:
            link.engines = rng.choice([1, 2, 3])
            args += ["--copy-engines", str(link.engines)]
        if rng.random() < 0.5:
            lat = rng.choice([0, 1.5, 6, 40])
            link.lat = [lat * 1e-6, lat * 1e-6]
            args += ["--latency", f"{lat}us"]
        if rng.random() < 0.5:
            link.duplex = rng.choice([0.3, 0.5, 1.0])
            args += ["--duplex-factor", str(link.duplex)]
    else:
        h2d, d2h = rng.choice([3e9, 12e9, 25e9, 55e9]), rng.choice([2e9, 12e9, 24.5e9, 50e9])
        hl, dl = rng.choice([0, 2e-6, 6e-6, 3e-5]), rng.choice([0, 5e-6, 1e-5])
        link = ref.Link(h2d, d2h, hl, dl, rng.choice([1, 2, 4]), rng.choice([0.25, 0.5, 0.9, 1.0]),
                        rng.choice([0, 0.3, 0.5, 0.9]), rng.choice([0, 0.2, 0.5]))
        prof = {"name": "fuzz", "h2d": {"bandwidth_Bps": h2d, "latency_s": hl},
                "d2h": {"bandwidth_Bps": d2h, "latency_s": dl}, "copy_engines": link.engines,
                "duplex_factor": link.duplex, "nccl_share": link.nccl_share, "memcpy_share": link.memcpy_share}
        f = work / "link.json"
        f.write_text(json.dumps(prof))
        args = ["--link", str(f)]
    if rng.random() < 0.3:
        link.nccl_share = rng.choice([0.0, 0.6])
        args += ["--nccl-share", str(link.nccl_share)]
    if rng.random() < 0.3:
        link.memcpy_share = rng.choice([0.0, 0.7])
        args += ["--memcpy-share", str(link.memcpy_share)]
    if rng.random() < 0.3:
        link.max_ops = rng.choice([3000, 20000, 1e5, 777])
        args += ["--max-swap-ops-per-sec", str(link.max_ops)]
    return link, args


def same_int(got, mine):
    """A metric is a double (run_metrics.value is REAL, --json prints the same number): beyond 2^53 ns
    (a trace near the ends of its time range) it holds the nearest double of the integer figure."""
    return int(got) == int(mine) if abs(int(mine)) <= 1 << 53 else float(got) == float(int(mine))


def run_one(mhc, trace, rng, work, verbose):
    link, largs = random_link(rng, work)
    policy = rng.choice(["lru", "largest", "belady"])
    k = rng.choice([0, 0, 2, 8])
    early = rng.random() < 0.8
    samples = rng.choice([4096, 4096, 1, 7, 64, 1000000])
    ratio = rng.choice([0, 0, 0.1, 0.5, 1])
    share = rng.choice([100, 95, 90, 80, 70, 60, 50, 40, 30, "peak", "peak-1"])
    db = sqlite3.connect(str(trace))
    host_rows = db.execute("SELECT count(*) FROM allocations WHERE device = -1").fetchone()[0]
    db.close()
    host_device = host_rows > 0 and rng.random() < 0.1   # --device -1: the host's pinned buffers alone
    tr = ref.Trace(str(trace), -1 if host_device else None)
    base_peak, _ = tr.live_walk()
    if isinstance(share, str):   # the limit at the peak in bytes, or a byte under it
        cap = max(1, base_peak - (share == "peak-1"))
        capacity = f"{cap}B"
    else:
        cap = math.floor(base_peak * share / 100)
        capacity = f"{share}%"
    cmd = [mhc, "simulate", str(trace), "--allocator", "ideal", "--policy", policy,
           "--prefetch", f"lookahead:{k}" if k else "none", "--capacity", capacity, "--json",
           "--cpu-buffer-ratio", str(ratio), "--memory-samples", str(samples)] + largs
    cmd += ([] if early else ["--no-early"]) + (["--device", "-1"] if host_device else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(str(c) for c in cmd[2:])
    if p.returncode not in (0, 3):
        return label, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    out = json.loads(p.stdout)
    got = out["metrics"]
    dev = out["device"]
    problems = []
    if host_device:
        TALLY["device -1"] = TALLY.get("device -1", 0) + 1
    if tr.device != dev:
        problems.append(f"device: mhc {dev}, outside {tr.device}")
        tr = ref.Trace(str(trace), dev)
    if bool(out["assumed_accesses"]) != tr.assumed:
        problems.append(f"assumed_accesses: mhc {out['assumed_accesses']}, outside {tr.assumed}")
    if tr.assumed:
        TALLY["assumed accesses"] = TALLY.get("assumed accesses", 0) + 1
    if out["timing"] != ("order-only" if tr.order_only else "exact"):
        problems.append(f"timing: mhc {out['timing']}, outside {'order-only' if tr.order_only else 'exact'}")
    # "Inputs", events all at one instant: said in a warning (not for order-only timing, said otherwise)
    instant = not tr.order_only and tr.first == tr.last
    said = any("is at one instant" in w for w in out["warnings"])
    if said != instant:
        problems.append(f"one-instant warning: mhc {said}, outside {instant}")
    if instant:
        TALLY["one instant"] = TALLY.get("one instant", 0) + 1
    host_cap = math.floor(cap * ratio) if ratio else 0
    sim = ref.Sim(tr, cap, policy, link, k, host_cap, early, samples).run()
    mine = sim.metrics
    if int(got["host_capacity_bytes"]) != (host_cap if ratio else -1):
        problems.append(f"host_capacity_bytes: mhc {got['host_capacity_bytes']}, outside {host_cap}")
    for key in INT_METRICS:
        if (key in mine) != (key in got and got[key] is not None):
            problems.append(f"{key}: mhc {got.get(key)}, outside {mine.get(key)}")
        elif key in mine and not same_int(got[key], mine[key]):
            problems.append(f"{key}: mhc {int(got[key])}, outside {mine[key]}")
    for key in FLOAT_METRICS:
        a, b = got.get(key), mine.get(key)
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"{key}: mhc {a}, outside {b}")
    if bool(out.get("oom")) != bool(sim.oom):
        problems.append(f"oom: mhc {out.get('oom')}, outside {sim.oom}")
    elif sim.oom:
        for key in OOM_FIELDS:
            if out["oom"][key] != sim.oom[key]:
                problems.append(f"oom.{key}: mhc {out['oom'][key]}, outside {sim.oom[key]}")
    stored = stored_run(trace)
    # the stored run holds the figures --json printed ("Time": oom_slowdown the same in both; an
    # OOM run's loss and peak reduction null in --json, absent from the store)
    for key in INT_METRICS + FLOAT_METRICS + ["oom_bytes_needed", "oom_bytes_pinned", "oom_bytes_short"]:
        a, b = got.get(key), stored["metrics"].get(key)
        if key == "capacity_bytes":
            continue   # a config entry, not a metric
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)):
            problems.append(f"stored {key}: {b}, --json {a}")
    kt = sorted((k2, v[0], v[1]) for k2, v in sim.kernel_times.items())
    if kt != stored["kernels"]:
        d = next((f"mhc {y}, outside {x}" for x, y in zip(kt, stored["kernels"]) if x != y),
                 f"{len(stored['kernels'])} rows, outside {len(kt)}")
        problems.append(f"run_kernels: {d}")
    ids = tr.ids
    mine_ev = sorted((KINDS.index(k), t0, t1, ids[a] if a is not None else 0, kern or 0, b)
                     for k, t0, t1, a, kern, b in sim.events)
    if mine_ev != stored["events"]:
        d = next((f"mhc {y}, outside {x}" for x, y in zip(mine_ev, stored["events"]) if x != y),
                 f"{len(stored['events'])} rows, outside {len(mine_ev)}")
        problems.append(f"run_events (kind, start, end, allocation, kernel, bytes): {d}")
    mem = [(t, int(d), int(h)) for t, d, h in stored["memory"]]
    if mem != sim.memory:
        d = next((f"mhc {y}, outside {x}" for x, y in zip(sim.memory, mem) if x != y),
                 f"{len(mem)} rows, outside {len(sim.memory)}")
        problems.append(f"run_memory: {d}")
    if verbose and problems:
        print("   ", cmd)
    for key in ("swap_outs", "swap_ins", "stalls", "oom", "prefetches", "early_evictions", "clean_evictions"):
        if mine.get(key):
            TALLY[key] = TALLY.get(key, 0) + 1
    for key in sim.seen:
        TALLY[key] = TALLY.get(key, 0) + 1
    return f"{label} [{out['run']}]", problems


def run_sweep(mhc, trace, rng, work):
    """`mhc sweep`'s answer (docs/simulator.md, "Sweep"): the bisection's share and the run at it."""
    if rng.random() < 0.5:
        name = rng.choice(list(ref.PRESETS))
        link, largs = ref.preset(name), ["--links", name]
    else:
        link, largs = random_link(rng, work)
        while len(largs) > 2 or largs[1] in ref.PRESETS:   # sweep takes no overrides: a profile file alone
            link, largs = random_link(rng, work)
        largs = ["--links" if a == "--link" else a for a in largs]
    policy = rng.choice(["lru", "largest", "belady"])
    k = rng.choice([0, 0, 2, 8])
    budget = rng.choice([0, 1, 3, 10, 50, 200])
    steps = rng.randint(1, 10)
    ratio = rng.choice([0, 0, 0.5])
    cmd = [mhc, "sweep", str(trace), "--allocator", "ideal", "--policies", policy, "--prefetchers",
           f"lookahead:{k}" if k else "none", "--capacities", "100%", "--budget", f"{budget}%",
           "--bisect-steps", str(steps), "--cpu-buffer-ratio", str(ratio)] + largs
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(str(c) for c in cmd[2:])
    if p.returncode != 0:
        return label, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    db = sqlite3.connect(str(trace))
    row = db.execute("SELECT id FROM runs WHERE name LIKE 'bisect:%' ORDER BY id DESC LIMIT 1").fetchone()
    got = None
    if row:
        got = dict(db.execute("SELECT key, value FROM run_metrics WHERE run = ?", row).fetchall())
        got["capacity_bytes"] = int(db.execute("SELECT value FROM run_config WHERE run = ? AND key = "
                                               "'capacity_bytes'", row).fetchone()[0])
    db.close()
    tr = ref.Trace(str(trace), None)
    peak, _ = tr.live_walk()

    def at(share):
        cap = math.floor(peak * share)
        sim = ref.Sim(tr, cap, policy, link, k, math.floor(cap * ratio) if ratio else 0).run()
        loss = sim.metrics["throughput_loss"]   # None at one instant: never within ("Inputs")
        return sim.metrics, (not sim.oom and loss is not None and loss <= budget / 100)

    mine = None
    m, ok = at(1.0)
    if ok and not tr.order_only:   # an order-only trace is not bisected (its budget is a share of time)
        lo, hi = 0.0, 1.0
        for _ in range(steps):
            mid = (lo + hi) / 2
            m, ok = at(mid)
            if ok:
                hi, mine = mid, m
            else:
                lo = mid
    problems = []
    if (got is None) != (mine is None):
        problems.append(f"answer: mhc {got and got['capacity_bytes']}, outside {mine and mine['capacity_bytes']}")
    elif mine:
        for key in INT_METRICS:
            if key in mine and key in got and not same_int(got[key], mine[key]):
                problems.append(f"answer {key}: mhc {int(got[key])}, outside {mine[key]}")
    if mine:
        TALLY["sweep answers"] = TALLY.get("sweep answers", 0) + 1
    return label + (f" [answer {mine['capacity_bytes']} B]" if mine else " [no answer]"), problems


def run_second(mhc, trace, rng, work, prefetchers=None):
    """The same random traces and links through the first reading (reference_sim.py, via
    reference_compare.compare): every policy and prefetcher, both allocators."""
    import reference_compare as first   # noqa: E402
    link, largs = random_link(rng, work)
    other = first.ref.Link(h2d_bps=link.bps[0], d2h_bps=link.bps[1], h2d_latency_s=link.lat[0],
                           d2h_latency_s=link.lat[1], copy_engines=link.engines, duplex_factor=link.duplex,
                           nccl_share=link.nccl_share, memcpy_share=link.memcpy_share, max_ops_per_sec=link.max_ops)
    ratio = rng.choice([0, 0, 0.5, 1])
    largs = largs + ["--cpu-buffer-ratio", str(ratio)]
    policy = rng.choice(["lru", "largest", "belady", "dtr", "cost_aware"])
    allocator = rng.choice(["ideal", "caching"])
    pre = rng.choice(prefetchers or ["none", "lookahead", "periodic", "capuchin", "forecast"])
    k = rng.choice([2, 8])
    share = rng.choice(["95%", "80%", "60%", "40%"])
    report = {}
    original = first.ref.Sim.oom_figures

    def keep(sim, a):   # the first reading's OOM figures of this run
        report.update(original(sim, a))
        return report

    first.ref.Sim.oom_figures = keep
    try:
        problems, got = first.compare(mhc, trace, policy, share, other, largs, k if pre == "lookahead" else 0,
                                      allocator, "", -1 if pre == "capuchin" else k if pre == "periodic" else 0,
                                      k if pre == "forecast" else 0)
    finally:
        first.ref.Sim.oom_figures = original
    if got.get("throughput_loss") is None and not got.get("oom"):
        TALLY["loss not defined"] = TALLY.get("loss not defined", 0) + 1
    if report and not problems:   # rule 7's figures beside short by (compared with the oom event)
        for key, v in report.items():
            if int(got.get(key, -1)) != v:
                problems.append(f"{key}: mhc {got.get(key)}, reference {v}")
        TALLY[f"oom {allocator}"] = TALLY.get(f"oom {allocator}", 0) + 1
        TALLY["oom fragmentation"] = TALLY.get("oom fragmentation", 0) + report["oom_fragmentation"]
    return f"{allocator} {policy} {pre}:{k} {share} {' '.join(largs)}", problems


def run_ranks(mhc, work, rng):
    """A generated job (data, tensor and pipeline parallel, up to 4 ranks, jittered) through
    `mhc simulate --ranks` and reference_coupled.py under a random link, policy and allocator."""
    import reference_compare as first   # noqa: E402
    preset = rng.choice(["gpt2-small", "llama2-7b", "mhc-27b"])
    dp, tp, pp = rng.choice([(2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 1, 2), (1, 2, 2), (4, 1, 1), (1, 1, 4)])
    layers = 4 if pp == 4 else rng.choice([2, 4])
    args = ["--preset", preset, "--layers", str(layers), "--steps", "2", "--seq", "64", "--dp", str(dp), "--tp",
            str(tp), "--pp", str(pp), "--micro-batches", str(rng.choice([1, 2]))]
    jitter = rng.choice([0, 0.1, 0.3])
    args += ["--seed", str(rng.randint(1, 99)), "--jitter", str(jitter)] if jitter else ["--jitter", "0"]
    for old in work.glob("job.rank*.db"):
        old.unlink()
    g = subprocess.run([mhc, "generate", "--all-ranks", "--force", "-o", str(work / "job.db")] + args,
                       capture_output=True, text=True)
    if g.returncode != 0:
        return " ".join(args), [f"generate: {g.stderr.strip()[:200]}"]
    paths = sorted(work.glob("job.rank*.db"))
    moved = []
    if rng.random() < 0.4:   # "Inputs": each rank simulates its own largest GPU, here GPU 1 beside a smaller GPU 0
        moved = rng.sample(paths, rng.randint(1, len(paths)))
        for path in moved:
            db = sqlite3.connect(str(path))
            for table in ("allocations", "kernels", "copies"):
                db.execute(f"UPDATE {table} SET device = 1")
            db.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                       "SELECT MAX(id) + 1, 0, 0, MIN(bytes), MIN(t_alloc), NULL, 0, 3 FROM allocations")
            db.commit()
            db.close()
        args.append(f"(ranks of {','.join(p.name for p in moved)} on GPU 1)")
    if rng.random() < 0.5:   # "Coupled ranks": ties go to the lowest global rank, whatever the files' order
        rng.shuffle(paths)
    link, largs = random_link(rng, work)
    other = first.ref.Link(h2d_bps=link.bps[0], d2h_bps=link.bps[1], h2d_latency_s=link.lat[0],
                           d2h_latency_s=link.lat[1], copy_engines=link.engines, duplex_factor=link.duplex,
                           nccl_share=link.nccl_share, memcpy_share=link.memcpy_share, max_ops_per_sec=link.max_ops)
    policy = rng.choice(["lru", "largest", "belady", "dtr", "cost_aware"])
    allocator = rng.choice(["ideal", "caching"])
    share = rng.choice(["95%", "80%", "60%", "45%"])
    problems, got = first.compare_job(mhc, paths, policy, share, other, largs, allocator)
    return (f"{len(paths)} ranks {' '.join(args)} {allocator} {policy} {share} {' '.join(largs)}: "
            f"job loss {got.get('throughput_loss')}"), problems


def random_job(work, blank, rng, far=0.2):
    """A job of 2 to 4 ranks written here (docs/trace-format.md, "Multi-rank traces"): the same
    cross-rank operations in the same order on every member (collectives of the whole job on
    stream 13, point-to-point between ranks 0 and 1 on stream 23, as Send/Recv kernels or as
    SendRecv kernels whose accesses give the role), random compute and memory between them, each
    rank's own timing (so that members reach a collective at different times: the slacks), and its
    own time origin on the job's clock. With probability `far`, every rank's times are moved towards
    -2^62 ns (each by its own offset, its time origin moved back by as much, so that the job's clock
    is unchanged; without job keys all by one offset, their common time 0 moving with them)."""
    n = rng.choice([2, 2, 3, 4])
    named = rng.random() < 0.6   # else no nccl.stream keys: each stream number is a communicator of its users
    identity = rng.random() < 0.8   # else no job keys at all: one job, ranked by the command line, one time 0
    ops = []
    for _ in range(rng.randint(1, 7)):
        if rng.random() < 0.35:
            ops.append(("p2p", rng.choice([0, 1])))   # the sender
        else:
            ops.append((rng.choice(["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]), None))
    names = {"gemm": 100, "ncclDevKernel_AllReduce_Sum_f32_RING_LL": 101, "ncclDevKernel_AllGather_RING_LL": 102,
             "ncclDevKernel_ReduceScatter_Sum_bf16": 103, "ncclKernel_Broadcast_RING": 104,
             "ncclDevKernel_SendRecv": 105, "ncclKernel_Send_x": 106, "ncclKernel_Recv_x": 107}
    op_name = {"AllReduce": 101, "AllGather": 102, "ReduceScatter": 103, "Broadcast": 104}
    grid = rng.choice([1000, 5000, 20000])
    sizes = [4096, MiB, 3 * MiB + 512, 16 * MiB, 40 * MiB, 100 * MiB]
    paths = []
    for r in range(n):
        path = work / f"rjob.rank{r}.db"
        path.write_bytes(blank)
        db = sqlite3.connect(str(path))
        db.executemany("INSERT OR REPLACE INTO strings (id, text) VALUES (?, ?)", [(v, k) for k, v in names.items()])
        meta = {"job.id": "fuzz-job", "world_size": str(n), "rank": str(r), "time_origin_ns": "0"} if identity else {}
        if named and identity:
            meta["nccl.stream.13"] = "world:" + ",".join(map(str, range(n)))
            if r < 2:
                meta["nccl.stream.23"] = "p01:0,1"
        db.execute("DELETE FROM meta WHERE key IN ('job.id', 'world_size', 'rank', 'time_origin_ns')")
        db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(meta.items()))
        kernels, allocs, acc = [], [], []
        t = rng.randint(0, grid)
        live = []

        def kernel(stream, name, dur, uses):
            nonlocal t
            kernels.append((len(kernels) + 1, 0, stream, name, t, t + dur, -1))
            acc.extend((len(kernels), a, mode) for a, mode in uses)
            t += dur + rng.choice([0, 0, grid // 2, rng.randint(0, 2 * grid)])

        def tensor(comm=False):
            allocs.append([len(allocs) + 1, 0, (1 << 30) + len(allocs) * (1 << 28), rng.choice(sizes), t, None,
                           0, 5 if comm else 3, 0])
            live.append(allocs[-1])
            return allocs[-1][0]

        for op, sender in ops:
            for _ in range(rng.randint(1, 4)):   # compute between the cross-rank kernels
                uses = [(tensor(), 2)] if rng.random() < 0.7 or not live else []
                for a in rng.sample(live, min(len(live), rng.randint(0, 2))):
                    if all(a[0] != u for u, _ in uses):
                        uses.append((a[0], rng.choice([1, 3])))
                kernel(7, 100, rng.choice([grid, 2 * grid, rng.randint(1, 6 * grid), 0]), uses)
                for a in list(live):   # some die at this instant
                    if rng.random() < 0.3:
                        a[5] = t
                        live.remove(a)
            if op != "p2p":
                buf = rng.choice(live)[0] if live else tensor()
                kernel(13, op_name[op], rng.choice([grid, 3 * grid, rng.randint(1, 5 * grid), 0]), [(buf, 3)])
            elif r < 2:
                sends = r == sender
                if rng.random() < 0.5:
                    kernel(23, 106 if sends else 107, rng.choice([rng.randint(1, 3 * grid), 0]), [])
                else:   # SendRecv: reads a buffer (send) or writes one (receive); comm memory does not count
                    plain = [a for a in live if a[7] != 5]   # comm memory does not give the role
                    buf = rng.choice(plain)[0] if plain and sends else tensor()
                    kernel(23, 105, rng.randint(1, 3 * grid), [(buf, 1 if sends else 2), (tensor(comm=True), 3)])
        for a in allocs:
            if a[5] is not None and a[5] < a[4]:
                a[5] = a[4]
        db.executemany("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category, label) "
                       "VALUES (?,?,?,?,?,?,?,?,?)", [tuple(a) for a in allocs])
        db.executemany("INSERT INTO kernels (id, device, stream, name, t_start, t_end, step, grid_x, grid_y, grid_z, "
                       "block_x, block_y, block_z, shared_mem, registers, correlation) "
                       "VALUES (?,?,?,?,?,?,?,1,1,1,1,1,1,0,0,0)", kernels)
        db.executemany("INSERT OR IGNORE INTO accesses (kernel, allocation, mode) VALUES (?,?,?)", acc)
        db.commit()
        db.close()
        paths.append(path)
    spans = []
    for path in paths:
        db = sqlite3.connect(str(path))
        spans.append(db.execute("SELECT min(t_start), max(t_end) FROM kernels").fetchone())
        db.close()
    shortest = min(e - b for b, e in spans)
    for path, (b, _) in zip(paths, spans) if identity else []:   # own origins, overlapping on the job's clock
        db = sqlite3.connect(str(path))
        db.execute("UPDATE meta SET value = ? WHERE key = 'time_origin_ns'", (str(rng.randint(0, shortest // 2)),))
        db.commit()
        db.close()
    if rng.random() < far:
        base = rng.choice([-(1 << 62), -(1 << 40), -10 ** 6])
        lows = []
        for path in paths:
            db = sqlite3.connect(str(path))
            lows.append(min(v for (v,) in db.execute("SELECT min(t_start) FROM kernels UNION ALL "
                                                     "SELECT min(t_alloc) FROM allocations") if v is not None))
            db.close()
        common = base - min(lows)
        for path, lo in zip(paths, lows):
            off = base - lo + rng.randint(0, 1000) if identity else common
            db = sqlite3.connect(str(path))
            for tb, c in (("allocations", "t_alloc"), ("allocations", "t_free"), ("kernels", "t_start"),
                          ("kernels", "t_end")):
                db.execute(f"UPDATE {tb} SET {c} = {c} + ? WHERE {c} IS NOT NULL", (off,))
            if identity:
                origin = int(db.execute("SELECT value FROM meta WHERE key = 'time_origin_ns'").fetchone()[0])
                db.execute("UPDATE meta SET value = ? WHERE key = 'time_origin_ns'", (str(origin - off),))
            db.commit()
            db.close()
        TALLY["far job"] = TALLY.get("far job", 0) + 1
    return paths


def run_random_ranks(mhc, work, blank, rng, far=0.2):
    """A random job (random_job) through `mhc simulate --ranks` and reference_coupled.py."""
    import reference_compare as first   # noqa: E402
    paths = random_job(work, blank, rng, far)
    for pth in paths:
        chk = subprocess.run([mhc, "check", str(pth)], capture_output=True, text=True)
        if chk.returncode != 0:
            return f"{pth.name}", [f"mhc check: {chk.stdout.strip()[:300]}"]
    link, largs = random_link(rng, work)
    other = first.ref.Link(h2d_bps=link.bps[0], d2h_bps=link.bps[1], h2d_latency_s=link.lat[0],
                           d2h_latency_s=link.lat[1], copy_engines=link.engines, duplex_factor=link.duplex,
                           nccl_share=link.nccl_share, memcpy_share=link.memcpy_share, max_ops_per_sec=link.max_ops)
    policy = rng.choice(["lru", "largest", "belady", "dtr"])
    allocator = rng.choice(["ideal", "caching"])
    share = rng.choice(["100%", "99%", "97%", "95%", "90%", "80%", "60%"])
    if rng.random() < 0.5:   # by meta rank; a job without the keys is ranked by this order
        rng.shuffle(paths)
    label = f"random job of {len(paths)} ranks {allocator} {policy} {share} {' '.join(largs)}"
    try:
        problems, got = first.compare_job(mhc, paths, policy, share, other, largs, allocator)
    except SystemExit as e:   # a refusal of a job written to be valid
        return label, [str(e)[:400]]
    TALLY["coupled waits"] = TALLY.get("coupled waits", 0) + bool(any(
        sqlite3.connect(str(pth)).execute("SELECT count(*) FROM run_metrics WHERE key = 'coupled_wait_count' "
                                          "AND value > 0").fetchone()[0] for pth in paths))
    return f"{label}: job loss {got.get('throughput_loss')}", problems


def step_time_check(mhc, captures, work):
    """docs/advise.md, "A measured step time", on captures whose step has no copies and no
    collectives (one round: the step is proportional to the factor, up to rounding): the factor,
    the estimated and calibrated step times and every kernel of --trace-out."""
    problems, checked = [], 0
    for cap in captures:
        db = sqlite3.connect(f"file:{cap}?mode=ro", uri=True)
        ks = db.execute("SELECT t_start, t_end, step FROM kernels ORDER BY t_start, id").fetchall()
        copies = db.execute("SELECT count(*) FROM copies").fetchone()[0]
        names = [r[0] for r in db.execute("SELECT s.text FROM kernels k JOIN strings s ON s.id = k.name")]
        db.close()
        if copies or any(n.startswith(("c10d::", "fsdp::", "nccl")) for n in names):
            continue
        ends = {}
        for _, e, st in ks:
            if st >= 0:
                ends[st] = max(ends.get(st, e), e)
        order = sorted(ends)
        estimated = ends[order[-1]] - (ends[order[-2]] if len(order) > 1 else ks[0][0])
        for measured in (estimated * 3 // 2, estimated * 4, max(1, estimated // 3)):
            out = work / "step.db"
            if out.exists():
                out.unlink()
            p = subprocess.run([mhc, "advise", str(cap), "--setting", "{}", "--step-time", f"{measured}ns", "--json",
                                "--trace-out", str(out)], capture_output=True, text=True)
            if p.returncode != 0:
                problems.append(f"{cap.name} --step-time {measured}ns: exit {p.returncode}: {p.stderr.strip()[:200]}")
                continue
            cal = json.loads(p.stdout)["calibration"]
            factor = measured / estimated
            scaled = []   # the kernels one after another, gaps kept
            for (s0, e0, st), prev in zip(ks, [None] + ks[:-1]):
                start = s0 if prev is None else scaled[-1][1] + (s0 - prev[1])
                scaled.append((start, start + math.floor((e0 - s0) * factor + 0.5), st))   # halves up
            sends = {}
            for _, e, st in scaled:
                if st >= 0:
                    sends[st] = max(sends.get(st, e), e)
            calibrated = sends[order[-1]] - (sends[order[-2]] if len(order) > 1 else scaled[0][0])
            want = dict(estimated_step_ns=estimated, measured_step_ns=measured, calibrated_step_ns=calibrated)
            for key, v in want.items():
                if cal[key] != v:
                    problems.append(f"{cap.name} --step-time {measured}ns: {key}: mhc {cal[key]}, outside {v}")
            if not math.isclose(cal["factor"], factor, rel_tol=1e-12):
                problems.append(f"{cap.name} --step-time {measured}ns: factor: mhc {cal['factor']}, outside {factor}")
            db = sqlite3.connect(str(out))
            got = db.execute("SELECT t_start, t_end FROM kernels ORDER BY t_start, id").fetchall()
            db.close()
            if [(a, b) for a, b, _ in scaled] != got:
                d = next((f"mhc {y}, outside {x[:2]}" for x, y in zip(scaled, got) if x[:2] != y),
                         f"{len(got)} kernels, outside {len(scaled)}")
                problems.append(f"{cap.name} --step-time {measured}ns: --trace-out kernels: {d}")
            checked += 1
    return checked, problems


def stored_run(trace):
    db = sqlite3.connect(str(trace))
    run = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    q = lambda sql: db.execute(sql, (run,)).fetchall()   # noqa: E731
    res = dict(metrics=dict(q("SELECT key, value FROM run_metrics WHERE run = ?")),
               events=sorted(q("SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ?")),
               kernels=q("SELECT kernel, t_start, t_end FROM run_kernels WHERE run = ? ORDER BY kernel"),
               memory=q("SELECT t, device_bytes, host_bytes FROM run_memory WHERE run = ? ORDER BY t, rowid"))
    db.close()
    return res


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opt = lambda name, d: next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), d)  # noqa
    runs, seed = int(opt("runs", "200")), int(opt("seed", "1"))
    edges = [e for e in opt("edges", "").split(",") if e]   # only these shapes (EDGES), every random trace
    prefetchers = [x for x in opt("prefetchers", "").split(",") if x]   # --second-reading: only these
    move = opt("move", "")   # far or wide: every random trace's times moved so, whatever its shape
    if move not in ("", "far", "wide"):
        raise SystemExit("--move: far or wide")
    if any(e not in EDGES for e in edges):
        raise SystemExit(f"--edges: one of {','.join(EDGES)}")
    verbose = "--verbose" in sys.argv
    work.mkdir(parents=True, exist_ok=True)
    if opt("step-time", None) is not None:   # captures (the settings' second reading takes them)
        caps = sorted(Path(opt("step-time", None)).glob("*.db"))
        caps = [c for c in caps if sqlite3.connect(str(c)).execute(   # model captures only
            "SELECT count(*) FROM sqlite_master WHERE name = 'modules'").fetchone()[0] and
                sqlite3.connect(str(c)).execute("SELECT count(*) FROM modules").fetchone()[0]]
        checked, problems = step_time_check(mhc, [c for c in caps if c.name != "advise-out.db"], work)
        for p in problems:
            print(f"DIFFER {p}")
        print(f"--step-time: {checked} runs, {len(problems)} differences")
        return 77 if not checked else 1 if problems else 0
    blank = empty_trace(mhc, work)
    rng = random.Random(seed)
    public = opt("public", None)
    if public is not None:   # the real traces, each under random configurations
        only = [x for x in opt("public-filter", "").split(",") if x] or None
        traces = public_traces(mhc, work, public, only)
        if not traces:
            print(f"--public: no trace of {public} with GPU memory")
            return 1
        differ = 0
        for i in range(runs):
            src = traces[i % len(traces)]
            trace = work / "run.db"
            trace.write_bytes(src.read_bytes())
            sweeping = i % 7 == 6
            label, problems = (run_sweep if sweeping else run_one)(mhc, trace, rng, work,
                                                                   *([] if sweeping else [verbose]))
            if problems:
                differ += 1
                (work / f"differ-{i}.db").write_bytes(trace.read_bytes())
                if (work / "link.json").exists():
                    (work / f"differ-{i}.json").write_bytes((work / "link.json").read_bytes())
            print(f"{'DIFFER' if problems else 'same  '} {i}: {src.name}: {label}")
            for p in problems[:8]:
                print(f"    {p}")
        print(f"{runs} runs on {len(traces)} public traces, {differ} differ; runs with: " +
              ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))
        return 1 if differ else 0
    # generated traces: plain, tensor parallel (NCCL kernels for rule 8's contention), micro-batches
    # with recomputation, data parallel with jitter
    gens = []
    for j, args in enumerate([["--preset", "gpt2-small", "--layers", "2", "--steps", "2", "--seq", "128"],
                              ["--preset", "mhc-27b", "--layers", "2", "--steps", "2", "--seq", "64", "--tp", "2",
                               "--dp", "1", "--pp", "1"],
                              ["--preset", "llama2-7b", "--layers", "1", "--steps", "2", "--seq", "128",
                               "--micro-batches", "2", "--recompute"],
                              ["--preset", "gpt2-small", "--layers", "2", "--steps", "3", "--seq", "128", "--dp", "2",
                               "--pp", "1", "--seed", "7", "--jitter", "0.2", "--no-dropout"]]):
        gen = work / f"gen{j}.db"
        subprocess.run([mhc, "generate", "--force", "-o", str(gen)] + args, check=True, capture_output=True)
        gens.append(gen.read_bytes())
    differ = 0
    for i in range(runs):
        trace = work / "run.db"
        if "--random-ranks" in sys.argv:   # its own traces
            pass
        elif i % 5 == 4:
            trace.write_bytes(gens[(i // 5) % len(gens)])
        else:
            random_trace(trace, blank, rng, [e for e in edges if e not in ("far", "wide")] if move else edges,
                         ("far", "wide") if move else ())
            if move:   # on top of the trace's shape: its times moved (far) or spread (wide)
                db = sqlite3.connect(str(trace))
                (far_times if move == "far" else wide_times)(db, rng)
                db.commit()
                db.close()
            chk = subprocess.run([mhc, "check", str(trace)], capture_output=True, text=True)
            if chk.returncode != 0:
                print(f"trace {i} fails mhc check: {chk.stdout.strip()[:300]}")
                differ += 1
                continue
        sweeping = i % 7 == 6
        if "--random-ranks" in sys.argv:
            label, problems = run_random_ranks(mhc, work, blank, rng, 1.0 if "far" in edges else 0.2)
        elif "--ranks" in sys.argv:
            label, problems = run_ranks(mhc, work, rng)
        elif "--second-reading" in sys.argv:
            label, problems = run_second(mhc, trace, rng, work, prefetchers)
        else:
            label, problems = (run_sweep if sweeping else run_one)(mhc, trace, rng, work, *([] if sweeping else [verbose]))
        if problems:   # kept for a rerun by hand: the trace, its link profile, the command
            differ += 1
            if "--random-ranks" in sys.argv:
                for pth in sorted(work.glob("rjob.rank*.db")):
                    (work / f"differ-{i}.{pth.name}").write_bytes(pth.read_bytes())
            else:
                (work / f"differ-{i}.db").write_bytes(trace.read_bytes())
            if (work / "link.json").exists():
                (work / f"differ-{i}.json").write_bytes((work / "link.json").read_bytes())
        print(f"{'DIFFER' if problems else 'same  '} {i}: {label}")
        for p in problems[:8]:
            print(f"    {p}")
    print(f"{runs} runs, {differ} differ; runs with: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
