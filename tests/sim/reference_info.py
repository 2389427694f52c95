"""An outside reading of what `mhc info TRACE --json` says of a trace's own rows (not of its runs),
written from the documents alone and sharing no code with trace/ or cli/:

* docs/trace-format.md, "Events at one instant" (the order in which `mhc info`'s peak replays the
  allocations and frees of one time) and the tables' columns;
* docs/simulator.md, "Inputs" (**Device**: the device `mhc info`'s `peak` line is that of: the GPU,
  number >= 0, with the largest live peak, ties the lowest number; the host never by default; the
  other devices' peaks are its `blocks` lines);
* docs/import.md, "Requested and block bytes" (`mhc info`'s peak counts `bytes`; it also prints the
  peak of requested bytes), "Steps" (`steps none marked`), the Kineto duration (first start to last
  end of the kernels, copies and memory events);
* docs/trace-format.md, "The summary (`mhc info`)", for what the pages above leave open.

Written first from the pages above alone (2026-12-07), it took six readings the pages allowed and
`mhc info` did not: an allocation alive at the end had no lifetime (mhc: to the trace's end), one
without a label had an empty one (mhc: `allocation ID`), the steps' durations came in start order
(mhc: row order), each device's requested peak was null unless one of its own allocations had
requested bytes (mhc: any allocation of the trace), and ties in both lists were broken by row and
by name, where mhc gave no stated order (fixed in mhc). The section "The summary" now says each.

summarise(path, top=10) returns a dict with the keys of `mhc info --json` it reads: counts,
has_accesses, t_begin_ns, t_end_ns, duration_ns, kernel_time_ns, peak {device, bytes, time_ns,
by_category}, memory [{device, peak_bytes, peak_time_ns, requested_peak_bytes}], steps,
step_durations_ns, layers, largest_allocations, top_kernels.

Standard library only.
"""
import sqlite3

CATEGORIES = ["param", "grad", "optimizer", "activation", "workspace", "comm", "other"]
TABLES = ["allocations", "kernels", "accesses", "copies", "markers"]


def memory_events(allocs):
    """The allocations and frees of one device as (time, +bytes | -bytes, alloc row) in the order of
    "Events at one instant": at a time t the frees of allocations made before t (by row), then the
    allocations made at t (by row), each one freed at t as well right after it is made."""
    at = {}
    for a in allocs:
        ta, tf = a[3], a[4]
        at.setdefault(ta, [[], []])[1].append(a)
        if tf is not None and tf > ta:
            at.setdefault(tf, [[], []])[0].append(a)
    out = []
    for t in sorted(at):
        frees, made = at[t]
        for a in sorted(frees, key=lambda r: r[0]):
            out.append((t, -1, a))
        for a in sorted(made, key=lambda r: r[0]):
            out.append((t, +1, a))
            if a[4] == a[3]:
                out.append((t, -1, a))
    return out


def device_peak(allocs, size_of):
    """(peak, time of the event that first reaches it, live bytes per category then); peak 0 and time
    None when nothing is ever live. The peak's time is that of the first event that reaches it (a
    later event that equals it does not move it); the categories are those live right after it."""
    live, best, when, cats = 0, 0, None, None
    by_cat = [0] * len(CATEGORIES)
    for t, sign, a in memory_events(allocs):
        b = size_of(a)
        live += sign * b
        by_cat[a[5]] += sign * b
        if sign > 0 and live > best:
            best, when, cats = live, t, list(by_cat)
    return best, when, cats


def summarise(path, top=10):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, text FROM strings"))
    counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    allocs = db.execute("SELECT id, device, bytes, t_alloc, t_free, category, label, requested_bytes "
                        "FROM allocations ORDER BY id").fetchall()
    kernels = db.execute("SELECT id, device, name, t_start, t_end FROM kernels ORDER BY id").fetchall()
    copies = db.execute("SELECT t_start, t_end FROM copies").fetchall()
    markers = db.execute("SELECT id, kind, t_start, t_end FROM markers ORDER BY id").fetchall()
    db.close()
    out = {"counts": counts, "has_accesses": counts["accesses"] > 0}

    # The trace's span: the first to the last time of its kernels, copies, allocations and frees
    # (markers left out); 0 and 0 without such rows.
    starts = [k[3] for k in kernels] + [c[0] for c in copies] + [a[3] for a in allocs]
    ends = [k[4] for k in kernels] + [c[1] for c in copies] + [a[3] for a in allocs] + \
        [a[4] for a in allocs if a[4] is not None]
    if starts:
        out["t_begin_ns"], out["t_end_ns"] = min(starts), max(ends)
    else:
        out["t_begin_ns"], out["t_end_ns"] = 0, 0
    out["duration_ns"] = out["t_end_ns"] - out["t_begin_ns"]
    # Kernel time: the sum of every kernel's duration, every device and stream.
    out["kernel_time_ns"] = sum(k[4] - k[3] for k in kernels)

    devices = sorted({a[1] for a in allocs})
    any_requested = any(a[7] is not None for a in allocs)
    memory = []
    for dev in devices:
        rows = [a for a in allocs if a[1] == dev]
        peak, when, cats = device_peak(rows, lambda a: a[2])
        entry = {"device": dev, "peak_bytes": peak, "peak_time_ns": when, "by_category": cats}
        # The requested peak counts each allocation's requested_bytes where given and its bytes
        # where not; null unless some allocation of the trace has one.
        if any_requested:
            entry["requested_peak_bytes"] = device_peak(rows, lambda a: a[2] if a[7] is None else a[7])[0]
        else:
            entry["requested_peak_bytes"] = None
        memory.append(entry)
    out["memory"] = memory
    gpus = [m for m in memory if m["device"] >= 0] or memory   # the host only when no GPU allocates
    if gpus:
        best = max(gpus, key=lambda m: (m["peak_bytes"], -m["device"]))
        out["peak"] = {"device": best["device"], "bytes": best["peak_bytes"], "time_ns": best["peak_time_ns"],
                       "by_category": dict(zip(CATEGORIES, best["by_category"] or [0] * len(CATEGORIES)))}
    else:
        out["peak"] = None

    # Steps are the step markers (kind 0), in row order; a step's duration is its marker's end less
    # its start. Layers are the layer markers (kind 1), counted.
    steps = [m for m in markers if m[1] == 0]
    out["steps"] = len(steps)
    out["step_durations_ns"] = [m[3] - m[2] for m in steps]
    out["layers"] = sum(1 for m in markers if m[1] == 1)

    # The largest allocations of every device, by bytes (ties: row order), lifetime t_free - t_alloc
    # (alive at the end: t_end_ns - t_alloc), label `allocation ID` where there is none.
    big = sorted(allocs, key=lambda a: (-a[2], a[0]))[:top]
    out["largest_allocations"] = [{"bytes": a[2], "category": CATEGORIES[a[5]],
                                   "label": strings.get(a[6], "") if a[6] else "",
                                   "lifetime_ns": (out["t_end_ns"] if a[4] is None else a[4]) - a[3]}
                                  for a in big]
    for entry, a in zip(out["largest_allocations"], big):
        entry["label"] = entry["label"] or f"allocation {a[0]}"
    # Kernels grouped by name over every device, by total duration (ties: name, byte order).
    groups = {}
    for k in kernels:
        g = groups.setdefault(strings.get(k[2], ""), [0, 0])
        g[0] += 1
        g[1] += k[4] - k[3]
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top]
    out["top_kernels"] = [{"name": n, "count": c, "total_ns": tot} for n, (c, tot) in ranked]
    return out
