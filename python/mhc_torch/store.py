"""Writes traces in the toolkit's SQLite format (docs/trace-format.md, schema version 1) and reads
their runs back as pandas DataFrames.

The DDL is the C++ store's (trace/src/schema.cpp), statement for statement; `mhc check` is the
judge of what this writes. A trace is written to PATH.mhc-tmp-PID and renamed into place when
complete, so an interrupted capture leaves no half-written file (the C++ tools' convention:
docs/trace-format.md, "Durability and concurrency").
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field

from .output_file import OutputError, OutputExists, SignalGuard, begin_output, check_output, commit  # noqa: F401 (re-exported)

SCHEMA_VERSION = 1
FORMAT_NAME = "mhc-trace"

# Category, access-mode and marker-kind codes of the format.
PARAM, GRAD, OPTIMIZER, ACTIVATION, WORKSPACE, COMM, OTHER = range(7)
CATEGORY_NAMES = ["param", "grad", "optimizer", "activation", "workspace", "comm", "other"]
READ, WRITE, READ_WRITE = 1, 2, 3
MARKER_STEP, MARKER_LAYER, MARKER_RANGE = 0, 1, 2
FORWARD, BACKWARD, OPTIMIZER_PHASE, RECOMPUTE, OTHER_PHASE = range(5)
H2D, D2H = 0, 1  # copy kinds
PHASE_NAMES = ["forward", "backward", "optimizer", "recompute", "other"]

_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE allocations (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, address INTEGER NOT NULL,
  bytes INTEGER NOT NULL, t_alloc INTEGER NOT NULL, t_free INTEGER,
  stream INTEGER NOT NULL, category INTEGER NOT NULL, label INTEGER NOT NULL DEFAULT 0,
  requested_bytes INTEGER);
CREATE TABLE kernels (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  name INTEGER NOT NULL, t_start INTEGER NOT NULL, t_end INTEGER NOT NULL,
  step INTEGER NOT NULL, grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL, block_x INTEGER NOT NULL, block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL, shared_mem INTEGER NOT NULL, registers INTEGER NOT NULL,
  correlation INTEGER NOT NULL);
CREATE TABLE accesses (kernel INTEGER NOT NULL, allocation INTEGER NOT NULL, mode INTEGER NOT NULL,
  PRIMARY KEY (kernel, allocation)) WITHOUT ROWID;
CREATE TABLE copies (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  kind INTEGER NOT NULL, bytes INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL);
CREATE TABLE markers (
  id INTEGER PRIMARY KEY, name INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL, kind INTEGER NOT NULL, idx INTEGER NOT NULL);
CREATE TABLE segments (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER NOT NULL,
  address INTEGER NOT NULL, bytes INTEGER NOT NULL, t_alloc INTEGER NOT NULL, t_free INTEGER,
  expandable INTEGER NOT NULL, reconstructed INTEGER NOT NULL);
CREATE TABLE modules (
  id INTEGER PRIMARY KEY, name INTEGER NOT NULL, parent INTEGER NOT NULL, type INTEGER NOT NULL);
CREATE TABLE kernel_info (
  kernel INTEGER PRIMARY KEY, module INTEGER NOT NULL, phase INTEGER NOT NULL,
  flops INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE saved_tensors (allocation INTEGER NOT NULL, kernel INTEGER NOT NULL, packs INTEGER,
  PRIMARY KEY (allocation, kernel)) WITHOUT ROWID;
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
  created TEXT NOT NULL, base_run INTEGER NOT NULL DEFAULT 0);
CREATE TABLE run_config (run INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (run, key)) WITHOUT ROWID;
CREATE TABLE run_metrics (run INTEGER NOT NULL, key TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY (run, key)) WITHOUT ROWID;
CREATE TABLE run_events (run INTEGER NOT NULL, kind INTEGER NOT NULL, t_start INTEGER NOT NULL,
  t_end INTEGER NOT NULL, allocation INTEGER NOT NULL, kernel INTEGER NOT NULL,
  bytes INTEGER NOT NULL);
CREATE TABLE run_kernels (run INTEGER NOT NULL, kernel INTEGER NOT NULL,
  t_start INTEGER NOT NULL, t_end INTEGER NOT NULL, PRIMARY KEY (run, kernel)) WITHOUT ROWID;
CREATE TABLE run_memory (run INTEGER NOT NULL, t INTEGER NOT NULL,
  device_bytes INTEGER NOT NULL, host_bytes INTEGER NOT NULL);
"""

_LOOKUPS = """
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO categories VALUES (0,'param'),(1,'grad'),(2,'optimizer'),(3,'activation'),
  (4,'workspace'),(5,'comm'),(6,'other');
CREATE TABLE access_modes (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO access_modes VALUES (1,'read'),(2,'write'),(3,'read-write');
CREATE TABLE copy_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO copy_kinds VALUES (0,'H2D'),(1,'D2H'),(2,'D2D'),(3,'P2P'),(4,'memset'),(5,'H2H');
CREATE TABLE marker_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO marker_kinds VALUES (0,'step'),(1,'layer'),(2,'range');
CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO event_kinds VALUES (0,'swap_out'),(1,'swap_in'),(2,'evict_clean'),(3,'drop'),
  (4,'recompute'),(5,'stall'),(6,'oom'),(7,'prefetch');
CREATE TABLE phases (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO phases VALUES (0,'forward'),(1,'backward'),(2,'optimizer'),(3,'recompute'),(4,'other');
"""

_INDEXES = """
CREATE INDEX accesses_by_allocation ON accesses (allocation);
CREATE INDEX run_events_by_run ON run_events (run, t_start);
CREATE INDEX run_memory_by_run ON run_memory (run, t);
"""


@dataclass
class Allocation:
    id: int
    bytes: int
    t_alloc: int
    t_free: int | None
    category: int
    label: str = ""
    device: int = 0
    stream: int = 0


@dataclass
class Kernel:
    id: int
    name: str
    t_start: int
    t_end: int
    step: int
    accesses: dict[int, int] = field(default_factory=dict)  # allocation id -> mode
    stream: int = 0
    device: int = 0
    module: str = ""  # fully qualified name of the innermost module running it ("" outside any)
    phase: int = OTHER_PHASE
    flops: int = 0
    moved_bytes: int = 0  # the bytes the roofline counted as read and written


@dataclass
class Module:
    name: str  # fully qualified, as ModTracker spells it
    parent: str  # "" for a root
    type: str  # class name


@dataclass
class Copy:
    id: int
    kind: int  # H2D, D2H, ...
    bytes: int
    t_start: int
    t_end: int
    stream: int = 0
    device: int = 0


@dataclass
class Marker:
    name: str
    t_start: int
    t_end: int
    kind: int
    idx: int


def write_trace(path: str, allocations, kernels, markers, meta: dict[str, str],
                modules=(), saved=(), copies=(), replace: bool = True) -> None:
    """Writes a complete trace to `path` atomically (temporary file, then rename).

    `modules` (Module records, parents before children) and the kernels' module/phase/flops fill
    the capture tables `modules` and `kernel_info`; `saved` is (allocation id, kernel id, packs)
    for `saved_tensors`: the storages autograd saved for the backward, the op that saved them and
    how many times (views of one storage); `copies` are Copy records.
    With `replace` False an existing `path` is never replaced (OutputExists).
    """
    tmp = begin_output(path, replace)
    signals = SignalGuard()
    strings: dict[str, int] = {"": 0}

    def intern(text: str) -> int:
        sid = strings.get(text)
        if sid is None:
            sid = strings[text] = len(strings)  # "" holds id 0 and is not stored
        return sid

    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=16384;")
            db.executescript(_TABLES)
            db.executescript(_LOOKUPS)
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO allocations VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                ((a.id, a.device, 0, a.bytes, a.t_alloc, a.t_free, a.stream, a.category, intern(a.label))
                 for a in allocations))
            db.executemany(
                "INSERT INTO kernels VALUES (?,?,?,?,?,?,?,0,0,0,0,0,0,0,0,0)",
                ((k.id, k.device, k.stream, intern(k.name), k.t_start, k.t_end, k.step) for k in kernels))
            db.executemany(
                "INSERT INTO accesses VALUES (?,?,?)",
                ((k.id, a, m) for k in kernels for a, m in sorted(k.accesses.items())))
            module_id = {"": 0}
            for m in modules:
                module_id[m.name] = len(module_id)
                db.execute("INSERT INTO modules VALUES (?,?,?,?)",
                           (module_id[m.name], intern(m.name), module_id[m.parent], intern(m.type)))
            db.executemany(
                "INSERT INTO kernel_info VALUES (?,?,?,?,?)",
                ((k.id, module_id[k.module], k.phase, k.flops, k.moved_bytes) for k in kernels))
            db.executemany("INSERT INTO saved_tensors VALUES (?,?,?)", sorted(saved))
            db.executemany("INSERT INTO copies VALUES (?,?,?,?,?,?,?)",
                           ((c.id, c.device, c.stream, c.kind, c.bytes, c.t_start, c.t_end) for c in copies))
            db.executemany(
                "INSERT INTO markers VALUES (?,?,?,?,?,?)",
                ((i + 1, intern(m.name), m.t_start, m.t_end, m.kind, m.idx) for i, m in enumerate(markers)))
            db.executemany("INSERT INTO strings VALUES (?,?)",
                           ((sid, text) for text, sid in strings.items() if sid))
            full_meta = dict(meta)
            full_meta["format"] = FORMAT_NAME
            full_meta["schema_version"] = str(SCHEMA_VERSION)
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", sorted(full_meta.items()))
            db.execute("COMMIT")
            db.executescript(_INDEXES)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        finally:
            db.close()
        commit(tmp, path, replace)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        signals.reraise_fatal()
        # A full disk or a file size limit: one line naming the output, not a traceback.
        if isinstance(e, sqlite3.Error) or (isinstance(e, OSError) and not isinstance(e, OutputError)):
            raise OutputError(f"{path}: cannot write the trace: {e}") from None
        raise
    finally:
        signals.restore()


class TraceError(Exception):
    """A trace file that cannot be read: the message names the file and the reason."""


def _open(path: str) -> sqlite3.Connection:
    if not os.path.isfile(path):
        raise TraceError(f"{path}: no such file")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        db.close()
        raise TraceError(f"{path}: not a trace: {e}") from None
    if "meta" not in tables:
        db.close()
        raise TraceError(f"{path}: not a trace (no meta table)")
    if version != SCHEMA_VERSION:
        db.close()
        raise TraceError(f"{path}: schema version {version}, expected {SCHEMA_VERSION}")
    return db


def read_meta(path: str) -> dict[str, str]:
    db = _open(path)
    try:
        return dict(db.execute("SELECT key, value FROM meta"))
    finally:
        db.close()


def read_runs(path: str):
    """The trace's runs as one DataFrame, a row per run: id, kind, name, status, created, base_run,
    then one column per `run_config` key (prefixed `config.`) and per `run_metrics` key."""
    import pandas as pd

    db = _open(path)
    try:
        runs = pd.read_sql("SELECT * FROM runs ORDER BY id", db)
        cfg = pd.read_sql("SELECT run, key, value FROM run_config", db)
        met = pd.read_sql("SELECT run, key, value FROM run_metrics", db)
    finally:
        db.close()
    runs = runs.set_index("id")
    if len(cfg):
        wide = cfg.pivot(index="run", columns="key", values="value").add_prefix("config.")
        runs = runs.join(wide)
    if len(met):
        runs = runs.join(met.pivot(index="run", columns="key", values="value"))
    return runs


def read_run_table(path: str, table: str, run: int | None = None):
    """One of the per-run tables (run_events, run_kernels, run_memory, run_config, run_metrics) as
    a DataFrame, for one run or all; run_events gets the event kind's name as `kind_name`."""
    import pandas as pd

    allowed = {"run_events", "run_kernels", "run_memory", "run_config", "run_metrics"}
    if table not in allowed:
        raise ValueError(f"unknown run table '{table}'; valid: {', '.join(sorted(allowed))}")
    db = _open(path)
    try:
        where, args = ("WHERE run = ?", (run,)) if run is not None else ("", ())
        df = pd.read_sql(f"SELECT * FROM {table} {where}", db, params=args)
        if table == "run_events":
            kinds = dict(db.execute("SELECT id, name FROM event_kinds"))
            df["kind_name"] = df["kind"].map(kinds)
        return df
    finally:
        db.close()


def read_table(path: str, table: str):
    """Any trace table (allocations, kernels, accesses, markers, …) as a DataFrame, with names
    (kernels.name, allocations.label, markers.name) resolved to text."""
    import pandas as pd

    db = _open(path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if table not in tables:
            raise TraceError(f"{path}: no table '{table}'")
        df = pd.read_sql(f"SELECT * FROM {table}", db)
        strings = dict(db.execute("SELECT id, text FROM strings"))
        strings[0] = ""
        for col in {"kernels": ["name"], "allocations": ["label"], "markers": ["name"]}.get(table, []):
            df[col] = df[col].map(strings)
        if table == "allocations":
            df["category_name"] = df["category"].map(dict(enumerate(CATEGORY_NAMES)))
        return df
    finally:
        db.close()
