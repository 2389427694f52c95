#!/usr/bin/env python3
"""Runs `mhc simulate --allocator caching` beside reference_allocator_outside.py (an outside tester's
reading of docs/simulator.md "Allocator models", written from the document alone) on random memory
traces (no kernels) whose sizes sit at the model's edges: 512 B, the small pool's 1 MiB, the 10 and 20
MiB of the large pool's segments, 2 MiB multiples, powers of two and the steps of
roundup_power2_divisions, max_split_size_mb and max_non_split_rounding_mb, several streams, ties at
one instant, blocks freed where they are made, huge requests. Each trace runs under a random
allocator setting at unlimited capacity and at a capacity; the memory timeline is taken with one
sample per nanosecond of the trace, so the reserved bytes after every recorded event are compared.

Under a capacity the run is read with its evictions (rules 1, 4, 5, 6 and 7 on a trace without
kernels: policy lru, pcie4, nothing pinned, nothing read back): an allocation the allocator cannot
place after its retries (garbage collection, max_split_size_mb's release, the release of every
cached segment) swaps out the least recently allocated resident ones while the swap-outs in flight
(of the request's pool) hold less than its rounded size, waits for them, tries again, and is an
out of memory when nothing is left; compared: the memory timeline (simulated time, reserved bytes),
every swap_out, stall and oom event (times, allocation, bytes; the oom's short-by), stalls, stall_ns,
swap_outs, swap_out_bytes and the peak. A capacity under the largest request's block or segment
makes some runs end in an out of memory.

Usage: reference_allocator_outside_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose] [--keep] [--only=K]
--only=K: only run K of the seed's runs (its trace kept with --keep).
Exit 0 when all agree, 1 otherwise (each difference printed with its trace's settings)."""

import json
import math
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_allocator_outside as ra  # noqa: E402

MIB = ra.MIB
GIB = 1 << 30
SAMPLES = 1_000_000


def write_trace(path, allocs, meta=None):
    """allocs: (bytes, t_alloc, t_free or None, stream); ids from 1 in list order."""
    if path.exists():
        path.unlink()
    db = sqlite3.connect(str(path))
    db.executescript((HERE.parent.parent / "trace" / "schema.sql").read_text())
    db.execute("PRAGMA user_version = 1")
    for k, v in (("format", "mhc-trace"), ("schema_version", "1"), ("source", "reference_allocator_outside_compare.py")) + tuple((meta or {}).items()):
        db.execute("INSERT INTO meta VALUES (?, ?)", (k, v))
    for i, (n, ta, tf, st) in enumerate(allocs, 1):
        db.execute("INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                   "VALUES (?,0,0,?,?,?,?,3)", (i, n, ta, tf, st))
    db.commit()
    db.close()


def edge_sizes(conf):
    s = [1, 511, 512, 513, 1023, 1024 * 1024 - 1, MIB, MIB + 1, MIB + 511, MIB + 512, 2 * MIB - 1, 2 * MIB,
         2 * MIB + 1, 3 * MIB, 5 * MIB + 1, 10 * MIB - 512, 10 * MIB - 1, 10 * MIB, 10 * MIB + 1, 12 * MIB,
         19 * MIB + 1, 20 * MIB, 20 * MIB + 1, 21 * MIB, 22 * MIB + 512, 23 * MIB + 1, 24 * MIB,
         40 * MIB, 41 * MIB, 64 * MIB, 64 * MIB + 1, 96 * MIB - 1, 128 * MIB + 1, 256 * MIB]
    ms = conf.max_split
    if ms < ra.NO_SPLIT_LIMIT:
        s += [ms - 1, ms, ms + 1, ms - 2 * MIB, ms + 2 * MIB, ms + 19 * MIB, ms + 20 * MIB, ms + 21 * MIB,
              2 * ms]
    return [x for x in s if x > 0]


def random_size(rng, sizes):
    r = rng.random()
    if r < 0.45:
        return rng.choice(sizes)
    if r < 0.6:
        return rng.randint(1, 4 * MIB)
    if r < 0.97:
        return int(2 ** rng.uniform(9, 28))
    return rng.choice([int(2 ** rng.uniform(30, 36)), 1 << 35, (1 << 34) + 1, 1 << 56, (1 << 56) - 1,
                       int(2 ** rng.uniform(40, 56))])   # huge, up to a row's bound (2^56 B)


CONFS = ["", "", "expandable_segments:True", "max_split_size_mb:24", "max_split_size_mb:40",
         "max_split_size_mb:64,max_non_split_rounding_mb:21", "max_split_size_mb:32,max_non_split_rounding_mb:64",
         "max_split_size_mb:20,max_non_split_rounding_mb:20",
         "roundup_power2_divisions:4", "roundup_power2_divisions:1", "roundup_power2_divisions:2",
         "roundup_power2_divisions:16", "roundup_power2_divisions:[1:8,4:2,>:4]",
         "roundup_power2_divisions:[2:8,16:2,>:4]", "roundup_power2_divisions:[64:8]",
         "roundup_power2_divisions:[>:2]",
         "garbage_collection_threshold:0.5", "garbage_collection_threshold:0.8",
         "garbage_collection_threshold:0.6,max_split_size_mb:32",
         "expandable_segments:True,max_split_size_mb:40", "expandable_segments:True,roundup_power2_divisions:4",
         "expandable_segments:True,garbage_collection_threshold:0.7"]


def random_trace(rng, conf):
    """Allocations with lifetimes; times 0..T (T < SAMPLES ns) with some ties."""
    n = rng.randint(1, 70)
    streams = rng.choice([[0], [0], [0, 7], [0, 1, 2]])
    sizes = edge_sizes(conf)
    tie = rng.random() < 0.3
    t, allocs = 0, []
    for _ in range(n):
        t += 0 if (tie and rng.random() < 0.3) else rng.randint(1, 40)
        allocs.append([random_size(rng, sizes), t, None, rng.choice(streams)])
    end = t + rng.randint(1, 50)
    for a in allocs:
        r = rng.random()
        if r < 0.1:
            a[2] = None
        elif r < 0.15:
            a[2] = a[1]                        # freed where it is made
        else:
            a[2] = rng.randint(a[1] + 1, end) if not tie or rng.random() < 0.5 else \
                rng.choice([x[1] for x in allocs if x[1] >= a[1]] + [end])
    if rng.random() < 0.3:   # a pattern of repeated steps (reuse through the cache)
        base = list(allocs)
        span = end + 1
        for k in range(1, rng.randint(2, 4)):
            for n_, ta, tf, st in base:
                allocs.append([n_, ta + k * span, None if tf is None else tf + k * span, st])
        end = max(max(a[1] for a in allocs), max(a[2] or 0 for a in allocs))
    allocs.sort(key=lambda a: a[1])
    return [tuple(a) for a in allocs]


def events(allocs):
    """Memory events in the order of docs/trace-format.md ("Events at one instant"): at one time the
    frees of allocations made before it (by row), then its allocations (by row), each freed right
    after it when it is freed at that instant."""
    times = sorted({a[1] for a in allocs} | {a[2] for a in allocs if a[2] is not None})
    by_alloc, by_free = {}, {}
    for i, (n, ta, tf, st) in enumerate(allocs):
        by_alloc.setdefault(ta, []).append(i)
        if tf is not None and tf > ta:
            by_free.setdefault(tf, []).append(i)
    out = []
    for t in times:
        for i in by_free.get(t, []):
            out.append(("free", i, t))
        for i in by_alloc.get(t, []):
            out.append(("alloc", i, t))
            if allocs[i][2] == t:
                out.append(("free", i, t))
    return out


def reference(allocs, conf_text, capacity, first_reserved=None, pools=None):
    """Reserved bytes after each event; the index of the first event the allocator cannot place
    (None: all placed); the peak. first_reserved: a profiler's reserved bytes at its first memory
    event (meta kineto.reserved_first.device0), topped up before the first allocation after t = 0."""
    alloc = ra.Allocator(conf_text, capacity)
    blocks, after, fail, peak = {}, [], None, 0
    for k, (kind, i, t) in enumerate(events(allocs)):
        if kind == "alloc" and t > 0 and first_reserved is not None:
            alloc.top_up(first_reserved)
            first_reserved = None
        if kind == "alloc":
            b = alloc.malloc(allocs[i][0], allocs[i][3], pools[i] if pools else "")
            if b is None:
                fail = k
                break
            blocks[i] = b
        else:
            alloc.free(blocks.pop(i))
        peak = max(peak, alloc.reserved)
        after.append((t, alloc.reserved))
    return after, fail, peak, alloc


LATENCY_S, BW = 6e-6, 25e9   # pcie4 ("Link models"): each direction; only swap-outs run here


def simulate(allocs, conf_text, capacity, first_reserved=None, pools=None):
    """Rules 1, 4, 5, 6 and 7 (docs/simulator.md) on a trace without kernels, the caching allocator,
    policy lru, pcie4, no prefetch: each allocation that does not fit makes room by swapping out the
    least recently allocated resident allocations (nothing is pinned, nothing is read back).
    Returns the memory offers (recorded time, simulated time, reserved), the events (kind, start,
    end, allocation id, bytes) and the figures."""
    alloc = ra.Allocator(conf_text, capacity)
    state, block, xfer = {}, {}, {}   # state: gpu, d2h, host; xfer: i -> end of its swap-out
    queue_free = None
    shift, offers, evs = 0, [], []
    fig = dict(stalls=0, stall_ns=0, swap_outs=0, swap_out_bytes=0, oom=None)
    order = []   # allocation order (LRU's clock: no kernels, so allocations alone advance it)

    def complete(t):
        for i in sorted((i for i, e in xfer.items() if e <= t), key=lambda i: (xfer[i], i)):
            del xfer[i]
            state[i] = "host"
            alloc.free(block.pop(i))

    for kind, i, r in events(allocs):
        t = r + shift
        if kind == "free":
            if state.get(i) in ("gpu", "d2h"):
                xfer.pop(i, None)   # a swap-out cancelled: its queue stays busy until its end
                alloc.free(block.pop(i))
            state[i] = "freed"
            offers.append((r, t, alloc.reserved))
            continue
        if r > 0 and first_reserved is not None:
            alloc.top_up(first_reserved)
            first_reserved = None
        complete(t)
        n, stream = allocs[i][0], allocs[i][3]
        pool = pools[i] if pools else ""
        t0 = t
        while True:
            complete(t)
            b = alloc.malloc(n, stream, pool)
            if b is not None:
                break
            # the swap-outs of the request's own pool: a block of another pool does not serve it
            pending = sum(allocs[j][0] for j in xfer if (pools[j] if pools else "") == pool)
            victims = [j for j in order if state.get(j) == "gpu"]
            if pending < alloc.round_size(n) and victims:
                v = victims[0]
                start = t if queue_free is None else max(t, queue_free)
                nb = allocs[v][0]
                end = start + max(1, math.ceil(LATENCY_S * 1e9 + nb / BW * 1e9))
                queue_free = end
                xfer[v] = end
                state[v] = "d2h"
                fig["swap_outs"] += 1
                fig["swap_out_bytes"] += nb
                evs.append(("swap_out", start, end, v + 1, nb))
                continue
            if xfer:
                t = min(xfer.values())
                continue
            fig["oom"] = (t, i + 1, n, alloc)
            break
        if fig["oom"]:
            break
        if t > t0:
            fig["stalls"] += 1
            fig["stall_ns"] += t - t0
            evs.append(("stall", t0, t, i + 1, 0))
            shift += t - t0
        block[i] = b
        state[i] = "gpu"
        order.append(i)
        offers.append((r, t, alloc.reserved))
    return offers, evs, fig, shift


def buckets(after, first, span):
    """--memory-samples SAMPLES: bucket floor((r - first) * N / (span + 1)), its highest value's first offer."""
    out = {}
    for t, v in after:
        b = min((t - first) * SAMPLES // (span + 1), SAMPLES - 1)
        if b not in out or v > out[b][1]:
            out[b] = (t, v)
    return out


def run_mhc(mhc, trace, conf, capacity):
    cmd = [mhc, "simulate", str(trace), "--allocator", "caching"] + (
        ["--policy", "lru", "--prefetch", "none"] if capacity != "unlimited" else []) + ["--capacity", capacity, "--memory-samples", str(SAMPLES), "--json"] + (
        ["--allocator-conf", conf] if conf else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        return None, f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}"
    out = json.loads(p.stdout)
    db = sqlite3.connect(str(trace))
    run = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    mem = db.execute("SELECT t, device_bytes FROM run_memory WHERE run = ? ORDER BY t, rowid", (run,)).fetchall()
    ev = db.execute("SELECT kind, t_start, t_end, allocation, bytes FROM run_events WHERE run = ? ORDER BY rowid",
                    (run,)).fetchall()
    db.close()
    return (out, mem, ev), None


KIND = {0: "swap_out", 5: "stall", 6: "oom"}


def oom_figures(fig):
    """Rule 7's figures for the caching allocator: needed, short by, fragmentation, largest free
    block, and whether the free bytes hold the request but not the unit the allocator adds for it."""
    t, aid, n, alloc = fig["oom"]
    needed = alloc.round_size(n)
    in_use = sum(b.size for s in alloc.segs for b in s.blocks if b.state == "used")
    largest = max([b.size for s in alloc.segs for b in s.blocks if b.state == "free"] + [0])
    cap = alloc.capacity
    frag = cap - in_use >= needed
    short = max(0, needed - max(largest, cap - alloc.reserved)) if frag else needed - (cap - in_use)
    if alloc.conf.expandable:
        page = ra.PAGE_SMALL if needed <= MIB else ra.PAGE_LARGE
        unit = (needed + page - 1) // page * page
    else:
        unit = alloc.segment_size(needed)
    return dict(bytes_needed=needed, bytes_short=short, fragmentation=frag, largest_free_block=largest,
                unit_too_big=frag and unit > cap - in_use)


def short_by(fig, allocs):
    return oom_figures(fig)["bytes_short"]


SEEN = {"runs": 0, "evicting": 0, "oom": 0, "oom_short_by_0": 0}


def compare_evicting(got, allocs, conf, capacity, first_reserved, pools=None):
    """A run under a capacity, its evictions included (simulate above)."""
    out, mem, ev = got
    offers, evs, fig, shift = simulate(allocs, conf, capacity, first_reserved, pools)
    SEEN["runs"] += 1
    SEEN["evicting"] += bool(evs)
    SEEN["oom"] += bool(fig["oom"])
    SEEN["oom_short_by_0"] += bool(fig["oom"]) and short_by(fig, allocs) == 0
    times = [a[1] for a in allocs] + [a[2] for a in allocs if a[2] is not None]
    first, span = min(times), max(1, max(times) - min(times))
    want = {}
    for r, t, v in offers:
        b = min((r - first) * SAMPLES // (span + 1), SAMPLES - 1)
        if b not in want or v > want[b][1]:
            want[b] = (t, v)
    problems = []
    want_rows = sorted(want.values())
    if [tuple(x) for x in mem] != want_rows:
        diff = next((k for k in range(min(len(mem), len(want_rows))) if tuple(mem[k]) != want_rows[k]),
                    min(len(mem), len(want_rows)))
        problems.append(f"memory row {diff}: mhc {mem[diff] if diff < len(mem) else '-'}, "
                        f"reference {want_rows[diff] if diff < len(want_rows) else '-'}")
    want_ev = [(k, a, b, c, d) for k, a, b, c, d in evs]
    if fig["oom"]:
        want_ev.append(("oom", fig["oom"][0], fig["oom"][0], fig["oom"][1], short_by(fig, allocs)))
    got_ev = [(KIND.get(k, str(k)), a, b, c, d) for k, a, b, c, d in ev]
    # the rows' order is not the document's: compared in (start, kind, allocation) order
    got_ev.sort(key=lambda e: (e[1], e[0], e[3]))
    want_ev.sort(key=lambda e: (e[1], e[0], e[3]))
    if got_ev != want_ev:
        diff = next((k for k in range(min(len(got_ev), len(want_ev))) if got_ev[k] != want_ev[k]),
                    min(len(got_ev), len(want_ev)))
        problems.append(f"event {diff}: mhc {got_ev[diff] if diff < len(got_ev) else '-'}, "
                        f"reference {want_ev[diff] if diff < len(want_ev) else '-'} "
                        f"({len(got_ev)} and {len(want_ev)} events)")
    m = out["metrics"]
    if fig["oom"]:
        want = oom_figures(fig)
        got_oom = out.get("oom") or {}
        for k in ("bytes_needed", "bytes_short", "fragmentation", "largest_free_block"):
            if got_oom.get(k) != want[k]:
                problems.append(f"oom {k}: mhc {got_oom.get(k)}, reference {want[k]}")
        says = "hold the request but not" in got_oom.get("why", "")
        if says != want["unit_too_big"]:
            problems.append(f"oom why: mhc '{got_oom.get('why')}', reference: the unit the allocator adds "
                            f"{'does not fit' if want['unit_too_big'] else 'is not the cause'}")
        r_fail = allocs[fig["oom"][1] - 1][1]   # its recorded time
        times = [a[1] for a in allocs] + [a[2] for a in allocs if a[2] is not None]
        first = min(times)
        slow = (fig["oom"][0] - first) / (r_fail - first) - 1 if r_fail > first else 0.0
        if not math.isclose(m.get("oom_slowdown", -1), slow, rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"oom_slowdown: mhc {m.get('oom_slowdown')}, reference {slow}")
    elif out.get("oom"):
        problems.append(f"mhc ran out of memory ({out['oom'].get('why')}), the reference did not")
    for k in ("stalls", "stall_ns", "swap_outs", "swap_out_bytes"):
        if m.get(k, 0) != float(fig[k]):   # doubles (beyond 2^53: the nearest one)
            problems.append(f"{k}: mhc {m.get(k)}, reference {fig[k]}")
    peak = max([v for _, _, v in offers] + [0])
    if m["simulated_peak_bytes"] != float(peak):   # a double (beyond 2^53: the nearest one)
        problems.append(f"simulated_peak_bytes: mhc {int(m['simulated_peak_bytes'])}, reference {peak}")
    return problems


def compare(mhc, trace, allocs, conf, capacity, first_reserved=None, pools=None, recorded=""):
    """capacity: None for unlimited; recorded: the trace's allocator.conf, conf given over it.
    Returns a list of problems."""
    got, err = run_mhc(mhc, trace, conf, "unlimited" if capacity is None else f"{capacity}B")
    if err:
        return [err]
    effective = ra.Conf(recorded)
    effective.update(conf)
    conf = effective
    if capacity is not None:
        return compare_evicting(got, allocs, conf, capacity, first_reserved, pools)
    out, mem, ev = got
    after, fail, peak, model = reference(allocs, conf, ra.UNLIMITED if capacity is None else capacity, first_reserved,
                                         pools)
    times = [a[1] for a in allocs] + [a[2] for a in allocs if a[2] is not None]
    first, span = min(times), max(1, max(times) - min(times))
    want = buckets(after, first, span)
    problems = []
    evs = events(allocs)
    limit_t = evs[fail][2] if fail is not None else None
    for t, v in mem:
        if limit_t is not None and t >= limit_t:
            continue
        b = min((t - first) * SAMPLES // (span + 1), SAMPLES - 1)
        w = want.get(b)
        if w is None or w[1] != v:
            problems.append(f"reserved at t={t}: mhc {v}, reference {w[1] if w else 'no sample'}")
            break
    got_b = {min((t - first) * SAMPLES // (span + 1), SAMPLES - 1) for t, _ in mem}
    for b, (t, v) in sorted(want.items()):
        if b not in got_b and (limit_t is None or t < limit_t):
            problems.append(f"reserved at t={t}: mhc no sample, reference {v}")
            break
    m = out["metrics"]
    if fail is None:
        if m["simulated_peak_bytes"] != float(peak):
            problems.append(f"simulated_peak_bytes: mhc {int(m['simulated_peak_bytes'])}, reference {peak}")
        if ev:
            problems.append(f"mhc has {len(ev)} events (first {ev[0]}), the reference places every block")
    else:
        early = [e for e in ev if e[1] < limit_t]
        if early:
            problems.append(f"mhc evicts before t={limit_t} (the reference's first failed allocation, "
                            f"allocation {evs[fail][1] + 1}): {early[0]}")
        if not ev:
            problems.append(f"the reference cannot place allocation {evs[fail][1] + 1} at t={limit_t} "
                            f"(reserved {model.reserved}), mhc has no event")
    return problems


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    if len(args) != 2:
        raise SystemExit(__doc__)
    mhc, work = args[0], Path(args[1])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = random.Random(int(opts.get("seed", "1")))
    runs = int(opts.get("runs", "100"))
    bad = 0
    for k in range(runs):
        conf = CONFS[k % len(CONFS)] if k < len(CONFS) else rng.choice(CONFS)
        allocs = random_trace(rng, ra.Conf(conf))
        trace = work / f"t{k}.db"
        first = None
        if rng.random() < 0.25:   # a Kineto trace's first reserved figure, with rows at t = 0
            _, _, p0, _ = reference(allocs, conf, ra.UNLIMITED)
            first = rng.choice([0, 512, 2 * MIB] + [int(p0 * rng.uniform(0.1, 1.6))] * 5)
            z = rng.randint(1, 3)
            allocs = [(n, 0 if j < z else ta, tf, st) for j, (n, ta, tf, st) in enumerate(allocs)]
        if first is None and rng.random() < 0.15:   # far from 0: every rule reads differences of times
            off = rng.choice([-(1 << 62), -(1 << 62) + 12345, -(1 << 40), 1 << 61])
            allocs = [(n, ta + off, None if tf is None else tf + off, st) for n, ta, tf, st in allocs]
        meta = {"kineto.reserved_first.device0": str(first)} if first is not None else {}
        recorded = ""
        if rng.random() < 0.25:   # settings the recording names (meta allocator.conf), the given ones over them
            recorded = rng.choice([c for c in CONFS if c])
            meta["allocator.conf"] = recorded
        pools = None
        if first is None and rng.random() < 0.3:   # private pools, as a torch 2.15 snapshot's import names them
            names = rng.choice([["0,1"], ["0,1", "1,0"]])
            pools = [rng.choice(names) if rng.random() < 0.4 else "" for _ in allocs]
            meta["snapshot.pools_from"] = "trace events (pool_id): exact"
            meta["snapshot.allocation_pools"] = " ".join(
                f"{p}:" + ",".join(str(j + 1) for j, q in enumerate(pools) if q == p) for p in names
                if p in pools)
        write_trace(trace, allocs, meta)
        effective = ra.Conf(recorded)
        effective.update(conf)
        _, _, peak, _ = reference(allocs, effective, ra.UNLIMITED, first, pools)
        caps = [None]
        if peak > 0:
            share = rng.choice([1.0, 0.95, 0.8, 0.6, 0.4, 0.2])
            caps.append(max(512, int(peak * share)) if share < 1 else peak)
            if rng.random() < 0.3:   # the largest request's block or segment does not fit: an OOM
                big = max(a[0] for a in allocs)
                model = ra.Allocator(conf)
                rb = model.round_size(big)
                caps.append(max(1, rng.choice([rb - 1, rb, model.segment_size(rb) - 1, rb + 512])))
            elif pools and rng.random() < 0.5:
                caps.append(max(512, int(peak * rng.uniform(0.3, 0.9))))
            else:
                caps.append(peak - 1)
        for cap in caps:
            if "only" in opts and int(opts["only"]) != k:
                continue
            problems = compare(mhc, trace, allocs, conf, cap, first, pools, recorded)
            label = (f"run {k} ({len(allocs)} allocations, conf '{conf}', capacity {cap or 'unlimited'}"
                     + (f", first reserved {first}" if first is not None else "")
                     + (f", private pools {meta['snapshot.allocation_pools']}" if pools else "")
                     + (f", recorded conf '{recorded}'" if recorded else "") + ")")
            if problems:
                bad += 1
                print(f"DIFF {label}: " + "; ".join(problems))
            elif "verbose" in opts:
                print(f"same {label}")
        if not opts.get("keep"):
            trace.unlink()
    print(f"{bad} differences; under a capacity: {SEEN['runs']} runs, {SEEN['evicting']} evicting, "
          f"{SEEN['oom']} out of memory ({SEEN['oom_short_by_0']} short by 0 B)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
