#!/usr/bin/env python3
"""The search's cost and answers under two builds of mhc or more, in one run (docs/results.md).

For each TRACE.db and each capacity (a fraction of the trace's captured reserved peak, as
docs/results.md's tables give them), runs `mhc advise TRACE --capacity C --json --top N` with the
old binary and each new one, one after the other, and prints per case: the first answer of each,
its loss, evaluations, the child's CPU seconds (user + system) and new/old; then whether the
whole JSON (the search's own counters and seconds left out) is the same as the old one's, and
per new binary the sums of CPU seconds and their ratio. Exit status 1 when some case's answers
differ (a change meant to cut the cost only must keep them), 2 on bad usage.

  search_cost.py OLD_MHC NEW_MHC[,NEWER_MHC...] --capacities 0.68,0.35 [--top 3] [--counters] TRACE.db...

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
    news = args.new.split(",")
    differ = [0] * len(news)
    cpu_old = 0.0
    cpu_new = [0.0] * len(news)
    for trace in args.traces:
        peak = reserved_peak(args.old, trace)
        for fraction in fractions:
            capacity = int(fraction * peak)
            old, t_old = timed(args.old, trace, capacity, args.top)
            cpu_old += t_old
            runs = [("old", old, t_old)]
            for i, mhc in enumerate(news):
                new, t_new = timed(mhc, trace, capacity, args.top)
                cpu_new[i] += t_new
                same = comparable(old, args.counters) == comparable(new, args.counters)
                differ[i] += not same
                name = "new" if len(news) == 1 else f"new{i + 1}"
                runs.append((name, new, t_new, same))
            for run in runs:
                answer, loss = first(run[1])
                evals = run[1].get("search", {}).get("evaluations", "-")
                loss_text = f"{loss * 100:+.2f}%" if loss is not None else ""
                extra = ""
                if len(run) > 3:
                    ratio = run[2] / t_old if t_old > 0 else float("nan")
                    extra = f"; new/old cpu {ratio:.2f}, answers {'the same' if run[3] else 'DIFFER'}"
                print(f"{os.path.basename(trace)} {fraction:.2f} ({capacity} B) {run[0]}: {answer} {loss_text} "
                      f"| evaluations {evals} cpu {run[2]:.2f} s{extra}")
    for i, mhc in enumerate(news):
        ratio = cpu_new[i] / cpu_old if cpu_old > 0 else float("nan")
        print(f"total cpu old {cpu_old:.2f} s, {mhc} {cpu_new[i]:.2f} s: new/old {ratio:.2f}; "
              f"{differ[i]} case(s) differ")
    return 1 if any(differ) else 0


if __name__ == "__main__":
    sys.exit(main())
