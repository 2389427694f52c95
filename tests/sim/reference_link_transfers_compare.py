#!/usr/bin/env python3
"""Runs `mhc simulate` on random traces under random links (presets with overrides, profile files
with `by_chunk` rows, one to four copy engines, duplex factors, latencies, contention shares, the
swap-operation cap) and checks, with reference_link_transfers.py (an outside reading of
docs/simulator.md "Link models" and rule 8), the link figures the run holds and every transfer it
stored, and the run's config as stored ("Outputs": `--json`'s config, the capacity in bytes, the
OOM's lines, warnings, the note of assumed accesses).

    python3 tests/sim/reference_link_transfers_compare.py MHC WORK [--runs=N] [--seed=S] [--edges=far,...] [-v]

Exit 1 when a run differs from the reading (each difference printed), 0 otherwise.
"""
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_link_transfers as ref  # noqa: E402
from reference_outside_compare import empty_trace, random_trace  # noqa: E402  (trace generator only)

EVENT_KINDS = {0: "swap_out", 1: "swap_in", 2: "evict_clean", 3: "drop", 4: "recompute", 5: "stall", 6: "oom",
               7: "prefetch"}


def random_profile(rng):
    """A profile file's text: each direction's figures, often `by_chunk` rows far from them (which a
    run must not take), shares present or left to their 0.5."""
    doc = {"name": rng.choice(["node-a", "h200 pcie5", "x"]),
           "h2d": {"bandwidth_Bps": rng.choice([1e6, 2.7e9, 12e9, 25.3e9, 55.1e9, 3e11]),
                   "latency_s": rng.choice([0.0, 1e-6, 6e-6, 1.12e-5, 3e-4])},
           "d2h": {"bandwidth_Bps": rng.choice([3.3e8, 2.5e9, 12e9, 24.9e9, 51.7e9]),
                   "latency_s": rng.choice([0.0, 2e-6, 1.06e-5, 5e-5])},
           "copy_engines": rng.choice([1, 1, 2, 3, 4]), "duplex_factor": rng.choice([0.1, 0.5, 0.81, 1.0]),
           "source": "random"}
    for key in ("nccl_share", "memcpy_share"):
        if rng.random() < 0.6:
            doc[key] = rng.choice([0.0, 0.25, 0.5, 0.9])
    if rng.random() < 0.6:
        rows, size = [], rng.choice([512, 4096])
        for _ in range(rng.randint(1, 6)):   # sizes rising, up to the bound 2^56
            row = {"bytes": size}
            for k in ("h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps"):
                if rng.random() < 0.8:
                    row[k] = rng.choice([0, 5e3, 1e8, 7e9, 9e14])
            if not any(row.get(k) for k in ("h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps")):
                row["h2d_Bps"] = 1e8   # a row that measures nothing is refused (docs/simulator.md)
            rows.append(row)
            if size == 1 << 56:
                break
            size = min(size * rng.choice([2, 16, 1024]), 1 << 56)
        doc["by_chunk"] = rows
    if rng.random() < 0.2:
        doc["measured_load_average"] = 3.5
        doc["notes"] = ["by hand"]
    return doc


def random_link(rng, work, slow=False):
    """(the reading's link, the command-line arguments)."""
    measured = sorted((HERE.parent.parent / "datasets" / "links").glob("*.json"))
    if rng.random() < 0.4:
        name = rng.choice(sorted(ref.PRESETS))
        link, args = ref.preset(name), ["--link", name]
    elif measured and rng.random() < 0.15:   # the profiles measured on real machines (by_chunk rows)
        f = rng.choice(measured)
        link, args = ref.profile(json.loads(f.read_text())), ["--link", str(f)]
    else:
        doc = random_profile(rng)
        f = work / "link.json"
        f.write_text(json.dumps(doc))
        link, args = ref.profile(doc), ["--link", str(f)]
    opts = {}
    choices = [("h2d", "--h2d-bandwidth", [(3e9, "3GB/s"), (7.5e8, "750MB/s"), (1e12, "1TB/s")]),
               ("d2h", "--d2h-bandwidth", [(2.5e10, "25GB/s"), (4e6, "4MB/s"), (1.5e9, "1.5GB/s")]),
               ("latency", "--latency", [(0.0, "0us"), (6e-6, "6us"), (2.5e-5, "25us"), (1e-3, "1ms")]),
               ("engines", "--copy-engines", [(0, "0"), (1, "1"), (2, "2"), (5, "5")]),
               ("duplex", "--duplex-factor", [(0, "0"), (0.3, "0.3"), (1.0, "1")]),
               ("nccl", "--nccl-share", [(-1, "-1"), (0.0, "0"), (0.6, "0.6")]),
               ("memcpy", "--memcpy-share", [(-1, "-1"), (0.0, "0"), (0.7, "0.7")]),
               ("max_ops", "--max-swap-ops-per-sec", [(3000.0, "3000"), (777.0, "777"), (1e5, "1e5"),
                                                     (0.5, "0.5")])]
    if slow:   # the page's too-slow example: 1 kB/s each way
        choices = [c for c in choices if c[0] not in ("h2d", "d2h")]
        opts.update(h2d=1e3, d2h=1e3)
        args += ["--h2d-bandwidth", "1kB/s", "--d2h-bandwidth", "1kB/s"]
    for key, flag, values in choices:
        if rng.random() < 0.25:
            value, text = rng.choice(values)
            opts[key] = value
            args += [flag, text]
    return ref.override(link, opts), args


def same(got, want):
    got = float(got)
    return got == want or abs(got - want) <= 1e-5 * abs(want)


def trace_rows(db, device):
    con = sqlite3.connect(str(db))
    nccl = [(a, b) for a, b, name in con.execute(
        "SELECT k.t_start, k.t_end, s.text FROM kernels k JOIN strings s ON s.id = k.name WHERE k.device = ?",
        (device,)) if "nccl" in name.lower() or "rccl" in name.lower()]
    copies = {"h2d": [], "d2h": []}
    for kind, a, b in con.execute("SELECT kind, t_start, t_end FROM copies WHERE device = ?", (device,)):
        if kind in (0, 1):
            copies["h2d" if kind == 0 else "d2h"].append((a, b))
    con.close()
    return nccl, copies


def stored_config(db):
    con = sqlite3.connect(str(db))
    run = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    rows = dict(con.execute("SELECT key, value FROM run_config WHERE run = ?", (run,)).fetchall())
    con.close()
    return rows


def config_as_stored(out):
    """The run's config as docs/simulator.md "Outputs" says it is stored: `--json`'s config, the
    resolved capacity in bytes (-1 unlimited), an OOM's two lines, the warnings one a line, the note
    of assumed accesses."""
    want = dict(out["config"])
    cap = out["metrics"]["capacity_bytes"]
    want["capacity_bytes"] = str(int(cap))
    if out.get("oom"):
        want["oom_where"], want["oom_why"] = out["oom"]["where"], out["oom"]["why"]
    if out.get("warnings"):
        want["warnings"] = "\n".join(out["warnings"])
    if out.get("assumed_accesses"):
        want["note"] = "trace has no accesses: assumed first-kernel write, last-kernel read"
    return want


def run_events(db):
    con = sqlite3.connect(str(db))
    run = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    rows = [(EVENT_KINDS.get(k, str(k)), s, e, a, kn, n) for k, s, e, a, kn, n in con.execute(
        "SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ? ORDER BY rowid",
        (run,))]
    con.close()
    return rows


EDGES = None   # --edges=a,b: the trace generator's edge shapes (far: times near +-2^62 ns)


def one_run(mhc, work, blank, rng, verbose):
    """Returns (problems, transfers checked, refused)."""
    trace = work / "t.db"
    random_trace(trace, blank, rng, edges=EDGES, skip=("instant", "one"))
    slow = rng.random() < 0.04
    if slow:   # the page's too-slow example: terabytes over 1 kB/s, past 2^62 ns
        con = sqlite3.connect(str(trace))
        con.execute("UPDATE allocations SET bytes = bytes * ? WHERE device >= 0", (1 << 20,))
        con.commit()
        con.close()
    link, args = random_link(rng, work, slow)
    policy = rng.choice(["lru", "largest", "belady", "dtr", "cost_aware"])
    prefetch = rng.choice(["none", "lookahead:2", "lookahead:8", "periodic", "capuchin", "forecast:2"])
    cap = rng.choice(["90%", "75%", "60%", "45%", "30%"])
    cmd = [mhc, "simulate", str(trace), "--capacity", cap, "--policy", policy, "--prefetch", prefetch,
           "--allocator", rng.choice(["ideal", "caching"]), "--json"] + args
    if rng.random() < 0.2:
        cmd += ["--cpu-buffer-ratio", rng.choice(["0.3", "1", "4"])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    label = " ".join(cmd[2:])
    if p.returncode == 2 and "too slow" in p.stderr:
        why = ref.too_slow(link, p.stderr)
        return ([f"{label}: {why}"] if why else []), 0, 1
    if p.returncode not in (0, 3):
        return [f"{label}: exit {p.returncode}: {p.stderr.strip()[:300]}"], 0, 0
    out = json.loads(p.stdout)
    problems = []
    for key, want in link.config().items():
        got = out["config"].get(key)
        ok = got == want if key == "link" else (got is not None and same(got, want))
        if not ok:
            problems.append(f"config {key}: mhc {got}, the reading {want}")
    stored, want = stored_config(trace), config_as_stored(out)
    for key in sorted(set(stored) | set(want)):
        if stored.get(key) != want.get(key):
            problems.append(f"stored config {key}: {str(stored.get(key))[:80]!r}, "
                            f"the reading {str(want.get(key))[:80]!r}")
    nccl, copies = trace_rows(trace, out["device"])
    found, count, open_ = ref.check_run(link, run_events(trace), nccl, copies)
    problems += found
    if verbose:
        print(f"{label}: {count} transfers ({open_} contention open), {len(problems)} problems")
    return [f"{label}: {x}" for x in problems[:5]], (count, open_), 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    verbose = "-v" in sys.argv
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(opts.get("seed", 1)))
    global EDGES
    EDGES = opts["edges"].split(",") if "edges" in opts else None
    runs = int(opts.get("runs", 50))
    blank = empty_trace(mhc, work)
    differ, transfers, open_, refused = 0, 0, 0, 0
    for i in range(runs):
        problems, count, slow = one_run(mhc, work, blank, rng, verbose)
        if count:
            transfers += count[0]
            open_ += count[1]
        refused += slow
        if problems:
            differ += 1
            print(f"run {i}:")
            for x in problems:
                print("  " + x)
    print(f"{runs} runs, {transfers} transfers checked ({open_} with their contention left open by the "
          f"stored events), {refused} refused as too slow alike: {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
