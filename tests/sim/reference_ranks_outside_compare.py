#!/usr/bin/env python3
"""Runs `mhc simulate --ranks --json` beside reference_ranks_outside.py (docs/simulator.md "Coupled
ranks", read from the document alone) on jobs that `mhc generate --all-ranks` writes under random
model, parallelism (pp, dp, tp) and jitter options, each then changed in some of these ways:

  durations  some compute kernels of each rank made shorter (the ranks of a data-parallel group
             no longer run alike, so their arrivals differ and the waits pass from rank to rank)
  origins    each rank's meta time_origin_ns moved by up to a fifth of the shortest rank's length (members reach a collective at
             different shared-clock times: the slack of rule 2)
  moved      a rank's every time moved by up to 2^50 ns, its time origin back by as much
  device     a rank's rows moved to device 1, a smaller allocation left on device 0
  shuffled   the files given in another order

under random capacities (a share, some below what the job needs: OOM and stopped ranks), policies
(lru, largest, belady), links (every preset, overrides of each figure, one copy engine, the
swap-operation cap), with the `ideal` allocator and no prefetch. With --mpi=P every job also runs
under `mpirun -n P` (P processes, P = 2 or 3 alternately when given 0) and must print the same.

Compared: every per-rank and job field of `--json`, and the exit status; with --stored, the
stored runs' coupled metrics too (a run per rank in --runs-db).

Usage: reference_ranks_outside_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--mpi=P] [--stored]
                                          [--verbose]
Exit 0 when all agree, 1 otherwise (each difference printed with the job's options)."""
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
import reference_ranks_outside as ref  # noqa: E402


def sql(path, query, args=()):
    db = sqlite3.connect(str(path))
    rows = db.execute(query, args).fetchall()
    db.commit()
    db.close()
    return rows


def generate(mhc, work, rng):
    pp = rng.choice([1, 2, 2, 3, 4])
    dp = rng.choice([1, 2, 2])
    tp = rng.choice([1, 1, 2]) if pp * dp <= 4 else 1
    if pp * dp * tp == 1:
        dp = 2
    arch = rng.choice(["gpt2", "llama"])
    heads = rng.choice([4, 8])
    args = ["--preset", "gpt2-small" if arch == "gpt2" else "llama2-7b", "--layers", str(pp * rng.choice([1, 2])),
            "--hidden", str(64 * heads), "--heads", str(heads), "--ffn", str(256 * heads), "--seq",
            str(rng.choice([128, 256])), "--micro-batch", str(rng.choice([1, 2, 4])), "--micro-batches",
            str(rng.choice([1, 2, 3, 4]) if pp > 1 else rng.choice([1, 2])), "--steps", str(rng.choice([1, 2])),
            "--vocab", "8192", "--pp", str(pp), "--dp", str(dp), "--tp", str(tp)]
    jitter = rng.choice([0, 0.05, 0.2])
    args += ["--jitter", str(jitter)] + (["--seed", str(rng.randrange(1000))] if jitter else [])
    if rng.random() < 0.3:
        args += ["--hc", "4"]
    if dp > 1 and rng.random() < 0.3:
        args += ["--zero1"]
    if rng.random() < 0.2:
        args += ["--recompute"]
    out = work / "job.db"
    r = subprocess.run([mhc, "-q", "generate", *args, "--all-ranks", "-o", str(out), "--force"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"generate {' '.join(args)}: {r.stderr.strip()}")
    return [work / f"job.rank{i}.db" for i in range(pp * dp * tp)], args


def change(paths, rng):
    """Changes the job's files in some of the ways above; returns their names."""
    done = []
    if rng.random() < 0.6:
        done.append("durations")
        for p in paths:
            # compute kernels, and in one job in three cross-rank kernels too (some to zero length:
            # "Inputs", a zero-length kernel's end comes right after its start)
            cross = "" if rng.random() < 0.33 else "s.text NOT LIKE 'nccl%' AND "
            ids = [r[0] for r in sql(p, "SELECT k.id FROM kernels k JOIN strings s ON s.id = k.name "
                                        f"WHERE {cross}k.t_end > k.t_start")]
            for kid in rng.sample(ids, len(ids) // 4):
                f = rng.choice([0.0, 0.3, 0.7])
                sql(p, "UPDATE kernels SET t_end = t_start + CAST((t_end - t_start) * ? AS INTEGER) WHERE id = ?",
                    (f, kid))
    if rng.random() < 0.5:
        done.append("origins")
        # at most a fifth of the shortest rank, so that the ranks still overlap in time
        span = min(sql(p, "SELECT MAX(t_end) - MIN(t_start) FROM kernels")[0][0] for p in paths) // 5
        for p in paths:
            sql(p, "UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'time_origin_ns'",
                (rng.randrange(-span, span + 1),))
    if rng.random() < 0.3:
        done.append("moved")
        for p in rng.sample(paths, rng.randint(1, len(paths))):
            d = rng.choice([-1, 1]) * rng.randrange(1, 2 ** 50)
            for table, cols in (("allocations", ("t_alloc", "t_free")), ("kernels", ("t_start", "t_end")),
                                ("copies", ("t_start", "t_end")), ("markers", ("t_start", "t_end"))):
                sets = ", ".join(f"{c} = {c} + {d}" for c in cols)
                sql(p, f"UPDATE {table} SET {sets}")
            sql(p, "UPDATE meta SET value = CAST(value AS INTEGER) - ? WHERE key = 'time_origin_ns'", (d,))
    device = None
    if rng.random() < 0.4:
        done.append("device")
        moved = rng.sample(paths, rng.randint(1, len(paths)))
        if len(moved) == len(paths) and rng.random() < 0.5:
            device = 1  # given as --device 1 for every rank
        for p in moved:
            for table in ("allocations", "kernels", "copies"):
                sql(p, f"UPDATE {table} SET device = 1")
            first, small = sql(p, "SELECT MIN(t_alloc), MIN(bytes) FROM allocations")[0]
            sql(p, "INSERT INTO allocations (id, device, address, bytes, t_alloc, t_free, stream, category) "
                   "VALUES ((SELECT MAX(id) + 1 FROM allocations), 0, 0, ?, ?, NULL, 0, 3)", (small, first))
    order = list(paths)
    if rng.random() < 0.5:
        done.append("shuffled")
        rng.shuffle(order)
    return order, done, device


def link_figure_overrides(rng, opts, over):
    """Some of the link's own figures (latency, each way's bandwidth) given on the command line:
    their options added to opts, their values to over (reference link_config's keywords)."""
    if rng.random() < 0.3:
        us = rng.choice([0, 1, 20])
        opts += ["--latency", f"{us}us"]
        over["latency"] = us * 1e-6
    if rng.random() < 0.3:
        gb = rng.choice([2, 8, 40])
        opts += ["--h2d-bandwidth", f"{gb}GB/s"]
        over["h2d_bw"] = gb * 1e9
    if rng.random() < 0.3:
        gb = rng.choice([3, 16])
        opts += ["--d2h-bandwidth", f"{gb}GB/s"]
        over["d2h_bw"] = gb * 1e9


def configuration(rng):
    share = rng.choice(["unlimited", "100", "95", "90", "85", "75", "70", "60", "50", "30", str(round(rng.uniform(40, 100), 2))])
    policy = rng.choice(["lru", "largest", "belady"])
    preset = rng.choice(sorted(ref.PRESETS))
    if share == "unlimited":  # nothing to evict: simulate refuses a policy or link beside it
        return ["--capacity", "unlimited", "--allocator", "ideal"], share, "lru", ref.link_config(), 0
    opts = ["--capacity", share if share == "unlimited" else share + "%", "--policy", policy, "--link", preset, "--allocator", "ideal"]
    over = {}
    if rng.random() < 0.4:
        n = rng.choice([1, 1, 2, 3])
        opts += ["--copy-engines", str(n)]
        over["engines"] = n
    if rng.random() < 0.3:
        x = rng.choice([0.25, 0.5, 0.8, 1])
        opts += ["--duplex-factor", str(x)]
        over["duplex"] = x
    if rng.random() < 0.3:
        x = rng.choice([0, 0.25, 0.9])
        opts += ["--nccl-share", str(x)]
        over["nccl_share"] = x
    if rng.random() < 0.3:
        x = rng.choice([0, 0.75])
        opts += ["--memcpy-share", str(x)]
        over["memcpy_share"] = x
    link_figure_overrides(rng, opts, over)
    max_ops = 0
    if rng.random() < 0.2:
        max_ops = rng.choice([1000, 20000])
        opts += ["--max-swap-ops-per-sec", str(max_ops)]
    return opts, share, policy, ref.link_config(preset, **over), max_ops


def diff(got, exp):
    out = []
    byrank = {r["rank"]: r for r in exp["ranks"]}
    if [r["rank"] for r in got.get("ranks", [])] != [r["rank"] for r in exp["ranks"]]:
        out.append(f"rank order {[r['rank'] for r in got.get('ranks', [])]} != {[r['rank'] for r in exp['ranks']]}")
    for g in got.get("ranks", []):
        e = byrank.get(g["rank"], {})
        for k, v in g.items():
            if k == "trace":
                continue
            if k not in e or e[k] != v:
                out.append(f"rank {g['rank']} {k}: mhc {v} reference {e.get(k, 'absent')}")
    for k, v in got.get("job", {}).items():
        if exp["job"].get(k, "absent") != v:
            out.append(f"job {k}: mhc {v} reference {exp['job'].get(k, 'absent')}")
    return out


def fmt_bytes(b):
    """docs/cli.md "What the commands print": binary units, two decimals (the unit chosen first)."""
    if abs(b) < 1024:
        return f"{b} B"
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    k = 0
    while k + 1 < len(units) and abs(b) >= 1024 ** (k + 2):
        k += 1
    return f"{b / 1024 ** (k + 1):.2f} {units[k]}"


def fmt_ns(n):
    """ns, us and ms with two decimals, s with three (the unit chosen first)."""
    if abs(n) < 1000:
        return f"{n} ns"
    if abs(n) < 1_000_000:
        return f"{n / 1e3:.2f} us"
    if abs(n) < 1_000_000_000:
        return f"{n / 1e6:.2f} ms"
    return f"{n / 1e9:.3f} s"


def text_facts(exp, unlimited):
    """The figures docs/cli.md says the text output of `simulate --ranks` prints, in its order:
    a row per rank (capacity, baseline, peak, loss or OOM/STOPPED, stall time, stalls, wait
    time, waits), then the job's lines (peak, makespan recorded -> simulated and loss, stall
    and wait time of all ranks, limiting rank and the rank that finishes last, out of memory,
    stopped)."""
    rows = []
    for r in exp["ranks"]:
        loss = "OOM" if r["oom"] else "STOPPED" if r["stopped"] else f"{r['throughput_loss'] * 100:.2f}%"
        rows.append([str(r["rank"]), "unlimited" if unlimited else fmt_bytes(r["capacity"]),
                     fmt_bytes(r["baseline_peak"]), fmt_bytes(r["simulated_peak"]), loss, fmt_ns(r["stall_time"]),
                     str(r["stall_count"]), fmt_ns(r["coupled_wait_time"]), str(r["coupled_wait_count"])])
    job = exp["job"]
    lines = [f"peak {fmt_bytes(job['peak'])} (baseline {fmt_bytes(job['baseline_peak'])}"]
    if job["throughput_loss"] is not None:
        lines.append(f"makespan recorded {fmt_ns(job['baseline_makespan'])} -> simulated "
                     f"{fmt_ns(job['simulated_makespan'])} (throughput loss {job['throughput_loss'] * 100:.2f}%)")
    else:
        lines.append(f"after {fmt_ns(job['simulated_makespan'])} of simulated time")
    lines.append(f"stall time {fmt_ns(sum(r['stall_time'] for r in exp['ranks']))}, wait time "
                 f"{fmt_ns(sum(r['coupled_wait_time'] for r in exp['ranks']))} (all ranks)")
    stall = {r["rank"]: r["stall_time"] for r in exp["ranks"]}
    lim = job["limiting_rank"]
    lines.append(f"limiting rank  {lim} ({fmt_ns(stall[lim])} of its own stalls" if lim >= 0
                 else "limiting rank  none")
    lines.append(f"rank {job['last_rank']} finishes last")
    if job["oom_rank"] >= 0:
        lines.append(f"out of memory  rank {job['oom_rank']}:")
    stopped = [str(r["rank"]) for r in exp["ranks"] if r["stopped"]]
    if stopped:
        lines.append(f"stopped        rank{'s' if len(stopped) > 1 else ''} {', '.join(stopped)}")
    return rows, lines


def rank_rows(text, count):
    """The table's rank rows: those after its heading, whose last line begins with 'rank' (the
    heading may take two lines, a figure's name over its unit)."""
    text_lines = text.splitlines()
    first = next((i + 1 for i, line in enumerate(text_lines) if line.startswith("rank ")), len(text_lines))
    return text_lines[first:first + count]


def text_diff(text, exp, unlimited):
    rows, lines = text_facts(exp, unlimited)
    out = []
    got_rows = []
    for line in rank_rows(text, len(rows)):
        t = line.split()
        row, i = [t[0]], 1
        for width in (2, 2, 2, 1, 2, 1, 2, 1):  # a size or time is two words, a count or loss one
            if t[i] == "unlimited":
                width = 1
            row.append(" ".join(t[i:i + width]))
            i += width
        got_rows.append(row)
    for g, e in zip(got_rows, rows):
        if g != e:
            out.append(f"text row of rank {e[0]}: {' | '.join(g)} ; reference {' | '.join(e)}")
    # a rank's device when not GPU 0, after its trace, as mhc info names a run's
    for line, r in zip(rank_rows(text, len(rows)), exp["ranks"]):
        note = "" if r["device"] == 0 else f" ({'host' if r['device'] < 0 else 'GPU %d' % r['device']})"
        if note and not line.endswith(note) or not note and line.endswith(")"):
            out.append(f"text row of rank {r['rank']} does not end with its device '{note}': {line}")
    if len(got_rows) != len(rows):
        out.append(f"text: {len(got_rows)} rank rows for {len(rows)} ranks")
    for want in lines:
        if want not in text:
            out.append(f"text lacks '{want}'")
    return out


def stored(runs_db, exp):
    """The coupled metrics stored per rank ("Coupled ranks": coupled_wait_time, coupled_wait_count,
    job_throughput_loss when the job finished; status incomplete and no loss for a stopped rank)."""
    out = []
    rows = sql(runs_db, "SELECT r.id, r.name, r.status, m.key, m.value FROM runs r JOIN run_metrics m ON m.run = r.id "
                        "WHERE m.key IN ('coupled_wait_time', 'coupled_wait_count', 'job_throughput_loss', "
                        "'throughput_loss', 'stall_ns', 'stalls') ORDER BY r.id")
    runs = {}
    for rid, name, status, key, value in rows:
        runs.setdefault(rid, {"name": name, "status": status})[key] = value
    if len(runs) != len(exp["ranks"]):
        return [f"stored: {len(runs)} runs with metrics for {len(exp['ranks'])} ranks"]
    for (rid, got), e in zip(sorted(runs.items()), exp["ranks"]):
        want = {"coupled_wait_time": e["coupled_wait_time"], "coupled_wait_count": e["coupled_wait_count"],
                "stall_ns": e["stall_time"], "stalls": e["stall_count"]}
        if e["throughput_loss"] is not None:
            want["throughput_loss"] = e["throughput_loss"]
        if exp["job"]["throughput_loss"] is not None:
            want["job_throughput_loss"] = exp["job"]["throughput_loss"]
        for k in ("coupled_wait_time", "coupled_wait_count", "stall_ns", "stalls", "throughput_loss",
                  "job_throughput_loss"):
            if got.get(k) != want.get(k):
                out.append(f"stored run {rid} ({got['name']}) {k}: {got.get(k)} reference {want.get(k)}")
        if e["stopped"] and got["status"] != "incomplete":
            out.append(f"stored run {rid}: status {got['status']} for a stopped rank")
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = dict((a[2:].split("=", 1) + [""])[:2] for a in sys.argv[1:] if a.startswith("--"))
    mhc, work = args[0], Path(args[1])
    runs, seed = int(flags.get("runs", 20)), int(flags.get("seed", 1))
    mpi = int(flags["mpi"]) if "mpi" in flags else None
    if mpi is not None and shutil.which("mpirun") is None:
        print("skipped: --mpi given but mpirun is not on PATH")
        return 77
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    bad = 0
    tally = {"finished": 0, "oom": 0, "waits": 0, "stopped": 0, "gpu1": 0, "mpi": 0}
    for i in range(runs):
        job_dir = work / f"job{i}"
        shutil.rmtree(job_dir, ignore_errors=True)
        job_dir.mkdir()
        paths, gen = generate(mhc, job_dir, rng)
        order, changes, device = change(paths, rng)
        opts, share, policy, link, max_ops = configuration(rng)
        if device is not None:
            opts += ["--device", str(device)]
        exp, rc = ref.simulate_job([str(p) for p in order], share, policy, link, max_ops, device)
        cmd = [mhc, "simulate", "--ranks", *map(str, order), *opts, "--json"]
        runs_db = job_dir / "runs.db"
        store = ["--runs-db", str(runs_db)] if "stored" in flags else ["--no-store"]
        r = subprocess.run(cmd + store, capture_output=True, text=True)
        problems = []
        if r.returncode != rc:
            problems.append(f"exit {r.returncode} reference {rc}: {r.stderr.strip()[:300]}")
        try:
            got = json.loads(r.stdout)
            problems += diff(got, exp)
        except json.JSONDecodeError:
            problems.append(f"no JSON: {r.stdout[:200]} {r.stderr[:200]}")
        unlimited = "unlimited" in opts
        t = subprocess.run(cmd[:-1] + ["--no-store"], capture_output=True, text=True)
        problems += text_diff(t.stdout, exp, unlimited)
        if "stored" in flags and not problems:
            problems += stored(runs_db, exp)
        if mpi is not None:
            p = mpi or (2 + i % 2)
            mpi_db = job_dir / "runs_mpi.db"  # rank 0 alone stores every rank's run ("MPI")
            m = subprocess.run(["timeout", "120", "mpirun", "-n", str(p), "--oversubscribe", *cmd]
                               + (["--runs-db", str(mpi_db)] if "stored" in flags else ["--no-store"]),
                               capture_output=True, text=True, env=env)
            tally["mpi"] += 1
            if m.returncode != rc:
                problems.append(f"mpirun -n {p}: exit {m.returncode} reference {rc}: {m.stderr.strip()[:300]}")
            try:
                problems += [f"mpirun -n {p}: {d}" for d in diff(json.loads(m.stdout), exp)]
            except json.JSONDecodeError:
                problems.append(f"mpirun -n {p}: no JSON: {m.stdout[:200]} {m.stderr[:200]}")
            if "stored" in flags and not problems:
                problems += [f"mpirun -n {p}: {d}" for d in stored(mpi_db, exp)]
        tally["finished" if rc == 0 else "oom"] += 1
        tally["waits"] += sum(1 for x in exp["ranks"] if x["coupled_wait_count"])
        tally["stopped"] += sum(1 for x in exp["ranks"] if x["stopped"])
        tally["gpu1"] += sum(1 for x in exp["ranks"] if x["device"] == 1)
        if problems or "verbose" in flags:
            print(f"job {i}: generate {' '.join(gen)}; changes {','.join(changes) or 'none'}; {' '.join(opts)}")
            for p in problems[:12]:
                print("   ", p)
        if problems:
            bad += 1
        else:
            shutil.rmtree(job_dir, ignore_errors=True)
    print(f"{runs - bad} of {runs} coupled jobs agree ({tally['finished']} finished, {tally['oom']} out of memory; "
          f"{tally['waits']} ranks with coupled waits, {tally['stopped']} stopped, {tally['gpu1']} on GPU 1; "
          f"{tally['mpi']} also under mpirun)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
