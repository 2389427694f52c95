#!/usr/bin/env python3
"""Compare `mhc check` with an outside reading of docs/trace-format.md (reference_check.py) on
random trace files with random defects: the problems listed, as (table, row, rule), and the exit
status (0 when clean, 2 when not). Also the content digest (v2) `mhc generate` writes, recomputed
by the reading, on a few small generated traces.

Usage: reference_check_compare.py MHC OUTDIR [--runs=N] [--seed=S] [--verbose]
"""

import collections
import os
import re
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_check as ref  # noqa: E402

LINE = re.compile(r"^(?P<file>.*?): (?:(?P<table>[a-z_]+) row (?P<row>-?\d+)|meta (?P<key>\S+)|(?P<t2>[a-z_]+)): .*\[(?P<rule>[a-z0-9-]+)\]$")


# A stored run its readers refuse is one line, the reader's own refusal, which names the run:
# `T.db: run_events row 4 (run 2): ...`, `T.db: run_metrics of run 1: ...`, `T.db: runs row 2: kind ...`.
RUN_LINE = re.compile(r"^.*?: (?:(?:run_events|run_kernels|run_memory) row \d+ \(run (?P<a>\d+)\)|run_metrics of run (?P<b>\d+)"
                      r"|runs row (?P<c>\d+): (?:kind|status) ).*\[(?:range|invalid-code|type)\]$")


def parse(stdout):
    problems, other = [], []
    for line in stdout.splitlines():
        run = RUN_LINE.match(line)
        if run:
            problems.append(("run", int(run.group("a") or run.group("b") or run.group("c")), "run"))
            continue
        m = LINE.match(line)
        if not m:
            other.append(line)
            continue
        if m.group("key"):
            problems.append(("meta", m.group("key"), m.group("rule")))
        elif m.group("table"):
            problems.append((m.group("table"), int(m.group("row")), m.group("rule")))
        else:
            problems.append((m.group("t2"), None, m.group("rule")))
    return problems, other


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    mhc, outdir = args[0], args[1]
    runs, seed = int(opts.get("runs", 100)), int(opts.get("seed", 1))
    verbose = "verbose" in opts
    os.makedirs(outdir, exist_ok=True)
    schema = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "trace", "schema.sql")).read()
    agree = 0
    rules_seen = collections.Counter()
    diffs = collections.Counter()
    failed = []
    for i in range(runs):
        path = os.path.join(outdir, "t%d.db" % i)
        if os.path.exists(path):
            os.remove(path)
        want = ref.random_trace(seed * 100003 + i, path, schema)
        p = subprocess.run([mhc, "check", "--max", "100000", path], capture_output=True, text=True)
        got, other = parse(p.stdout)
        rc_want = 2 if want else 0
        # a clean file says so ("T.db: ok: the rules ... pass"), and nothing else
        if not want and len(other) == 1 and other[0].startswith("%s: ok: " % path):
            other = []
        cw, cg = collections.Counter(want), collections.Counter(got)
        for w in want:
            rules_seen[w[2]] += 1
        if cw == cg and p.returncode == rc_want and not other:
            agree += 1
            continue
        failed.append(path)
        for k in (cw - cg):
            diffs[("missing from mhc", k[0], k[2])] += 1
        for k in (cg - cw):
            diffs[("extra in mhc", k[0], k[2])] += 1
        if p.returncode != rc_want:
            diffs[("exit status", p.returncode, rc_want)] += 1
        if verbose:
            print("--", path, "rc", p.returncode, "want", rc_want)
            print("   missing:", sorted(cw - cg, key=str))
            print("   extra:  ", sorted(cg - cw, key=str))
            for o in other:
                print("   other:", o)
    # the digest of generated traces, recomputed
    digests_ok = 0
    n_gen = 3
    for j in range(n_gen):
        path = os.path.join(outdir, "g%d.db" % j)
        subprocess.run([mhc, "generate", "--layers", "1", "--steps", str(1 + j), "--hidden", "64", "--heads", "2",
                        "--ffn", "128", "--seq", "16", "--vocab", "100", "--seed", str(seed + j), "-o", path, "--force"],
                       check=True, capture_output=True)
        con = sqlite3.connect(path)
        stored = con.execute("SELECT value FROM meta WHERE key='content_digest'").fetchone()[0]
        if stored == ref.digest_v2(con):
            digests_ok += 1
        else:
            diffs[("generate's digest", stored, ref.digest_v2(con))] += 1
        con.close()
    print("mhc check vs the outside reading: %d of %d random traces agree (problems expected by rule: %s)"
          % (agree, runs, ", ".join("%s %d" % kv for kv in sorted(rules_seen.items()))))
    print("content digest v2 of generated traces: %d of %d recomputed to the stored value" % (digests_ok, n_gen))
    for k, n in sorted(diffs.items(), key=str):
        print("  disagreement: %s: %d" % (" / ".join(map(str, k)), n))
    if failed:
        print("first traces that disagree:", " ".join(failed[:5]))
    return 0 if agree == runs and digests_ok == n_gen else 1


if __name__ == "__main__":
    sys.exit(main())
