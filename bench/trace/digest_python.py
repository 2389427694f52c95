"""What the v2 content digest costs mhc-torch's store (python/mhc_torch/digest.py): writes one
capture-shaped trace (ALLOCATIONS allocations, as many kernels with 4 accesses each and their
kernel_info rows: 7 x ALLOCATIONS rows) with store.write_trace, ROUNDS times with the digest and
without it (Digest.add_rows replaced by a no-op) in turn, and prints each side's CPU time (this
process: the store is one thread) as the median with the smallest and largest, and their ratio;
and the digest alone over the same rows.
Usage: PYTHONPATH=python python bench/trace/digest_python.py [ALLOCATIONS=50000] [ROUNDS=5]"""
import os
import statistics
import sys
import tempfile
import time

from mhc_torch import digest, store


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    allocations = [store.Allocation(id=i, bytes=256 * i, t_alloc=i, t_free=None if i % 4 == 0 else 10**7 + i,
                                    category=i % 7, label=f"tensor {i % 500}") for i in range(1, n + 1)]
    kernels = [store.Kernel(id=i, name=f"aten::op{i % 300}", t_start=20 * i, t_end=20 * i + 4, step=0,
                            accesses={1 + (i * 7 + j) % n: 1 + j % 3 for j in range(4)}, flops=i)
               for i in range(1, n + 1)]
    real = digest.Digest.add_rows
    times = {"with digest": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.db")
        for r in range(rounds):
            sides = ["with digest", "without"] if r % 2 == 0 else ["without", "with digest"]
            for side in sides:
                digest.Digest.add_rows = real if side == "with digest" else (lambda self, *a, **k: True)
                start = time.process_time()
                store.write_trace(out, allocations, kernels, [], {"source": "bench"})
                times[side].append(time.process_time() - start)
        digest.Digest.add_rows = real
        rows = sum(db_rows for db_rows in _counts(out))
        alone = []
        for _ in range(rounds):
            start = time.process_time()
            assert digest.of_file(out).startswith("v2:")
            alone.append(time.process_time() - start)
    print(f"store.write_trace, {rows} rows, {rounds} rounds (CPU s: median [smallest, largest])")
    for side, t in times.items():
        print(f"  {side:12s} {statistics.median(t):.3f} [{min(t):.3f}, {max(t):.3f}]")
    print(f"  ratio        {statistics.median(times['with digest']) / statistics.median(times['without']):.3f}")
    print(f"  digest.of_file (read back and sum): {statistics.median(alone):.3f} [{min(alone):.3f}, {max(alone):.3f}]")


def _counts(path):
    import sqlite3

    db = sqlite3.connect(path)
    try:
        for table in digest.TABLES:
            yield db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


if __name__ == "__main__":
    main()
