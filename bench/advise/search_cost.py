#!/usr/bin/env python3
"""The search's cost and answers under two builds of mhc, in one run (docs/results.md).

For each TRACE.db and each capacity (a fraction of the trace's captured reserved peak, as
docs/results.md's tables give them), runs `mhc advise TRACE --capacity C --json --top N` with the
old and the new binary, one after the other, and prints per case: the first answer of each,
its loss, evaluations, the child's CPU seconds (user + system) and new/old; then whether the
whole JSON (the search's own counters and seconds left out) is the same, and the sums of CPU
seconds and their ratio. Exit status 1 when some case's answers differ (a change meant to cut the
cost only must keep them), 2 on bad usage.

  search_cost.py OLD_MHC NEW_MHC --capacities 0.68,0.35 [--top 3] [--counters] TRACE.db...

--counters also compares the search's counters (evaluations, DP runs, rounds): for a change that
must not change how the search goes (a file split).
"""
import argparse
import json
import os
import subprocess
import sys


def reserved_peak(mhc, trace):
    """The captured step's reserved peak (the baseline's, without a limit)."""
    out = subprocess.run([mhc, "advise", trace, "--capacity", "1TiB", "--json", "--top", "1"],
                         capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)["baseline"]["reserved_bytes"])


def timed(mhc, trace, capacity, top):
    """The JSON of one search and the CPU seconds (user + system) its process used."""
    before = os.times()
    proc = subprocess.run([mhc, "advise", trace, "--capacity", f"{capacity}B", "--json", "--top", str(top)],
                          capture_output=True, text=True)
    after = os.times()
    if proc.returncode != 0 and "nothing fits" not in proc.stderr:
        sys.exit(f"{trace}: {mhc} exited {proc.returncode}: {proc.stderr.strip()}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return (json.loads(proc.stdout) if proc.stdout.strip() else {"error": proc.stderr.strip()}), cpu


def first(got):
    rows = got.get("rows") or []
    if not rows:
        return got.get("error", "no rows").split(": ", 1)[-1], None
    return rows[0]["description"], rows[0]["loss"]


def comparable(got, counters):
    got = json.loads(json.dumps(got))
    search = got.get("search", {})
    search.pop("seconds", None)
    if not counters:
        for key in ("evaluations", "dp_runs", "max_states", "refine_rounds", "pair_rounds"):
            search.pop(key, None)
    return got


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--capacities", required=True, help="fractions of the reserved peak, comma-separated")
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--counters", action="store_true")
    args = parser.parse_args()
    try:
        fractions = [float(f) for f in args.capacities.split(",")]
    except ValueError:
        print(f"--capacities: '{args.capacities}': fractions such as 0.68,0.35", file=sys.stderr)
        return 2
    differ = 0
    cpu_old = cpu_new = 0.0
    for trace in args.traces:
        peak = reserved_peak(args.old, trace)
        for fraction in fractions:
            capacity = int(fraction * peak)
            old, t_old = timed(args.old, trace, capacity, args.top)
            new, t_new = timed(args.new, trace, capacity, args.top)
            cpu_old += t_old
            cpu_new += t_new
            same = comparable(old, args.counters) == comparable(new, args.counters)
            differ += not same
            for name, got, cpu in (("old", old, t_old), ("new", new, t_new)):
                answer, loss = first(got)
                evals = got.get("search", {}).get("evaluations", "-")
                loss_text = f"{loss * 100:+.2f}%" if loss is not None else ""
                print(f"{os.path.basename(trace)} {fraction:.2f} ({capacity} B) {name}: {answer} {loss_text} "
                      f"| evaluations {evals} cpu {cpu:.2f} s")
            ratio = t_new / t_old if t_old > 0 else float("nan")
            print(f"  new/old cpu {ratio:.2f}; answers {'the same' if same else 'DIFFER'}")
    ratio = cpu_new / cpu_old if cpu_old > 0 else float("nan")
    print(f"total cpu old {cpu_old:.2f} s new {cpu_new:.2f} s new/old {ratio:.2f}; {differ} case(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
