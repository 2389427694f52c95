#!/usr/bin/env python3
"""The step rules of the independent checkers (public_traces.py) against mhc on generated traces
whose steps only one rule tells: an execution trace of two optimizers of one class stepping the
same work in the same ids (their tensors take turns: a step per two ranges, docs/import.md "Steps")
and of one optimizer stepping the same tensors every time (a step per range). public_traces.py's
check_et_steps must find mhc's ops per step and step markers on both, and the step counts must be
those the rule gives (4 and 8), so a checker that lags the importer's rule fails here. Likewise a
snapshot whose optimizer ranges take turns in duration: snapshot_accounting.py's markers must be
mhc's where the ranges allocate the same bytes (one optimizer stepping unevenly: 8 steps) and where
they do not (two optimizers: 5). Each time meta steps_optimizers must begin as the checker's
reading says (public_traces.steps_optimizers_said: how many optimizers, and from what).

Usage: checker_steps.py MHC WORK_DIR
"""
import gzip
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_traces  # noqa: E402
import snapshot_accounting  # noqa: E402


def adam_et(one_model):
    """Eight iterations (schema 1.0.1): aten::mm on its activation (storage 10 + i), then an
    Optimizer.step#Adam.step node with one aten::_foreach_add_ under it on two parameters: storages
    100/101 every time (one_model), else 100/101 and 200/201 in turns (two models, two Adams)."""
    nodes = []

    def node(name, parent, tensors):
        nodes.append({"id": len(nodes) + 1, "name": name, "parent": parent, "rf_id": len(nodes) + 1, "tid": 1,
                      "seq_id": -1, "inputs": tensors, "input_types": ["Tensor(float)"] * len(tensors),
                      "outputs": [], "output_types": []})
        return len(nodes)
    for i in range(8):
        node("aten::mm", 0, [[1000 + i, 10 + i, 0, 16, 4, "cuda:0"]])
        model = 100 if one_model or i % 2 == 0 else 200
        step = node("Optimizer.step#Adam.step", 0, [])
        node("aten::_foreach_add_", step, [[model, model, 0, 16, 4, "cuda:0"], [model + 1, model + 1, 0, 16, 4, "cuda:0"]])
    return {"schema": "1.0.1", "pid": 1, "nodes": nodes}


def adam_snapshot(even_bytes, odd_bytes):
    """A snapshot of eight iterations at T = 1000 + 100 i us: a forward alloc at T+10 (freed at
    T+40), then Optimizer.step#Adam.step from T+50 to T+55 (even i) or T+80 (odd i: durations take
    turns), inside which a temporary of even_bytes or odd_bytes is allocated at T+51, freed at T+53."""
    events = [{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 100}]   # freed at 1900
    notes = []
    for i in range(8):
        at, size = 1000 + 100 * i, odd_bytes if i % 2 else even_bytes
        events += [{"action": "alloc", "addr": 1 << 20, "size": 1 << 20, "stream": 0, "time_us": at + 10},
                   {"action": "free_completed", "addr": 1 << 20, "size": 1 << 20, "stream": 0, "time_us": at + 40},
                   {"action": "alloc", "addr": 1 << 24, "size": size, "stream": 0, "time_us": at + 51},
                   {"action": "free_completed", "addr": 1 << 24, "size": size, "stream": 0, "time_us": at + 53}]
        notes += [{"name": "Optimizer.step#Adam.step", "stage": "START", "device": 0, "time_us": at + 50},
                  {"name": "Optimizer.step#Adam.step", "stage": "END", "device": 0, "time_us": at + (80 if i % 2 else 55)}]
    events.append({"action": "free_completed", "addr": 4096, "size": 512, "stream": 0, "time_us": 1900})
    return {"device_traces": [events], "segments": [], "external_annotations": notes}


def check_said(path, db):
    """meta steps_optimizers begins as the checker's reading of the last ranges it stepped says."""
    import sqlite3
    meta = dict(sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT key, value FROM meta"))
    want, got = public_traces.steps_optimizers_said(), meta.get("steps_optimizers", "")
    print(f"  steps_optimizers: {got[:90]!r}")
    if not got.startswith(want):
        public_traces.fail(os.path.basename(path), f"meta steps_optimizers {got!r}, the checker's reading {want!r}...")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for one_model, steps in ((False, 4), (True, 8)):
        path = os.path.join(work, f"adam-{'one' if one_model else 'two'}-models-et.json.gz")
        with gzip.open(path, "wt") as f:
            json.dump(adam_et(one_model), f)
        public_traces.check(exe, path, public_traces.et_source, work)
        db = os.path.join(work, os.path.basename(path) + ".db")
        check_said(path, db)
        info = json.loads(public_traces.mhc(exe, "info", db, "--json"))
        print(f"  steps: mhc {info.get('steps')}, the rule {steps}")
        if info.get("steps") != steps:
            public_traces.fail(os.path.basename(path), f"mhc gives {info.get('steps')} steps, the rule {steps}")
    # A snapshot's optimizer ranges: one Adam slow every other step allocating the same bytes (a step
    # each: 8) against two allocating differently (their durations take turns: 5 steps).
    snapshot_failures = 0
    for (even, odd), steps in (((4096, 4096), 8), ((4096, 12288), 5)):
        snap = adam_snapshot(even, odd)
        path = os.path.join(work, f"adam-{even}-{odd}.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        snapshot_failures += snapshot_accounting.check(exe, os.path.basename(path), snap, "exact", path, work,
                                                       simulate=False)
        check_said(path, os.path.join(work, "t.db"))
        info = json.loads(public_traces.mhc(exe, "info", os.path.join(work, "t.db"), "--json"))
        print(f"  steps: mhc {info.get('steps')}, the rule {steps}")
        if info.get("steps") != steps:
            public_traces.fail(os.path.basename(path), f"mhc gives {info.get('steps')} steps, the rule {steps}")
    if snapshot_failures:
        public_traces.fail("snapshots", f"{snapshot_failures} mismatches with snapshot_accounting.py's reading")
    print(f"{len(public_traces.failures)} failures")
    for f in public_traces.failures:
        print("FAIL", f)
    sys.exit(1 if public_traces.failures else 0)


if __name__ == "__main__":
    main()
