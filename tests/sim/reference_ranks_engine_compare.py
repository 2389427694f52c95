#!/usr/bin/env python3
"""Runs `mhc simulate --ranks` beside reference_ranks_engine.py (a third reading of
docs/simulator.md, "Rules" 1-10 and "Coupled ranks", written from the page alone) on

  generated  jobs that `mhc generate --all-ranks` writes (random model, pp x dp x tp), changed as
             reference_ranks_outside_compare.py changes them (shorter kernels, moved time origins
             and times, ranks on GPU 1, shuffled files)
  public     jobs made of public traces that `mhc import` reads (Kineto with its memory events, the
             profiler's first reserved figure, the program's host memory and, in HTA's
             df-index trace, 2,020 NCCL kernels on one stream): 2 or 3 copies of one trace as the
             ranks of one job, cut to a window, some kernels made shorter in some copies, time
             origins moved

under random configurations: the `caching` or `ideal` allocator, every policy (`lru`, `largest`,
`belady`, `dtr`, `cost_aware`), `none` or `lookahead:K` (with or without early swap-out), links
(presets, overrides of each figure, one copy engine, contention shares), host buffers and the
swap-operation cap, capacities from unlimited down to OOM.

Compared: every per-rank and job field of `--json`, the exit status, the text's figures
(reference_ranks_outside_compare.text_diff), and every stored run's metrics and events.

Usage: reference_ranks_engine_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--public=DIR]
       [--traces=NAME,...] [--max-kernels=N] [--only=generated|public] [--stress] [--mpi=P]
       [--toggles=NAME,...] [--learning] [--confs] [--verbose]

--traces keeps the public traces whose names hold one of the words (HTA's df-index trace, the one
with NCCL kernels, is the first); --stress runs lookahead against host buffers of 0.25 to 2 x the
capacity; --toggles=NAME,... counts, for each other reading of a sentence this page once left open
(reference_ranks_engine.EXP), the jobs on which mhc tells it from the one written down; --mpi=P
runs each job under mpirun -n P too (0: 2 and 3 in turn); --learning runs every rank under a learning
prefetcher (`periodic[:K]`, `capuchin`, `forecast[:H]`: reference_learning_engine.py's, the
prefetchers of reference_learning.py over this engine) instead of `none` or `lookahead:K`; --confs
runs one caching job in two under allocator settings (`--allocator-conf`).
Exit 0 when all agree, 1 otherwise."""
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_ranks_engine as ref  # noqa: E402
import reference_ranks_outside_compare as outside  # noqa: E402

PUBLIC = ["kineto/hta-df-index-resolver.json.gz", "kineto/tracelens-h100-qwen1.5-0.5b-chat.json.gz",
          "kineto/tracelens-h100-timesformer-k400.json.gz", "kineto/tracelens-h100-bert-small-uncased.json.gz",
          "kineto/tracelens-mi300x-falconsai-nsfw-image-detection.json.gz",
          "kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz",
          "kineto/tracelens-mi300x-normalization-layer-test.json.gz"]

METRICS = ["baseline_peak_bytes", "simulated_peak_bytes", "capacity_bytes", "stall_ns", "stalls",
           "swap_in_bytes", "swap_ins", "swap_out_bytes", "swap_outs", "clean_evictions", "early_evictions",
           "prefetches", "drops", "recomputations", "recompute_ns", "recompute_depth_max",
           "recompute_inputs_assumed", "host_peak_bytes", "coupled_wait_time", "coupled_wait_count",
           "baseline_makespan_ns", "simulated_makespan_ns"]


sql = outside.sql


def imported(mhc, work, public, only=None):
    out = []
    for rel in PUBLIC:
        if only and not any(o in rel for o in only):
            continue
        src = Path(public) / rel
        db = work / f"public-{src.name}.db"
        if not db.exists():
            p = subprocess.run([mhc, "-q", "import", str(src), "-o", str(db)], capture_output=True, text=True)
            if p.returncode != 0:
                db.unlink(missing_ok=True)
                continue
        out.append(db)
    return out


def public_job(src, job_dir, rng, max_kernels):
    """2 or 3 copies of one imported trace as one job's ranks, cut to at most max_kernels kernels."""
    n = rng.choice([2, 2, 3])
    kernels = sql(src, "SELECT k.t_start, s.text LIKE 'nccl%' FROM kernels k JOIN strings s ON s.id = k.name "
                       "ORDER BY k.t_start, k.id")
    done = []
    paths = []
    cut = None
    if len(kernels) > max_kernels:
        nccl = [i for i, (_, n) in enumerate(kernels) if n]
        if nccl:  # a window that holds some of the NCCL kernels (they come in bursts)
            lo = min(max(0, rng.choice(nccl) - rng.randrange(max_kernels)), len(kernels) - max_kernels)
        else:
            lo = rng.randrange(0, len(kernels) - max_kernels)
        a, b = kernels[lo][0], kernels[lo + max_kernels - 1][0]
        cut = (a, b)
        done.append(f"window {lo}..{lo + max_kernels - 1}")
    for r in range(n):
        p = job_dir / f"job.rank{r}.db"
        shutil.copy(src, p)
        if cut:
            a, b = cut
            sql(p, "DELETE FROM accesses WHERE kernel IN (SELECT id FROM kernels WHERE t_start < ? OR t_start > ?)", (a, b))
            sql(p, "DELETE FROM kernels WHERE t_start < ? OR t_start > ?", (a, b))
            sql(p, "DELETE FROM allocations WHERE t_alloc > ? OR (t_free IS NOT NULL AND t_free < ?)", (b, a))
            sql(p, "UPDATE allocations SET t_free = NULL WHERE t_free > ?", (b,))
            sql(p, "UPDATE allocations SET t_alloc = ? WHERE t_alloc < ?", (a, a))
            sql(p, "DELETE FROM copies WHERE t_start < ? OR t_start > ?", (a, b))
            sql(p, "DELETE FROM markers WHERE t_start > ? OR t_end < ?", (b, a))
        for k, v in (("rank", r), ("world_size", n)):
            sql(p, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (k, str(v)))
        sql(p, "DELETE FROM meta WHERE key = 'job.id'")
        if r and rng.random() < 0.7:
            ids = [x[0] for x in sql(p, "SELECT k.id FROM kernels k JOIN strings s ON s.id = k.name "
                                        "WHERE s.text NOT LIKE 'nccl%' AND k.t_end > k.t_start")]
            for kid in rng.sample(ids, len(ids) // 4):
                f = rng.choice([0.0, 0.3, 0.7])
                sql(p, "UPDATE kernels SET t_end = t_start + CAST((t_end - t_start) * ? AS INTEGER) WHERE id = ?",
                    (f, kid))
            done.append(f"rank {r} shorter")
        if r and rng.random() < 0.8:
            # some of its allocations larger (its stalls differ from the others': coupled waits)
            f = rng.choice([1.25, 1.5, 2])
            ids = [x[0] for x in sql(p, "SELECT id FROM allocations WHERE device >= 0")]
            db = sqlite3.connect(str(p))
            db.executemany("UPDATE allocations SET bytes = CAST(bytes * ? AS INTEGER) WHERE id = ?",
                           [(f, a) for a in rng.sample(ids, len(ids) // 5)])
            db.commit()
            db.close()
            done.append(f"rank {r} larger x{f}")
        if r and rng.random() < 0.5:
            span = sql(p, "SELECT MAX(t_end) - MIN(t_start) FROM kernels")[0][0] or 1
            d = rng.randrange(-span // 5, span // 5 + 1)
            sql(p, "UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'time_origin_ns'", (d,))
            done.append(f"rank {r} origin {d:+d}")
        paths.append(p)
    return paths, done


def configuration(rng, stress=False, shares=None):
    if stress:  # lookahead's prefetches and early swap-outs against a small host buffer
        share = rng.choice(["95", "90", "85", "80"])
        alloc = rng.choice(["caching", "ideal"])
        policy = rng.choice(["lru", "largest", "belady", "dtr", "cost_aware"])
        prefetch = rng.choice(["lookahead", "lookahead:2", "lookahead:16"])
        ratio = rng.choice([0.25, 0.5, 1, 2])
        opts = ["--capacity", share + "%", "--policy", policy, "--prefetch", prefetch, "--allocator", alloc,
                "--cpu-buffer-ratio", str(ratio)]
        return opts, dict(share=share + "%", allocator=alloc, policy=policy, prefetch=prefetch,
                          link=ref.link_config(), host_ratio=ratio)
    if shares:  # a public trace's: the allocator first, then a share of its baseline
        alloc = rng.choice(["caching", "caching", "ideal"])
        share = rng.choice(shares[alloc])
    else:
        share = rng.choice(["unlimited", "100", "95", "90", "85", "75", "70", "60", "50", "40",
                            str(round(rng.uniform(40, 100), 2))])
        alloc = rng.choice(["caching", "caching", "ideal"])
    if share == "unlimited":
        return (["--capacity", "unlimited", "--allocator", alloc],
                dict(share="unlimited", allocator=alloc, policy="lru", prefetch="none", link=ref.link_config()))
    policy = rng.choice(["lru", "largest", "belady", "dtr", "cost_aware"])
    prefetch = rng.choice(["none", "none", "lookahead", "lookahead:2", "lookahead:16"])
    preset = rng.choice(sorted(ref.PRESETS))
    opts = ["--capacity", share + "%", "--policy", policy, "--prefetch", prefetch, "--link", preset,
            "--allocator", alloc]
    over = {}
    for flag, key, choices in (("--copy-engines", "engines", [1, 1, 2, 3]), ("--duplex-factor", "duplex", [0.25, 0.5, 1]),
                               ("--nccl-share", "nccl_share", [0, 0.25, 0.9]), ("--memcpy-share", "memcpy_share", [0, 0.75])):
        if rng.random() < 0.3:
            x = rng.choice(choices)
            opts += [flag, str(x)]
            over[key] = x
    outside.link_figure_overrides(rng, opts, over)
    cfg = dict(share=share + "%", allocator=alloc, policy=policy, prefetch=prefetch, link=ref.link_config(preset, **over))
    if rng.random() < 0.2:
        cfg["max_ops"] = rng.choice([1000, 20000])
        opts += ["--max-swap-ops-per-sec", str(cfg["max_ops"])]
    if rng.random() < 0.3:
        cfg["host_ratio"] = rng.choice([0.05, 0.25, 1])
        opts += ["--cpu-buffer-ratio", str(cfg["host_ratio"])]
    if prefetch != "none" and rng.random() < 0.25:
        cfg["no_early"] = True
        opts += ["--no-early"]
    return opts, cfg


def stored_diff(runs_db, engines):
    out = []
    db = sqlite3.connect(str(runs_db))
    runs = db.execute("SELECT r.id, c.value FROM runs r JOIN run_config c ON c.run = r.id "
                      "WHERE c.key = 'coupled.rank' ORDER BY r.id").fetchall()
    if len(runs) != len(engines):
        return [f"stored: {len(runs)} runs for {len(engines)} ranks"]
    for rid, rank in runs:
        e = engines[int(rank)]
        got = dict(db.execute("SELECT key, value FROM run_metrics WHERE run = ?", (rid,)).fetchall())
        want = dict(e.m, simulated_peak_bytes=e.peak, baseline_peak_bytes=e.base_peak,
                    capacity_bytes=-1 if e.cap is None else e.cap, host_peak_bytes=e.host_peak,
                    coupled_wait_time=e.coupled_wait, coupled_wait_count=e.coupled_waits,
                    baseline_makespan_ns=e.tr.last - e.tr.first, simulated_makespan_ns=e.sim_mk)
        for k in METRICS:
            if k in got and got[k] != want[k]:
                out.append(f"rank {rank} stored {k}: mhc {got[k]:.0f} reference {want[k]}")
            elif k not in got and k not in ("baseline_peak_bytes",):
                out.append(f"rank {rank} stored {k}: absent in mhc, reference {want[k]}")
        if isinstance(e.oom, dict):
            o = e.oom
            want_oom = dict(oom=1, oom_bytes_needed=o["needed"], oom_bytes_pinned=o["pinned"],
                            oom_bytes_short=o["short"], oom_time_ns=o["t"],
                            oom_slowdown=0 if o["recorded"] == e.tr.first else e.sim_mk / (o["recorded"] - e.tr.first) - 1)
            if "frag" in o:
                want_oom["oom_fragmentation"] = int(o["frag"])
            for k, v in want_oom.items():
                if got.get(k) != v:
                    out.append(f"rank {rank} stored {k}: mhc {got.get(k)} reference {v}")
        elif got.get("oom", 0) != 0:
            out.append(f"rank {rank} stored oom {got['oom']}, none in the reading")
        kr = len(e.kt)
        if got.get("kernels_reached") != kr:
            out.append(f"rank {rank} stored kernels_reached: mhc {got.get('kernels_reached')} reference {kr}")
        if kr and got.get("last_kernel_reached") != e.tr.kid[max(e.kt)]:
            out.append(f"rank {rank} stored last_kernel_reached: mhc {got.get('last_kernel_reached')} "
                       f"reference {e.tr.kid[max(e.kt)]}")
        ks = db.execute("SELECT kernel, t_start, t_end FROM run_kernels WHERE run = ? ORDER BY kernel", (rid,)).fetchall()
        mine = sorted((e.tr.kid[s], t, t + e.tr.kend[s] - e.tr.kstart[s]) for s, t in e.kt.items())
        if ks != mine:
            d = [(a, b) for a, b in zip(ks, mine) if a != b][:3]
            out.append(f"rank {rank} stored kernels: {len(ks)} in mhc, {len(mine)} in the reading; first differences {d}")
        mem = db.execute("SELECT t, device_bytes, host_bytes FROM run_memory WHERE run = ? ORDER BY t, rowid",
                         (rid,)).fetchall()
        mine = sorted(v for _, v in sorted(e.buckets.items()))
        if sorted(mem) != mine:
            d = [(a, b) for a, b in zip(sorted(mem), mine) if a != b][:3]
            out.append(f"rank {rank} stored memory samples: {len(mem)} in mhc, {len(mine)} in the reading; "
                       f"first differences {d}")
        ev = sorted(db.execute("SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ?",
                               (rid,)).fetchall())
        mine = sorted(e.events)
        if ev != mine:
            a, b = set(ev), set(mine)
            only_m = sorted(a - b)[:3]
            only_r = sorted(b - a)[:3]
            out.append(f"rank {rank} stored events: {len(ev)} in mhc, {len(mine)} in the reading; mhc only "
                       f"{only_m}, reading only {only_r}")
    db.close()
    return out


def oom_text_diff(text, exp, engines):
    """Rule 7's figures in the text's `out of memory` line of the rank reported."""
    r = exp["job"]["oom_rank"]
    if r < 0:
        return []
    o = engines[r].oom
    line = next((ln for ln in text.splitlines() if ln.startswith(f"out of memory  rank {r}:")), None)
    if line is None:
        return [f"text: no out-of-memory line for rank {r}"]
    f = outside.fmt_bytes
    want = [f"needs {f(o['needed'])}", f"({f(o['pinned'])} pinned by running kernels)", f"short by {f(o['short'])}"
            if not o.get("frag") else f"largest free block {f(o['largest'])}"]
    if "in_use" in o:
        want += [f"{f(o['in_use'])} in use", f"{f(o['reserved'])} reserved in segments of {f(engines[r].cap)}"]
    else:
        want += [f"{f(o['held'])} of {f(engines[r].cap)} are held"]
    k = o["kernel"]
    a = engines[r].tr.allocs[o["alloc"]][0]
    want.append(f"kernel {engines[r].tr.kid[k]} (" if k is not None else f"allocation {a}")
    if k is not None:
        want.append(f"needs allocation {a}:")
    return [f"text's OOM line lacks '{w}': {line}" for w in want if w not in line]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = dict((a[2:].split("=", 1) + [""])[:2] for a in sys.argv[1:] if a.startswith("--"))
    mhc, work = args[0], Path(args[1])
    runs, seed = int(flags.get("runs", 20)), int(flags.get("seed", 1))
    only = flags.get("only")
    mpi = int(flags["mpi"]) if "mpi" in flags else None
    if mpi is not None and shutil.which("mpirun") is None:
        print("skipped: --mpi given but mpirun is not on PATH")
        return 77
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    traces = flags["traces"].split(",") if flags.get("traces") else None
    public = imported(mhc, work, flags["public"], traces) if "public" in flags and only != "generated" else []
    max_kernels = int(flags.get("max-kernels", 400))
    bad = 0
    tally = {"mpi": 0, "finished": 0, "oom": 0, "waits": 0, "stopped": 0, "public": 0, "swaps": 0, "drops": 0,
             "prefetches": 0}
    for i in range(runs):
        job_dir = work / f"job{i}"
        shutil.rmtree(job_dir, ignore_errors=True)
        job_dir.mkdir()
        use_public = public and (only == "public" or rng.random() < 0.5)
        device = None
        if use_public:
            # HTA's df-index trace (2,020 NCCL kernels) in one job of two: the others couple at nothing
            src = public[0] if rng.random() < 0.5 else public[rng.randrange(len(public))]
            order, changes = public_job(src, job_dir, rng, max_kernels)
            gen = [src.name]
            tally["public"] += 1
        else:
            paths, gen = outside.generate(mhc, job_dir, rng)
            order, changes, device = outside.change(paths, rng)
        shares = None
        if use_public:
            # a Kineto trace's caching baseline is the profiler's first reserved figure, far above
            # its live bytes (HTA's df-index: 12.78 GB reserved, 4.1 GB live): shares of the live
            # peak there, so that runs evict without running out of memory at once
            t = ref.Trace(str(order[0]))
            live = ref.live_peak(t.allocs) / ref.baseline_peak(t, "caching")
            shares = {"caching": ["unlimited"] + [f"{100 * live * rng.uniform(0.85, 1.05):.2f}" for _ in range(4)],
                      "ideal": ["unlimited", "99", "97", "95", "90", "80", "70"]}
        opts, cfg = configuration(rng, "stress" in flags, shares)
        if "learning" in flags and "--prefetch" in opts:   # (none without a limit: a prefetcher is refused there)
            import reference_learning_engine   # each rank under a learning prefetcher
            pre = rng.choice(["periodic", "periodic:2", "capuchin", "forecast", "forecast:1"])
            opts[opts.index("--prefetch") + 1] = pre
            cfg.update(prefetch=pre, engine=reference_learning_engine.Sim)
        if "confs" in flags and cfg["allocator"] == "caching" and rng.random() < 0.5:
            import reference_learning_engine_compare   # its settings; the model reference_allocator_outside.py's
            cfg["allocator_conf"] = rng.choice(reference_learning_engine_compare.CONFS)
            opts += ["--allocator-conf", cfg["allocator_conf"]]
        if device is not None:
            opts += ["--device", str(device)]
            cfg["device"] = device
        problems = []
        try:
            exp, engines = ref.simulate_job([str(p) for p in order], cfg)
        except Exception as ex:  # a reading that cannot follow a job is a finding too
            exp, engines = None, None
            problems.append(f"reading failed: {type(ex).__name__}: {ex}")
        rc = 0 if exp and not any(r["oom"] or r["stopped"] for r in exp["ranks"]) else 3
        cmd = [mhc, "simulate", "--ranks", *map(str, order), *opts]
        runs_db = job_dir / "runs.db"
        r = subprocess.run(cmd + ["--json", "--runs-db", str(runs_db)], capture_output=True, text=True)
        if exp:
            if r.returncode != rc:
                problems.append(f"exit {r.returncode} reference {rc}: {r.stderr.strip()[:300]}")
            try:
                problems += outside.diff(json.loads(r.stdout), exp)
            except json.JSONDecodeError:
                problems.append(f"no JSON: {r.stdout[:200]} {r.stderr[:200]}")
            t = subprocess.run(cmd + ["--no-store"], capture_output=True, text=True)
            problems += outside.text_diff(t.stdout, exp, "unlimited" in opts)
            problems += oom_text_diff(t.stdout, exp, engines)
            if r.returncode in (0, 3):
                problems += stored_diff(runs_db, engines)
            if mpi is not None:
                # "MPI": the results of one process, bit for bit; rank 0 alone stores every rank's run
                p = mpi or (2 + i % 2)
                mpi_db = job_dir / "runs_mpi.db"
                m = subprocess.run(["timeout", "120", "mpirun", "-n", str(p), "--oversubscribe", *cmd, "--json",
                                    "--runs-db", str(mpi_db)], capture_output=True, text=True, env=env)
                tally["mpi"] += 1
                if m.returncode != rc:
                    problems.append(f"mpirun -n {p}: exit {m.returncode} reference {rc}: {m.stderr.strip()[:300]}")
                try:
                    problems += [f"mpirun -n {p}: {d}" for d in outside.diff(json.loads(m.stdout), exp)]
                except json.JSONDecodeError:
                    problems.append(f"mpirun -n {p}: no JSON: {m.stdout[:200]} {m.stderr[:200]}")
                if m.returncode in (0, 3):
                    problems += [f"mpirun -n {p}: {d}" for d in stored_diff(mpi_db, engines)]
            tally["finished" if rc == 0 else "oom"] += 1
            tally["waits"] += sum(1 for x in exp["ranks"] if x["coupled_wait_count"])
            tally["stopped"] += sum(1 for x in exp["ranks"] if x["stopped"])
            tally["swaps"] += sum(e.m["swap_outs"] for e in engines.values())
            tally["drops"] += sum(e.m["drops"] for e in engines.values())
            tally["prefetches"] += sum(e.m["prefetches"] for e in engines.values())
        for toggle in filter(None, flags.get("toggles", "").split(",")):
            # another reading of an ambiguous sentence: does mhc tell the two apart on this job?
            ref.EXP[toggle] = True
            try:
                alt, alt_engines = ref.simulate_job([str(p) for p in order], cfg)
                d = outside.diff(json.loads(r.stdout), alt) if r.stdout.strip() else []
                if r.returncode in (0, 3):
                    d += stored_diff(runs_db, alt_engines)
                tally.setdefault(f"toggle {toggle} differs", 0)
                tally[f"toggle {toggle} differs"] += bool(d)
            finally:
                ref.EXP.pop(toggle)
        if problems or "verbose" in flags:
            print(f"job {i}: {' '.join(gen)}; changes {','.join(changes) or 'none'}; {' '.join(opts)}")
            for p in problems[:12]:
                print("   ", p)
        if problems:
            bad += 1
        else:
            shutil.rmtree(job_dir, ignore_errors=True)
    print(f"{runs - bad} of {runs} coupled jobs agree ({tally['public']} of public traces; {tally['finished']} "
          f"finished, {tally['oom']} out of memory; {tally['waits']} ranks with coupled waits, {tally['stopped']} "
          f"stopped; {tally['swaps']} swap-outs, {tally['drops']} drops, {tally['prefetches']} prefetches; "
          f"{tally['mpi']} also under mpirun)")
    for k, v in tally.items():
        if k.startswith("toggle"):
            print(f"{k} from mhc in {v} of {runs} jobs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
