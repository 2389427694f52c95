#!/usr/bin/env python3
"""Runs `mhc validate --json --recorded-timing --no-store` beside reference_validate.py (what validate
predicts and how it judges, read from docs/validation.md and docs/simulator.md alone) on small
generated traces under random configurations: a preset or a random link profile (each direction's
bandwidth and latency, copy engines, duplex factor, NCCL and memcpy shares that validation must
ignore, `by_chunk` rows with rates left out), a random `--chunk`, a given time scale or `auto`
against a random `--model-link`, capacities, policies, prefetchers, both allocators, a host buffer,
`--replay-steps`, 1 to 3 repeats. Compared: the time scale, the estimate of the replays' duration,
the prediction's link, the replay window's first kernel, and per configuration the predicted peak,
peak reduction, makespan, loss, bytes each way and stalls (the whole run's and the window's), the measured loss from the repeats'
makespans, its error and spread, and the verdict's kind; and with `--max-replay-minutes` at half the
estimate, the refusal before any replay: its configurations, replays, scale and slowest configuration
with its predicted makespan.

Usage: reference_validate_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose] [--only=K --keep]
--only=K: run K of the seed's runs alone; --keep: each run's --json kept in WORKDIR as runK.json.
Exit 0 when every figure agrees, 1 otherwise (each difference printed with its configuration)."""

import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_validate as rv  # noqa: E402
import reference_sweep as sweep  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
SHAPE = ["--layers", "2", "--seq", "128", "--hidden", "256", "--heads", "4", "--kv-heads", "4", "--ffn", "704",
         "--vocab", "1000", "--dp", "1", "--no-zero1"]
SPECS = [["--preset", "llama2-7b", "--steps", "2"] + SHAPE,
         ["--preset", "llama2-7b", "--steps", "3", "--seed", "3", "--jitter", "0.2"] + SHAPE,
         ["--preset", "gpt2-small", "--layers", "1", "--steps", "3", "--seq", "64", "--hidden", "256", "--heads", "4",
          "--vocab", "1000", "--seed", "5", "--jitter", "0.3"],
         ["--preset", "gpt2-small", "--layers", "2", "--steps", "2", "--seq", "64", "--hidden", "192", "--heads", "3",
          "--vocab", "800", "--micro-batches", "2"],
         ["--preset", "gpt2-small", "--layers", "2", "--steps", "2", "--seq", "64", "--hidden", "256", "--heads", "4",
          "--vocab", "1000", "--dp", "2", "--seed", "9", "--jitter", "0.1"]]
POLICIES = ["lru", "largest", "belady", "dtr", "cost_aware"]
PREFETCHERS = ["none", "none", "lookahead:4", "lookahead:8", "periodic:4", "capuchin", "forecast:2"]


def generated(mhc, work):
    out = []
    for i, args in enumerate(SPECS):
        path = work / f"v{i}.db"
        if not path.exists():
            subprocess.run([mhc, "generate", "--force", "-o", str(path)] + args, check=True, capture_output=True)
        out.append(path)
    return out


def random_profile(rng, path, name):
    """A link profile with random figures within the documented bounds, by_chunk rows some rates absent, never all."""
    def bw():
        return float(f"{10 ** rng.uniform(8.3, 10.7):.4g}")
    p = {"name": name, "h2d": {"bandwidth_Bps": bw(), "latency_s": rng.choice([0, 1e-6, 6e-6, 2.5e-5, 1e-4])},
         "d2h": {"bandwidth_Bps": bw(), "latency_s": rng.choice([0, 3e-6, 6e-6, 4e-5])},
         "copy_engines": rng.choice([1, 2, 2, 3]), "duplex_factor": rng.choice([1.0, 0.5, 0.75, 52 / 55, 0.3])}
    if rng.random() < 0.5:
        p["nccl_share"] = rng.choice([0.0, 0.3, 0.9])
        p["memcpy_share"] = rng.choice([0.0, 0.5, 0.8])
    if rng.random() < 0.7:
        sizes = sorted(rng.sample([4 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 2 * MIB, 4 * MIB, 16 * MIB, 64 * MIB],
                                  rng.randint(1, 5)))
        rows = []
        for s in sizes:
            r = {"bytes": s}
            if rng.random() < 0.85:
                r["h2d_Bps"] = bw()
            if rng.random() < 0.85:
                r["d2h_Bps"] = bw()
            if len(r) == 1:   # a row that measures nothing is refused (docs/simulator.md)
                r[rng.choice(["h2d_Bps", "d2h_Bps"])] = bw()
            rows.append(r)
        p["by_chunk"] = rows
    path.write_text(json.dumps(p))
    return str(path)


def random_config(rng, work, i, traces):
    c = {"trace": rng.choice(traces), "policy": rng.choice(POLICIES), "prefetch": rng.choice(PREFETCHERS),
         "allocator": rng.choice(["caching", "caching", "ideal"])}
    c["link"] = (rng.choice(["pcie3", "pcie4", "pcie5", "nvlink-c2c"]) if rng.random() < 0.3
                 else random_profile(rng, work / f"link{i}.json", f"l{i}"))
    c["chunk"] = rng.choice([4 * KIB, 64 * KIB, 300 * KIB, 1 * MIB, 2 * MIB, 2 * MIB, 3 * MIB, 16 * MIB, 128 * MIB])
    if rng.random() < 0.5:
        c["scale"] = None
        c["model_link"] = (rng.choice(["pcie3", "pcie4", "pcie5", "nvlink-c2c"]) if rng.random() < 0.7
                           else random_profile(rng, work / f"model{i}.json", f"m{i}"))
    else:
        c["scale"] = rng.choice([0.05, 0.1, 0.25, 0.5, 1.0, 2.0])
        c["model_link"] = None
    c["capacities"] = sorted(rng.sample(["95%", "90%", "80%", "70%", "60%", "50%"], rng.randint(1, 3)), reverse=True)
    c["ratio"] = rng.choice(["0", "0", "0", "1", "0.5"])
    c["repeat"] = rng.choice([1, 1, 1, 2, 3])
    c["steps"] = rng.choice([None, None, 1, 2])
    return c


def args_of(c):
    a = ["--capacity", ",".join(c["capacities"]), "--policy", c["policy"], "--prefetch", c["prefetch"],
         "--allocator", c["allocator"], "--link", c["link"], "--chunk", f"{c['chunk']}B",
         "--repeat", str(c["repeat"]), "--recorded-timing", "--no-store", "--cpu-buffer-ratio", c["ratio"]]
    if c["scale"] is None:
        a += ["--time-scale", "auto", "--model-link", c["model_link"]]
    else:
        a += ["--time-scale", str(c["scale"])]
    if c["steps"] is not None:
        a += ["--replay-steps", str(c["steps"])]
    return a


class Tally:
    def __init__(self, verbose):
        self.n = self.bad = 0
        self.verbose = verbose
        self.lines = []
        self.verdicts = {}

    def check(self, label, what, got, want, rel=1e-9, abs_tol=0.0):
        self.n += 1
        ok = (got is None and want is None) or (
            got is not None and want is not None and math.isclose(got, want, rel_tol=rel, abs_tol=abs_tol))
        if not ok:
            self.bad += 1
            self.lines.append(f"{label}: {what}: mhc {got!r}, reference {want!r}")
        return ok


def compare_run(mhc, c, label, t, keep=None):
    cmd = [mhc, "validate", str(c["trace"])] + args_of(c) + ["--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 1, 3):
        t.n += 1
        t.bad += 1
        t.lines.append(f"{label}: exit {p.returncode}: {p.stderr.strip()[:300]}")
        return None
    j = json.loads(p.stdout)
    if keep:
        keep.write_text(p.stdout)
    scale, plink = rv.prediction_link(c["link"], c["chunk"], c["scale"], c["model_link"])
    t.check(label, "time_scale", j["time_scale"], scale, rel=1e-12)
    jl = j["link"]
    for key, want in [("h2d_Bps", plink.h2d_bps), ("d2h_Bps", plink.d2h_bps), ("h2d_latency_s", plink.h2d_latency_s),
                      ("d2h_latency_s", plink.d2h_latency_s), ("copy_engines", plink.copy_engines),
                      ("duplex_factor", plink.duplex_factor)]:
        t.check(label, f"link {key}", jl[key], want, rel=0)
    run = dict(policy=c["policy"], prefetch=c["prefetch"], allocator=c["allocator"], ratio=c["ratio"])
    base = rv.Prediction(c["trace"], "unlimited", plink, **run)
    preds = [rv.Prediction(c["trace"], cap, plink, **run) for cap in c["capacities"]]
    win = rv.window_kernel([base] + preds, c["steps"])
    t.check(label, "window kernel", (j["window"]["kernel"] is None and -1) or j["window"]["kernel"],
            (win is None and -1) or win[0])
    rows = [(j["baseline"], base)] + list(zip(j["configurations"], preds))
    if len(j["configurations"]) != len(preds):
        t.check(label, "configurations", len(j["configurations"]), len(preds))
    spans = []
    for row, pred in rows:
        name = f"{label} [{row['name']}]"
        jp = row["predicted"]
        t.check(name, "oom", int(jp["oom"]), int(pred.oom))
        t.check(name, "peak_bytes", jp["peak_bytes"], pred.peak)
        t.check(name, "peak_reduction", jp["peak_reduction"],
                None if pred.oom else 1 - pred.peak / base.peak, abs_tol=1e-12)
        for key in ("swap_in_bytes", "swap_out_bytes", "stalls", "stall_ns"):
            t.check(name, key, jp[key], getattr(pred, key))
        if win is not None and win[0] in pred.kernel_times:
            span, bspan, loss = rv.window_figures(pred, *win)
            w = row["window"]
            t.check(name, "whole_run_makespan_ns", w["whole_run_makespan_ns"], pred.makespan)
            t.check(name, "whole_run_loss", w["whole_run_loss"], pred.loss, rel=1e-9, abs_tol=1e-12)
            t.check(name, "window predicted_start_ns", w["predicted_start_ns"], pred.kernel_times[win[0]][0])
            t.check(name, "window predicted_baseline_ns", w["predicted_baseline_ns"], bspan)
            t.check(name, "makespan_ns (window)", jp["makespan_ns"], span)
            t.check(name, "loss (window)", jp["loss"], loss, abs_tol=1e-12)
            spans.append(span)
        else:
            t.check(name, "makespan_ns", jp["makespan_ns"], pred.makespan)
            t.check(name, "loss", jp["loss"], pred.loss, abs_tol=1e-12)
            spans.append(pred.makespan)
    est = rv.estimate_seconds(spans[1:], spans[0], scale, c["repeat"])
    t.check(label, "estimated_replay_seconds", j["estimated_replay_seconds"], est, rel=1e-9)
    check_refusal(mhc, c, label, t, [row["name"] for row, _ in rows], spans, scale, est)
    # the verdicts, from the measured makespans the report gives
    base_ms = j["baseline"]["repeats"]["makespans_ns"]
    for row, pred in rows[1:]:
        name = f"{label} [{row['name']}]"
        ms = row["repeats"]["makespans_ns"]
        if row["status"] != "complete" or row["measured"]["oom"] or row["predicted"]["oom"] or not ms:
            continue
        loss = rv.median(ms) / rv.median(base_ms) - 1
        t.check(name, "measured loss", row["measured"]["loss"], loss, rel=1e-9, abs_tol=1e-12)
        err = 100 * (loss - row["predicted"]["loss"])
        t.check(name, "loss_error_pp", row["loss_error_pp"], err, rel=1e-9, abs_tol=1e-9)
        spread = rv.loss_spread_pp(ms, base_ms, loss) if len(ms) > 1 else None
        t.check(name, "spread_pp", row["repeats"]["spread_pp"], spread, rel=1e-9, abs_tol=1e-9)
        kind = rv.verdict_kind(err, spread, j["target_pp"], len(ms))
        got = row["verdict"].split(":")[0]
        t.verdicts[kind] = t.verdicts.get(kind, 0) + 1
        t.n += 1
        if got != kind:
            t.bad += 1
            t.lines.append(f"{name}: verdict: mhc {row['verdict']!r}, reference {kind!r}")


REFUSAL = re.compile(r"the replays would take at least .*? \((\d+) configurations, (\d+) replays? each"
                     r"(?: \(the baseline (\d+)\))?, at time scale x(\S+); the slowest, (.*), is predicted at (.*?)\), "
                     r"more than the")


def check_refusal(mhc, c, label, t, names, spans, scale, est):
    """Above --max-replay-minutes (here half the estimate) validate is refused before any replay,
    naming the configurations, replays each (the baseline 2N - 1), the scale and the slowest
    configuration by its predicted makespan over what is replayed."""
    cmd = [mhc, "validate", str(c["trace"])] + args_of(c) + ["--max-replay-minutes", f"{est / 2 / 60:.6g}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = REFUSAL.search(p.stderr)
    t.n += 1
    if p.returncode != 2 or not m:
        t.bad += 1
        t.lines.append(f"{label}: --max-replay-minutes: exit {p.returncode}: {p.stderr.strip()[:300]}")
        return
    slowest = max(range(len(spans)), key=lambda i: (spans[i], -i))
    want = (str(len(spans)), str(c["repeat"]), str(2 * c["repeat"] - 1) if c["repeat"] >= 2 else None, f"{scale:g}",
            "the baseline" if slowest == 0 else names[slowest], sweep.fmt_time(spans[slowest]))
    for what, got, ref in zip(("configurations", "replays", "baseline replays", "scale", "slowest", "slowest's time"),
                              m.groups(), want):
        t.n += 1
        if got != ref:
            t.bad += 1
            t.lines.append(f"{label}: refusal's {what}: mhc {got!r}, reference {ref!r}")


def main():
    argv = sys.argv[1:]
    opts = {a.split("=")[0]: (a.split("=", 1)[1] if "=" in a else True) for a in argv if a.startswith("--")}
    pos = [a for a in argv if not a.startswith("--")]
    mhc, work = pos[0], Path(pos[1])
    work.mkdir(parents=True, exist_ok=True)
    runs, seed = int(opts.get("--runs", 20)), int(opts.get("--seed", 1))
    t = Tally("--verbose" in opts)
    traces = generated(mhc, work)
    rng = random.Random(seed)
    for i in range(runs):
        c = random_config(rng, work, i, traces)
        if "--only" in opts and int(opts["--only"]) != i:
            continue
        label = f"run {i}"
        if "--only" in opts or t.verbose:
            print(f"run {i}: {mhc} validate {c['trace']} {' '.join(args_of(c))} --json")
        bad = t.bad
        compare_run(mhc, c, label, t, work / f"run{i}.json" if "--keep" in opts else None)
        if t.bad > bad and not t.verbose:
            t.lines.append(f"run {i}: {mhc} validate {c['trace']} {' '.join(args_of(c))} --json")
    for line in t.lines:
        print(line)
    print("verdicts judged: " + (", ".join(f"{k} {v}" for k, v in sorted(t.verdicts.items())) or "none"))
    print(f"{t.n} comparisons, {t.n - t.bad} agree, {t.bad} differ")
    return 1 if t.bad else 0


if __name__ == "__main__":
    sys.exit(main())
