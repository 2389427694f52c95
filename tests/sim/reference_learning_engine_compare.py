#!/usr/bin/env python3
"""Runs `mhc simulate --prefetch periodic:K|capuchin|forecast:H` under the `caching` allocator and the
policies `dtr` and `cost_aware` (and the others) beside reference_learning_engine.py (two outside
readings of docs/simulator.md put together) and compares every metric (drops, recomputations and the
forecaster's errors included, the OOM report's figures), every stored event, every kernel's simulated
time and the memory timeline.

Usage: reference_learning_engine_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--public=DIR
       [--public-filter=A,B]] [--prefetchers=A,B] [--policies=A,B] [--stress] [--confs] [--verbose]
Traces: random ones (reference_outside_compare.random_trace) with a step column, step markers or
steps that keep what they make; `mhc generate` traces of 3 to 5 steps (one with recomputation);
with --public=DIR one run in four on the public traces of DIR with kernels and GPU memory.
Configurations: the caching allocator in four runs of five; lru, largest, belady, dtr, cost_aware
(dtr and cost_aware one run in two); periodic:K, capuchin, forecast:H; capacities from 100% down to
30%; random links, host buffers and `--no-early`; --stress: one run in two on a link at the ends of
the profile's bounds (reference_learning_compare.stress_link); --confs: one caching run in two under
allocator settings (`--allocator-conf`: expandable segments, max_split_size_mb, roundup_power2_divisions,
garbage collection), the model then being reference_allocator_outside.py's.
Exit 0 when every run agrees, 1 otherwise (each difference printed)."""
import json
import math
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_learning_compare as lc  # noqa: E402
import reference_learning_engine as ref  # noqa: E402
import reference_outside_compare as oc  # noqa: E402

RECOMPUTE_METRICS = ["drops", "recomputations", "recompute_ns", "recompute_depth_max", "recompute_inputs_assumed"]
OOM_METRICS = ["oom_bytes_needed", "oom_bytes_pinned", "oom_bytes_short", "oom_time_ns", "oom_fragmentation"]
POLICIES = ["dtr", "cost_aware", "dtr", "cost_aware", "lru", "largest", "belady"]
# "Allocator models": settings over the recorded ones (--confs: one caching run in two takes one)
CONFS = ["expandable_segments:True", "max_split_size_mb:20", "max_split_size_mb:64,max_non_split_rounding_mb:40",
         "roundup_power2_divisions:4", "roundup_power2_divisions:[1:2,64:8,>:4]", "garbage_collection_threshold:0.6",
         "expandable_segments:True,roundup_power2_divisions:8", "garbage_collection_threshold:0.9,max_split_size_mb:30"]


def engine_link(link, max_ops):
    """reference_outside's Link in reference_ranks_engine's form."""
    return dict(h2d_bw=link.bps[0], d2h_bw=link.bps[1], h2d_lat=link.lat[0], d2h_lat=link.lat[1],
                engines=link.engines, duplex=link.duplex, nccl_share=link.nccl_share,
                memcpy_share=link.memcpy_share), max_ops


def run_one(mhc, trace, rng, work, verbose, stress=False, confs=False):
    link, largs = lc.stress_link(rng, work) if stress else oc.random_link(rng, work)
    policy = rng.choice(POLICIES)
    allocator = "caching" if rng.random() < 0.8 else "ideal"
    pre = rng.choice(lc.PREFETCHERS)
    if pre == "periodic":
        pre += rng.choice(["", ":1", ":2", ":8", ":40"])
    elif pre == "forecast":
        pre += rng.choice(["", ":1", ":2", ":8"])
    elif pre == "lookahead":   # --prefetchers=lookahead: the engine's own, under the same settings
        pre += rng.choice(["", ":2", ":16"])
    early = rng.random() < 0.85
    samples = rng.choice([4096, 4096, 7])
    ratio = rng.choice([0, 0, 0, 0.05, 0.3, 1])
    share = rng.choice([100, 95, 90, 80, 70, 60, 50, 40, 30])
    cmd = [mhc, "simulate", str(trace), "--allocator", allocator, "--policy", policy, "--prefetch", pre,
           "--capacity", f"{share}%", "--json", "--cpu-buffer-ratio", str(ratio), "--memory-samples", str(samples)]
    cmd += largs + ([] if early else ["--no-early"])
    if rng.random() < 0.1:   # "Defaults": caching, lru, none, pcie4, no host buffer, no cap, 4096 samples
        link, allocator, policy, pre = oc.ref.preset("pcie4"), "caching", "lru", "none"
        ratio, samples, early = 0, 4096, True
        cmd = [mhc, "simulate", str(trace), "--capacity", f"{share}%", "--json"]
    conf = rng.choice(CONFS) if confs and allocator == "caching" and rng.random() < 0.5 else ""
    if conf:
        cmd += ["--allocator-conf", conf]
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(str(c) for c in cmd[2:])
    lk, max_ops = engine_link(link, link.max_ops)
    opts = dict(allocator=allocator, policy=policy, link=lk, host_ratio=ratio, memory_samples=samples, prefetch=pre,
                no_early=not early, allocator_conf=conf)
    if max_ops:
        opts["max_ops"] = max_ops
    try:
        sim = ref.simulate(str(trace), opts, f"{share}%")
    except ref.lrn.TooSlow as e:   # refused in one line naming the link and the transfer's bytes
        said = p.returncode == 2 and "past the simulator's time range" in p.stderr and f" {e.args[0]} bytes" in p.stderr
        lc.tally("link too slow")
        return label, [] if said else [f"exit {p.returncode}, the reading: a transfer of {e.args[0]} bytes past the "
                                       f"time range: {p.stderr.strip()[:200]}"]
    if p.returncode not in (0, 3):
        return label, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    got = json.loads(p.stdout)
    if got["device"] != sim.tr.device:
        return label, [f"device: mhc {got['device']}, reading {sim.tr.device}"]
    mine = sim.metrics
    stored = oc.stored_run(trace)
    gm = stored["metrics"]
    problems = []
    # "What the output says about the trace": no kernels, or no accesses (assumed)
    said = " ".join(got.get("warnings", []))
    for what, lacks in (("no kernels", not sim.tr.kid), ("no accesses", sim.lt.assumed and bool(sim.tr.kid))):
        if (what in said) != lacks:
            problems.append(f"warnings: {'no' if lacks else 'a'} warning saying '{what}': {said[:200]}")
    for key in oc.INT_METRICS + RECOMPUTE_METRICS + OOM_METRICS + ["forecast_evictions"]:
        if key not in gm:   # a count is stored only when above 0 (and the OOM's figures with an OOM)
            if mine.get(key):
                problems.append(f"{key}: absent in mhc, reading {mine[key]}")
        elif key not in mine or mine[key] is None or not oc.same_int(gm[key], mine[key]):
            problems.append(f"{key}: mhc {int(gm[key])}, reading {mine.get(key)}")
    for key in oc.FLOAT_METRICS + lc.FORECAST_METRICS[:4]:
        a, b = gm.get(key), mine.get(key)
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"{key}: mhc {a}, reading {b}")
    kt = sorted((k, v[0], v[1]) for k, v in sim.kernel_times.items())
    if kt != stored["kernels"]:
        d = next((f"mhc {y}, reading {x}" for x, y in zip(kt, stored["kernels"]) if x != y),
                 f"{len(stored['kernels'])} rows, reading {len(kt)}")
        problems.append(f"run_kernels: {d}")
    if sorted(sim.events) != stored["events"]:
        a, b = set(stored["events"]), set(sim.events)
        problems.append(f"run_events (kind, start, end, allocation, kernel, bytes): {len(a)} in mhc, {len(b)} in "
                        f"the reading; mhc only {sorted(a - b)[:3]}, reading only {sorted(b - a)[:3]}")
    mem = [(t, int(d), int(h)) for t, d, h in stored["memory"]]
    if mem != sim.memory:
        d = next((f"mhc {y}, reading {x}" for x, y in zip(sim.memory, mem) if x != y),
                 f"{len(mem)} rows, reading {len(sim.memory)}")
        problems.append(f"run_memory: {d}")
    if verbose and problems:
        print("   ", " ".join(str(c) for c in cmd))
    lc.tally(pre.split(":")[0])
    lc.tally(policy)
    lc.tally(allocator + (" with settings" if conf else ""))
    for key in ("prefetches", "early_evictions", "forecast_evictions", "drops", "recomputations", "stalls"):
        if mine.get(key):
            lc.tally(key)
    if mine.get("recompute_depth_max", 0) > 1:
        lc.tally("recompute depth > 1")
    if isinstance(sim.oom, dict):
        lc.tally("oom")
    if sim.lt.assumed:
        lc.tally("assumed accesses")
    return f"{label} [{got['run']}]", problems


GENERATE = lc.GENERATE + [["--preset", "gpt2-small", "--layers", "2", "--steps", "4", "--seq", "128", "--recompute",
                           "--seed", "3", "--jitter", "0.1"]]


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opt = lambda name, d: next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), d)  # noqa
    runs, seed = int(opt("runs", "100")), int(opt("seed", "1"))
    verbose = "--verbose" in sys.argv
    if opt("prefetchers", ""):
        lc.PREFETCHERS[:] = opt("prefetchers", "").split(",")
    if opt("policies", ""):
        POLICIES[:] = opt("policies", "").split(",")
    lc.GENERATE[:] = GENERATE
    work.mkdir(parents=True, exist_ok=True)
    blank = oc.empty_trace(mhc, work)
    public = opt("public", None)
    only = [x for x in opt("public-filter", "").split(",") if x] or None
    pubs = [t for t in (oc.public_traces(mhc, work, public, only) if public else []) if lc.with_kernels(t, False)]
    rng = random.Random(seed)
    differ = 0
    for i in range(runs):
        trace = work / "run.db"
        if pubs and i % 4 == 3:
            src = pubs[(i // 4) % len(pubs)]
            trace.write_bytes(src.read_bytes())
            what = src.name
        elif i % 3 == 2:
            trace.write_bytes(lc.generated(mhc, work, (i // 3) % len(GENERATE)))
            what = "generated"
        else:
            edge = rng.choice(["leak", "markers", None])
            oc.random_trace(trace, blank, rng, [edge] if edge else None, ("far", "wide"))
            what = f"random {edge or ''}"
            chk = subprocess.run([mhc, "check", str(trace)], capture_output=True, text=True)
            if chk.returncode != 0:
                print(f"trace {i} fails mhc check: {chk.stdout.strip()[:300]}")
                differ += 1
                continue
        label, problems = run_one(mhc, trace, rng, work, verbose, "--stress" in sys.argv and rng.random() < 0.5,
                                  "--confs" in sys.argv)
        if problems:
            differ += 1
            (work / f"differ-{i}.db").write_bytes(trace.read_bytes())
            if (work / "link.json").exists():
                (work / f"differ-{i}.json").write_bytes((work / "link.json").read_bytes())
        print(f"{'DIFFER' if problems else 'same  '} {i}: {what}: {label}")
        for p in problems[:8]:
            print(f"    {p}")
    print(f"{runs} runs, {differ} differ; runs with: " + ", ".join(f"{k} {v}" for k, v in sorted(lc.TALLY.items())))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
