"""An outside reading of `mhc export TRACE --format perfetto` without `--run` (docs/import.md, "Formats
out"; docs/trace-format.md, "Events at one instant" and "The summary"), written from the documents
and sharing no code with trace/: which Chrome trace events the file holds for a trace's own rows.

* a process per device, pid 100 + device (the host, device -1, pid 99), with one thread per stream
  for the kernels (a complete event `X`, category `kernel`, per kernel) and one per copy kind (an
  `X` of category `copy` per copy);
* a `markers` process with the threads step, layer and range (an `X` of category `marker` per
  marker);
* a `live bytes` counter (`C`) per device with allocations, one sample per instant: at each time
  at which an allocation of the device is made or freed, the live bytes once every event of that
  time is done (the document first said one sample, not which value: this reading took the value
  after the instant, which every order of "Events at one instant" agrees on, and so does mhc; a
  block alive only at one instant is in no sample);
* the trace's meta in `otherData`.

Times: `ts` and `dur` in microseconds (the format's unit) from the trace's time 0, written exactly
(docs/import.md: three decimals, whole nanoseconds). This reading first took them from the trace's
first time (`t_begin_ns` of "The summary", so that a trace far from 0 stays exact in a double); the
document did not say, and now does.

With `--run ID` (docs/import.md; docs/trace-format.md "Run tables"): the run's kernels at their
simulated times (`run_kernels`; an `X` per kernel, pid 10000 + the kernel's device), its events
(`run_events`, an `X` each on one thread per kind, pid 20000, tid the kind's code: the document
first named no process for them, and now does) and the counters `simulated device bytes` and
`simulated host bytes` (pid 20000, a sample of each per `run_memory` row, at its time).
expected_run(path, run) returns {"kernels": {id: (pid, ts_ns, dur_ns, name)}, "events": [(kind,
ts_ns, dur_ns, allocation, kernel, bytes)], "device": [(ts_ns, bytes)], "host": [(ts_ns, bytes)]}.

expected(path) returns {"kernels": {id: (pid, stream, ts_ns, dur_ns, name)}, "copies": {id: (pid, kind,
ts_ns, dur_ns, bytes)}, "markers": {id: (kind, ts_ns, dur_ns)}, "counters": {pid: [(ts_ns, bytes)]},
"meta": the meta table} with times in ns from time 0; the driver turns the file's microseconds back
into ns (exactly: they are decimals) to compare. Standard library only."""
import sqlite3

import reference_info


def pid_of(device):
    return 99 if device < 0 else 100 + device


def expected(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, text FROM strings"))
    kernels = db.execute("SELECT id, device, stream, name, t_start, t_end FROM kernels").fetchall()
    copies = db.execute("SELECT id, device, kind, bytes, t_start, t_end FROM copies").fetchall()
    markers = db.execute("SELECT id, kind, t_start, t_end FROM markers").fetchall()
    allocs = db.execute("SELECT id, device, bytes, t_alloc, t_free, category FROM allocations ORDER BY id").fetchall()
    meta = dict(db.execute("SELECT key, value FROM meta"))
    db.close()
    origin = 0   # "from the trace's time 0"
    out = {"meta": meta}
    out["kernels"] = {k[0]: (pid_of(k[1]), k[2], k[4] - origin, k[5] - k[4], strings.get(k[3], ""))
                      for k in kernels}
    out["copies"] = {c[0]: (pid_of(c[1]), c[2], c[4] - origin, c[5] - c[4], c[3]) for c in copies}
    out["markers"] = {m[0]: (m[1], m[2] - origin, m[3] - m[2]) for m in markers}   # tid: the kind
    counters = {}
    for dev in sorted({a[1] for a in allocs}):
        rows = [a for a in allocs if a[1] == dev]
        live, samples = 0, {}
        for t, sign, a in reference_info.memory_events(rows):
            live += sign * a[2]
            samples[t] = live   # the last value of the instant
        counters[pid_of(dev)] = [(t - origin, b) for t, b in sorted(samples.items())]
    out["counters"] = counters
    return out


def expected_run(path, run):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, text FROM strings"))
    kernels = db.execute("SELECT k.id, k.device, k.name, r.t_start, r.t_end FROM run_kernels r "
                         "JOIN kernels k ON k.id = r.kernel WHERE r.run = ?", (run,)).fetchall()
    events = db.execute("SELECT kind, t_start, t_end, allocation, kernel, bytes FROM run_events WHERE run = ?",
                        (run,)).fetchall()
    memory = db.execute("SELECT t, device_bytes, host_bytes FROM run_memory WHERE run = ? ORDER BY t",
                        (run,)).fetchall()
    db.close()
    return {"kernels": {k[0]: (10000 + k[1], k[3], k[4] - k[3], strings.get(k[2], "")) for k in kernels},
            "events": sorted((e[0], e[1], e[2] - e[1], e[3], e[4], e[5]) for e in events),
            "device": [(m[0], m[1]) for m in memory], "host": [(m[0], m[2]) for m in memory], "pid": 20000}
