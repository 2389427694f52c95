#!/usr/bin/env python3
"""The caching allocator's part of the search entry's second reading: the request streams that
reference_settings.reserved_peak gives the allocator during the search entry's configurations
(bench/ci/search_reading_dump.py's loop) on the traces given, replayed through two versions of
tests/sim/reference_caching.py, each 3 times, its least CPU seconds printed, and whether both give
every stream the same reserved peak.
  bench/ci/reference_caching_streams.py OLD.py NEW.py TRACE.db..."""
import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "sim"))

from reference_caching_same import load  # noqa: E402  (one module loader for both scripts)


def record(traces):
    import reference_settings as ref
    import search_reading_dump

    streams, orig = [], ref.reserved_peak

    def recording(rows, conf):
        by = dict(rows)
        streams.append((conf, [(i, d, by[i][3], by[i][5]) for _t, _k, i, d in ref.memory_events(rows)]))
        return orig(rows, conf)
    ref.reserved_peak = recording
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        search_reading_dump.main(["x", *traces])
    return streams


def replay(mod, streams):
    peaks = []
    for conf, events in streams:
        ca, peak = mod.CachingAllocator(mod.NO_LIMIT, conf), 0
        for i, d, nbytes, stream in events:
            if d > 0:
                ca.allocate(i, nbytes, stream)
                peak = max(peak, ca.reserved)
            else:
                ca.free(i)
        peaks.append(peak)
    return peaks


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    streams = record(argv[3:])
    print(f"{len(streams)} streams, {sum(len(e) for _, e in streams)} events, settings {sorted({c for c, _ in streams})}")
    mods = [(p, load(p, f"caching_{k}")) for k, p in enumerate(argv[1:3])]
    best, peaks = {}, {}
    for _ in range(3):
        for p, m in mods:
            t = time.process_time()
            peaks[p] = replay(m, streams)
            best[p] = min(best.get(p, 1e9), time.process_time() - t)
    for p, _ in mods:
        print(f"{best[p]:.2f} s of CPU (least of 3): {p}")
    same = peaks[argv[1]] == peaks[argv[2]]
    print("the same reserved peak for every stream" if same else "DIFFERENT reserved peaks")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
