#!/usr/bin/env python3
"""Compares a capture's last step with a real PyTorch memory snapshot of the same step recorded on
a GPU: live bytes when the recording began, the peak in the window, and which allocation sizes
one has that the other lacks (what fake tensors cannot see, or what the modelling adds).

    python3 bench/torch/compare_snapshot.py CAPTURE.db SNAPSHOT.pickle[.gz] [--sizes] [--step N]

The snapshot's figures come from its own fields only: an allocation's bytes are the `size` of its
`alloc` event (the requested size in PyTorch >= 2.1, what the capture stores too), and the blocks
alive when recording began are the end state's `active_allocated` blocks not allocated in the
window (at their `requested_size`) plus those freed in the window but never allocated in it (at
the `size` of their free event). Only the standard library and the pickle module.

--step N takes the snapshot's window to be its training step N (from 0), for a snapshot of several
steps whose external annotations mark the end of each step's `Optimizer.zero_grad` (what
torch.optim records; package/gpu/train_loop.py's snapshots, datasets/recorded/): the window runs
from the end of step N-1's zero_grad (the recording's start for step 0) to the end of step N's,
and its start is the bytes live then.
"""
import collections
import gzip
import pickle
import sqlite3
import sys


class _Loader(pickle.Unpickler):
    def find_class(self, module, name):  # a snapshot holds plain containers only
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a snapshot")


def _load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        return _Loader(f).load()


def snapshot_step(path, step, device=0):
    """The same figures for training step `step` of a snapshot of several (see --step)."""
    snap = _load(path)
    ends = sorted(a["time_us"] for a in snap.get("external_annotations", [])
                  if a.get("name", "").startswith("Optimizer.zero_grad") and a.get("stage") == "END")
    if step >= len(ends):
        raise ValueError(f"{path}: {len(ends)} steps marked by Optimizer.zero_grad, no step {step}")
    t0 = ends[step - 1] if step > 0 else None
    live = start = peak = 0
    sizes = []
    for e in snap["device_traces"][device]:
        if e["time_us"] > ends[step]:
            break
        inside = t0 is None or e["time_us"] > t0
        if e["action"] == "alloc":
            live += e["size"]
            if inside:
                sizes.append(e["size"])
        elif e["action"] == "free_completed":
            live -= e["size"]
        if not inside:
            start = live
        else:
            peak = max(peak, live)
    return start, max(peak, start), sizes


def snapshot_window(path, device=0):
    """(bytes alive at the start, peak of live bytes, [sizes allocated in the window])."""
    snap = _load(path)
    events = snap["device_traces"][device]
    allocated = set()
    start = 0
    for e in events:
        if e["action"] == "alloc":
            allocated.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in allocated:
            start += e["size"]  # alive before the window, freed in it
    freed_in_window = {e["addr"] for e in events if e["action"] == "free_completed"}
    for seg in snap["segments"]:
        if seg.get("device", 0) != device:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in allocated and b["address"] not in freed_in_window:
                start += b["requested_size"]
    live = peak = start
    sizes = []
    for e in events:
        if e["action"] == "alloc":
            live += e["size"]
            sizes.append(e["size"])
            peak = max(peak, live)
        elif e["action"] == "free_completed":
            live -= e["size"]
    return start, peak, sizes


def capture_window(path):
    """The same figures for a capture's last step (frees before allocations at one instant)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0, t1 = db.execute("SELECT t_start, t_end FROM markers WHERE kind = 0 ORDER BY idx DESC LIMIT 1").fetchone()
    rows = db.execute("SELECT bytes, t_alloc, t_free FROM allocations WHERE device = 0").fetchall()
    db.close()
    # Alive when the step begins: what the previous step freed at its very end is gone (the
    # recording began after a synchronize, when those Python objects had died).
    start = sum(b for b, ta, tf in rows if ta < t0 and (tf is None or tf > t0))
    events = []
    for b, ta, tf in rows:
        if t0 <= ta <= t1:
            events.append((ta, 1, b))
        if tf is not None and t0 < tf <= t1 or (tf == t0 and ta >= t0):
            events.append((tf, 0, -b))
    live = peak = start
    for _, _, d in sorted(events):
        live += d
        peak = max(peak, live)
    sizes = [b for b, ta, _ in rows if t0 <= ta <= t1]
    return start, peak, sizes


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    step = int(argv[argv.index("--step") + 1]) if "--step" in argv else None
    cap = capture_window(argv[0])
    snap = snapshot_window(argv[1]) if step is None else snapshot_step(argv[1], step)
    for name, (c, s) in (("live at the window's start", (cap[0], snap[0])), ("peak in the window", (cap[1], snap[1]))):
        share = f"({100 * (c - s) / s:+.4f}%)" if s else ""
        print(f"{name:28s} capture {c:>16,} B   snapshot {s:>16,} B   difference {c - s:>+14,} B {share}")
    print(f"{'allocations in the window':28s} capture {len(cap[2]):>16,}     snapshot {len(snap[2]):>16,}")
    if "--sizes" in argv:
        only_c = collections.Counter(cap[2]) - collections.Counter(snap[2])
        only_s = collections.Counter(snap[2]) - collections.Counter(cap[2])
        for label, d in (("only in the capture", only_c), ("only in the snapshot", only_s)):
            print(label)
            for size, n in sorted(d.items(), key=lambda kv: -kv[0] * kv[1]):
                print(f"  {n:6d} x {size:,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
