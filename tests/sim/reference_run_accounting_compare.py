#!/usr/bin/env python3
"""Runs `mhc simulate` and `mhc sweep` on generated and random traces under random configurations
(every policy and prefetcher, both allocators with their settings, capacities that evict, stall and
run out of memory, links, host buffers, the swap-operation cap, memory sample counts, early swap-out
off) and checks, with reference_run_accounting.py (an outside reading of docs/simulator.md "Time"
and "Outputs"), that every stored run's figures add up as the page says: the metrics against the
stored events, the global shift against every kernel time and the makespan, the loss, peak
reduction and OOM slowdown, the memory timeline's buckets; `--json` against the stored run; and
for `mhc sweep --json` (docs/cli.md "JSON", docs/simulator.md "Sweep") the grid, the answers, their
bisection and the count of simulations.

    python3 tests/sim/reference_run_accounting_compare.py MHC WORK [--runs=N] [--sweeps=N] [--ranks=N] [--seed=S] [-v]

Exit 1 when a run differs from the reading (each difference printed), 0 otherwise.
"""
import csv
import json
import random
import sqlite3
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_run_accounting as ref  # noqa: E402
from reference_outside_compare import empty_trace, random_trace  # noqa: E402  (trace generator only)

CSV_EVERY = 4   # about one simulate run in four is also exported as CSV
TALLY = {}   # runs in which each case came up: what the random configurations exercised
POLICIES = ["lru", "largest", "belady", "dtr", "cost_aware"]
PREFETCHERS = ["none", "lookahead:2", "lookahead", "periodic", "periodic:3", "capuchin", "forecast", "forecast:2"]
CONFS = ["expandable_segments:True", "max_split_size_mb:20", "roundup_power2_divisions:4",
         "garbage_collection_threshold:0.6", "max_split_size_mb:64,roundup_power2_divisions:[2:8,>:2]"]
LINKS = ["pcie3", "pcie4", "pcie5", "nvlink-c2c"]


def generated(mhc, work, rng, i):
    """A small `mhc generate` trace under random options."""
    preset = rng.choice(["gpt2-small", "llama2-7b", "mhc-27b"])
    args = ["--preset", preset, "--layers", str(rng.choice([1, 2])),
            "--steps", str(rng.choice([2, 3])), "--seq", str(rng.choice([32, 64, 128])),
            "--jitter", rng.choice(["0.03", "0.3"]), "--seed", str(rng.randint(1, 99))]
    if rng.random() < 0.2:   # no jitter: every step alike (the seed then draws nothing)
        args[-4:] = ["--jitter", "0"]
    if preset == "mhc-27b":   # its own parallelism divides more layers than these
        args += ["--tp", "2", "--dp", "1", "--pp", "1"]
    if rng.random() < 0.3:
        args += ["--micro-batches", "2"]
    if rng.random() < 0.2:
        args += ["--recompute"]
    if rng.random() < 0.15:
        args += ["--dtype", "fp32"]
    path = work / f"gen-{i}.db"
    subprocess.run([mhc, "-q", "generate", "--force", "-o", str(path)] + args, check=True, capture_output=True)
    return path


def random_config(rng):
    """(the command-line options, what the reading needs to know of them)."""
    allocator = rng.choice(["ideal", "caching"])
    prefetch = rng.choice(PREFETCHERS)
    cap = rng.choice(["95%", "80%", "65%", "50%", "33.3333%", "20%", "unlimited", "100%"])
    args = ["--allocator", allocator, "--capacity", cap]
    if allocator == "caching" and rng.random() < 0.4:
        args += ["--allocator-conf", rng.choice(CONFS)]
    samples = ref.MEMORY_SAMPLES
    if rng.random() < 0.5:
        samples = rng.choice([1, 2, 3, 7, 64, 1000])
        args += ["--memory-samples", str(samples)]
    info = dict(prefetch=prefetch, allocator=allocator, capacity_text=cap, samples=samples)
    if cap == "unlimited":   # what is evicted or swapped how is not asked where nothing is
        info["prefetch"] = "none"
        return args, info
    info["policy"] = rng.choice(POLICIES)
    args += ["--policy", info["policy"], "--prefetch", prefetch, "--link", rng.choice(LINKS)]
    if rng.random() < 0.25:
        args += ["--cpu-buffer-ratio", rng.choice(["0.05", "0.3", "1", "4"])]
    if rng.random() < 0.15:
        args += ["--no-early"]
        info["early"] = False
    if rng.random() < 0.15:
        args += ["--max-swap-ops-per-sec", rng.choice(["2000", "50000"])]
    return args, info


def tally(run, allocator):
    kinds = {x[0] for x in run.events}
    moved = kinds & {"swap_out", "swap_in", "drop", "evict_clean"}
    for name, on in (("stalls", "stall" in kinds), ("OOM", "oom" in kinds), ("drops", "drop" in kinds),
                     ("recomputations", "recompute" in kinds), ("prefetches", "prefetch" in kinds),
                     ("coupled waits", run.metrics.get("coupled_wait_count", 0) > 0),
                     ("stopped ranks", run.status == "incomplete"),
                     ("timelines known exactly", allocator == "ideal" and not moved)):
        if on:
            TALLY[name] = TALLY.get(name, 0) + 1


def last_run(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    run = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    con.close()
    return run


def json_against_stored(out, run):
    """docs/cli.md "JSON": `--json`'s metrics are the stored figures (null: not stored)."""
    got = out["metrics"]
    problems = []
    for key in sorted(set(got) | set(run.metrics)):
        a, b = got.get(key), run.metrics.get(key)
        if key in ("capacity_bytes", "host_capacity_bytes") and b is None:
            continue   # the stored run keeps these in its config
        if not ref.close(None if a is None else float(a), b):
            problems.append(f"--json metric {key} = {a}, stored {b}")
    return problems


def shortest(text, value):
    """docs/import.md "Formats out": a metric in the shortest text that reads back as the same double,
    a whole-valued one as the integer it is (all its digits, beyond 2^53 too)."""
    if float(text) != value:
        return False
    if float(value).is_integer():
        return text == str(int(value))
    digits = lambda t: len(t.lower().split("e")[0].replace("-", "").replace(".", "").strip("0"))  # noqa: E731
    return digits(text) <= digits(repr(float(value)))


def csv_against_stored(mhc, trace, db, run, work):
    """`mhc export --format csv --run ID` (docs/import.md "Formats out"): the run tables as stored, time
    columns named with `_ns`, event kinds by name, `run_events` and `run_memory` in time order."""
    out = work / "csv"
    if out.exists():
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
    p = subprocess.run([mhc, "export", str(trace), "--runs-db", str(db), "--format", "csv", "-o", str(out), "--run",
                        str(run.id)], capture_output=True, text=True)
    if p.returncode != 0:
        return [f"export --format csv: exit {p.returncode}: {p.stderr.strip()[:200]}"]
    read = lambda name: list(csv.DictReader((out / name).open(newline="")))  # noqa: E731
    problems = []
    metrics = {r["key"]: r["value"] for r in read("run_metrics.csv")}
    if set(metrics) != set(run.metrics):
        problems.append(f"run_metrics.csv keys differ: {sorted(set(metrics) ^ set(run.metrics))[:4]}")
    problems += [f"run_metrics.csv {k} = {v!r}, stored {run.metrics.get(k)!r} (not the shortest text of it)"
                 for k, v in metrics.items() if k in run.metrics and not shortest(v, run.metrics[k])][:3]
    events = [(r["kind"], int(r["t_start_ns"]), int(r["t_end_ns"]), int(r["allocation"]), int(r["kernel"]),
               int(r["bytes"])) for r in read("run_events.csv")]
    if sorted(events) != sorted(run.events):
        problems.append(f"run_events.csv: {len(events)} rows, {len(run.events)} stored, or not the same rows")
    if [e[1] for e in events] != sorted(e[1] for e in events):
        problems.append("run_events.csv is not in time order")
    memory = [(int(r["t_ns"]), int(r["device_bytes"]), int(r["host_bytes"])) for r in read("run_memory.csv")]
    if memory != [tuple(x) for x in run.memory]:
        problems.append(f"run_memory.csv: {len(memory)} rows, not the {len(run.memory)} stored in time order")
    kernels = {int(r["kernel"]): (int(r["t_start_ns"]), int(r["t_end_ns"])) for r in read("run_kernels.csv")}
    if kernels != run.kernels:
        problems.append(f"run_kernels.csv: {len(kernels)} rows, {len(run.kernels)} stored, or other times")
    config = {r["key"]: r["value"] for r in read("run_config.csv")}
    if config != run.config:
        problems.append(f"run_config.csv differs from the stored config: {sorted(set(config.items()) ^ set(run.config.items()))[:2]}")
    runs = read("runs.csv")
    if [(r["id"], r["name"], r["status"], r["kind"]) for r in runs] != [(str(run.id), run.name, run.status, run.kind)]:
        problems.append(f"runs.csv: {[(r['id'], r['name'], r['status']) for r in runs][:2]}")
    return problems


def simulate(mhc, trace, work, args, info, verbose, label=""):
    db = work / "runs.db"
    if db.exists():
        db.unlink()
    cmd = [mhc, "simulate", str(trace), "--json", "--runs-db", str(db)] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    name = f"{label}{trace.name} {' '.join(args)}"
    if p.returncode not in (0, 3):
        if p.returncode == 2 and ("too slow" in p.stderr or "no allocations" in p.stderr
                                  or "only memory is the host" in p.stderr):
            return [], 0
        return [f"{name}: exit {p.returncode}: {p.stderr.strip()[:300]}"], 0
    out = json.loads(p.stdout)
    tr = ref.Trace(str(trace), out["device"])
    run = ref.Run(str(db), last_run(db))
    problems = ref.check_run(tr, run, **info) + json_against_stored(out, run)
    tally(run, info["allocator"])
    TALLY["simulate runs"] = TALLY.get("simulate runs", 0) + 1
    if TALLY["simulate runs"] % CSV_EVERY == 0:
        problems += csv_against_stored(mhc, trace, db, run, work)
        TALLY["runs exported as CSV"] = TALLY.get("runs exported as CSV", 0) + 1
    if verbose:
        print(f"{name}: {len(run.events)} events, {len(run.kernels)} kernels, {len(problems)} problems")
    return [f"{name}: {x}" for x in problems[:6]], 1


def within(metrics, budget):
    """"Sweep": finishes with a throughput loss at most the budget."""
    loss = metrics.get("throughput_loss")
    return not metrics.get("oom") and loss is not None and loss <= budget


def check_answers(mhc, trace, answers, steps, budget, allocator):
    """"Sweep": each answer's oracle mark, what found and saving say, its share a bisection point, its
    run within the budget, and the probe 2^-steps under it not within (simulated again)."""
    problems = []
    b = float(Fraction(budget.rstrip("%")) / 100)
    for a in answers:
        label = f"answer {a.get('policy')}+{a.get('prefetch')}"
        oracle = a.get("policy") == "belady" or str(a.get("prefetch")).startswith("lookahead")
        if a.get("oracle") != oracle:
            problems.append(f"{label}: oracle {a.get('oracle')}")
        share = a.get("capacity_share")
        if not a.get("found"):
            if share is not None or a.get("run") is not None or a.get("saving") is not False:
                problems.append(f"{label}: nothing found, yet a share {share}, a run or saving {a.get('saving')}")
            continue
        if share is None or a.get("run") is None:
            problems.append(f"{label}: found, with no share or no run")
            continue
        if share * (1 << steps) != int(share * (1 << steps)) or not 0 < share <= 1:
            problems.append(f"{label}: share {share} is not a bisection point of {steps} steps")
        if a.get("saving") != (share < 1):
            problems.append(f"{label}: saving {a.get('saving')} at a share of {share}")
        if not within(a["run"]["metrics"], b):
            problems.append(f"{label}: the answer's run is not within the {budget} budget")
        lower = share - 1 / (1 << steps)
        if share < 1 and lower > 0:   # the probe just under the answer: bisection found it not within
            pct = f"{float(Fraction(lower) * 100):.10g}%"
            r = subprocess.run([mhc, "simulate", str(trace), "--capacity", pct, "--policy", a["policy"], "--prefetch",
                                a["prefetch"], "--allocator", allocator, "--link", "pcie4", "--json", "--no-store"],
                               capture_output=True, text=True)
            TALLY["answers checked against the probe under them"] = TALLY.get(
                "answers checked against the probe under them", 0) + 1
            if r.returncode in (0, 3) and within(json.loads(r.stdout)["metrics"], b):
                problems.append(f"{label}: {pct} of the peak, under the answer {share}, is within the budget too")
    return problems


def sweep_case(mhc, trace, work, rng, verbose):
    """`mhc sweep --json`: the grid's runs (each as simulate stores it, against the reading), the answers
    and their bisection (the answer within the budget, the probe 2^-steps under it not), the count."""
    db = work / "sweep.db"
    if db.exists():
        db.unlink()
    policies = rng.sample(POLICIES, rng.choice([1, 2]))
    prefetchers = rng.sample(["none", "lookahead:4", "periodic"], rng.choice([1, 2]))
    caps = rng.sample(["90%", "70%", "50%", "37.5%"], 2)
    steps = rng.choice([1, 3, 5])
    budget = rng.choice(["0%", "3%", "25%", "300%", "1000%"])   # large budgets: answers below the peak
    allocator = rng.choice(["ideal", "caching"])
    args = ["--policies", ",".join(policies), "--prefetchers", ",".join(prefetchers), "--capacities", ",".join(caps),
            "--links", "pcie4", "--budget", budget, "--bisect-steps", str(steps), "--allocator", allocator,
            "--json", "-j", "1"]
    p = subprocess.run([mhc, "sweep", str(trace), "--runs-db", str(db)] + args, capture_output=True, text=True)
    name = f"sweep {trace.name} {' '.join(args)}"
    if p.returncode not in (0, 3):
        return [f"{name}: exit {p.returncode}: {p.stderr.strip()[:300]}"], 0
    out = json.loads(p.stdout)
    problems = []
    b = float(Fraction(budget.rstrip("%")) / 100)
    grid, answers = out.get("grid", []), out.get("answers", [])
    if len(grid) != len(policies) * len(prefetchers) * len(caps):
        problems.append(f"{len(grid)} grid runs, {len(policies)} x {len(prefetchers)} x {len(caps)} asked")
    tr = ref.Trace(str(trace), grid[0]["device"]) if grid else None
    # "Inputs": a sweep of an order-only trace, or of one whose events are all at one instant, does
    # not bisect (its budget is a share of time): no answers, and its budget null as with --no-bisect
    bisects = tr is not None and not tr.order_only and tr.first != tr.last
    if len(answers) != (len(policies) * len(prefetchers) if bisects else 0):
        problems.append(f"{len(answers)} answers for {len(policies)} x {len(prefetchers)} x 1 link"
                        f"{'' if bisects else ' where the sweep does not bisect'}")
    if out.get("simulations") != len(grid) + len(answers) * (steps + 1):
        problems.append(f"simulations {out.get('simulations')}, the grid's {len(grid)} + (steps + 1) x "
                        f"{len(answers)} answers = {len(grid) + len(answers) * (steps + 1)}")
    if not ref.close(out.get("budget"), b if bisects else None):
        problems.append(f"budget {out.get('budget')}, asked {b}{'' if bisects else ' (no bisection: null)'}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    stored = {n: i for i, n in con.execute("SELECT id, name FROM runs")}
    con.close()
    for g in grid:
        if g["metrics"].get("baseline_peak_bytes") != out.get("baseline_peak_bytes"):
            problems.append(f"grid run {g['run']}: baseline peak {g['metrics'].get('baseline_peak_bytes')}, the "
                            f"sweep's {out.get('baseline_peak_bytes')}")
        rid = stored.get(g["run"])
        if rid is None:
            problems.append(f"grid run {g['run']} is not stored")
            continue
        run = ref.Run(str(db), rid)
        tr = ref.Trace(str(trace), g["device"])
        cap = g["config"]["capacity"]
        found = ref.check_run(tr, run, prefetch=g["config"]["prefetch"], allocator=allocator, capacity_text=cap,
                              policy=g["config"]["eviction"])
        tally(run, allocator)
        problems += [f"grid {g['run']}: {x}" for x in found[:3] + json_against_stored(g, run)[:3]]
    problems += check_answers(mhc, trace, answers, steps, budget, allocator)
    if verbose:
        print(f"{name}: {len(grid)} grid runs, {len(answers)} answers, {len(problems)} problems")
    return [f"{name}: {x}" for x in problems[:8]], len(grid)


def ranks_case(mhc, work, rng, verbose):
    """`mhc simulate --ranks` on a job `mhc generate --all-ranks` writes, some compute kernels of each
    rank made shorter (so that the ranks reach their collectives apart and wait): every rank's stored
    run, its coupled waits (stall events at a cross-rank kernel's end, left out of `stalls`)."""
    dp, pp = rng.choice([(2, 1), (1, 2), (2, 2)])
    out = work / "job.db"
    for f in work.glob("job.rank*.db"):
        f.unlink()
    subprocess.run([mhc, "-q", "generate", "--preset", rng.choice(["gpt2-small", "llama2-7b"]), "--layers", "2",
                    "--steps", "2", "--seq", "64", "--micro-batches", str(rng.choice([1, 2])), "--dp", str(dp),
                    "--pp", str(pp), "--tp", "1", "--seed", str(rng.randint(1, 50)), "--all-ranks", "-o", str(out),
                    "--force"], check=True, capture_output=True)
    files = sorted(work.glob("job.rank*.db"))
    for f in files:   # shorter kernels on some ranks: their arrivals differ
        if rng.random() < 0.7:
            con = sqlite3.connect(str(f))
            con.execute("UPDATE kernels SET t_end = t_start + (t_end - t_start) / 3 WHERE id % 3 = 0 AND name NOT IN "
                        "(SELECT id FROM strings WHERE text LIKE 'nccl%')")
            con.commit()
            con.close()
    rng.shuffle(files)
    cap = rng.choice(["90%", "70%", "50%", "unlimited"])
    prefetch = rng.choice(["none", "lookahead:4"])
    allocator = rng.choice(["ideal", "caching"])
    args = ["--capacity", cap, "--allocator", allocator]
    policy = rng.choice(["lru", "largest", "belady", "dtr"])
    if cap != "unlimited":
        args += ["--policy", policy, "--prefetch", prefetch,
                 "--link", rng.choice(LINKS)]
    else:
        prefetch = "none"
    p = subprocess.run([mhc, "simulate", "--ranks", *map(str, files), "--json"] + args, capture_output=True,
                       text=True)
    name = f"ranks {' '.join(f.name for f in files)} {' '.join(args)}"
    if p.returncode not in (0, 3):
        return [f"{name}: exit {p.returncode}: {p.stderr.strip()[:300]}"], 0
    doc = json.loads(p.stdout)
    problems = []
    for f, entry in zip(files, doc.get("ranks", [])):
        tr = ref.Trace(str(f), entry.get("device", 0))
        run = ref.Run(str(f), last_run(f))
        found = ref.check_run(tr, run, prefetch=prefetch, allocator=allocator, capacity_text=cap, coupled=True,
                              policy=policy)
        tally(run, allocator)
        problems += [f"{f.name}: {x}" for x in found[:4]]
    if verbose:
        print(f"{name}: {len(files)} ranks, {len(problems)} problems")
    return [f"{name}: {x}" for x in problems[:8]], len(files)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    verbose = "-v" in sys.argv
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(opts.get("seed", 1)))
    runs, sweeps = int(opts.get("runs", 40)), int(opts.get("sweeps", 2))
    jobs = int(opts.get("ranks", 2))
    blank = empty_trace(mhc, work)
    differ, checked = 0, 0
    traces = []
    for i in range(runs + sweeps + jobs):
        if i % 8 == 0 or not traces:
            if rng.random() < 0.5:
                traces = [generated(mhc, work, rng, i)]
            else:
                path = work / f"random-{i}.db"
                random_trace(path, blank, rng)
                traces = [path]
        trace = traces[0]
        if i < runs:
            cmd, info = random_config(rng)
            problems, n = simulate(mhc, trace, work, cmd, info, verbose)
        elif i < runs + sweeps:
            problems, n = sweep_case(mhc, trace, work, rng, verbose)
        else:
            problems, n = ranks_case(mhc, work, rng, verbose)
        checked += n
        if problems:
            differ += 1
            print(f"case {i}:")
            for x in problems:
                print("  " + x)
    print(f"{runs} simulate runs, {sweeps} sweeps and {jobs} coupled jobs, {checked} stored runs checked "
          f"({', '.join(f'{k} {v}' for k, v in sorted(TALLY.items()))}): {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
