"""The Nsight Systems exports (nsys/*.sqlite) against their own tables: the source's timeline,
kernels, copies, NVTX ranges and unread tables, and the checks of mhc's import of them
(public_traces.py runs them)."""
import bisect
import sqlite3

from public_report import CAPTURE_BEGIN, CAPTURE_END, HOST, LAUNCH_PREFIXES, fail, imported_copies


def check_nsys_launches_without_kernel(name, path, meta):
    """An nsys export's CUPTI_ACTIVITY_KIND_RUNTIME launches (the names above, with nsys's _vNNNN
    suffix) that returned 0 and whose correlationId no kernel, memcpy, memset or graph row carries:
    counted in meta nsys.launches_without_kernel (captured, not recorded), absent where none."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    said = meta.get("nsys.launches_without_kernel")
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables or "StringIds" not in tables:
        if said is not None:
            fail(name, f"no runtime table, yet meta nsys.launches_without_kernel = {said!r}")
        return
    # Correlation ids are per process: a GPU row with a globalPid stands for that process's call only.
    ran, ran_any = set(), set()
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                  "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if table in tables:
            columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            pid = "globalPid" if "globalPid" in columns else "NULL"
            for process, corr in db.execute(f"SELECT {pid}, correlationId FROM {table}"):
                (ran_any.add(corr) if process is None else ran.add((process >> 24, corr)))
    rows = db.execute("SELECT s.value, r.start, r.globalTid, r.correlationId, r.rowid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                      "JOIN StringIds s ON s.id = r.nameId WHERE r.returnValue = 0 ORDER BY r.start, r.rowid").fetchall()
    spans, launches = {}, []
    for text, start, tid, corr, row in rows:
        process = (tid or 0) >> 24
        if text.startswith(CAPTURE_BEGIN):
            spans.setdefault(process, []).append([start, None])
        elif text.startswith(CAPTURE_END):
            if spans.get(process) and spans[process][-1][1] is None:
                spans[process][-1][1] = start
        elif text.startswith(LAUNCH_PREFIXES):
            launches.append((text, start, process, corr, row))
    captured = lost = 0
    first = None
    for text, start, process, corr, row in launches:
        if corr in ran_any or (process, corr) in ran:
            continue
        if any(b <= start and (e is None or start < e) for b, e in spans.get(process, [])):
            captured += 1
        else:
            lost += 1
            first = first or (row, text)
    if captured + lost == 0:
        if said is not None:
            fail(name, f"every launch has its rows, yet meta nsys.launches_without_kernel = {said!r}")
        return
    parts = []
    if captured:
        parts.append(f"{captured} made while a stream capture was open (captured into a CUDA graph, not run)")
    if lost:
        parts.append(f"{lost} not recorded (the first: CUPTI_ACTIVITY_KIND_RUNTIME row {first[0]} '{first[1]}')")
    want = (f"{captured + lost} of {len(launches)} kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch "
            f"kernels or CUDA graphs, returning success) have no kernel, memcpy, memset or graph row of their "
            f"correlationId: " + ", ".join(parts))
    print(f"  launches without kernel rows: {captured} captured, {lost} not recorded, of {len(launches)}")
    if said != want:
        fail(name, f"launches without kernel rows: meta {said!r}, expected {want!r}")


# ENUM_NSYS_EVENT_TYPE's NVTX names (nsys 2024.5 exports list them; older ones use the same numbers).
NVTX_EVENT_TYPES = {32: "NvtxEvents", 33: "NvtxCategory", 34: "NvtxMark", 35: "NvtxPushRange", 36: "NvtxPopRange",
                    37: "NvtxStartRange", 38: "NvtxEndRange", 39: "NvtxThread", 59: "NvtxPushPopRange",
                    60: "NvtxStartEndRange", 64: "NvtxtCategory", 65: "NvtxtMark", 66: "NvtxtPushRange",
                    67: "NvtxtPopRange", 68: "NvtxtStartRange", 69: "NvtxtEndRange", 70: "NvtxtPushPopRange",
                    71: "NvtxtStartEndRange", 72: "NvtxtMetaThread", 73: "NvtxtMetaProcess",
                    74: "NvtxtMetaFileDisplay", 75: "NvtxDomainCreate", 76: "NvtxDomainDestroy",
                    97: "NvtxNameCudaDevice", 98: "NvtxNameCudaContext", 99: "NvtxNameCudaStream"}


def nvtx_markers(db, tables):
    """NVTX rows that are marks or ranges (a range's Pop/End half is not one; domains, categories
    and names are not): by the file's ENUM_NSYS_EVENT_TYPE where it has one."""
    if "NVTX_EVENTS" not in tables:
        return 0
    if "eventType" not in {r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")}:
        return db.execute("SELECT COUNT(*) FROM NVTX_EVENTS").fetchone()[0]
    names = dict(NVTX_EVENT_TYPES)
    if "ENUM_NSYS_EVENT_TYPE" in tables:
        names.update(db.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"))
    count = 0
    for kind, n in db.execute("SELECT eventType, COUNT(*) FROM NVTX_EVENTS GROUP BY eventType"):
        name = names.get(kind, "")
        if name.endswith("Mark") or (name.endswith("Range") and not name.endswith(("PopRange", "EndRange"))) \
                or name.endswith(("PushPopRange", "StartEndRange")):
            count += n
    return count


def nsys_kernel_rows(db, tables):
    """An nsys export's kernels as (device, lane, start, end) by start: the kernel table's rows and
    the CUDA graph launches traced whole (nsys --cuda-graph-trace=graph: a launch is one row of
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE and its kernels are not in the kernel table; start = end = 0:
    not timed, left out; a launch whose process's kernel row has its correlation id is in the
    kernel table already: correlation ids are per process). Several processes on one GPU: the k-th
    process's (by globalPid) streams are k * 2^40 + streamId (docs/import.md)."""
    def cols(t):
        return {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
    gpu_tables = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE") if t in tables]
    base = {}
    if gpu_tables and all("globalPid" in cols(t) for t in gpu_tables):
        pids = {}
        for t in gpu_tables:
            for dev, pid in db.execute(f"SELECT DISTINCT deviceId, globalPid FROM {t}"):
                pids.setdefault(dev, set()).add(pid)
        for dev, ps in pids.items():
            for k, pid in enumerate(sorted(ps, key=lambda p: (p is None, p or 0))):
                base[(dev, pid)] = k << 40

    def pid_col(t):
        return "globalPid" if "globalPid" in cols(t) else "0"
    rows = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        rows = list(db.execute(f"SELECT deviceId, streamId, start, end, correlationId, "
                               f"{pid_col('CUPTI_ACTIVITY_KIND_KERNEL')} FROM CUPTI_ACTIVITY_KIND_KERNEL "
                               "ORDER BY start, rowid"))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        traced = {(r[5], r[4]) for r in rows if r[4]}
        rows += [r for r in db.execute(f"SELECT deviceId, streamId, start, end, correlationId, "
                                       f"{pid_col('CUPTI_ACTIVITY_KIND_GRAPH_TRACE')} FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE "
                                       "WHERE NOT (start = 0 AND end = 0) ORDER BY start, rowid")
                 if not (r[4] and (r[5], r[4]) in traced)]
        rows.sort(key=lambda r: r[2])   # stable: kernels before graph launches at one start
    return [(dev, stream + base.get((dev, pid), 0), start, end) for dev, stream, start, end, _, pid in rows]


def nsys_profiler_steps(db, tables):
    """An nsys export's ProfilerStep#N NVTX ranges: (how many, joined) where joined is, when they
    come from two or more processes (globalTid >> 24) and some N is marked twice, one (start, end,
    'ProfilerStep#N') per N from its ranges' first start to their last end (docs/import.md: each is
    one step marker, the ranges themselves ranges), else []."""
    if "NVTX_EVENTS" not in tables:
        return 0, []
    cols = {r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
    text = "text" if "text" in cols else "NULL"
    if "textId" in cols and "StringIds" in tables:
        text = f"COALESCE({text}, (SELECT value FROM StringIds WHERE id = textId))"
    tid = "globalTid" if "globalTid" in cols else "NULL"
    ranges = [(start, end, (t >> 24) if t is not None else -1, int(name[13:]))
              for start, end, name, t in db.execute(f"SELECT start, end, {text}, {tid} FROM NVTX_EVENTS")
              if isinstance(name, str) and name.startswith("ProfilerStep#") and name[13:].isdigit() and end is not None]
    if len({r[2] for r in ranges}) < 2:
        return len(ranges), []
    joined = {}
    for start, end, _, n in ranges:
        a, b = joined.get(n, (start, end))
        joined[n] = (min(a, start), max(b, end))
    if len(joined) == len(ranges):   # no N twice: each range its own step, as in one process
        return len(ranges), []
    return len(ranges), [(a, b, f"ProfilerStep#{n}") for n, (a, b) in sorted(joined.items())]


def nsys_timeline(path):
    """What `mhc info` reports of an nsys export's timeline, counted with SQL."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def rows(table, what):
        return db.execute(f"SELECT {what} FROM {table}").fetchone() if table in tables else None
    kernels, clamped, prev_end = [0, 0], 0, {}
    rows_ = nsys_kernel_rows(db, tables)
    if rows_:
        # docs/import.md: a kernel that starts before the previous one on its stream ended
        # starts at that end (the export's own sum of end - start is printed beside it).
        for dev, stream, start, end in rows_:
            begin = max(start, prev_end.get((dev, stream), start))
            clamped += begin > start
            prev_end[(dev, stream)] = max(begin, end)
            kernels[0] += 1
            kernels[1] += max(0, end - begin)
    copies = sum((rows(t, "COUNT(*)") or (0,))[0] for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    spans = [rows(t, "MIN(start), MAX(end)") for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                       "CUPTI_ACTIVITY_KIND_MEMSET")]
    spans += [(min(r[2] for r in rows_), max(r[3] for r in rows_))] if rows_ else []
    spans += [rows("CUDA_GPU_MEMORY_USAGE_EVENTS", "MIN(start), MAX(start)")]
    spans = [s for s in spans if s and s[0] is not None]
    ranges, joined = nsys_profiler_steps(db, tables)
    steps = {"steps": len(joined) if joined else ranges} if ranges else {}
    if not ranges:   # steps from the optimizer's ranges: one step#k marker each (the processes' k-th joined)
        joined = sorted({k for own in nsys_own_steps(db, tables).values() for _, _, k in own})
        steps = {"steps": len(joined)} if joined else {}
    return {**steps, "kernels": kernels[0], "copies": copies, "markers": nvtx_markers(db, tables) + len(joined),
            "kernel_time_ns": kernels[1], "kernel_starts_clamped": clamped,
            "duration_ns": max(s[1] for s in spans) - min(s[0] for s in spans)}


# CUPTI_ACTIVITY_MEMCPY_KIND (cupti_activity.h) and nsys's unified-memory codes 11-13
# (ENUM_CUDA_MEMCPY_OPER) to the trace's copy kinds (0 H2D, 1 D2H, 2 D2D, 3 P2P, 4 memset, 5 H2H):
# HtoD, HtoA, UVM HtoD -> H2D; DtoH, AtoH, UVM DtoH -> D2H; PtoP -> P2P; HtoH -> H2H; the rest D2D.
NSYS_COPY_KINDS = {1: 0, 3: 0, 11: 0, 2: 1, 4: 1, 12: 1, 10: 3, 9: 5}


def nsys_lanes(path):
    """An nsys export's kernels per (device, stream) with their GPU time after the clamp (the rows
    of nsys_kernel_rows), and its memcpys and memsets per (device, kind) with their bytes."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    kernels, prev_end = {}, {}
    for dev, stream, start, end in nsys_kernel_rows(db, tables):
        lane = (dev, stream)
        begin = max(start, prev_end.get(lane, start))
        prev_end[lane] = max(begin, end)
        k = kernels.setdefault(lane, [0, 0])
        k[0] += 1
        k[1] += max(0, end - begin)
    copies = {}
    for t, memset in (("CUPTI_ACTIVITY_KIND_MEMCPY", False), ("CUPTI_ACTIVITY_KIND_MEMSET", True)):
        if t not in tables:
            continue
        kind_col = "-1" if memset else "copyKind"
        for dev, kind, n, size in db.execute(f"SELECT deviceId, {kind_col}, COUNT(*), SUM(bytes) FROM {t} GROUP BY 1, 2"):
            c = copies.setdefault((dev, 4 if memset else NSYS_COPY_KINDS.get(kind, 2)), [0, 0])
            c[0] += n
            c[1] += size
    return kernels, copies


def check_nsys_placement(name, path, db):
    """Per (device, stream) the export's kernel count and GPU time, per (device, kind) its copy count
    and bytes, equal to the imported rows'."""
    kernels, copies = nsys_lanes(path)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got_k = {(d, s): [n, t] for d, s, n, t in conn.execute(
        "SELECT device, stream, COUNT(*), SUM(t_end - t_start) FROM kernels GROUP BY device, stream")}
    got_c = imported_copies(conn)
    print(f"  kernels per (device, stream) [count, ns]: {dict(sorted(kernels.items()))} in the file; copies per "
          f"(device, kind) [count, bytes]: {dict(sorted(copies.items()))}")
    if got_k != kernels:
        fail(name, f"kernels per (device, stream) {dict(sorted(got_k.items()))}, the file's {dict(sorted(kernels.items()))}")
    if got_c != copies:
        fail(name, f"copies per (device, kind) {dict(sorted(got_c.items()))}, the file's {dict(sorted(copies.items()))}")


# nsys tables of GPU memory or GPU samples that the trace has no rows for: pools' reservations,
# unified-memory page faults, Windows' per-process video memory and budget, GPU metrics.
NSYS_UNREAD_TABLES = ("CUDA_GPU_MEMORY_POOL_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS", "CUDA_UM_CPU_PAGE_FAULT_EVENTS",
                      "GPU_MEMORY_USAGE_EVENTS", "GPU_MEMORY_BUDGET_EVENTS", "GPU_METRICS")


def check_nsys_unread_tables(name, path, meta):
    """Rows of those tables are never left out in silence: meta nsys.unread_tables names each with
    its row count."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    want = {}
    for table in NSYS_UNREAD_TABLES:
        if table in tables:
            rows = conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
            if rows:
                want[table] = rows
    said = {}
    for part in filter(None, meta.get("nsys.unread_tables", "").split(", ")):
        table, rows = part.rsplit(" ", 1)
        said[table] = int(rows)
    if want:
        print(f"  rows of tables not read: {want}, meta {said}")
    if said != want:
        fail(name, f"meta nsys.unread_tables {said}, the file's {want}")


def check_nsys_uvm_migrations(name, path, meta):
    """Memcpy rows of copyKind 11-13 (ENUM_CUDA_MEMCPY_OPER's unified-memory migrations) are said:
    meta nsys.uvm_migrations gives their count first, and each kind's rows and bytes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    want = {}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        want = {k: (n, b) for k, n, b in conn.execute(
            "SELECT copyKind, COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (11, 12, 13) "
            "GROUP BY copyKind")}
    said = meta.get("nsys.uvm_migrations", "")
    if want:
        print(f"  unified-memory migrations: {want}; meta: {said[:80]}...")
    total = sum(n for n, _ in want.values())
    names = {11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}
    ok = (not said) if not want else said.startswith(f"{total} memcpy rows are unified-memory page migrations") \
        and all(f"{n} {names[k]} ({b} B)" in said for k, (n, b) in want.items())
    if not ok:
        fail(name, f"unified-memory migrations {want} in the file, meta nsys.uvm_migrations {said!r}")


def check_nsys_markers(name, path, db):
    """Each NVTX mark or range (nvtx_markers' rows) is one marker with the file's times: the
    imported markers' (start, end) relative to the earliest, sorted, equal to the file's (a mark,
    whose end is NULL, ends at its start); and its name is the row's text (or StringIds' by textId)."""
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "NVTX_EVENTS" not in tables:
        return
    cols = {r[1] for r in src.execute("PRAGMA table_info(NVTX_EVENTS)")}
    names = dict(NVTX_EVENT_TYPES)
    if "ENUM_NSYS_EVENT_TYPE" in tables:
        names.update(src.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"))
    strings = dict(src.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}
    want = []
    query = "SELECT start, end, {}, {}, {} FROM NVTX_EVENTS".format(
        "eventType" if "eventType" in cols else "NULL", "text" if "text" in cols else "NULL",
        "textId" if "textId" in cols else "NULL")
    for start, end, kind, text, text_id in src.execute(query):
        n = names.get(kind, "") if kind is not None else "NvtxMark"
        if not (n.endswith("Mark") or (n.endswith("Range") and not n.endswith(("PopRange", "EndRange")))
                or n.endswith(("PushPopRange", "StartEndRange"))):
            continue
        label = text if text is not None else strings.get(text_id, f"string {text_id}") if text_id is not None else "nvtx"
        want.append((start, end if end is not None else start, label))
    want += nsys_profiler_steps(src, tables)[1]   # several processes' steps joined: a marker each
    if not nsys_profiler_steps(src, tables)[0]:   # steps from optimizer ranges: a marker step#k each, joined
        joined = {}
        for steps in nsys_own_steps(src, tables).values():
            for a, b, k in steps:
                lo, hi = joined.get(k, (a, b))
                joined[k] = (min(lo, a), max(hi, b))
        want += [(a, b, f"step#{k}") for k, (a, b) in joined.items()]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = list(conn.execute("SELECT m.t_start, m.t_end, s.text FROM markers m LEFT JOIN strings s ON s.id = m.name"))
    if not want and not got:
        return

    def norm(rows):
        first = min(r[0] for r in rows) if rows else 0
        return sorted((r[0] - first, r[1] - r[0], r[2]) for r in rows)
    print(f"  NVTX: {len(want)} marks and ranges in the file, {len(got)} markers imported")
    if norm(got) != norm(want):
        diff = [(g, w) for g, w in zip(norm(got), norm(want)) if g != w][:3]
        fail(name, f"markers (start, length, name) differ from the file's NVTX rows: {len(got)} against {len(want)}; "
                   f"first differences {diff}")


def nsys_source(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name='CUDA_GPU_MEMORY_USAGE_EVENTS'").fetchone():
        return {}
    rows = db.execute("SELECT deviceId, memKind, memoryOperationType, bytes FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
                      "ORDER BY start, rowid").fetchall()
    run, low, high = {}, {}, {}
    for device, kind, op, size in rows:
        dev = HOST if kind in (0, 1) else device   # memKind 0 pageable, 1 pinned: host memory
        run[dev] = run.get(dev, 0) + (size if op == 0 else -size)
        low[dev] = min(low.get(dev, 0), run[dev])
        high[dev] = max(high.get(dev, 0), run[dev])
    return {d: (high[d] - low[d], None, "signed sum of memory events") for d in run}


def nsys_own_steps(db, tables):
    """docs/import.md "Steps" on an nsys export, each process's own (globalTid >> 24): {process:
    [(start, end, N)]} from its ProfilerStep#N NVTX ranges (a range never ended: to the end of
    recording, the latest start or end of the tables the import reads), else from its optimizer-step
    ranges (optimizer_step_bounds, each range's work the runtime calls of its thread that begin within
    it; step 0 from the export's first time). Ranges without a thread are process -1."""
    if "NVTX_EVENTS" not in tables:
        return {}
    from public_traces import loop_range_name, optimizer_step_bounds, optimizer_step_name   # noqa: cycle
    cols = {r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")}
    text = "text" if "text" in cols else "NULL"
    if "textId" in cols and "StringIds" in tables:
        text = f"COALESCE({text}, (SELECT value FROM StringIds WHERE id = textId))"
    tid = "globalTid" if "globalTid" in cols else "NULL"
    kinds = " AND (eventType IS NULL OR eventType IN (35, 37, 59, 60, 66, 68, 70, 71))" if "eventType" in cols else ""
    rows = list(db.execute(f"SELECT start, end, {text}, {tid} FROM NVTX_EVENTS WHERE 1{kinds}"))
    step_rows = [r for r in rows if isinstance(r[2], str) and r[2].startswith("ProfilerStep#") and r[2][13:].isdigit()]
    times = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                  "CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS"):
        if table in tables:
            tcols = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            times += [v for c in ("start", "end") if c in tcols
                      for (v,) in db.execute(f'SELECT MAX("{c}") FROM {table}') if v is not None]
    recording_end = max(times) if times else 0
    own = {}
    if step_rows:
        for start, end, name, t in step_rows:
            own.setdefault(t >> 24 if t is not None else -1, []).append(
                (start, end if end is not None else max(start, recording_end), int(name[13:])))
        return {p: sorted(v) for p, v in own.items()}
    calls = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        for t, start in db.execute("SELECT globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            calls.setdefault(t, []).append(start)
    for v in calls.values():
        v.sort()
    firsts = [v for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUDA_GPU_MEMORY_USAGE_EVENTS") if table in tables
              for (v,) in db.execute(f"SELECT MIN(start) FROM {table}") if v is not None]
    marks = " WHERE eventType IS NULL OR eventType IN (34, 35, 37, 59, 60, 65, 66, 68, 70, 71)" if "eventType" in cols else ""
    firsts += [v for (v,) in db.execute(f"SELECT MIN(start) FROM NVTX_EVENTS{marks}") if v is not None]
    by_process = {}
    for start, end, name, t in rows:
        if optimizer_step_name(name or "") or loop_range_name(name or ""):
            if end is None:
                if not optimizer_step_name(name):
                    continue
                end = max(start, recording_end)
            v = calls.get(t, [])
            work = (bisect.bisect_right(v, end) - bisect.bisect_left(v, start)) \
                if optimizer_step_name(name) and t is not None and calls else None
            by_process.setdefault(t >> 24 if t is not None else -1, []).append((name, start, end, work, None))
    stepping = {p for p, v in by_process.items() if any(optimizer_step_name(r[0]) for r in v)}
    if len(stepping) < 2:   # one process: its ranges read together (with any that have no thread)
        by_process = {0: [r for v in by_process.values() for r in v]}
    for p, ranges in by_process.items():
        begin, ends = optimizer_step_bounds(ranges, min(firsts))
        for k, end in enumerate(ends):
            end = max(end, begin)
            own.setdefault(p, []).append((begin, end, k))
            begin = end
    return own


def check_nsys_kernel_steps(name, path, db):
    """Kernels (and CUDA graph launches traced whole) per step: each in the step its launch (the
    CUPTI_ACTIVITY_KIND_RUNTIME row of its correlationId and globalPid) fell in, else its start, among
    its own process's steps (nsys_own_steps; one process: all of them); one without a runtime row, of a
    correlationId below every runtime row of its process, launched before the capture began: in no
    step, and counted in meta nsys.kernels_launched_before_recording."""
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    own = nsys_own_steps(src, tables)
    if not own or "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return
    single = [s for v in own.values() for s in v] if len(own) == 1 else None
    calls = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        for t, corr, start in src.execute("SELECT globalTid, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
            calls[(t >> 24, corr)] = start
    first_call = {}
    for process, corr in calls:
        first_call[process] = min(first_call.get(process, corr), corr)
    kcols = {r[1] for r in src.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    pid = "globalPid" if "globalPid" in kcols else "NULL"
    want, before = {}, 0
    for start, corr, gp in src.execute(f"SELECT start, correlationId, {pid} FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        process = gp >> 24 if gp is not None else -1
        if (process, corr) not in calls and corr and 0 < corr < first_call.get(process, 0):
            want[-1] = want.get(-1, 0) + 1
            before += 1
            continue
        t = calls.get((process, corr), start)
        steps = sorted(single if single is not None else own.get(process, [s for v in own.values() for s in v]))
        begun = [s for s in steps if s[0] <= t]
        n = max(begun, key=lambda s: s[0])[2] if begun and t <= max(begun, key=lambda s: s[0])[1] else -1
        want[n] = want.get(n, 0) + 1
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = dict(conn.execute("SELECT step, COUNT(*) FROM kernels WHERE name NOT IN "
                            "(SELECT id FROM strings WHERE text LIKE 'CUDA graph %') GROUP BY step"))
    print(f"  kernels per step: {dict(sorted(got.items()))} imported, {dict(sorted(want.items()))} in the file")
    if got != want:
        fail(name, f"kernels per step {dict(sorted(got.items()))}, the file's {dict(sorted(want.items()))}")
    said = dict(conn.execute("SELECT key, value FROM meta")).get("nsys.kernels_launched_before_recording")
    if (int(said.split()[0]) if said else 0) != before:
        fail(name, f"meta nsys.kernels_launched_before_recording {said!r}, the file has {before} such kernels")
