#!/usr/bin/env python3
"""Runs `mhc export TRACE --format perfetto -o F.json` beside reference_perfetto.py (an outside
reading of docs/import.md "Formats out" for a trace's own rows) on random traces
(reference_info_compare's: one or two GPUs, the host's memory, markers, allocations alive only at
one instant, edge shapes, times near the ends of the range) and generated ones, and compares every
kernel's and copy's process and times, every marker's times, each device's `live bytes` samples and
`otherData`; and, for one trace in two, a run simulated under a random configuration (OOM runs too)
exported with `--run`: its kernels at their simulated times, its events and its memory counters
against the stored run.

Usage: reference_perfetto_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose]
Exit 0 when every trace agrees, 1 otherwise (each difference printed)."""
import json
from decimal import Decimal
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference_info_compare as info_compare  # noqa: E402
import reference_outside_compare as outside  # noqa: E402
import reference_perfetto as ref  # noqa: E402

COPY_KINDS = ["H2D", "D2H", "D2D", "P2P", "memset", "H2H"]


def ns(us):
    """A time of the file back in ns: read as the decimal it is written as (a double holds 2^61 ns
    in microseconds only to a quarter of a microsecond)."""
    value = us * 1000
    if value != int(value):
        raise ValueError(f"{us} us is no whole number of ns")
    return int(value)


def read(path):
    """The file's events in the reading's shape (times back in ns, rounded)."""
    doc = json.loads(Path(path).read_text(), parse_float=Decimal)
    got = {"meta": doc.get("otherData", {}), "kernels": {}, "copies": {}, "markers": {}, "counters": {},
           "run": {"kernels": {}, "events": [], "device": [], "host": [], "event_pids": set()}}
    for e in doc["traceEvents"]:
        ph, cat, args = e.get("ph"), e.get("cat"), e.get("args", {})
        if ph == "X" and cat == "kernel":
            got["kernels"][args["id"]] = (e["pid"], e["tid"], ns(e["ts"]), ns(e["dur"]), e["name"])
        elif ph == "X" and cat == "copy":
            got["copies"][args["id"]] = (e["pid"], e["name"].split(" ")[0], ns(e["ts"]), ns(e["dur"]),
                                         args.get("bytes"))
        elif ph == "X" and cat == "marker":
            got["markers"].setdefault(e["name"], []).append((e["tid"], ns(e["ts"]), ns(e["dur"])))
        elif ph == "C" and e["name"] == "live bytes":
            got["counters"].setdefault(e["pid"], []).append((ns(e["ts"]), args["bytes"]))
        elif ph == "X" and cat == "simulated":
            got["run"]["kernels"][args["kernel"]] = (e["pid"], ns(e["ts"]), ns(e["dur"]), e["name"])
        elif ph == "X" and cat == "run-event":
            got["run"]["events"].append((e["tid"], ns(e["ts"]), ns(e["dur"]), args["allocation"], args["kernel"],
                                         args["bytes"]))
            got["run"]["event_pids"].add(e["pid"])
        elif ph == "C" and e["name"] in ("simulated device bytes", "simulated host bytes"):
            got["run"]["device" if "device" in e["name"] else "host"].append((ns(e["ts"]), args["bytes"]))
            got["run"]["event_pids"].add(e["pid"])
    return got


def simulate(mhc, path, rng):
    """A run of the trace to export (an OOM run too), or None where simulate refuses the trace."""
    args = [mhc, "simulate", str(path), "--capacity", f"{rng.choice([40, 60, 75, 90, 100])}%", "--allocator",
            rng.choice(["ideal", "caching"]), "--policy", rng.choice(["lru", "belady", "dtr"]), "--prefetch",
            rng.choice(["none", "lookahead:4"]), "--memory-samples", str(rng.choice([1, 7, 4096]))]
    p = subprocess.run(args, capture_output=True, text=True)
    return 1 if p.returncode in (0, 3) else None


def compare_run(got, path, run):
    want, have = ref.expected_run(path, run), got["run"]
    diffs = []
    for key in ("kernels", "device", "host"):
        if have[key] != want[key]:
            diffs.append(f"run {key}: mhc {len(have[key])} entries, reading {len(want[key])}")
    if sorted(have["events"]) != want["events"]:
        diffs.append(f"run events: mhc {len(have['events'])}, reading {len(want['events'])}")
    if have["event_pids"] - {want["pid"]}:
        diffs.append(f"run events on processes {sorted(have['event_pids'])}, reading {want['pid']}")
    return diffs


def compare(mhc, path, work, run=None):
    out = work / (path.stem + ".json")
    p = subprocess.run([mhc, "export", str(path), "--format", "perfetto", "-o", str(out), "--force"] +
                       (["--run", str(run)] if run else []), capture_output=True, text=True)
    if p.returncode != 0:
        return [f"exit {p.returncode}: {p.stderr.strip()}"]
    got, want = read(out), ref.expected(path)
    diffs = []
    if got["meta"] != want["meta"]:
        diffs.append("otherData differs")
    kernels = {i: (k[0], k[1], k[2], k[3], k[4]) for i, k in want["kernels"].items()}
    if got["kernels"] != kernels:
        bad = [i for i in kernels if got["kernels"].get(i) != kernels[i]]
        diffs.append(f"kernels: {len(bad)} differ, first {bad[:1]}: mhc {got['kernels'].get(bad[0]) if bad else None} "
                     f"reading {kernels[bad[0]] if bad else None}")
    copies = {i: (c[0], COPY_KINDS[c[1]], c[2], c[3], c[4]) for i, c in want["copies"].items()}
    if got["copies"] != copies:
        bad = [i for i in copies if got["copies"].get(i) != copies[i]]
        diffs.append(f"copies: mhc {got['copies'].get(bad[0]) if bad else got['copies']} "
                     f"reading {copies[bad[0]] if bad else copies}")
    mine = sorted(want["markers"].values())
    theirs = sorted(m for ms in got["markers"].values() for m in ms)
    if mine != theirs:
        diffs.append(f"markers: mhc {theirs[:4]} reading {mine[:4]}")
    for pid in sorted(set(want["counters"]) | set(got["counters"])):
        a, b = got["counters"].get(pid, []), want["counters"].get(pid, [])
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs.append(f"live bytes of pid {pid}: {len(a)} samples, reading {len(b)}; first difference at "
                         f"{first}: mhc {a[first:first + 2]} reading {b[first:first + 2]}")
    return diffs + (compare_run(got, path, run) if run else [])


def main():
    mhc, work = sys.argv[1], Path(sys.argv[2])
    opts = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--") and "=" in a)
    runs, seed = int(opts.get("runs", 40)), int(opts.get("seed", 1))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    blank = outside.empty_trace(mhc, work)
    failed, tally, total, runs_done = 0, {}, 0, 0
    for i in range(runs):
        path = work / f"pf{i}.db"
        if i % 10 == 9:
            path = info_compare.generated(mhc, work, rng, i)
        else:
            outside.random_trace(path, blank, rng, edges=["far", "instant", "ties", "frees_first"]
                                 if rng.random() < 0.3 else None)
            info_compare.shake(path, rng)
        total += 1
        run = simulate(mhc, path, rng) if rng.random() < 0.5 else None
        runs_done += 1 if run else 0
        diffs = compare(mhc, path, work, run)
        for d in diffs:
            tally[d.split(":", 1)[0][:24]] = tally.get(d.split(":", 1)[0][:24], 0) + 1
        if diffs:
            failed += 1
            print(f"DIFF {i} (seed {seed}, {path}):")
            for d in diffs:
                print("  " + d)
    print(f"{total - failed} of {total} traces agree ({runs_done} exported with a run)" + (f"; differed (traces): {tally}" if tally else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
