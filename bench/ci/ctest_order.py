#!/usr/bin/env python3
"""Replays a ctest -jN run's start order with the seconds each entry took, to see what its order
costs: ctest on a fresh clone (no timings of its own) starts the entries that others DEPEND on
first, then the rest by their COST property, highest first, ties in the order they were registered;
an entry waits for what it DEPENDS on and for the RESOURCE_LOCK another holds.

    bench/ci/ctest_order.py CTEST_LOG TESTS_JSON [--jobs=2] [--cost-from=SECONDS]

CTEST_LOG: the output of `ctest -j2` (the `N/M Test #I: NAME .... Passed  S sec` lines; .ci/run's
log does); TESTS_JSON: `ctest --test-dir build -N --show-only=json-v1` of the same tree (COST,
DEPENDS, RESOURCE_LOCK). Prints the sum of the entries' seconds, the bound no order beats (the
sum over the slots, or the longest entry with what it waits for), ctest's order replayed, the
last entries to start in it, and with --cost-from=S the replay with every entry of S seconds or
more given its measured seconds as COST (what a COST property on each would do).
"""
import json
import re
import sys

LINE = re.compile(r"^\s*\d+/\d+ Test +#(\d+): (.+?) \.+[^\n]*?(Passed|Failed|\*\*\*\w+|Not Run)?\s+([\d.]+) sec")


def read_log(path):
    """{name: (index, seconds)} from ctest's result lines."""
    got = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                got[m.group(2).strip()] = (int(m.group(1)), float(m.group(4)))
    return got


def read_props(path):
    """{name: (cost, depends, locks)} from ctest's JSON listing."""
    with open(path) as f:
        tests = json.load(f)["tests"]
    out = {}
    for t in tests:
        p = {q["name"]: q["value"] for q in t.get("properties", [])}
        out[t["name"]] = (float(p.get("COST", 0)), list(p.get("DEPENDS", [])), list(p.get("RESOURCE_LOCK", [])))
    return out


def order(entries):
    """ctest's list: dependencies first (deepest level first), each level by COST, then index."""
    levels, top = [], set(entries)
    current = set(entries)
    while current:
        deeper = {d for n in current for d in entries[n]["depends"] if d in entries}
        top -= deeper
        levels.append(deeper)
        current = deeper
    ranked, seen = [], set()
    for level in list(reversed(levels)) + [top]:
        for n in sorted(level, key=lambda n: (-entries[n]["cost"], entries[n]["index"])):
            if n not in seen:
                ranked.append(n)
                seen.add(n)
    return ranked


def replay(entries, jobs):
    """(makespan, [(start, name)]) of ctest's loop: whenever a slot is free, the first entry of
    the list that may start."""
    waiting = order(entries)
    running, done, locks, t, starts = [], set(), set(), 0.0, []
    while waiting or running:
        started = True
        while started and len(running) < jobs:
            started = False
            for n in waiting:
                e = entries[n]
                if all(d in done or d not in entries for d in e["depends"]) and not locks & set(e["locks"]):
                    waiting.remove(n)
                    running.append((t + e["seconds"], n))
                    locks |= set(e["locks"])
                    starts.append((t, n))
                    started = True
                    break
        if not running:
            raise SystemExit("ctest_order: entries wait for something that never ends: " + ", ".join(waiting[:3]))
        running.sort()
        t, n = running.pop(0)
        done.add(n)
        locks -= set(entries[n]["locks"])
    return t, starts


def main(argv):
    opts = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__)
        return 2
    log, props = read_log(args[0]), read_props(args[1])
    jobs = int(opts.get("jobs", "2"))
    entries = {}
    for name, (index, seconds) in log.items():
        cost, depends, locks = props.get(name, (0.0, [], []))
        entries[name] = {"index": index, "seconds": seconds, "cost": cost, "depends": depends, "locks": locks}
    total = sum(e["seconds"] for e in entries.values())
    longest = max(entries, key=lambda n: entries[n]["seconds"] + sum(
        entries[d]["seconds"] for d in entries[n]["depends"] if d in entries))
    chain = entries[longest]["seconds"] + sum(entries[d]["seconds"] for d in entries[longest]["depends"] if d in entries)
    print(f"{len(entries)} entries, {total:.0f} s in all; no order on {jobs} slots ends before "
          f"{max(total / jobs, chain):.0f} s")
    span, starts = replay(entries, jobs)
    print(f"ctest's order replayed: {span:.0f} s; the last to start:")
    for t, n in starts[-4:]:
        print(f"  {t:7.0f} s  {entries[n]['seconds']:6.0f} s  {n}")
    if "cost-from" in opts:
        floor = float(opts["cost-from"])
        for e in entries.values():
            if e["seconds"] >= floor:
                e["cost"] = e["seconds"]
        span, starts = replay(entries, jobs)
        print(f"with each entry of {floor:g} s or more given its seconds as COST: {span:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
