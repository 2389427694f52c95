#!/usr/bin/env python3
"""Runs `mhc simulate` and `mhc sweep` beside reference_sweep.py (a reading of what the commands make of
a run, from docs/simulator.md and docs/cli.md alone) on generated traces (several presets, sizes and
seeds) and the public traces of tests/data/public, and compares what the user sees and what is stored:
the device, the baseline peak of each allocator model, the capacity and host buffer in bytes (shares
with decimals, sizes in every unit, MHC_CPU_BUFFER_RATIO and MHC_EVICTION_STRATEGY beside the
options), throughput loss, peak reduction and OOM slowdown; the text output's figures; the sweep's
grid rows, its bisection answers and the runs it stores (names, status, metrics).

Usage: reference_sweep_compare.py MHC WORKDIR [--public=DIR [--public-filter=A,B]] [--runs=N] [--sweeps=N] [--seed=S]
--runs: simulate runs per trace (4); --sweeps: sweeps per trace (1); --public-filter: only the public
traces whose file names contain A or B.
Exit 0 when every run agrees, 1 otherwise (each difference printed).
"""
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_sweep as ref  # noqa: E402
from reference_compare import public_traces  # noqa: E402

POLICIES = ["lru", "largest", "belady", "dtr", "cost_aware"]
INT_METRICS = ["baseline_peak_bytes", "capacity_bytes", "host_capacity_bytes", "simulated_peak_bytes",
               "baseline_makespan_ns", "simulated_makespan_ns", "stall_ns", "swap_in_bytes", "swap_out_bytes"]
FLOAT_METRICS = ["throughput_loss", "peak_reduction", "oom_slowdown"]


def generated(mhc, work):
    specs = [["--preset", "gpt2-small", "--layers", "2", "--steps", "2", "--seq", "128"],
             ["--preset", "gpt2-small", "--layers", "1", "--steps", "3", "--seq", "64", "--seed", "5",
              "--jitter", "0.3"],
             ["--preset", "llama2-7b", "--layers", "1", "--steps", "2", "--seq", "128", "--seed", "11",
              "--jitter", "0.1"],
             ["--preset", "mhc-27b", "--layers", "2", "--steps", "2", "--seq", "64", "--tp", "2", "--dp", "1",
              "--pp", "1"]]
    out = []
    for i, args in enumerate(specs):
        path = work / f"gen-{i}.db"
        subprocess.run([mhc, "generate", "--force", "-o", str(path)] + args, check=True, capture_output=True)
        out.append(path)
    return out


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def random_capacity(rng, peak):
    """A share with decimals, or a size in one of the units (decimal and binary, any case)."""
    kind = rng.random()
    if kind < 0.6:
        return rng.choice(["95%", "87.5%", "70%", "66.6%", "33.3333%", "50.25%", "12.5%", "99.99%", "60 %"])
    frac = rng.uniform(0.3, 1.0) * peak
    if kind < 0.7:  # a half byte: the rounding's tie ("mhc help sizes": halves up)
        return f"{int(frac)}.5B"
    unit, scale = rng.choice([("MiB", 1 << 20), ("mb", 10 ** 6), ("KiB", 1 << 10), ("GB", 10 ** 9), ("g", 1 << 30)])
    return f"{frac / scale:.3f}{unit}" if scale >= 10 ** 9 else f"{frac / scale:.1f}{unit}"


def random_overrides(rng):
    """Some of the options that override a link's figures ("Link models"), as a user writes them."""
    choices = {"h2d-bandwidth": ["20GB/s", "12.5GiB/s", "40 GB/s"], "d2h-bandwidth": ["18GB/s", "30GB"],
               "latency": ["3us", "0.5 us", "20us", "0ns"], "copy-engines": ["1", "2", "4"],
               "duplex-factor": ["0.7", "1", "0.25"], "nccl-share": ["0", "0.2"], "memcpy-share": ["0", "0.9"],
               "max-swap-ops-per-sec": ["5000", "200000", "0"]}
    return {k: rng.choice(v) for k, v in choices.items() if rng.random() < 0.3}


CONFS = ["expandable_segments:True", "max_split_size_mb:64", "garbage_collection_threshold:0.8",
         "roundup_power2_divisions:4"]


def profile(work, rng):
    """A link profile file as `mhc calibrate` writes one ("Link models"), sometimes without the shares."""
    doc = {"name": f"node-{rng.randint(1, 99)}", "h2d": {"bandwidth_Bps": rng.choice([8e9, 2.45e10, 6e10]),
                                                        "latency_s": rng.choice([0, 6e-6, 2.5e-5])},
           "d2h": {"bandwidth_Bps": rng.choice([5e9, 2.5e10]), "latency_s": rng.choice([3e-6, 1e-5])},
           "copy_engines": rng.choice([1, 2, 3]), "duplex_factor": rng.choice([0.5, 0.9, 1]),
           "source": "reference_sweep_compare.py", "notes": ["written by hand"]}
    if rng.random() < 0.5:
        doc.update(nccl_share=rng.choice([0, 0.3]), memcpy_share=rng.choice([0.1, 0.7]))
    path = work / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def stored_runs(db):
    q = sqlite3.connect(str(db))
    runs = q.execute("SELECT id, kind, name, status FROM runs ORDER BY id").fetchall()
    out = {}
    for rid, kind, name, status in runs:
        metrics = dict(q.execute("SELECT key, value FROM run_metrics WHERE run = ?", (rid,)).fetchall())
        config = dict(q.execute("SELECT key, value FROM run_config WHERE run = ?", (rid,)).fetchall())
        out.setdefault(name, []).append(dict(kind=kind, status=status, metrics=metrics, config=config))
    q.close()
    return out


def compare_metrics(want, got, keys_int=INT_METRICS, keys_float=FLOAT_METRICS, stored=False):
    problems = []
    for k in keys_int:
        if k in want and want[k] is not None and (got.get(k) is None or int(got[k]) != int(want[k])):
            problems.append(f"{k}: mhc {got.get(k)}, reference {want[k]}")
    for k in keys_float:
        w, g = want.get(k), got.get(k)
        if stored and w is None:   # absent from the store (an OOM run's loss and reduction)
            if k in got:
                problems.append(f"stored {k} {g}: an OOM run stores none")
            continue
        if not close(w, g):
            problems.append(f"{k}: mhc {g}, reference {w}")
    return problems


def is_order_only(trace):
    q = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    n = q.execute("SELECT count(*) FROM meta WHERE key = 'timing' AND value = 'order-only'").fetchone()[0]
    q.close()
    return bool(n)


def order_only_row(fig, oom):
    """"Inputs": with order-only timing the sweep prints - for a run's loss and stall."""
    return fig[:4] + ["-"] + fig[5:] if oom else fig[:3] + ["-", "-"] + fig[5:]


def simulate_case(mhc, trace, rng, work):
    """One `mhc simulate` (--json, then text) against the reference."""
    allocator = rng.choice(["ideal", "caching"])
    dev = ref.pick_device(trace)
    peak = ref.baseline_peak(trace, dev, allocator)
    cap = random_capacity(rng, peak)
    policy = rng.choice(POLICIES)
    prefetch = rng.choice(["none", "none", "lookahead:4", "periodic", "forecast:2", "capuchin"])
    link = rng.choice(list(ref.PRESETS)) if rng.random() < 0.75 else profile(work, rng)
    ratio = rng.choice(["0", "0", "0.5", "0.35", "1", "0.123"])
    over = random_overrides(rng)
    samples = rng.choice([4096, 4096, 1, 7, 100, 5000])
    env = dict(os.environ)
    for k in ["MHC_CPU_BUFFER_RATIO", "MHC_EVICTION_STRATEGY", "MHC_MAX_SWAP_OPS_PER_SEC"]:
        env.pop(k, None)
    conf = rng.choice(CONFS) if allocator == "caching" and rng.random() < 0.3 else ""
    args = ["--capacity", cap, "--prefetch", prefetch, "--link", link, "--allocator", allocator]
    args += ["--allocator-conf", conf] if conf else []
    if "max-swap-ops-per-sec" in over and rng.random() < 0.5:   # by environment ("Limits")
        env["MHC_MAX_SWAP_OPS_PER_SEC"] = over["max-swap-ops-per-sec"]
        args += [] if rng.random() < 0.6 else ["--max-swap-ops-per-sec", over["max-swap-ops-per-sec"]]
    elif "max-swap-ops-per-sec" in over:
        args += ["--max-swap-ops-per-sec", over["max-swap-ops-per-sec"]]
    for k, v in over.items():
        if k != "max-swap-ops-per-sec":
            args += [f"--{k}", v]
    if samples != 4096:
        args += ["--memory-samples", str(samples)]
    how = rng.random()   # the host buffer and the policy by option, by environment, or both (the option wins)
    if how < 0.25:
        env["MHC_CPU_BUFFER_RATIO"] = ratio
    elif how < 0.4:
        env["MHC_CPU_BUFFER_RATIO"] = "0.9" if ratio != "0.9" else "0.2"
        args += ["--cpu-buffer-ratio", ratio]
    else:
        args += ["--cpu-buffer-ratio", ratio]
    if rng.random() < 0.25:
        env["MHC_EVICTION_STRATEGY"] = policy
    else:
        args += ["--policy", policy]
    db = work / "sim-runs.db"
    if db.exists():
        db.unlink()
    env_text = ", ".join(k + "=" + env[k] for k in sorted(env) if k.startswith("MHC_"))
    tag = f"simulate {trace.name} {' '.join(args)} ({env_text})"
    p = subprocess.run([mhc, "simulate", str(trace), "--json", "--runs-db", str(db)] + args, capture_output=True,
                       text=True, env=env)
    if p.returncode not in (0, 3):
        return tag, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    out = json.loads(p.stdout)
    want = ref.Run(trace, cap, policy, prefetch, link, allocator, ratio, over=over, samples=samples, conf=conf)
    problems = []
    if out["device"] != want.device:
        problems.append(f"device: mhc {out['device']}, reference {want.device}")
    if (p.returncode == 3) != want.oom:
        problems.append(f"exit {p.returncode}, reference {'OOM' if want.oom else 'finishes'}")
    problems += compare_metrics(want.metrics, out["metrics"])
    problems += oom_report(want, out, allocator)
    # the stored run: its name, kind and status, and the figures --json printed
    runs = stored_runs(db)
    name = ref.run_name(policy, prefetch, cap, link, allocator, over, conf)
    if name not in runs:
        problems.append(f"stored run names {sorted(runs)}, reference {name}")
    else:
        r = runs[name][0]
        if (r["kind"], r["status"]) != ("simulated", "oom" if want.oom else "complete"):
            problems.append(f"stored kind/status {r['kind']}/{r['status']}")
        problems += ["stored " + x for x in compare_metrics(want.metrics, r["metrics"], stored=True)]
        q = sqlite3.connect(str(db))
        mem = [(t, int(d), int(h)) for t, d, h in q.execute(
            "SELECT t, device_bytes, host_bytes FROM run_memory ORDER BY t, rowid").fetchall()]
        q.close()
        if mem != [(t, int(d), int(h)) for t, d, h in want.memory]:   # "Outputs": the memory timeline
            diff = next((f"mhc {y}, reference {x}" for x, y in zip(want.memory, mem) if tuple(x) != y),
                        f"{len(mem)} rows, reference {len(want.memory)}")
            problems.append(f"run_memory ({samples} samples): {diff}")
    problems += info_line(mhc, trace, db, name, want)
    # the text output: first line, capacity line, the figures in the document's words
    t = subprocess.run([mhc, "simulate", str(trace), "--no-store"] + args, capture_output=True, text=True, env=env)
    text = " ".join(t.stdout.split())
    m = want.metrics
    # docs/cli.md: a capacity given as a share is also said as one, as the run's name writes it
    share = name.split("@", 1)[1].split("/", 1)[0]
    of_peak = f" ({share} of the baseline peak)" if share.endswith("%") else ""
    expect = [f"run {name} (device {want.device})",
              f"capacity {ref.fmt_size(m['capacity_bytes'])}{of_peak} host buffer "
              f"{'unlimited' if m['host_capacity_bytes'] < 0 else ref.fmt_size(m['host_capacity_bytes'])}"]
    order_only = is_order_only(trace)
    if order_only and not want.oom:   # "Inputs": memory figures stand, times are event numbers
        expect += ["makespan not a time"]
    if want.oom:   # rule 7's figures in words
        o = want.oom_report
        expect += [f"needs {ref.fmt_size(o['oom_bytes_needed'])}",
                   f"{ref.fmt_size(o['oom_bytes_pinned'])} pinned by running kernels"]
        if allocator == "ideal":
            expect += [f"short by {ref.fmt_size(o['oom_bytes_short'])}"]
        elif o["oom_fragmentation"]:
            expect += [f"largest free block {ref.fmt_size(o['largest_free_block'])}"]
    if not want.oom:
        expect += [f"(peak reduction {m['peak_reduction'] * 100:.1f}%)",
                   f"simulated {ref.fmt_size(m['simulated_peak_bytes'])}"]
        expect += [] if order_only else [f"(throughput loss {m['throughput_loss'] * 100:.2f}%)"]
    for e in expect:
        if e not in text:
            problems.append(f"text output lacks '{e}'")
    return tag, problems


def info_line(mhc, trace, db, name, want):
    """docs/cli.md "What the commands print": `mhc info` lists each stored run with its id, kind, status,
    peak, peak reduction, throughput loss and name (an OOM run: OOM and what was short); an order-only
    trace's runs without a loss ("Inputs")."""
    p = subprocess.run([mhc, "info", str(trace), "--runs-db", str(db)], capture_output=True, text=True)
    text = " ".join(p.stdout.split())
    m = want.metrics
    if want.oom:   # a long name on a line of its own, indented 6: the name cut with ... so that
        # what was short stays whole within 100 columns (docs/cli.md)
        short = f" (out of memory, short by {ref.fmt_size(m['oom_bytes_short'])})"
        cut = name if 6 + len(name) + len(short) <= 100 else name[:100 - 6 - len(short) - 3] + "..."
        second = f"      {cut}{short}"
        expect = f"1 simulated oom - - OOM {' '.join(second.split())}"
    else:
        loss = "-" if is_order_only(trace) else f"{m['throughput_loss'] * 100:.2f}%"
        expect = (f"1 simulated complete {ref.fmt_size(m['simulated_peak_bytes'])} {m['peak_reduction'] * 100:.1f}% "
                  f"{loss} {name}")
    if expect not in text:
        return [f"mhc info lacks '{expect}': {[x for x in p.stdout.splitlines() if 'simulated' in x]}"]
    return []


def oom_report(want, out, allocator):
    """Rule 7: --json's oom object and metrics against the reference's."""
    got = out.get("oom")
    if not want.oom:
        return [f"an oom object {got}, reference finishes"] if got else []
    if not got:
        return ["no oom object, reference OOM"]
    o = want.oom_report
    pairs = [("allocation", o["allocation"]), ("kernel", o["kernel"]), ("time_ns", o["oom_time_ns"]),
             ("bytes_needed", o["oom_bytes_needed"]), ("bytes_pinned", o["oom_bytes_pinned"]),
             ("bytes_short", o["oom_bytes_short"]), ("fragmentation", bool(o["oom_fragmentation"]))]
    if allocator == "caching":
        pairs.append(("largest_free_block", o["largest_free_block"]))
    problems = [f"oom {k}: mhc {got.get(k)}, reference {v}" for k, v in pairs if got.get(k) != v]
    for k in ["oom_bytes_needed", "oom_bytes_pinned", "oom_bytes_short", "oom_fragmentation", "oom_time_ns"]:
        if int(out["metrics"].get(k, -1)) != int(o[k]):
            problems.append(f"{k}: mhc {out['metrics'].get(k)}, reference {o[k]}")
    return problems


def parse_sweep(stdout):
    """{link: {'grid': {(policy, prefetch, cap): figures}, 'answers': {(policy, prefetch): text}}}"""
    out, link, part, last = {}, None, None, None
    for line in stdout.splitlines():
        words = line.split()
        if part == "answers" and last and line.startswith(" ") and words:
            out[link]["answers"][last] += " " + " ".join(words)   # an answer wrapped onto the next line
        elif line.startswith("link "):
            link, part = words[1], "grid"
            out[link] = {"grid": {}, "answers": {}}
        elif line.startswith("smallest capacity"):
            part = "answers"
        elif link and words and words[0] in POLICIES:
            star = len(words) > 2 and words[2] == "*"
            rest = words[3 if star else 2:]
            if part == "grid":
                out[link]["grid"][(words[0], words[1])] = out[link]["grid"].get((words[0], words[1]), []) + [rest]
            else:
                last = (words[0], words[1])
                out[link]["answers"][last] = " ".join(rest)
        else:
            last = None
    return out


def sweep_case(mhc, trace, rng, work):
    allocator = rng.choice(["ideal", "caching"])
    dev = ref.pick_device(trace)
    peak = ref.baseline_peak(trace, dev, allocator)
    policies = rng.sample(POLICIES, 2)
    prefetchers = rng.sample(["none", "lookahead:8", "periodic:4"], rng.choice([1, 2]))
    caps = rng.sample(["90%", "75.5%", "50%", "unlimited", f"{peak * 0.8 / (1 << 20):.2f}MiB"], 2)
    links = rng.sample(["pcie4", "pcie3", "nvlink-c2c", "pcie5", profile(work, rng)], rng.choice([1, 2]))
    budget = rng.choice(["3%", "50%", "250%", "1000%", "2.5%"])
    steps = rng.choice([2, 3, 4, 5])
    ratio = rng.choice(["0", "0.5"])
    over = {k: v for k, v in random_overrides(rng).items() if k == "max-swap-ops-per-sec"}   # the one sweep takes
    conf = rng.choice(CONFS) if allocator == "caching" and rng.random() < 0.3 else ""
    db = work / "sweep-runs.db"
    if db.exists():
        db.unlink()
    args = ["--policies", ",".join(policies), "--prefetchers", ",".join(prefetchers), "--capacities", ",".join(caps),
            "--links", ",".join(links), "--budget", budget, "--bisect-steps", str(steps), "--allocator", allocator,
            "--cpu-buffer-ratio", ratio, "-j", rng.choice(["1", "1", "2"])]
    args += [x for k, v in over.items() for x in (f"--{k}", v)] + (["--allocator-conf", conf] if conf else [])
    tag = f"sweep {trace.name} {' '.join(args)}"
    p = subprocess.run([mhc, "sweep", str(trace), "--runs-db", str(db)] + args, capture_output=True, text=True)
    if p.returncode != 0:
        return tag, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    shown, runs = parse_sweep(p.stdout), stored_runs(db)
    problems, grid_runs, probes, answers, stored_answers = [], 0, 0, 0, 0
    order_only = is_order_only(trace)   # "Inputs": no bisection, - for loss and stall
    b = float(budget.rstrip("%")) / 100
    for link in links:
        got = shown.get(ref.link_label(link))
        if got is None:
            problems.append(f"no 'link {ref.link_label(link)}' heading: {sorted(shown)}")
            continue
        for policy in policies:
            for pf in prefetchers:
                rows = got["grid"].get((policy, pf), [])
                for cap in caps:
                    want = ref.Run(trace, cap, policy, pf, link, allocator, ratio, over=over, conf=conf)
                    grid_runs += 1
                    fig = ref.grid_figures(want, cap)
                    fig = " ".join(order_only_row(fig, want.oom) if order_only else fig)
                    if fig not in [" ".join(r) for r in rows]:
                        problems.append(f"grid {link} {policy} {pf} {cap}: mhc {[' '.join(r) for r in rows]}, "
                                        f"reference {fig}")
                    name = ref.run_name(policy, pf, cap, link, allocator, conf=conf)
                    if name not in runs:
                        problems.append(f"grid run {name} not stored")
                    else:
                        problems += [f"{name}: {x}" for x in compare_metrics(want.metrics, runs[name][0]["metrics"],
                                                                                 stored=True)]
                if order_only:
                    continue
                share, at, n, what = ref.bisect(trace, policy, pf, link, allocator, ratio, b, steps, over, conf)
                probes += steps + 1   # "Sweep": counted for every answer, run or not (n were run)
                answers += 1
                line = got["answers"].get((policy, pf), "")
                if what == "answer":
                    want_line = ref.answer_figures(share, at)
                    stored_answers += 1
                    bname = "bisect:" + ref.run_name(policy, pf, ref.share_text(share), link, allocator, conf=conf)
                    if bname not in runs:
                        problems.append(f"bisection run {bname} not stored ({[n for n in runs if 'bisect' in n]})")
                    else:
                        problems += [f"{bname}: {x}" for x in compare_metrics(at.metrics, runs[bname][0]["metrics"],
                                                                                  stored=True)]
                        if "bisect_budget" not in runs[bname][0]["config"]:
                            problems.append(f"{bname}: no bisect_budget in its config")
                elif what == "no saving":
                    want_line = f"no saving within the {budget} budget"
                else:
                    want_line = f"not within the {budget} budget even at 100%"
                if not line.startswith(want_line):
                    problems.append(f"answer {link} {policy} {pf}: mhc '{line}', reference '{want_line}'")
    intro = f"smallest capacity within the loss budget of {budget} (baseline peak {ref.fmt_size(peak)}):"
    if intro not in p.stdout and not order_only:   # an order-only trace has no answers
        problems.append(f"no line '{intro}': {[x for x in p.stdout.splitlines() if x.startswith('smallest')][:1]}")
    oracle = any(x == "belady" for x in policies) or any(x.startswith("lookahead") for x in prefetchers)
    if oracle != ("* oracle:" in p.stdout):
        problems.append(f"the oracle's note {'missing' if oracle else 'printed without an oracle'}")
    stored_bisect = sum(len(v) for k, v in runs.items() if k.startswith("bisect:"))
    if stored_bisect != stored_answers:
        problems.append(f"stored {stored_bisect} bisection runs, reference {stored_answers}")
    summary = f"{grid_runs + probes} simulations"
    if summary not in p.stdout or (answers and f"{probes} bisection probes for {answers} answers" not in p.stdout):
        problems.append(f"summary: mhc '{[x for x in p.stdout.splitlines() if 'simulations' in x]}', "
                        f"reference {summary}, {probes} probes for {answers} answers")
    return tag, problems


def order_only_case(mhc, trace, rng, work):
    """"Inputs", order-only timing: the sweep prints - for each run's loss and stall and does not
    bisect (a line says so); simulate prints `makespan not a time` and --json has its timing."""
    copy = work / "order-only.db"
    copy.write_bytes(Path(trace).read_bytes())
    q = sqlite3.connect(str(copy))
    q.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('timing', 'order-only')")
    q.commit()
    q.close()
    allocator = rng.choice(["ideal", "caching"])
    caps = ["90%", "60%"]
    db = work / "order-runs.db"
    if db.exists():
        db.unlink()
    args = ["--policies", "lru,belady", "--capacities", ",".join(caps), "--allocator", allocator, "-j", "1"]
    tag = f"sweep (order-only) {trace.name} {' '.join(args)}"
    p = subprocess.run([mhc, "sweep", str(copy), "--runs-db", str(db)] + args, capture_output=True, text=True)
    if p.returncode != 0:
        return tag, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    problems, shown, runs = [], parse_sweep(p.stdout).get("pcie4", {"grid": {}, "answers": {}}), stored_runs(db)
    for policy in ["lru", "belady"]:
        rows = [" ".join(r) for r in shown["grid"].get((policy, "none"), [])]
        for cap in caps:
            want = ref.Run(copy, cap, policy, "none", "pcie4", allocator)
            fig = " ".join(order_only_row(ref.grid_figures(want, cap), want.oom))
            if fig not in rows:
                problems.append(f"grid {policy} {cap}: mhc {rows}, reference {fig}")
    if shown["answers"] or any(k.startswith("bisect:") for k in runs):
        problems.append("bisected an order-only trace")
    if "no bisection" not in p.stderr + p.stdout:
        problems.append("no line says that the sweep does not bisect")
    if "4 simulations" not in p.stdout:
        problems.append(f"summary {[x for x in p.stdout.splitlines() if 'simulations' in x]}, reference 4 simulations")
    s = subprocess.run([mhc, "simulate", str(copy), "--capacity", "90%", "--allocator", allocator, "--no-store"],
                       capture_output=True, text=True)
    if "makespan not a time" not in " ".join(s.stdout.split()):
        problems.append("simulate's text lacks 'makespan not a time'")
    j = subprocess.run([mhc, "simulate", str(copy), "--capacity", "90%", "--allocator", allocator, "--no-store",
                        "--json"], capture_output=True, text=True)
    if json.loads(j.stdout).get("timing") != "order-only":
        problems.append("--json lacks \"timing\": \"order-only\"")
    return tag, problems


def zero_duration_case(mhc, trace, rng, work):
    """"Inputs", events all at one instant: simulate's loss is not defined (null in --json, not
    stored), the other figures stand; the sweep prints - for the loss and does not bisect."""
    copy = work / "one-instant.db"
    copy.write_bytes(Path(trace).read_bytes())
    q = sqlite3.connect(str(copy))
    q.executescript("UPDATE kernels SET t_start = 0, t_end = 0; UPDATE markers SET t_start = 0, t_end = 0;"
                    "UPDATE copies SET t_start = 0, t_end = 0;"
                    "UPDATE allocations SET t_alloc = 0, t_free = CASE WHEN t_free IS NULL THEN NULL ELSE 0 END;")
    q.commit()
    q.close()
    allocator = rng.choice(["ideal", "caching"])
    policy = rng.choice(["lru", "belady"])
    tag = f"simulate and sweep (one instant) {trace.name} --policy {policy} --allocator {allocator}"
    p = subprocess.run([mhc, "simulate", str(copy), "--capacity", "90%", "--policy", policy, "--allocator",
                        allocator, "--no-store", "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        return tag, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    want = ref.Run(copy, "90%", policy, "none", "pcie4", allocator)
    out = json.loads(p.stdout)
    got = out["metrics"]
    problems = compare_metrics(want.metrics, got)
    if got.get("throughput_loss") is not None or want.metrics["throughput_loss"] is not None:
        problems.append(f"throughput_loss: mhc {got.get('throughput_loss')}, reference "
                        f"{want.metrics['throughput_loss']}: not defined on a zero baseline")
    if not any("one instant" in w for w in out.get("warnings", [])):
        problems.append("no warning (--json's warnings) says the events are all at one instant")
    s = subprocess.run([mhc, "sweep", str(copy), "--policies", policy, "--capacities", "90%,60%", "--allocator",
                        allocator, "--no-store", "-j", "1"], capture_output=True, text=True)
    if s.returncode != 0:
        return tag, problems + [f"sweep exit {s.returncode}: {s.stderr.strip()[:300]}"]
    if parse_sweep(s.stdout).get("pcie4", {}).get("answers"):
        problems.append("the sweep bisected a trace without duration")
    return tag, problems


def no_events_case(mhc, trace, rng, work):
    """`--no-events`: the run is stored with its metrics and memory timeline, without events or kernel
    times ("Outputs")."""
    db = work / "noevents-runs.db"
    if db.exists():
        db.unlink()
    args = ["--capacity", "70%", "--policy", rng.choice(POLICIES), "--no-events"]
    tag = f"simulate {trace.name} {' '.join(args)}"
    p = subprocess.run([mhc, "simulate", str(trace), "--runs-db", str(db)] + args, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        return tag, [f"exit {p.returncode}: {p.stderr.strip()[:300]}"]
    q = sqlite3.connect(str(db))
    problems = [f"{t}: {n} rows" for t in ["run_events", "run_kernels"]
                for n in [q.execute(f"SELECT count(*) FROM {t}").fetchone()[0]] if n]
    if not q.execute("SELECT count(*) FROM run_memory").fetchone()[0]:
        problems.append("no memory timeline stored")
    if not q.execute("SELECT count(*) FROM run_metrics").fetchone()[0]:
        problems.append("no metrics stored")
    q.close()
    return tag, problems


def names_case(mhc, trace, rng, work):
    """"Outputs", **Run names**: each option that overrides a figure of the link, alone, names the link
    LINK-custom (whatever its value, the preset's own included); --max-swap-ops-per-sec does not."""
    problems = []
    for key, value in [("nccl-share", "0.5"), ("memcpy-share", "0.2"), ("copy-engines", "2"), ("latency", "6us"),
                       ("duplex-factor", "0.5"), ("h2d-bandwidth", "25GB/s"), ("d2h-bandwidth", "1GB/s"),
                       ("max-swap-ops-per-sec", "5000")]:
        p = subprocess.run([mhc, "simulate", str(trace), "--capacity", "90%", "--no-store", f"--{key}", value],
                           capture_output=True, text=True)
        want = f"run {ref.run_name('lru', 'none', '90%', 'pcie4', 'caching', {key: value})} (device "
        if want not in " ".join(p.stdout.split()):
            problems.append(f"--{key} {value}: mhc '{p.stdout.splitlines()[0] if p.stdout else p.stderr.strip()}', "
                            f"reference '{want}'")
    return "simulate: run names under each link override", problems


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opt = lambda name, d: next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), d)  # noqa
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(opt("seed", "1")))
    traces = generated(mhc, work)
    if opt("public", None):
        only = opt("public-filter", None)
        traces += public_traces(mhc, work, opt("public", None), only.split(",") if only else None)
    runs = differ = 0
    cases = [("sim", t) for t in traces for _ in range(int(opt("runs", "4")))]
    cases += [("sweep", t) for t in traces for _ in range(int(opt("sweeps", "1")))]
    cases += [("order", traces[0]), ("instant", traces[0]), ("noevents", traces[1]), ("names", traces[0])]
    kinds = {"sim": simulate_case, "sweep": sweep_case, "order": order_only_case, "instant": zero_duration_case,
             "noevents": no_events_case, "names": names_case}
    for kind, trace in cases:
        tag, problems = kinds[kind](mhc, trace, rng, work)
        runs += 1
        differ += bool(problems)
        print(f"{'DIFFER' if problems else 'same  '} {tag}")
        for x in problems[:10]:
            print(f"    {x}")
    print(f"{runs} runs, {differ} differ ({len(traces)} traces)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
