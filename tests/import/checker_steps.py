#!/usr/bin/env python3
"""The step rules of the independent checkers (public_traces.py) against mhc on generated traces
whose steps only one rule tells: an execution trace of two optimizers of one class stepping the
same work in the same ids (their tensors take turns: a step per two ranges, docs/import.md "Steps")
and of one optimizer stepping the same tensors every time (a step per range). public_traces.py's
check_et_steps must find mhc's ops per step and step markers on both, and the step counts must be
those the rule gives (4 and 8), so a checker that lags the importer's rule fails here.

Usage: checker_steps.py MHC WORK_DIR
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_traces  # noqa: E402


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
        info = json.loads(public_traces.mhc(exe, "info", db, "--json"))
        print(f"  steps: mhc {info.get('steps')}, the rule {steps}")
        if info.get("steps") != steps:
            public_traces.fail(os.path.basename(path), f"mhc gives {info.get('steps')} steps, the rule {steps}")
    print(f"{len(public_traces.failures)} failures")
    for f in public_traces.failures:
        print("FAIL", f)
    sys.exit(1 if public_traces.failures else 0)


if __name__ == "__main__":
    main()
