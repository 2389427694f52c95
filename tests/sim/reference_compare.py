#!/usr/bin/env python3
"""Runs `mhc simulate` and the document's second reading (reference_sim.py) on generated traces
and compares metrics and every stored event.

Usage: reference_compare.py MHC WORKDIR [--quick] [--public=DIR] [--confs] [--periodic] [--ranks] [--policies=A,B]
       [--sample=N]
Every configuration runs with the ideal and the caching allocator.
--quick: 2 of the 4 generated traces, 2 of the 4 links, lookahead 0 and 8 (192 runs instead of 1,152);
--public=DIR: also every public trace of DIR (tests/data/public) the importer reads alone and
that holds GPU memory, at 90% and 60% under lru and belady, with none and lookahead:8.
--conf-filter=TEXT: only the settings of CONFS that contain TEXT.
--public-filter=A,B: with --confs or --periodic, only the public traces whose names contain A or B.
--periodic: instead, the learning prefetchers periodic:8, periodic:2, capuchin, forecast:8 and
forecast:1 under lru, belady, dtr and cost_aware
(90/70/50%, pcie4 and nvlink-c2c with a host buffer, both allocators).
--ranks: instead, coupled ranks (`simulate --ranks`) of two generated 4-rank jobs (dp x pp, tp x pp) under
lru, belady and dtr, 90/70/50%, pcie4 and pcie5 with latency, both allocators.
--policies=A,B: these policies instead (e.g. dtr,cost_aware).
--confs: instead, the caching allocator under each setting of CONFS (lru and belady, 90/70/50%,
none and lookahead:8 (--quick: none), pcie4) on those traces.
--pools: instead, the generated traces with private memory pools as a torch 2.15 snapshot's import
names them (every third allocation in pool (0, 1), every seventh in pool (1, 0), which the recording
gives back at 40% of the trace), under the caching allocator (lru, largest, belady; 90/70/50/30%;
pcie4 and pcie3 with one copy engine; lookahead 0 and 8).
--sample=N: one configuration in N, chosen by its label's CRC-32 (the same ones every time).
Exit 0 when every run agrees, 1 otherwise (each difference printed).
"""
import itertools
import math
import json
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_coupled as coupled  # noqa: E402
import reference_sim as ref  # noqa: E402

KINDS = {0: "swap_out", 1: "swap_in", 2: "evict_clean", 3: "drop", 4: "recompute", 5: "stall", 6: "oom",
         7: "prefetch"}
METRICS = ["simulated_peak_bytes", "baseline_makespan_ns", "simulated_makespan_ns", "stall_ns", "stalls",
           "swap_ins", "swap_in_bytes", "swap_outs", "swap_out_bytes", "clean_evictions", "host_peak_bytes", "prefetches", "early_evictions",
           "drops", "recomputations", "recompute_ns", "recompute_depth_max", "recompute_inputs_assumed",
           "forecast_evictions"]
FLOAT_METRICS = ["forecast_error", "forecast_peak_error", "forecast_horizon_error"]


# The caching allocator's settings that --confs runs (docs/simulator.md, "Allocator models")
CONFS = ["expandable_segments:True", "max_split_size_mb:24", "max_split_size_mb:64,max_non_split_rounding_mb:32",
         "roundup_power2_divisions:4", "roundup_power2_divisions:[2:8,16:2,>:4]",
         "garbage_collection_threshold:0.6", "garbage_collection_threshold:0.9,max_split_size_mb:32"]



def same_int(got, mine):
    """A metric is a double (run_metrics.value is REAL; --json prints the same number): beyond 2^53 it
    holds the nearest double of the integer figure (a trace spanning near 2^62 ns)."""
    return int(got) == int(mine) if abs(int(mine)) <= 1 << 53 else float(got) == float(int(mine))

def run_mhc(mhc, trace, policy, capacity, link_args, prefetch="none", allocator="ideal", conf=""):
    cmd = [mhc, "simulate", str(trace), "--allocator", allocator, "--policy", policy, "--prefetch", prefetch,
           "--capacity", capacity, "--json"] + link_args + (["--allocator-conf", conf] if conf else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout), stored_run(trace)


def stored_run(trace):
    """The last run stored in a trace: metrics, events, kernel times and memory timeline."""
    db = sqlite3.connect(str(trace))
    run = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    q = lambda sql: db.execute(sql, (run,)).fetchall()   # noqa: E731
    stored = dict(metrics=dict(q("SELECT key, value FROM run_metrics WHERE run = ?")),
                  events=q("SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ? "
                           "ORDER BY rowid"),
                  kernels=q("SELECT kernel, t_start, t_end FROM run_kernels WHERE run = ? ORDER BY kernel"),
                  memory=q("SELECT t, device_bytes, host_bytes FROM run_memory WHERE run = ? ORDER BY t, rowid"))
    db.close()
    return stored


def compare(mhc, trace, policy, capacity, link=ref.Link(), link_args=(), lookahead=0, allocator="ideal", conf="",
            periodic=0, forecast=0):
    """periodic: K of periodic:K, or -1 for capuchin; forecast: H of forecast:H."""
    prefetch = (f"forecast:{forecast}" if forecast else "capuchin" if periodic < 0 else
                f"periodic:{periodic}" if periodic else f"lookahead:{lookahead}" if lookahead else "none")
    out, stored = run_mhc(mhc, trace, policy, capacity, list(link_args), prefetch, allocator, conf)
    cap = int(out["metrics"]["capacity_bytes"])
    host_cap = max(0, int(out["metrics"]["host_capacity_bytes"]))
    res, tr = ref.simulate(str(trace), cap, policy, link, out["device"], lookahead, allocator, host_cap, conf,
                           max(periodic, 0), periodic < 0, forecast, read_trace(trace, out["device"]))
    problems = []
    got = out["metrics"]
    for k in METRICS:
        if k in res.metrics and k in got and not same_int(got[k], res.metrics[k]):
            problems.append(f"{k}: mhc {int(got[k])}, reference {int(res.metrics[k])}")
    for k in FLOAT_METRICS:   # the forecast's errors: doubles summed in the same order
        if (k in res.metrics) != (k in got and got[k] is not None) or (
                k in res.metrics and not math.isclose(got[k], res.metrics[k], rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"{k}: mhc {got.get(k)}, reference {res.metrics.get(k)}")
    for k in ("throughput_loss", "oom_slowdown"):   # "Time"; null when not defined ("Inputs": one instant)
        a, b = got.get(k), res.metrics.get(k)
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"{k}: mhc {a}, reference {b}")
    problems += same_rows(res, tr, stored)
    return problems, got


def compare_job(mhc, paths, policy, capacity, link, link_args, allocator):
    """`mhc simulate --ranks` against reference_coupled: every rank's stored run and the job's figures."""
    cmd = [mhc, "simulate", "--ranks", *map(str, paths), "--allocator", allocator, "--policy", policy,
           "--capacity", capacity, "--json"] + list(link_args)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    out = json.loads(p.stdout)
    caps = [int(r["capacity"]) for r in out["ranks"]]
    ranks, halted = coupled.simulate([str(x) for x in paths], caps, policy, link, allocator,
                                     [read_trace(x, None) for x in paths])
    problems = []
    for r, rank_out in zip(ranks, out["ranks"]):
        res = r.sim.result
        if rank_out["device"] != r.sim.tr.device:   # "Inputs": each rank's own largest GPU
            problems.append(f"rank {r.rank} device: mhc {rank_out['device']}, reference {r.sim.tr.device}")
        if bool(rank_out["stopped"]) != (halted[r.index] and not res.oom):
            problems.append(f"rank {r.rank} stopped: mhc {rank_out['stopped']}, reference {halted[r.index]}")
        stored = stored_run(r.path)
        got = stored["metrics"]
        for k in METRICS + ["coupled_wait_time", "coupled_wait_count"]:
            if k in res.metrics and k in got and not same_int(got[k], res.metrics[k]):
                problems.append(f"rank {r.rank} {k}: mhc {int(got[k])}, reference {int(res.metrics[k])}")
        a, b = got.get("throughput_loss"), res.metrics.get("throughput_loss")   # its own loss, when it finished
        if (a is None) != (b is None) or (a is not None and not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)):
            problems.append(f"rank {r.rank} throughput_loss: mhc {a}, reference {b}")
        problems += [f"rank {r.rank} {x}" for x in same_rows(res, r.sim.tr, stored)]
    mine = coupled.job(ranks, halted)
    for k, v in mine.items():
        if out["job"][k] != v:
            problems.append(f"job {k}: mhc {out['job'][k]}, reference {v}")
    return problems, out["job"]


def same_rows(res, tr, stored):
    """The stored events, kernel times and memory timeline against the reference's."""
    problems = []
    for name, mine, theirs in [("run_kernels", sorted(res.kernel_times), stored["kernels"]),
                               ("run_memory", res.memory, [(t, int(d), int(h)) for t, d, h in stored["memory"]])]:
        if mine != theirs:
            diff = next((f"mhc {y}, reference {x}" for x, y in zip(mine, theirs) if x != y),
                        f"{len(theirs)} rows, reference {len(mine)}")
            problems.append(f"{name}: {diff}")
    rows = stored["events"]
    ids = [a[0] for a in tr.allocs]
    mine = [(kind, t0, t1, ids[a] if a is not None else None, kern, b) for kind, t0, t1, a, kern, b in res.events]
    theirs = []
    for kind, t0, t1, a, kern, b in rows:
        name = KINDS[kind]
        if name == "oom":
            theirs.append((name, t0, t1, a, kern or None, b))
        elif name == "stall":
            theirs.append((name, t0, t1, None, kern or None, 0))
        else:
            theirs.append((name, t0, t1, a, None, b))
    mine = [(k, t0, t1, a, kern if k in ("oom", "stall") else None, b) for k, t0, t1, a, kern, b in mine]
    key = lambda e: (e[1], e[0], e[3] or 0, e[4] or 0)   # noqa: E731
    mine.sort(key=key)
    theirs.sort(key=key)
    if mine != theirs:
        diff = next((f"event {i}: mhc {y}, reference {x}" for i, (x, y) in enumerate(zip(mine, theirs)) if x != y),
                    f"events: mhc {len(theirs)}, reference {len(mine)}")
        problems.append(diff)
    return problems


def public_traces(mhc, work, public, only=None):
    """The public traces (tests/data/public) the importer reads alone, with allocations on a GPU,
    imported once (only: those whose file name contains one of these)."""
    out = []
    for folder in ["torch-snapshot", "kineto", "nsys"]:
        for f in sorted((Path(public) / folder).glob("*")):
            if only and not any(o in f.name for o in only):
                continue
            db = work / f"public-{f.name}.db"
            if not db.exists():
                p = subprocess.run([mhc, "import", str(f), "-o", str(db)], capture_output=True, text=True)
                if p.returncode != 0:
                    db.unlink(missing_ok=True)
                    continue
            con = sqlite3.connect(str(db))
            n = con.execute("SELECT count(*) FROM allocations WHERE device >= 0").fetchone()[0]
            con.close()
            if n:
                out.append(db)
    return out


class Tally:
    """Counts the runs and prints each: `same` or `DIFFER` with what differs. With a sample of N, one
    configuration in N is run, chosen by its label's CRC-32: every value of every dimension still
    turns up, in combinations no fixed stride would give, and the same ones from run to run."""

    def __init__(self, sample=1):
        self.runs = self.failures = self.skipped = 0
        self.sample = sample

    def takes(self, label):
        if zlib.crc32(label.encode()) % self.sample == 0:
            return True
        self.skipped += 1
        return False

    def report(self, tag, problems):
        self.runs += 1
        self.failures += bool(problems)
        print(f"{'DIFFER' if problems else 'same  '} {tag}")
        for p in problems[:8]:
            print(f"    {p}")

    def end(self):
        sampled = f" (one configuration in {self.sample}: {self.skipped} not run)" if self.sample > 1 else ""
        print(f"{self.runs} runs, {self.failures} differ{sampled}")
        return 1 if self.failures else 0


_SOURCE = {}   # a run's copy -> the trace it copies, until the run reads it
_TRACES = {}   # (trace, size, time of change, device) -> its rows (reference_sim.Trace): runs only read them


def fresh_copy(work, path, name="run.db"):
    """A copy of a trace for one run (each run stores into its trace)."""
    copy = work / name
    shutil.copy(path, copy)
    _SOURCE[str(copy)] = str(path)
    return copy


def read_trace(trace, device):
    """The rows of a run's trace on that device. A copy fresh_copy made holds the rows of the trace it
    copies (and the runs stored into it, which the reading does not read): those are read once per
    trace as it is (its size and time of change); any other file is read each time (a caller may
    write another trace at the same path). A copy serves the one run it was made for."""
    src = _SOURCE.pop(str(trace), None)
    if src is None:
        return ref.Trace(str(trace), device)
    st = Path(src).stat()
    key = (src, st.st_size, st.st_mtime_ns, device)
    if key not in _TRACES:
        _TRACES[key] = ref.Trace(src, device)
    return _TRACES[key]


def generated_traces(mhc, work, quick):
    traces = []
    specs = [("gpt2-small", ["--layers", "2", "--steps", "2", "--seq", "256"]),
             ("llama2-7b", ["--layers", "1", "--steps", "2", "--seq", "256"]),
             ("mhc-27b", ["--layers", "4", "--steps", "2", "--seq", "128", "--dp", "1"]),
             ("gpt2-small", ["--layers", "2", "--steps", "3", "--seq", "128", "--dp", "2"])]
    for i, (preset, args) in enumerate(specs):
        if quick and i not in (0, 2):   # quick: gpt2-small, and mhc-27b's tensor-parallel NCCL kernels
            continue
        path = work / f"ref-{i}.db"
        if path.exists():
            path.unlink()
        subprocess.run([mhc, "generate", "--preset", preset, "-o", str(path)] + args, check=True,
                       capture_output=True)
        traces.append(path)
    return traces


LINKS = [("pcie4", ref.Link(), []),
         ("pcie3, 1 copy engine, host buffer 1", ref.Link(h2d_bps=12e9, d2h_bps=12e9, copy_engines=1),
          ["--link", "pcie3", "--copy-engines", "1", "--cpu-buffer-ratio", "1"]),
         ("nvlink-c2c, 2000 ops/s, host buffer 0.5", ref.Link(h2d_bps=320e9, d2h_bps=320e9, max_ops_per_sec=2000),
          ["--link", "nvlink-c2c", "--max-swap-ops-per-sec", "2000", "--cpu-buffer-ratio", "0.5"]),
         ("pcie5, 1.5 us", ref.Link(h2d_bps=55e9, d2h_bps=55e9, duplex_factor=52 / 55, h2d_latency_s=1.5e-6,
                                   d2h_latency_s=1.5e-6), ["--link", "pcie5", "--latency", "1.5us"])]


def run_ranks(mhc, work, chosen, tally):
    """Coupled ranks: generated jobs (data, pipeline and tensor parallel)."""
    jobs = [("gpt2-small", ["--layers", "2", "--steps", "2", "--seq", "128", "--dp", "2", "--pp", "2"]),
            ("mhc-27b", ["--layers", "4", "--steps", "2", "--seq", "64", "--tp", "2", "--pp", "2", "--dp", "1"])]
    for j, (preset, args) in enumerate(jobs):
        for old in work.glob(f"job{j}.rank*.db"):
            old.unlink()
        subprocess.run([mhc, "generate", "--preset", preset, "--all-ranks", "-o", str(work / f"job{j}.db")] + args,
                       check=True, capture_output=True)
        paths = sorted(work.glob(f"job{j}.rank*.db"))
        for policy, cap, (lname, link, largs), alloc in itertools.product(
                chosen or ["lru", "belady", "dtr"], ["90%", "70%", "50%"], [LINKS[0], LINKS[3]], ["ideal", "caching"]):
            label = f"job{j} ({len(paths)} ranks) {alloc} {policy} {cap} {lname}"
            if not tally.takes(label):
                continue
            copies = [fresh_copy(work, path, f"run{i}.db") for i, path in enumerate(paths)]
            problems, got = compare_job(mhc, copies, policy, cap, link, largs, alloc)
            tally.report(f"{label}: job loss {got.get('throughput_loss')}", problems)


def run_learning(mhc, work, traces, chosen, tally):
    """The learning prefetchers: periodic:8 and :2, capuchin, forecast:8 and :1."""
    prefetchers = [("periodic:8", 8, 0), ("periodic:2", 2, 0), ("capuchin", -1, 0), ("forecast:8", 0, 8),
                   ("forecast:1", 0, 1)]
    for path, policy, cap, (lname, link, largs), (pname, k, h), alloc in itertools.product(
            traces, chosen or ["lru", "belady", "dtr", "cost_aware"], ["90%", "70%", "50%"], [LINKS[0], LINKS[2]],
            prefetchers, ["ideal", "caching"]):
        label = f"{path.name} {alloc} {policy} {cap} {lname} {pname}"
        if not tally.takes(label):
            continue
        problems, got = compare(mhc, fresh_copy(work, path), policy, cap, link, largs, 0, alloc, "", k, h)
        tally.report(f"{label}: loss {got.get('throughput_loss')}", problems)


def run_confs(mhc, work, traces, only, quick, tally):
    """The caching allocator's settings (quick: on demand only)."""
    for path, conf, policy, cap, k in itertools.product(traces, [c for c in CONFS if only in c], ["lru", "belady"],
                                                        ["90%", "70%", "50%"], [0] if quick else [0, 8]):
        label = f"{path.name} caching {conf} {policy} {cap} lookahead:{k}"
        if not tally.takes(label):
            continue
        problems, got = compare(mhc, fresh_copy(work, path), policy, cap, ref.Link(), [], k, "caching", conf)
        tally.report(f"{label}: loss {got.get('throughput_loss')}", problems)


def run_public(mhc, work, public, chosen, tally):
    """Real traces: their own event ties, assumed accesses, the program's host memory."""
    for path, policy, cap, k, alloc in itertools.product(public_traces(mhc, work, public), chosen or ["lru", "belady"],
                                                         ["90%", "60%"], [0, 8], ["ideal", "caching"]):
        label = f"{path.name} {alloc} {policy} {cap} lookahead:{k}"
        if not tally.takes(label):
            continue
        problems, got = compare(mhc, fresh_copy(work, path), policy, cap, ref.Link(), [], k, alloc)
        tally.report(f"{label}: loss {got.get('throughput_loss')}", problems)


def pooled(work, path):
    """A copy of a generated trace with private pools as meta snapshot.pools_from,
    snapshot.allocation_pools and snapshot.segment_row_pools name them (docs/import.md): allocation
    ids 3, 6, ... in the MemPool (0, 1), whose segment row is held at the end; 7, 14, ... (not also
    a multiple of 3) in the CUDA graph pool (1, 0), whose one segment row the recording frees at
    40% of the trace: the pool is given back then."""
    out = work / f"pools-{path.name}"
    shutil.copy(path, out)
    db = sqlite3.connect(str(out))
    ids = [i for (i,) in db.execute("SELECT id FROM allocations WHERE device >= 0 ORDER BY id")]
    dev = db.execute("SELECT device FROM allocations WHERE device >= 0 LIMIT 1").fetchone()[0]
    t0, t1 = db.execute("SELECT min(t_alloc), max(coalesce(t_free, t_alloc)) FROM allocations").fetchone()
    mempool = [i for i in ids if i % 3 == 0]
    graph = [i for i in ids if i % 7 == 0 and i % 3 != 0]
    nxt = (db.execute("SELECT max(id) FROM segments").fetchone()[0] or 0) + 1
    db.execute("INSERT INTO segments VALUES (?, ?, 0, ?, ?, ?, NULL, 0, 0)", (nxt, dev, 1 << 40, 1 << 30, t0))
    db.execute("INSERT INTO segments VALUES (?, ?, 0, ?, ?, ?, ?, 0, 0)",
               (nxt + 1, dev, 1 << 41, 1 << 30, t0, t0 + (t1 - t0) * 2 // 5))
    meta = {"snapshot.pools_from": "trace events (pool_id): exact",
            "snapshot.allocation_pools": "0,1:" + ",".join(map(str, mempool)) + " 1,0:" + ",".join(map(str, graph)),
            "snapshot.segment_row_pools": f"0,1:{nxt} 1,0:{nxt + 1}"}
    for k, v in meta.items():
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (k, v))
    db.commit()
    db.close()
    return out


def run_pools(mhc, work, traces, chosen, tally):
    for path in traces:
        p = pooled(work, path)
        for policy, cap, (lname, link, largs), k in itertools.product(
                chosen or ["lru", "largest", "belady"], ["90%", "70%", "50%", "30%"], [LINKS[0], LINKS[1]], [0, 8]):
            label = f"{p.name} caching {policy} {cap} {lname} lookahead:{k}"
            if not tally.takes(label):
                continue
            problems, got = compare(mhc, fresh_copy(work, p), policy, cap, link, largs, k, "caching")
            tally.report(f"{label}: loss {got.get('throughput_loss')}", problems)


def run_generated(mhc, work, traces, chosen, quick, tally):
    for path in traces:
        for policy, cap, (lname, link, largs), k, alloc in itertools.product(
                chosen or ["lru", "largest", "belady"], ["90%", "70%", "50%", "30%"],
                [LINKS[0], LINKS[2]] if quick else LINKS, [0, 8] if quick else [0, 8, 2], ["ideal", "caching"]):
            label = f"{path.name} {alloc} {policy} {cap} {lname} lookahead:{k}"
            if not tally.takes(label):
                continue
            problems, got = compare(mhc, fresh_copy(work, path), policy, cap, link, largs, k, alloc)
            tally.report(f"{label}: loss {got.get('throughput_loss')}", problems)


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    option = lambda name: next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), None)  # noqa
    quick = "--quick" in sys.argv
    public = option("public")
    chosen = option("policies").split(",") if option("policies") else None
    work.mkdir(parents=True, exist_ok=True)
    tally = Tally(int(option("sample") or 1))
    if "--ranks" in sys.argv:
        run_ranks(mhc, work, chosen, tally)
        return tally.end()
    traces = generated_traces(mhc, work, quick)
    only = option("public-filter").split(",") if option("public-filter") else None
    every = traces + (public_traces(mhc, work, public, only) if public else [])
    if "--pools" in sys.argv:
        run_pools(mhc, work, traces, chosen, tally)
    elif "--periodic" in sys.argv:
        run_learning(mhc, work, every, chosen, tally)
    elif "--confs" in sys.argv:
        run_confs(mhc, work, every, option("conf-filter") or "", quick, tally)
    else:
        if public:
            run_public(mhc, work, public, chosen, tally)
        run_generated(mhc, work, traces, chosen, quick, tally)
    return tally.end()


if __name__ == "__main__":
    sys.exit(main())
