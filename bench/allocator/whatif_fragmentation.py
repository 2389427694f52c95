#!/usr/bin/env python3
"""What-if: would expandable segments have saved this out-of-memory? (docs/simulator.md)

Writes a PyTorch-memory-snapshot pickle of a hand-built allocation sequence whose OOM is
fragmentation, recorded without expandable segments (allocator_settings as PyTorch >= 2.4 writes
them), imports it and simulates it at 40 MiB twice: with the recorded settings and with
--allocator-conf expandable_segments:True. The host buffer is a few bytes, so nothing can be
evicted: the run either fits or reports the OOM.

The sequence (times in us): x = 6 MiB and y = 6 MiB share one 20 MiB segment; x is freed, leaving
6 MiB free before y and 8 MiB after it; z = 12 MiB needs a segment of its own (32 MiB reserved);
w = 10 MiB fits no free block and a 10 MiB segment would pass 40 MiB: out of memory while only
24 MiB would be in use. With expandable segments z grows the free 8 MiB by one 20 MiB page
(40 MiB reserved) and w takes 10 of the 16 MiB left after z.

    bench/allocator/whatif_fragmentation.py [MHC]     (MHC default: build/cli/mhc)
"""
import os
import pickle
import subprocess
import sys
import tempfile

MiB = 1 << 20
mhc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "cli", "mhc")


def ev(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": float(t)}


X, Y, Z, W = 0x7F0000000000, 0x7F0000600000, 0x7F0001400000, 0x7F0002000000
trace = [
    ev("segment_alloc", X, 20 * MiB, 1), ev("alloc", X, 6 * MiB, 1),
    ev("alloc", Y, 6 * MiB, 2),
    ev("free_requested", X, 6 * MiB, 3), ev("free_completed", X, 6 * MiB, 3),
    ev("segment_alloc", Z, 12 * MiB, 4), ev("alloc", Z, 12 * MiB, 4),
    ev("alloc", W, 10 * MiB, 5),   # recorded with more memory than the 40 MiB simulated
    ev("free_requested", W, 10 * MiB, 6), ev("free_completed", W, 10 * MiB, 6),
    ev("free_requested", Y, 6 * MiB, 7), ev("free_completed", Y, 6 * MiB, 7),
    ev("free_requested", Z, 12 * MiB, 8), ev("free_completed", Z, 12 * MiB, 8),
]
snapshot = {
    "device_traces": [trace],
    # The end state: the three segments, held (the blocks inside are not needed here).
    "segments": [{"device": 0, "address": a, "total_size": n, "stream": 0, "is_expandable": False, "blocks": []}
                 for a, n in ((X, 20 * MiB), (Z, 12 * MiB), (W, 10 * MiB))],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                           "garbage_collection_threshold": 0.0, "expandable_segments": False,
                           "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}},
}
# The segment_alloc of W's 10 MiB segment: recorded where the GPU had room.
trace.insert(7, ev("segment_alloc", W, 10 * MiB, 5))

with tempfile.TemporaryDirectory() as d:
    pk, db = os.path.join(d, "frag.pickle"), os.path.join(d, "frag.db")
    with open(pk, "wb") as f:
        pickle.dump(snapshot, f)
    subprocess.run([mhc, "-q", "import", pk, "-o", db], check=True)
    for extra in ([], ["--allocator-conf", "expandable_segments:True"]):
        cmd = [mhc, "-q", "simulate", db, "--allocator", "caching", "--capacity", "40MiB",
               "--cpu-buffer-ratio", "0.0000001", "--no-store"] + extra
        print("$ mhc " + " ".join(cmd[2:]).replace(db, "frag.db"))
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(r.stdout + r.stderr + "exit %d\n" % r.returncode)
    print("$ mhc allocator frag.db")
    r = subprocess.run([mhc, "allocator", db], capture_output=True, text=True)
    print((r.stdout + r.stderr).replace(db, "frag.db"))
