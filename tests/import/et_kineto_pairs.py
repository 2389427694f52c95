#!/usr/bin/env python3
"""The execution trace + Kineto pairs in tests/data/public, imported by mhc with --kineto, against a
join computed here with Python's json/gzip/sqlite3 and no mhc code.

Usage: et_kineto_pairs.py MHC PUBLIC_DIR WORK_DIR [FIXTURES_DIR]

For each pair in PAIRS (and, with FIXTURES_DIR, the CPU-only pairs recorded in tests/import/fixtures,
CPU_PAIRS, and the writer-version matrix in FIXTURES_DIR/writers: torch-V-et.json.gz with
torch-V-kineto.json.gz, one run of each torch recorded by make_writers.py):
  - same process: the ET's top-level pid must be among the Kineto CPU ops' pids, else mhc must
    refuse the pair (exit status 2, one line);
  - the join: where the Kineto trace writes Record function ids, the ET node of each nonzero
    id, with the same name, and nothing else; where it writes none, each ET thread's ops (id
    order, without the [pytorch|profiler|...] ranges) are compared with each Kineto thread's
    cpu_op and user_annotation events (Ev Idx order) at every start, and the thread is joined
    where exactly one start has the same names and the same autograd sequence numbers wherever
    both traces write one (seq_id, Sequence number);
  - each kernel's storages: its launch (the cuda_runtime event of its correlation) lies inside
    Kineto ops of its thread; the innermost joined one gives an ET node, and the node or its
    nearest ET ancestor (the ET's own parent links) with tensors gives the storages;
  - every GPU storage must then be in mhc's allocations (label "storage N", device) and no other:
    bytes = largest (offset + elements spanned) * itemsize over those nodes' uses (the ET's tensors:
    the span from shapes and strides where written, else numel; public_traces.et_tensors), alive
    from its first kernel's start to its last kernel's end (Kineto's times, to the ns);
  - every kernel mhc gave accesses was launched inside the Kineto ops the ET was joined to (the
    iteration the ET recorded, not another).
  - a CPU-only pair (no GPU kernel): each leaf op with tensors joined to a Kineto op is timed by
    that op's interval (a start inside the previous op of its Kineto thread moved to that op's
    end); every storage those ops use, on any device, must be in mhc's allocations and no other:
    bytes as above, alive from its first op's start to its last op's end; the storages of leaf
    ops not joined (a thread the profiler did not record) must be counted in meta
    et.storages_left_out; and each joined leaf op's step (the ProfilerStep#N node above it, else
    the Kineto step its op begins in) counted per step as mhc's.
Prints one line per pair with the figures; exits 1 on any mismatch.
"""
import bisect
import glob
import gzip
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from public_traces import (HOST, cpu_lanes, cpu_steps, decimal_of, et_allocations, et_side_tensors,  # noqa: E402
                           et_tensors, step_of, storage_of_label)

# (execution trace, Kineto trace of the same run), under PUBLIC_DIR.
PAIRS = [
    ("chakra/simple_add_et.json.gz", "kineto/simple_add_trace.json.gz"),
    ("chakra/param-resnet-et-1.0.1.json.gz", "kineto/param-resnet-kineto.json.gz"),
    ("chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz", "kineto/param-resnet-kineto.json.gz"),
    ("chakra/param-dlrm-rank0-et.json.gz", "kineto/param-dlrm-rank0-kineto.json.gz"),
    ("chakra/param-linear-et-1.0.1.json.gz", "kineto/param-linear-kineto.json.gz"),
]
# CPU-only pairs recorded with torch 2.15 (tests/import/fixtures/README.md), under FIXTURES_DIR.
CPU_PAIRS = [
    ("cpu_mlp_et.json.gz", "cpu_mlp_kineto.json.gz"),
    ("cpu_mlp_window_et.json.gz", "cpu_mlp_window_kineto.json.gz"),
    ("cpu_threads_et.json.gz", "cpu_threads_kineto.json.gz"),
    ("cpu_threads_all_et.json.gz", "cpu_threads_all_kineto.json.gz"),
]
failures = []


def fail(name, what):
    failures.append(f"{name}: {what}")
    print(f"  FAIL {what}")


def ns(v):
    return int(decimal_of(v) * 1000)


def load_et(path):
    """(pid, nodes by id in id order) with tid, seq, rf_id, parent and tensors per node."""
    with gzip.open(path) as f:
        et = json.load(f)
    nodes = {}
    for n in et["nodes"]:
        if isinstance(n.get("inputs"), dict):
            attrs = {a["name"]: a["value"] for a in n.get("attrs", [])}
            ins = et_side_tensors(n["inputs"])
            outs = et_side_tensors(n["outputs"])
            parent = n.get("ctrl_deps")
        else:
            attrs = n
            ins = et_tensors(n.get("inputs", []), n.get("input_types", []))
            outs = et_tensors(n.get("outputs", []), n.get("output_types", []))
            parent = n.get("parent")
        nodes[n["id"]] = {"name": n["name"], "tid": attrs.get("tid", 0), "seq": attrs.get("seq_id", -1),
                          "rf_id": attrs.get("rf_id", -1), "parent": parent, "ins": ins, "outs": outs,
                          "device": (outs or ins or [(0, HOST, 0)])[0][1]}
    allocations = et_allocations([(i, n["name"], n["parent"], n["ins"], n["outs"]) for i, n in sorted(nodes.items())])
    for i, n in nodes.items():   # each storage as (id, allocation number): ids come back with addresses
        n["tensors"] = allocations[i][0] + allocations[i][1]
    parents = {n["parent"] for n in nodes.values() if n["parent"] is not None and n["parent"] != -1}
    for i, n in nodes.items():
        # A leaf op with tensors, not a profiler range: what a CPU-only run times.
        n["leaf"] = i not in parents and bool(n["tensors"]) and not n["name"].startswith("[pytorch|")
    return et.get("pid"), dict(sorted(nodes.items()))


def load_kineto(path):
    with gzip.open(path) as f:
        events = json.load(f, parse_float=str)["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    threads = {}
    for e in ops:
        threads.setdefault(e["tid"], []).append(e)
    for t in threads.values():
        t.sort(key=ev_idx)
    return events, ops, threads


def ev_idx(e):
    """The profiler's own index of an event: `Ev Idx`, which PyTorch 1.13 wrote as `Profiler Event Index`."""
    a = e["args"]
    return a["Ev Idx"] if "Ev Idx" in a else a["Profiler Event Index"]


def join(nodes, ops, threads):
    """{ET node id: Kineto op (its dict)}"""
    joined = {}
    by_rf = {}
    for e in ops:
        rf = e["args"].get("Record function id", 0)
        if rf > 0:
            by_rf[rf] = None if rf in by_rf else e
    for i, n in nodes.items():
        e = by_rf.get(n["rf_id"]) if n["rf_id"] > 0 else None
        if e is not None and e["name"] == n["name"]:
            joined[i] = e
    if any("Record function id" in e["args"] for e in ops):
        return joined
    keyed = {nodes[i]["tid"] for i in joined}
    # PyTorch 1.13's ExecutionGraphObserver records no ProfilerStep#N: the profiler's step ranges
    # are then no op of the execution trace's, and an execution trace of two steps fits around them.
    if not any(n["name"].startswith("ProfilerStep#") for n in nodes.values()):
        threads = {t: [e for e in kops if not e["name"].startswith("ProfilerStep#")] for t, kops in threads.items()}
    et_threads = {}
    for i, n in nodes.items():
        if not n["name"].startswith("[pytorch|profiler|"):
            et_threads.setdefault(n["tid"], []).append(i)
    for tid, ids in et_threads.items():
        if tid in keyed:
            continue
        fits = []
        for kops in threads.values():
            for s in range(len(kops) - len(ids) + 1):
                window = kops[s:s + len(ids)]
                if all(nodes[i]["name"] == e["name"] and
                       (nodes[i]["seq"] < 0 or e["args"].get("Sequence number", -1) < 0 or
                        nodes[i]["seq"] == e["args"]["Sequence number"]) for i, e in zip(ids, window)):
                    fits.append(window)
        if len(fits) == 1:
            joined.update(zip(ids, fits[0]))
    return joined


def innermost_joined(joined_by_tid, tid, t):
    """The innermost joined Kineto op of thread `tid` whose [ts, ts + dur] holds t, or None: of
    the ops that start by t (by start, then Ev Idx), the last that has not ended."""
    starts, thread_ops = joined_by_tid.get(tid, ([], []))
    for e in reversed(thread_ops[:bisect.bisect_right(starts, t)]):
        if t <= ns(e["ts"]) + ns(e.get("dur", 0)):
            return e
    return None


def expected_storages(nodes, joined, events):
    """{(storage, device): [bytes, first ns, last ns]} on the GPU, and the joined ops' CPU span."""
    node_of = {id(e): i for i, e in joined.items()}
    joined_by_tid = {}
    for e in sorted(joined.values(), key=lambda e: (ns(e["ts"]), ev_idx(e))):
        joined_by_tid.setdefault(e["tid"], ([], []))
        joined_by_tid[e["tid"]][0].append(ns(e["ts"]))
        joined_by_tid[e["tid"]][1].append(e)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    storages = {}
    for k in events:
        if not (k.get("ph") == "X" and k.get("cat") == "kernel"):
            continue
        launch = launches.get(k["args"]["correlation"])
        if launch is None:
            continue
        op = innermost_joined(joined_by_tid, launch["tid"], ns(launch["ts"]))
        i = node_of.get(id(op)) if op is not None else None
        while i is not None and i in nodes and not nodes[i]["tensors"]:
            i = nodes[i]["parent"]
        if i is None or i not in nodes:
            continue
        t0, t1 = ns(k["ts"]), ns(k["ts"]) + ns(k.get("dur", 0))
        for storage, dev, size in nodes[i]["tensors"]:
            if dev == HOST:
                continue
            s = storages.setdefault((storage, dev), [0, t0, t1])
            s[0], s[1], s[2] = max(s[0], size), min(s[1], t0), max(s[2], t1)
    return storages, launches


def expected_cpu_storages(nodes, joined):
    """A CPU-only run: {(storage, device): [bytes, first ns, last ns]} of the joined leaf ops, timed
    by their Kineto ops (per device and Kineto thread, by start then ET id, a start before the
    previous op's end moved to it), and how many storages of leaf ops are left out."""
    units = sorted(((nodes[i]["device"], e["tid"], ns(e["ts"]), i, ns(e["ts"]) + ns(e.get("dur", 0)))
                    for i, e in joined.items() if nodes[i]["leaf"]))
    storages = {}
    prev = None
    for dev, tid, t0, i, t1 in units:
        if prev is not None and prev[:2] == (dev, tid) and t0 < prev[2]:
            t0, t1 = prev[2], max(t1, prev[2])
        prev = (dev, tid, t1)
        for storage, sdev, size in nodes[i]["tensors"]:
            s = storages.setdefault((storage, sdev), [0, t0, t1])
            s[0], s[1], s[2] = max(s[0], size), min(s[1], t0), max(s[2], t1)
    every = {(storage, sdev) for n in nodes.values() if n["leaf"] for storage, sdev, _ in n["tensors"]}
    return storages, len(every) - len(storages)


def check_cpu_pair(name, conn, nodes, joined):
    """A CPU-only pair: the joined leaf ops' storages, on any device, and those left out."""
    want, left_out = expected_cpu_storages(nodes, joined)
    strings = dict(conn.execute("SELECT id, text FROM strings"))
    got = {(storage_of_label(strings[label]), dev): [size, t0, t1] for label, dev, size, t0, t1 in
           conn.execute("SELECT label, device, bytes, t_alloc, t_free FROM allocations")}
    # mhc's times start at the Kineto trace's first op: the offset is the first timed op's.
    first_json = min((t0 for _, t0, _ in want.values()), default=0)
    first_db = conn.execute("SELECT MIN(t_alloc) FROM allocations").fetchone()[0] or 0
    got = {key: [size, t0 + first_json - first_db, t1 + first_json - first_db] for key, (size, t0, t1) in got.items()}
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    print(f"  CPU-only: storages placed here {len(want)}, mhc {len(got)}; left out here {left_out}, "
          f"mhc {meta.get('et.storages_left_out')}")
    if str(left_out) != meta.get("et.storages_left_out"):
        fail(name, f"mhc says {meta.get('et.storages_left_out')} storages left out, here {left_out}")
    if set(want) != set(got):
        fail(name, f"storages only here: {sorted(set(want) - set(got))[:5]}, only in mhc: {sorted(set(got) - set(want))[:5]}")
    differ = sorted(key for key in set(want) & set(got) if want[key] != got[key])
    if differ:
        fail(name, f"{len(differ)} storages differ in bytes or lifetime, e.g. {differ[0]}: here {want[differ[0]]}, "
                   f"mhc {got[differ[0]]}")
    else:
        print(f"  every storage's bytes, first use and last use equal here and in mhc "
              f"({sum(s[0] for s in want.values())} B in all)")


def check_cpu_steps(name, conn, nodes, joined, events):
    """A CPU-only pair: each joined leaf op's step, the ProfilerStep#N node above it in the execution
    trace, else the Kineto step its Kineto op begins in (public_traces.cpu_steps: the CPU
    ProfilerStep#N ranges, mended where the writer wrote them with their end only right), counted
    per step and compared with mhc's ops (kernels rows) per step."""
    steps = cpu_steps([e for e in events if e.get("ph") == "X" and "ts" in e], cpu_lanes(events)[1])

    def in_tree(i):
        for _ in range(256):
            n = nodes.get(i)
            if n is None:
                return -1
            if n["name"].startswith("ProfilerStep#") and n["name"][13:].isdigit():
                return int(n["name"][13:])
            if n["parent"] == i:
                return -1
            i = n["parent"]
        return -1
    want = {}
    for i, e in joined.items():
        if nodes[i]["leaf"]:
            step = in_tree(i)
            if step < 0:
                step = step_of(steps, decimal_of(e["ts"]))
            want[step] = want.get(step, 0) + 1
    got = dict(conn.execute("SELECT step, COUNT(*) FROM kernels GROUP BY step"))
    print(f"  ops per step: {dict(sorted(got.items()))} imported, {dict(sorted(want.items()))} here")
    if got != want:
        fail(name, f"ops per step {dict(sorted(got.items()))}, here {dict(sorted(want.items()))}")


def check_pair(exe, et_path, kineto_path, work):
    name = f"{os.path.basename(et_path)} + {os.path.basename(kineto_path)}"
    print(name)
    pid, nodes = load_et(et_path)
    events, ops, threads = load_kineto(kineto_path)
    db = os.path.join(work, "pair.db")
    p = subprocess.run([exe, "import", et_path, "--kineto", kineto_path, "-o", db, "--force"],
                       capture_output=True, text=True)
    if pid is not None and pid not in {e["pid"] for e in ops}:
        print(f"  ET of process {pid}, Kineto of {sorted({e['pid'] for e in ops})}: mhc exit status {p.returncode}")
        if p.returncode != 2 or p.stderr.count("\n") != 1:
            fail(name, f"a pair of two processes must be refused with one line and status 2: {p.returncode}, {p.stderr!r}")
        return
    if p.returncode != 0:
        fail(name, f"mhc import exited {p.returncode}: {p.stderr.strip()}")
        return
    joined = join(nodes, ops, threads)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    if not any(e.get("ph") == "X" and e.get("cat") == "kernel" for e in events):
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        print(f"  joined here {len(joined)} ops, mhc {meta.get('et.kineto_ops_matched')} ({meta.get('et.join_key')})")
        if str(len(joined)) != meta.get("et.kineto_ops_matched"):
            fail(name, f"mhc joined {meta.get('et.kineto_ops_matched')} ops, here {len(joined)}")
        check_cpu_pair(name, conn, nodes, joined)
        check_cpu_steps(name, conn, nodes, joined, events)
        return
    want, launches = expected_storages(nodes, joined, events)
    strings = dict(conn.execute("SELECT id, text FROM strings"))
    got = {(storage_of_label(strings[label]), dev): [size, t0, t1] for label, dev, size, t0, t1 in
           conn.execute("SELECT label, device, bytes, t_alloc, t_free FROM allocations WHERE device >= 0")}
    # mhc's times start at the trace's first event: the offset is the first kernel's.
    first_json = min(ns(e["ts"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    (first_db,) = conn.execute("SELECT MIN(t_start) FROM kernels").fetchone()
    shift = first_json - first_db
    got = {key: [size, t0 + shift, t1 + shift] for key, (size, t0, t1) in got.items()}
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    print(f"  joined here {len(joined)} ops, mhc {meta.get('et.kineto_ops_matched')} ({meta.get('et.join_key')}); "
          f"GPU storages placed here {len(want)}, mhc {len(got)}; left out by mhc {meta.get('et.storages_left_out')}")
    if str(len(joined)) != meta.get("et.kineto_ops_matched"):
        fail(name, f"mhc joined {meta.get('et.kineto_ops_matched')} ops, here {len(joined)}")
    if set(want) != set(got):
        fail(name, f"storages only here: {sorted(set(want) - set(got))[:5]}, only in mhc: {sorted(set(got) - set(want))[:5]}")
    differ = [key for key in set(want) & set(got) if want[key] != got[key]]
    if differ:
        fail(name, f"{len(differ)} storages differ in bytes or lifetime, e.g. {differ[0]}: here {want[differ[0]]}, "
                   f"mhc {got[differ[0]]}")
    else:
        print(f"  every GPU storage's bytes, first use and last use equal here and in mhc "
              f"({sum(s[0] for s in want.values())} B in all)")
    check_iteration(name, conn, joined, launches)


def check_iteration(name, conn, joined, launches):
    """Every kernel with accesses was launched inside the CPU span of the joined ops."""
    if not joined:
        return
    lo = min(ns(e["ts"]) for e in joined.values())
    hi = max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in joined.values())
    outside = [c for (c,) in conn.execute(
        "SELECT DISTINCT k.correlation FROM kernels k JOIN accesses a ON a.kernel = k.id")
        if not lo <= ns(launches[c]["ts"]) <= hi]
    if outside:
        fail(name, f"{len(outside)} kernels with accesses were launched outside the joined ops' span")
    else:
        print(f"  every kernel with accesses was launched inside the joined ops' span ({(hi - lo) // 1000} us)")


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    exe, public, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    pairs = [(os.path.join(public, et), os.path.join(public, kineto)) for et, kineto in PAIRS]
    if len(sys.argv) == 5:
        pairs += [(os.path.join(sys.argv[4], et), os.path.join(sys.argv[4], kineto)) for et, kineto in CPU_PAIRS]
        # The writer-version matrix (fixtures/writers/README.md): each torch's pair of one run.
        pairs += [(et, et[:-len("-et.json.gz")] + "-kineto.json.gz")
                  for et in sorted(glob.glob(os.path.join(sys.argv[4], "writers", "torch-*-et.json.gz")))]
    for et, kineto in pairs:
        check_pair(exe, et, kineto, work)
    print(f"{len(pairs)} pairs, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
