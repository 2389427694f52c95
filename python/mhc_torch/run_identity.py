"""Which runs stored in a trace were computed from it as it is now (docs/trace-format.md, "Runs and
their data"): the same test and the same words as the C++ readers' (trace/src/run_files.cpp,
RunReader::stale_reason), so that mhc_torch.read_runs never shows a run of other data as the trace's."""
from __future__ import annotations

import sqlite3

from . import digest

_MASK = (1 << 64) - 1
_AGAIN = "compute {it} again from the trace as it is: mhc simulate {path} (mhc validate for a replay)"


def _fnv_field(h: int, data: bytes) -> int:
    """64-bit FNV-1a over `data` then the byte 0xff (mhc::Fnv1a::add_field, its offset included)."""
    for byte in data + b"\xff":
        h = ((h ^ byte) * 1099511628211) & _MASK
    return h


_GUARDS: dict[str, str] = {}


def _squeezed(sql) -> str:
    return " ".join(str(sql or "").split())


def _guarded(db) -> bool:
    """trace::digest_guarded: every digest trigger of trace/schema.sql is in the file as it makes them."""
    if not _GUARDS:
        from .store import _SCHEMA   # noqa: PLC0415 (store imports this module)
        mem = sqlite3.connect(":memory:")
        mem.executescript(_SCHEMA["trace_tables"] + _SCHEMA["content_digest_triggers"])
        _GUARDS.update((n, _squeezed(s)) for n, s in mem.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        mem.close()
    have = {n: _squeezed(s) for n, s in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
    return all(have.get(n) == s for n, s in _GUARDS.items())


def identity_digest(db, stored: str) -> str:
    """trace::identity_meta's content_digest: the stored one, or what the rows give (a v2 digest)
    when the file lacks the triggers that keep it true (a row could be changed without a trace)."""
    if not str(stored).startswith("v2:") or _guarded(db):
        return stored
    return digest.of_db(db)


def fingerprint(db) -> str:
    """trace::fingerprint of trace::identity_meta: the meta rows (in byte order of their keys) and
    the row counts."""
    h = 1469598103934665603
    meta = dict(db.execute("SELECT key, value FROM meta"))
    if "content_digest" in meta:
        meta["content_digest"] = identity_digest(db, meta["content_digest"])
    rows = [(str(k).encode(), str(v).encode()) for k, v in meta.items()]
    for key, value in sorted(rows):
        h = _fnv_field(_fnv_field(h, key), value)
    for table in ("allocations", "kernels", "accesses", "copies", "markers", "strings"):
        h = _fnv_field(h, str(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]).encode())
    return f"{h:016x}"


def _reason(stored, now: str, edited: str, path: str) -> str:
    if stored:
        if stored == now:
            return ""
        return (f"was computed from other data than {path} holds now (trace fingerprint {stored} then, {now} now: "
                "its rows or meta were changed after the run was stored)")
    if not edited:   # not recorded (an mhc before 2026-12-06): the trace's while its rows are as written
        return ""
    return (f"does not record which data it was computed from (stored by an mhc before 2026-12-06), and {path}'s "
            f"rows were changed after it was written ({edited})")


def stale_runs(db, path: str) -> dict[int, tuple[str, str]]:
    """{run id: (its name, why it is stale)} for each run of `db` computed from other data."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
    if not columns:
        return {}
    recorded = "trace_fingerprint" if "trace_fingerprint" in columns else "NULL"
    rows = db.execute(f"SELECT id, name, {recorded} FROM runs ORDER BY id").fetchall()
    if not rows:
        return {}
    stored_digest = db.execute("SELECT value FROM meta WHERE key = 'content_digest'").fetchone()
    edited = ""
    if stored_digest and str(stored_digest[0]).startswith("edited:"):
        edited = f"meta content_digest '{stored_digest[0]}'"
    elif stored_digest and not all(r[2] for r in rows):
        rows_give = identity_digest(db, stored_digest[0])
        if rows_give != stored_digest[0]:
            edited = (f"meta content_digest {stored_digest[0]}, the rows {rows_give}: a row was changed with its "
                      "digest triggers dropped")
    now = fingerprint(db) if any(r[2] for r in rows) else ""
    out = {}
    for run, name, stored in rows:
        why = _reason(stored, now, edited, path)
        if why:
            out[run] = (name, why)
    return out


def _run(path: str, run: int, name: str) -> str:
    return f"{path}: run {run}" + (f" ({name})" if name else "")


def refusal(path: str, run: int, stale: dict[int, tuple[str, str]]) -> str:
    """The line that refuses run `run` by name (mhc export --run, load_run); empty when not stale."""
    if run not in stale:
        return ""
    name, why = stale[run]
    return f"{_run(path, run, name)} {why}; " + _AGAIN.format(it="it", path=path)


def note(path: str, stale: dict[int, tuple[str, str]]) -> str:
    """One line saying which runs a reader leaves out, as mhc info says it; empty when none."""
    if not stale:
        return ""
    if len(stale) == 1:
        (run, (name, why)), = stale.items()
        return f"{_run(path, run, name)} is not shown: it {why}; " + _AGAIN.format(it="it", path=path)
    ids = ", ".join(str(i) for i in list(stale)[:8]) + (f", … ({len(stale)} in all)" if len(stale) > 8 else "")
    return (f"{path}: runs {ids} are not shown: they were computed from other data than {path} holds now (its "
            "rows or meta were changed after they were stored); " + _AGAIN.format(it="them", path=path))
