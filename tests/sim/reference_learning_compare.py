#!/usr/bin/env python3
"""Runs `mhc simulate --prefetch periodic:K|capuchin|forecast:H` beside reference_learning.py (an
outside reading of docs/simulator.md's learning prefetchers and **Steps**, over the outside reading
of the engine, reference_outside.py) and compares every metric (the forecaster's errors included),
every stored event, every kernel's simulated time and the memory timeline.

Usage: reference_learning_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--public=DIR [--big]]
       [--public-filter=A,B] [--prefetchers=A,B] [--stress] [--verbose]
Traces: random ones (reference_outside_compare.random_trace) with a step column or step markers,
steps that keep what they make, ties, one instant, many streams; `mhc generate` traces of 2 to 5
steps; with --public=DIR, the public traces of DIR that `mhc import` reads with kernels and GPU memory
(one run in four; --public-filter=A,B: those whose names contain A or B; --big: also those over
3,000 kernels or allocations, slow here).
Configurations: lru, largest or belady; periodic:K (K 1, 2, 8, 40), capuchin, forecast:H (H 1, 2,
8); capacities from 100% down to 30% and the peak in bytes less one; random links, host buffers
(some small: rule 5's set-aside victims) and `--no-early`; --stress: one run in two on a link at
the ends of the profile's bounds (1 kB/s to 1 PB/s, 10 s latency, 64 copy engines, shares near 1,
0.001 swap operations per second).
Exit 0 when every run agrees, 1 otherwise (each difference printed)."""
import math
import random
import sqlite3
import subprocess
import sys
import json
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_learning as ref  # noqa: E402
import reference_outside_compare as oc  # noqa: E402

FORECAST_METRICS = ["forecast_error", "forecast_peak_error", "forecast_horizon_error", "forecast_horizon_steps",
                    "forecast_evictions"]
TALLY = {}
PREFETCHERS = ["periodic", "periodic", "capuchin", "forecast", "forecast"]


def tally(key):
    TALLY[key] = TALLY.get(key, 0) + 1


def stress_link(rng, work):
    """A link at the ends of the profile's bounds (docs/simulator.md, "Link models"): 1 kB/s to
    1 PB/s, latencies of 0 to 10 s, 1 or 64 copy engines, a duplex factor near 0 or 1, shares of
    0 or near 1, a swap-operation cap of 0.001 to 1e12 per second."""
    h2d, d2h = rng.choice([1e3, 1e6, 1e15]), rng.choice([1e3, 7e5, 1e15])
    hl, dl = rng.choice([0, 0, 1e-9, 10.0]), rng.choice([0, 3e-9, 10.0])
    link = ref.out.Link(h2d, d2h, hl, dl, rng.choice([1, 64]), rng.choice([1e-6, 1.0]), rng.choice([0, 0.999]),
                        rng.choice([0, 0.999]), rng.choice([0, 0.001, 1e12]))
    prof = {"name": "stress", "h2d": {"bandwidth_Bps": h2d, "latency_s": hl},
            "d2h": {"bandwidth_Bps": d2h, "latency_s": dl}, "copy_engines": link.engines,
            "duplex_factor": link.duplex, "nccl_share": link.nccl_share, "memcpy_share": link.memcpy_share}
    (work / "link.json").write_text(json.dumps(prof))
    args = ["--link", str(work / "link.json")]
    return link, args + (["--max-swap-ops-per-sec", str(link.max_ops)] if link.max_ops else [])


def run_one(mhc, trace, rng, work, verbose, stress=False):
    link, largs = stress_link(rng, work) if stress else oc.random_link(rng, work)
    policy = rng.choice(["lru", "largest", "belady"])
    pre = rng.choice(PREFETCHERS)
    if pre == "periodic":
        pre += rng.choice(["", ":1", ":2", ":8", ":40"])
    elif pre == "forecast":
        pre += rng.choice(["", ":1", ":2", ":8"])
    early = rng.random() < 0.85
    samples = rng.choice([4096, 4096, 7, 1000000])
    ratio = rng.choice([0, 0, 0, 0.05, 0.3, 1])
    share = rng.choice([100, 95, 90, 80, 70, 60, 50, 40, 30, "peak-1"])
    tr = ref.Trace(str(trace), None)
    base_peak, _ = tr.live_walk()
    if share == "peak-1":
        cap = max(1, base_peak - 1)
        capacity = f"{cap}B"
    else:
        cap = math.floor(base_peak * share / 100)
        capacity = f"{share}%"
    cmd = [mhc, "simulate", str(trace), "--allocator", "ideal", "--policy", policy, "--prefetch", pre,
           "--capacity", capacity, "--json", "--cpu-buffer-ratio", str(ratio), "--memory-samples", str(samples)]
    cmd += largs + ([] if early else ["--no-early"])
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(str(c) for c in cmd[2:])
    host_cap = math.floor(cap * ratio) if ratio else 0
    try:
        sim = ref.Sim(tr, cap, policy, link, pre, host_cap, early, samples).run()
    except ref.TooSlow as e:   # refused in one line naming the link and the transfer's bytes
        said = p.returncode == 2 and "past the simulator's time range" in p.stderr and f" {e.args[0]} bytes" in p.stderr
        tally("link too slow")
        return label, [] if said else [f"exit {p.returncode}, the reading: a transfer of {e.args[0]} bytes past the "
                                       f"time range: {p.stderr.strip()[:200]}"]
    if p.returncode not in (0, 3):
        return label, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    got = json.loads(p.stdout)
    if got["device"] != tr.device:
        return label, [f"device: mhc {got['device']}, reading {tr.device}"]
    mine = sim.metrics
    if not mine.get("forecast_evictions"):   # stored only when above 0
        mine.pop("forecast_evictions", None)
    stored = oc.stored_run(trace)
    gm = stored["metrics"]
    problems = []
    for key in oc.INT_METRICS:
        if key == "capacity_bytes":
            continue
        if (key in mine and mine[key] is not None) != (key in gm):
            problems.append(f"{key}: mhc {gm.get(key)}, reading {mine.get(key)}")
        elif key in gm and not oc.same_int(gm[key], mine[key]):
            problems.append(f"{key}: mhc {int(gm[key])}, reading {mine[key]}")
    for key in oc.FLOAT_METRICS + FORECAST_METRICS:
        a, b = gm.get(key), mine.get(key)
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"{key}: mhc {a}, reading {b}")
    kt = sorted((k, v[0], v[1]) for k, v in sim.kernel_times.items())
    if kt != stored["kernels"]:
        d = next((f"mhc {y}, reading {x}" for x, y in zip(kt, stored["kernels"]) if x != y),
                 f"{len(stored['kernels'])} rows, reading {len(kt)}")
        problems.append(f"run_kernels: {d}")
    ids = tr.ids
    mine_ev = sorted((oc.KINDS.index(k), t0, t1, ids[a] if a is not None else 0, kern or 0, b)
                     for k, t0, t1, a, kern, b in sim.events)
    if mine_ev != stored["events"]:
        d = next((f"mhc {y}, reading {x}" for x, y in zip(mine_ev, stored["events"]) if x != y),
                 f"{len(stored['events'])} rows, reading {len(mine_ev)}")
        problems.append(f"run_events (kind, start, end, allocation, kernel, bytes): {d}")
    mem = [(t, int(d), int(h)) for t, d, h in stored["memory"]]
    if mem != sim.memory:
        d = next((f"mhc {y}, reading {x}" for x, y in zip(sim.memory, mem) if x != y),
                 f"{len(mem)} rows, reading {len(sim.memory)}")
        problems.append(f"run_memory: {d}")
    if verbose and problems:
        print("   ", " ".join(str(c) for c in cmd))
    tally(pre.split(":")[0])
    tally(f"{len(tr.steps)} steps" if len(tr.steps) < 3 else "3+ steps")
    for key in ("prefetches", "early_evictions", "forecast_evictions", "stalls", "swap_ins"):
        if mine.get(key):
            tally(key)
    if sim.oom:
        tally("oom")
    return f"{label} [{got['run']}]", problems


def with_kernels(path, big):
    """A public trace with kernels beside its GPU memory (the prefetchers act at kernel starts),
    and, unless `big`, small enough for this reading (at most 3,000 kernels and allocations)."""
    db = sqlite3.connect(str(path))
    k, a = db.execute("SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM allocations)").fetchone()
    db.close()
    return k > 0 and (big or max(k, a) <= 3000)


GENERATE = [["--preset", "gpt2-small", "--layers", "2", "--steps", "3", "--seq", "64"],
            ["--preset", "llama2-7b", "--layers", "1", "--steps", "4", "--seq", "64", "--micro-batches", "2",
             "--recompute"],
            ["--preset", "gpt2-small", "--layers", "1", "--steps", "5", "--seq", "64", "--dp", "2", "--pp", "1",
             "--seed", "7", "--jitter", "0.2"],
            ["--preset", "mhc-27b", "--layers", "2", "--steps", "3", "--seq", "64", "--tp", "2", "--dp", "1",
             "--pp", "1"]]


def generated(mhc, work, j):
    """The j-th generated trace (made once, when first needed)."""
    gen = work / f"gen{j}.db"
    if not gen.exists():
        subprocess.run([mhc, "generate", "--force", "-o", str(gen)] + GENERATE[j], check=True, capture_output=True)
    return gen.read_bytes()


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opt = lambda name, d: next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), d)  # noqa
    runs, seed = int(opt("runs", "100")), int(opt("seed", "1"))
    verbose = "--verbose" in sys.argv
    big = "--big" in sys.argv
    stress = "--stress" in sys.argv   # one run in two on a link at the bounds' ends
    only = opt("prefetchers", "")   # only these (periodic, capuchin, forecast)
    if only:
        PREFETCHERS[:] = only.split(",")
    work.mkdir(parents=True, exist_ok=True)
    blank = oc.empty_trace(mhc, work)
    public = opt("public", None)
    only = [x for x in opt("public-filter", "").split(",") if x] or None
    pubs = [t for t in (oc.public_traces(mhc, work, public, only) if public else []) if with_kernels(t, big)]
    rng = random.Random(seed)
    differ = 0
    for i in range(runs):
        trace = work / "run.db"
        if pubs and i % 4 == 3:
            src = pubs[(i // 4) % len(pubs)]
            trace.write_bytes(src.read_bytes())
            what = src.name
        elif i % 5 == 4:
            trace.write_bytes(generated(mhc, work, (i // 5) % len(GENERATE)))
            what = "generated"
        else:
            edge = rng.choice(["leak", "markers", "leak", "markers", None, "ties", "instant", "streams", "one"])
            oc.random_trace(trace, blank, rng, [edge] if edge else None, ("far", "wide"))
            what = f"random {edge or ''}"
            chk = subprocess.run([mhc, "check", str(trace)], capture_output=True, text=True)
            if chk.returncode != 0:
                print(f"trace {i} fails mhc check: {chk.stdout.strip()[:300]}")
                differ += 1
                continue
        label, problems = run_one(mhc, trace, rng, work, verbose, stress and rng.random() < 0.5)
        if problems:
            differ += 1
            (work / f"differ-{i}.db").write_bytes(trace.read_bytes())
            if (work / "link.json").exists():
                (work / f"differ-{i}.json").write_bytes((work / "link.json").read_bytes())
        print(f"{'DIFFER' if problems else 'same  '} {i}: {what}: {label}")
        for p in problems[:8]:
            print(f"    {p}")
    print(f"{runs} runs, {differ} differ; runs with: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
