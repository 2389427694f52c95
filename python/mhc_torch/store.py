"""Writes traces in the toolkit's SQLite format (docs/trace-format.md, schema version 1) and reads
their runs back as pandas DataFrames.

The DDL and the codes come from the format's one schema file (trace/schema.sql, which the C++
store embeds); `mhc check` is the judge of what this writes. A trace is written to
PATH.mhc-tmp-PID and renamed into place when complete, so an interrupted capture leaves no half-written file (the C++ tools' convention:
docs/trace-format.md, "Durability and concurrency").
"""
from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
import urllib.parse
from dataclasses import dataclass, field

from . import file_bytes, run_identity
from .digest import Digest
from .output_file import OutputError, SignalGuard, begin_output, commit

SCHEMA_VERSION = 1
FORMAT_NAME = "mhc-trace"


def _schema_sections() -> dict[str, str]:
    """The parts of the format's one schema file (trace/schema.sql, shipped in this package as
    schema.sql): each "-- section: NAME" line starts one (the C++ store splits it the same way)."""
    from importlib import resources

    text = resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        if line.startswith("-- section: "):
            name = line[len("-- section: "):].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line
    return sections


_SCHEMA = _schema_sections()
_TABLES = _SCHEMA["trace_tables"] + _SCHEMA["run_tables"]
_LOOKUPS = _SCHEMA["lookups"]
_INDEXES = _SCHEMA["trace_indexes"] + _SCHEMA["run_indexes"] + _SCHEMA["run_event_rows"]
# The content digest (docs/trace-format.md, "Content digest") is written with the meta, the
# triggers that mark it edited after the rows are in, as the C++ writer does.
_DIGEST_TRIGGERS = _SCHEMA["content_digest_triggers"]


def _codes(table: str) -> dict[str, int]:
    """name -> code of one lookup table of the schema (categories, access_modes, ...)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(_LOOKUPS)
        return {name: code for code, name in db.execute(f"SELECT id, name FROM {table} ORDER BY id")}
    finally:
        db.close()


# Category, access-mode, marker-kind, phase and copy-kind codes of the format, from its lookup tables.
_CATEGORY = _codes("categories")
PARAM, GRAD, OPTIMIZER, ACTIVATION, WORKSPACE, COMM, OTHER = (
    _CATEGORY[n] for n in ("param", "grad", "optimizer", "activation", "workspace", "comm", "other"))
CATEGORY_NAMES = list(_CATEGORY)
_ACCESS = _codes("access_modes")
READ, WRITE, READ_WRITE = _ACCESS["read"], _ACCESS["write"], _ACCESS["read-write"]
_MARKER = _codes("marker_kinds")
MARKER_STEP, MARKER_LAYER, MARKER_RANGE = _MARKER["step"], _MARKER["layer"], _MARKER["range"]
_PHASE = _codes("phases")
FORWARD, BACKWARD, OPTIMIZER_PHASE, RECOMPUTE, OTHER_PHASE = (
    _PHASE[n] for n in ("forward", "backward", "optimizer", "recompute", "other"))
PHASE_NAMES = list(_PHASE)
_COPY = _codes("copy_kinds")
H2D, D2H = _COPY["H2D"], _COPY["D2H"]


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


class RowOutOfRange(ValueError):
    """A row the trace's readers would refuse (docs/trace-format.md, "Value ranges")."""


def _refuse_out_of_range(allocations, kernels, markers, copies) -> None:
    """Raises RowOutOfRange naming the first row mhc would refuse: a fake tensor of 2^58 bytes,
    or a roofline time past 2^62 ns, was written, and every mhc command then refused the trace."""
    from .formatting import format_bytes

    total = 0
    for a in allocations:
        if not 1 <= a.bytes <= 2**56:
            raise RowOutOfRange(f"allocation {a.id} ({a.label or 'no label'}) holds {format_bytes(a.bytes)}, outside "
                                "1 B to 2^56 B (64.00 PiB), what one allocation of a trace may hold")
        total += a.bytes
        if total > 2**62:
            raise RowOutOfRange(f"the allocations up to {a.id} ({a.label or 'no label'}) hold {format_bytes(total)} "
                                "together, past 2^62 B (4.00 EiB), what all of a trace's may hold")
    for table, rows in (("kernel", kernels), ("allocation", allocations), ("copy", copies), ("marker", markers)):
        for n, r in enumerate(rows):
            times = (r.t_alloc, r.t_free) if table == "allocation" else (r.t_start, r.t_end)
            if any(t is not None and abs(t) > 2**62 for t in times):
                name = getattr(r, "label", None) or getattr(r, "name", "")
                raise RowOutOfRange(f"{table} {getattr(r, 'id', n + 1)}{f' ({name})' if name else ''}: a time of "
                                    f"{max(abs(t) for t in times if t is not None) / 1e9:.3g} s, past 2^62 ns "
                                    "(146 years), what a trace's times may be")
            if table == "copy" and not 0 <= r.bytes <= 2**56:
                raise RowOutOfRange(f"copy {r.id}: {format_bytes(r.bytes)}, outside 0 B to 2^56 B (64.00 PiB)")


def write_trace(path: str, allocations, kernels, markers, meta: dict[str, str],
                modules=(), saved=(), copies=(), replace: bool = True) -> None:
    """Writes a complete trace to `path` atomically (temporary file, then rename).

    `modules` (Module records, parents before children) and the kernels' module/phase/flops fill
    the capture tables `modules` and `kernel_info`; `saved` is (allocation id, kernel id, packs)
    for `saved_tensors`: the storages autograd saved for the backward, the op that saved them and
    how many times (views of one storage); `copies` are Copy records.
    With `replace` False an existing `path` is never replaced (OutputExists).
    """
    _refuse_out_of_range(allocations, kernels, markers, copies)
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
            # Each table's rows, every column: inserted, and summed into the content digest
            # (digest.py) from the same values; a table with a value SQLite could store otherwise
            # than given (a float in an INTEGER column) is summed as the file holds it.
            digest = Digest()

            def insert(table: str, rows: list[tuple], text_columns=()) -> None:
                if rows:
                    db.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
                if not digest.add_rows(table, rows, text_columns):
                    digest.add_table(db, table)

            insert("allocations", [(a.id, a.device, 0, a.bytes, a.t_alloc, a.t_free, a.stream, a.category,
                                    intern(a.label), None) for a in allocations])
            insert("kernels", [(k.id, k.device, k.stream, intern(k.name), k.t_start, k.t_end, k.step,
                                0, 0, 0, 0, 0, 0, 0, 0, 0) for k in kernels])
            insert("accesses", [(k.id, a, m) for k in kernels for a, m in sorted(k.accesses.items())])
            module_id = {"": 0}
            module_rows = []
            for m in modules:
                module_id[m.name] = len(module_id)
                module_rows.append((module_id[m.name], intern(m.name), module_id[m.parent], intern(m.type)))
            insert("modules", module_rows)
            insert("kernel_info", [(k.id, module_id[k.module], k.phase, k.flops, k.moved_bytes) for k in kernels])
            insert("saved_tensors", [tuple(s) for s in sorted(saved)])
            insert("copies", [(c.id, c.device, c.stream, c.kind, c.bytes, c.t_start, c.t_end) for c in copies])
            insert("markers", [(i + 1, intern(m.name), m.t_start, m.t_end, m.kind, m.idx)
                               for i, m in enumerate(markers)])
            insert("strings", [(sid, text) for text, sid in strings.items() if sid], text_columns=(1,))
            full_meta = dict(meta)
            full_meta["format"] = FORMAT_NAME
            full_meta["schema_version"] = str(SCHEMA_VERSION)
            full_meta["content_digest"] = digest.hex()
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", sorted(full_meta.items()))
            db.execute("COMMIT")
            db.executescript(_INDEXES)
            db.executescript(_DIGEST_TRIGGERS)
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


def gzip_note(path: str) -> str:
    """What a file that is no SQLite database is when it is gzip-compressed, as mhc says it
    (trace/src/sqlite_util.cpp): "gzip-compressed, not an SQLite database: decompress it first
    (gunzip ...)"; "" otherwise."""
    if file_bytes.read(path, 0, 2) != b"\x1f\x8b":
        return ""
    how = f"gunzip -k {path}" if path.endswith(".gz") and len(path) > 3 else f"gunzip -c {path} > trace.db"
    return f"gzip-compressed, not an SQLite database: decompress it first ({how})"


def _busy_timeout_s() -> float:
    """How long a trace another process holds locked is waited for, as mhc waits: MHC_BUSY_TIMEOUT_MS
    (a whole number of milliseconds, 0 to 3,600,000), else 600 s (docs/cli.md, "Environment")."""
    text = os.environ.get("MHC_BUSY_TIMEOUT_MS")
    if text is None:
        return 600.0
    if not re.fullmatch(r"0|[1-9][0-9]{0,6}", text) or int(text) > 3_600_000:
        from .number_grammar import shortened   # a value of 200 bytes quoted short, as mhc quotes it
        raise TraceError(f"MHC_BUSY_TIMEOUT_MS='{shortened(text)}': a whole number of milliseconds, 0 to 3600000")
    return int(text) / 1000


def _wal_without_index(path: str) -> bool:
    """True for a trace in SQLite's WAL mode (header bytes 18 and 19 are 2) in a folder this process
    cannot write, with no -shm index beside it: SQLite cannot make the index there, and every read
    failed ("attempt to write a readonly database"). Such a file is read immutable, as mhc reads
    it (docs/cli.md), when its -wal log is absent or empty; one with writes in its log is refused."""
    if file_bytes.read(path, 18, 2) != b"\x02\x02":
        return False
    folder = os.path.dirname(path) or "."
    if os.path.exists(path + "-shm") or os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return False
    if os.path.isfile(path + "-wal") and os.path.getsize(path + "-wal") > 0:
        raise TraceError(f"{path}: cannot read: it is in SQLite's WAL mode with writes in {path}-wal not yet in it, "
                         f"which SQLite reads only through an index it must make in {folder}, where this process "
                         f"cannot write: copy both files to a folder you can write, or have the owner run "
                         f"sqlite3 {path} 'PRAGMA journal_mode=DELETE'")
    return True


def _stray_log(path: str | os.PathLike) -> None:
    """A -wal log beside a trace not in WAL mode is another file's: SQLite applies its pages over the
    trace when it opens it, read-only too. Refused as mhc refuses it (sqlite_util.cpp, stray_log)."""
    path = os.fspath(path)   # callers pass str or pathlib paths
    if not os.path.isfile(path + "-wal") or file_bytes.read(path, 18, 2) in (b"\x02\x02", None):
        return
    try:   # no lock of SQLite's is on a -wal file: a descriptor of its own drops none
        with open(path + "-wal", "rb") as f:
            if f.read(4) not in (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83"):
                return
    except OSError:
        return
    raise TraceError(f"{path}: {path}-wal is there, a write-ahead log that {path} (not in SQLite's WAL mode) did "
                     "not leave: SQLite would apply its pages over the file's when it is opened (another file's "
                     "log, copied or left beside it); move it away and rerun")


class _Connection(sqlite3.Connection):
    """A connection to a trace; `snapshot` is what the file was when it was opened, for one read
    without a lock (immutable): None otherwise."""
    snapshot: tuple | None = None


# How a read without a lock that saw the file change is said (both refusals below), up to who wrote.
_READ_WITHOUT_LOCK = ("changed while it was read (it is in SQLite's WAL mode in a folder this process cannot "
                      "write, so it is read without a lock, and another process")


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _settled(path: str) -> tuple | None:
    """The file's identity once its last change is a tick of the coarse clock old, as mhc takes it
    (settled_stat, trace/src/sqlite_util.cpp): a write in the tick of this look would leave the
    file's times as seen. Waits at most 3 s; a file still changing then is being written."""
    give_up = time.monotonic() + 3
    while True:
        try:
            st = os.stat(path)
        except OSError:
            return None   # gone: SQLite's open says so
        whole_seconds = st.st_ctime_ns % 1_000_000_000 == 0 and st.st_mtime_ns % 1_000_000_000 == 0
        tick = 2_000_000_000 if whole_seconds else 20_000_000
        age = time.time_ns() - st.st_ctime_ns
        if age > tick:
            return _identity(st)
        if time.monotonic() >= give_up:
            raise TraceError(f"{path}: {_READ_WITHOUT_LOCK} kept writing it: in 3 s of waiting its last change was "
                             "never a tick old): run the command again when it is done")
        time.sleep(min(tick - age, 100_000_000) / 1e9)


def _require_unchanged(db: sqlite3.Connection, path: str) -> None:
    """Refuses what a read without a lock got when the file changed meanwhile: it may mix two
    versions (another process checkpointed into it). Called once every read of `db` is done."""
    taken = getattr(db, "snapshot", None)
    if taken is None:
        return
    try:
        now = _identity(os.stat(path))
    except OSError:
        now = None
    if now != taken:
        raise TraceError(f"{path}: {_READ_WITHOUT_LOCK} wrote it meanwhile): what was read may mix two versions "
                         "of it; run the command again")


def _side_file_in_the_way(path: str) -> str:
    """Why SQLite cannot use a side file of `path` (a folder, a link or a special file where it keeps
    the journal, log or index), as mhc says it (side_file_in_the_way, trace/src/sqlite_util.cpp); ""."""
    for suffix, name in (("-journal", "journal"), ("-wal", "write-ahead log"), ("-shm", "shared-memory index")):
        try:
            mode = os.lstat(path + suffix).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
            return f"{path}{suffix} is {what}, where SQLite keeps {path}'s {name}: move it away and rerun"
    return ""


def _open(path: str) -> sqlite3.Connection:
    if not os.path.isfile(path):
        from .json_input import not_a_regular_file, unreachable

        special = not_a_regular_file(path)   # a FIFO or a device was "no such file"; a loop of links too
        raise TraceError(f"{path}: " + ('is a directory, not a trace' if os.path.isdir(path) else
                                        special.split(",")[0] + ", not a trace" if special else
                                        unreachable(path)))
    # The path quoted into the URI: a '?', '#' or '%' in a file's name is part of the name (x#y.db
    # opened x, 50%41.db 50A.db).
    wait_s = _busy_timeout_s()
    _stray_log(path)
    # Read without a lock: what the file was, for _require_unchanged (mhc-torch read it on while
    # another process wrote it, where mhc refused).
    snapshot = _settled(path) if _wal_without_index(path) else None
    mode = "mode=ro" if snapshot is None else "immutable=1"
    # Quoted as the file system's bytes: a name that is no UTF-8 (bad\xff.db) raised UnicodeEncodeError.
    uri_path = urllib.parse.quote(os.fsencode(os.path.abspath(path)))
    db = sqlite3.connect(f"file:{uri_path}?{mode}", uri=True, timeout=wait_s, factory=_Connection)
    db.snapshot = snapshot
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        db.close()
        if "locked" in str(e):   # a trace another process writes: it was "not a trace: database is locked"
            raise TraceError(f"{path}: cannot read: the file stayed locked by another process for {wait_s:g} s "
                             "(MHC_BUSY_TIMEOUT_MS sets the wait)") from None
        side = _side_file_in_the_way(path)
        if side:   # it was "not a trace: disk I/O error"
            raise TraceError(f"{path}: cannot read: {side}") from None
        gz = gzip_note(path)
        raise TraceError(f"{path}: not a trace: " + (f"the file is {gz}" if gz else str(e))) from None
    if "meta" not in tables:
        db.close()
        raise TraceError(f"{path}: not a trace (no meta table)")
    if version != SCHEMA_VERSION:
        try:   # a runs database (mhc simulate --runs-db) was "schema version 0, expected 1"
            kind = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('format', 'trace')"))
        except sqlite3.DatabaseError:
            kind = {}
        db.close()
        if kind.get("format") == "mhc-runs":
            made = f" (it was made for {kind['trace']})" if kind.get("trace") else ""
            raise TraceError(f"{path}: is a runs database (mhc simulate --runs-db), not a trace{made}")
        raise TraceError(f"{path}: schema version {version}, expected {SCHEMA_VERSION}")
    try:
        why = _not_a_whole_trace(db, path, tables)
    except sqlite3.DatabaseError as e:   # meta without its columns: said as _database_errors_said says it
        db.close()
        raise TraceError(_database_error_line(path, e)) from None
    if why:
        db.close()
        raise TraceError(why)
    return db


# The tables every trace has (trace/src/schema.cpp, kRequiredTables).
_REQUIRED_TABLES = ("meta", "strings", "allocations", "kernels", "accesses", "copies", "markers", "runs", "run_config",
                    "run_metrics", "run_events", "run_kernels", "run_memory")


def _not_a_whole_trace(db: sqlite3.Connection, path: str, tables: set[str]) -> str:
    """What mhc's reader refuses in a file of the right schema version (trace/src/reader.cpp), or
    "": a table missing (`runs` of a file without run_metrics was a traceback of pandas'
    DatabaseError, exit 1), meta saying another format, or another schema_version than the file's."""
    for table in _REQUIRED_TABLES:
        if table not in tables:
            return f"{path}: missing table '{table}' (a damaged or foreign file)"
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('format', 'schema_version')"))
    if meta.get("format") != FORMAT_NAME:
        return f"{path}: not an mhc trace (meta format is '{meta.get('format', '')}', not '{FORMAT_NAME}')"
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        return (f"{path}: meta schema_version is '{meta.get('schema_version', '')}', not {SCHEMA_VERSION} as "
                "PRAGMA user_version says (a damaged or foreign file)")
    return ""


def _table_lacking(path: str, column: str) -> str:
    """The table of `path` that the schema gives `column` and the file does not, or '' (SQLite's
    "no such column: value" named none of meta, run_config and run_metrics, which all have one)."""
    expected = sqlite3.connect(":memory:")
    try:
        expected.executescript(_TABLES)
        db = sqlite3.connect(f"file:{urllib.parse.quote(os.fspath(path))}?mode=ro", uri=True)
    except sqlite3.Error:
        return ""
    try:
        for (table,) in expected.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            want = {row[1] for row in expected.execute("SELECT * FROM pragma_table_info(?)", (table,))}
            have = {row[1] for row in db.execute("SELECT * FROM pragma_table_info(?)", (table,))}
            if column in want and have and column not in have:
                return table
    except sqlite3.Error:
        return ""
    finally:
        expected.close()
        db.close()
    return ""


def _database_error_line(path: str, cause: Exception) -> str:
    """SQLite's error `cause` in reading `path`, said as mhc says it: a missing column with its table."""
    reason = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    if reason.startswith("no such column: "):
        column = reason[len("no such column: "):].rsplit(".", 1)[-1]
        table = _table_lacking(path, column)
        reason = f"table {table} has no column {column}" if table else reason
    damaged = " (a damaged or foreign file)" if reason.startswith(("no such column", "no such table", "table ")) else ""
    return f"{path}: cannot read: {reason}{damaged}"


def _database_errors_said(read):
    """`read(path, ...)` with SQLite's errors said as TraceError naming the file, as mhc says them
    (`T.db: table run_config has no column value`): a run table or meta without one of its
    columns was a traceback of pandas' DatabaseError or sqlite3's OperationalError, exit 1."""
    import functools

    @functools.wraps(read)
    def reading(path, *args, **kwargs):
        try:
            return read(path, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 (sqlite3's and pandas' DatabaseError only; others re-raised)
            cause = e.__cause__ if isinstance(e.__cause__, sqlite3.DatabaseError) else e
            if not isinstance(cause, sqlite3.DatabaseError) and type(e).__name__ != "DatabaseError":
                raise
            raise TraceError(_database_error_line(path, cause)) from None

    return reading


@_database_errors_said
def read_meta(path: str) -> dict[str, str]:
    db = _open(path)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        _require_unchanged(db, path)
        return meta
    finally:
        db.close()


@_database_errors_said
def read_runs(path: str):
    """The trace's runs as one DataFrame, a row per run: id, kind, name, status, created, base_run,
    then one column per `run_config` key (prefixed `config.`) and per `run_metrics` key."""
    import pandas as pd

    db = _open(path)
    try:
        runs = pd.read_sql("SELECT * FROM runs ORDER BY id", db)
        cfg = pd.read_sql("SELECT run, key, value FROM run_config", db)
        met = pd.read_sql("SELECT run, key, value FROM run_metrics", db)
        stale = run_identity.stale_runs(db, path)
        _require_unchanged(db, path)
    finally:
        db.close()
    # A run computed from other data (the trace edited after it was stored) is not the trace's:
    # left out, and said in df.attrs["stale_note"] (docs/trace-format.md, "Runs and their data").
    runs = runs[~runs["id"].isin(list(stale))].drop(columns=["trace_fingerprint"], errors="ignore")
    runs = runs.set_index("id")
    if len(cfg):
        wide = cfg.pivot(index="run", columns="key", values="value").add_prefix("config.")
        runs = runs.join(wide)
    if len(met):
        runs = runs.join(met.pivot(index="run", columns="key", values="value"))
    runs.attrs["stale_note"] = run_identity.note(path, stale)
    return runs


def _run_events_by_range(db, run: int):
    """One run's events read from its rowid range (run_event_rows), or None where the file has no
    range for it or the range does not fit its rows (renumbered by a VACUUM, written by hand): the
    same test as the C++ reader's, so that a new file (no index on run) is not scanned whole."""
    import pandas as pd

    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_event_rows'").fetchone() is None:
        return None
    found = db.execute("SELECT first_row, last_row FROM run_event_rows WHERE run = ?", (run,)).fetchone()
    if found is None:
        return None
    first, last = found
    df = pd.read_sql("SELECT * FROM run_events WHERE rowid BETWEEN ? AND ?", db, params=(first, last))
    beside = db.execute("SELECT count(*) FROM run_events WHERE rowid IN (?, ?) AND run = ?",
                        (first - 1, last + 1, run)).fetchone()[0]
    fits = len(df) == max(last - first + 1, 0) and bool((df["run"] == run).all()) and beside == 0
    return df if fits else None


@_database_errors_said
def read_run_table(path: str, table: str, run: int | None = None):
    """One of the per-run tables (run_events, run_kernels, run_memory, run_config, run_metrics) as
    a DataFrame, for one run or all; run_events gets the event kind's name as `kind_name`."""
    import pandas as pd

    allowed = {"run_events", "run_kernels", "run_memory", "run_config", "run_metrics"}
    if table not in allowed:
        raise ValueError(f"unknown run table '{table}'; valid: {', '.join(sorted(allowed))}")
    db = _open(path)
    try:
        stale = run_identity.stale_runs(db, path)
        if run in stale:
            raise TraceError(run_identity.refusal(path, run, stale))
        df = _run_events_by_range(db, run) if table == "run_events" and run is not None else None
        if df is None:
            where, args = ("WHERE run = ?", (run,)) if run is not None else ("", ())
            df = pd.read_sql(f"SELECT * FROM {table} {where}", db, params=args)
        if stale:
            df = df[~df["run"].isin(list(stale))]
        if table == "run_events":
            kinds = dict(db.execute("SELECT id, name FROM event_kinds"))
            df["kind_name"] = df["kind"].map(kinds)
        _require_unchanged(db, path)
        return df
    finally:
        db.close()


@_database_errors_said
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
        _require_unchanged(db, path)
        return df
    finally:
        db.close()
