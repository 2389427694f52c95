#!/usr/bin/env python3
"""Runs two versions of tests/sim/reference_caching.py side by side on generated request streams
and stops at the first difference in what either shows: each allocate's answer, the reserved
bytes, every live allocation's block bytes, the largest free block, and every segment's blocks
(offset, size, free, mapped, cached_at), after every request. Then times both on the same streams.
  bench/ci/reference_caching_same.py OLD.py NEW.py [STREAMS] [SEED]
e.g. git show HEAD~1:tests/sim/reference_caching.py >/tmp/old.py
     bench/ci/reference_caching_same.py /tmp/old.py tests/sim/reference_caching.py 400
Exit 0 when every stream agrees at every step, 1 at the first difference (printed)."""
import importlib.util
import random
import sys
import time

MIB = 1 << 20
CONFS = ["", "expandable_segments:True", "max_split_size_mb:64", "max_split_size_mb:24",
         "max_split_size_mb:40,max_non_split_rounding_mb:8", "roundup_power2_divisions:4",
         "roundup_power2_divisions:[256:1,512:2,>:8]", "garbage_collection_threshold:0.6",
         "garbage_collection_threshold:0.8,max_split_size_mb:32",
         "expandable_segments:True,roundup_power2_divisions:8",
         "expandable_segments:True,garbage_collection_threshold:0.7"]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sizes(rng):
    kind = rng.random()
    if kind < 0.4:
        return rng.randint(1, MIB)                       # small pool
    if kind < 0.8:
        return rng.randint(MIB + 1, 12 * MIB)            # large, under and over 10 MiB
    return rng.choice([rng.randint(12 * MIB, 160 * MIB), rng.choice([2, 4, 8, 32, 64]) * MIB])


def stream(seed, n):
    """(conf, capacity, [(op, allocation, bytes, stream)])"""
    rng = random.Random(seed)
    conf = CONFS[seed % len(CONFS)]
    capacity = rng.choice([1 << 62, rng.randint(64, 2048) * MIB])
    live, ops, nxt = [], [], 0
    for _ in range(n):
        if live and rng.random() < 0.45:
            a = live.pop(rng.randrange(len(live)))
            ops.append(("free", a, 0, 0))
        else:
            ops.append(("alloc", nxt, sizes(rng), rng.choice([0, 0, 0, 7])))
            live.append(nxt)
            nxt += 1
    return conf, capacity, ops


def state(ca, live):
    segs = tuple((s.id, s.stream, s.small, s.size, s.expandable,
                  tuple((b.offset, b.size, b.free, b.mapped, b.cached_at) for b in s.blocks))
                 for s in ca.segments)
    return (ca.reserved, ca.large_searches, ca.next_id, ca.largest_free_block(), segs,
            tuple(ca.block_bytes(a) for a in sorted(live)))


def run(mod, conf, capacity, ops, check):
    ca = mod.CachingAllocator(capacity, conf)
    live, out = set(), []
    for op, a, nbytes, st in ops:
        if op == "alloc":
            ok = ca.allocate(a, nbytes, st)
            if ok:
                live.add(a)
            out.append(ok)
        elif a in live:
            ca.free(a)
            live.discard(a)
        if check:
            out.append(state(ca, live))
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    old, new = load(sys.argv[1], "caching_old"), load(sys.argv[2], "caching_new")
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    seed0 = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    steps = 0
    for seed in range(seed0, seed0 + count):
        conf, capacity, ops = stream(seed, 300 + seed % 5 * 150)
        a, b = run(old, conf, capacity, ops, True), run(new, conf, capacity, ops, True)
        if a != b:
            k = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y) if len(a) == len(b) else min(len(a), len(b))
            print(f"stream {seed} ({conf!r}, capacity {capacity}): differs at output {k}")
            return 1
        steps += len(ops)
    print(f"{count} streams, {steps} requests: identical after every request ({len(CONFS)} settings)")
    # The time of the requests alone, long streams, no state compared.
    for label, mod in (("old", old), ("new", new)):
        t = time.process_time()
        for seed in range(seed0, seed0 + 10):
            conf, capacity, ops = stream(seed, 6000)
            run(mod, conf, capacity, ops, False)
        print(f"{label}: {time.process_time() - t:.2f} s of CPU for 10 streams of 6,000 requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
