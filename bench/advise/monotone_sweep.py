#!/usr/bin/env python3
"""Sweeps `mhc advise --capacity` over a capture in 1% steps of its reserved peak and reports where
the first answer's time at the capacity grows with the capacity (docs/advise.md "Search": an answer
that runs at a capacity runs at every larger one, so a larger capacity never needs a slower one).

    MHC_EXE=build/cli/mhc python3 bench/advise/monotone_sweep.py T.db [T2.db ...] [--from 40 --to 102]

Prints one line per capture (capacities tried, answered, violations) and each violation: the
capacity, the first answer there and the faster one found at a smaller capacity. Exit status 1
when any capture has one.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MHC = os.environ.get("MHC_EXE", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "cli", "mhc"))


def advise(path, capacity):
    out = subprocess.run([MHC, "advise", path, "--capacity", f"{capacity}B", "--json", "--top", "1"],
                         capture_output=True, text=True)
    if out.returncode != 0 and "nothing fits" in out.stderr:
        return None
    if out.returncode != 0:
        sys.exit(f"{path}: mhc advise --capacity {capacity}: exit {out.returncode}: {out.stderr.strip()}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        return None


def sweep(path, lo, hi):
    base = advise(path, 1 << 50)
    reserved = base["baseline"]["reserved_bytes"]
    least, least_at, answered, bad = None, None, 0, []
    for pct in range(lo, hi + 1):
        capacity = reserved * pct // 100
        got = advise(path, capacity)
        rows = [r for r in (got or {}).get("rows", []) if r.get("fits")]
        if not rows:
            if least is not None:
                bad.append((pct, capacity, "nothing", None, least_at, least))
            continue
        answered += 1
        row = rows[0]
        time = row["step_time_ns"] + row.get("steady_retry_cost_ns", 0)
        if least is not None and time > least:
            bad.append((pct, capacity, row["description"], time, least_at, least))
        if least is None or time < least:
            least, least_at = time, pct
    return hi - lo + 1, answered, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--from", dest="lo", type=int, default=40, help="first capacity, %% of the reserved peak")
    ap.add_argument("--to", dest="hi", type=int, default=102, help="last capacity, %% of the reserved peak")
    args = ap.parse_args()
    failed = False
    for path in args.traces:
        tried, answered, bad = sweep(path, args.lo, args.hi)
        print(f"{path}: {tried} capacities, {answered} answered, {len(bad)} slower than a smaller capacity's")
        for pct, capacity, desc, time, at, least in bad:
            shown = "nothing" if time is None else f"{desc}: {time} ns"
            print(f"  {pct}% ({capacity} B): {shown}; at {at}%: {least} ns")
        failed = failed or bool(bad)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
