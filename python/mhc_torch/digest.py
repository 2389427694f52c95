"""A trace's content digest, version 2 (docs/trace-format.md, "Content digest"): what the C++ store
computes as it writes (trace/src/content_digest.hpp), here with numpy's wrapping uint64
arithmetic, so that the traces mhc-torch writes have a content identity that `mhc check`
recomputes and verifies.

Every value of a content table's row adds a term, in two 64-bit lanes, of its table, the row's
primary key, its column's position, its SQLite type and its value; each lane is summed mod 2^64.
The sum does not depend on the order of the rows.
"""
from __future__ import annotations

import itertools
import os
import sqlite3
import urllib.parse

import numpy as np

# v2's table number is the index + 1; the tables whose primary key has two columns.
TABLES = ("strings", "allocations", "kernels", "accesses", "copies", "markers", "segments", "modules",
          "kernel_info", "saved_tensors")
_TWO_KEYS = {"accesses", "saved_tensors"}

# SQLite's type codes (sqlite3_column_type).
INTEGER, FLOAT, TEXT, BLOB, NULL = 1, 2, 3, 4, 5

_U = np.uint64
_M1, _M2 = _U(0xFF51AFD7ED558CCD), _U(0xC4CEB9FE1A85EC53)
_TABLE_MUL = _U(0x9E3779B97F4A7C15)
_LANE_B = _U(0xE7037ED1A0B428DB)
_COLUMN_A = _U(0xD6E8FEB86659FD93)
_COLUMN_B = _U(0xA0761D6478BD642F)
_BYTES_SEED = _U(0x8EBC6AF09C88C6E3)
_S33 = _U(33)
_MASK = (1 << 64) - 1


def _fmix(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer, on a uint64 array (wrapping)."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


def _fmix_(x: np.ndarray) -> np.ndarray:
    """_fmix in place, on a uint64 array of the caller's own (no temporaries but one)."""
    t = x >> _S33
    x ^= t
    x *= _M1
    np.right_shift(x, _S33, out=t)
    x ^= t
    x *= _M2
    np.right_shift(x, _S33, out=t)
    x ^= t
    return x


def _bytes_words(values: list[bytes]) -> np.ndarray:
    """Each TEXT (UTF-8) or BLOB value's word: its length, then its little-endian 8-byte words
    (the last padded with zero bytes), chained through the finalizer."""
    n = len(values)
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
    h = _fmix(lengths.astype(_U) * _TABLE_MUL + _BYTES_SEED)
    if n == 0:
        return h
    words_per = (lengths + 7) // 8
    words = np.frombuffer(b"".join(v + b"\0" * (-len(v) % 8) for v in values), dtype="<u8").astype(_U)
    starts = np.concatenate(([0], np.cumsum(words_per)[:-1]))
    # Longest first, so that the values still hashing at word j are a prefix.
    order = np.argsort(-words_per, kind="stable")
    left = -words_per[order]  # ascending
    at = starts[order]
    hs = h[order]
    for j in range(int(-left[0]) if n else 0):
        active = int(np.searchsorted(left, -j, side="left"))  # values of more than j words
        hs[:active] = _fmix(hs[:active] ^ words[at[:active] + j])
    h[order] = hs
    return h


def _column(values: list, text: bool, as_stored: bool):
    """(types, words) of one column's values, or None where SQLite's column affinity could store
    a value otherwise than given (a float or a str in an INTEGER column): the caller reads such a
    table back. `as_stored`: the values were read from the file (every type taken as it is)."""
    n = len(values)
    kinds = set(map(type, values))
    if kinds <= {int, bool}:
        return np.full(n, INTEGER, dtype=_U), np.array(values, dtype=np.int64).view(_U)
    if kinds <= {int, bool, type(None)}:
        null = np.fromiter((v is None for v in values), dtype=bool, count=n)
        words = np.array([0 if v is None else v for v in values], dtype=np.int64).view(_U)
        return np.where(null, _U(NULL), _U(INTEGER)), words
    if kinds <= {str, type(None)} and (text or as_stored):
        types = np.full(n, TEXT, dtype=_U)
        words = np.zeros(n, dtype=_U)
        idx = [i for i, v in enumerate(values) if v is not None]
        types[[i for i, v in enumerate(values) if v is None]] = NULL
        words[idx] = _bytes_words([values[i].encode("utf-8") for i in idx])
        return types, words
    if not as_stored:
        return None
    types = np.zeros(n, dtype=_U)
    words = np.zeros(n, dtype=_U)
    blobs, blob_at = [], []
    for i, v in enumerate(values):
        if v is None:
            types[i] = NULL
        elif isinstance(v, int):
            types[i], words[i] = INTEGER, np.array(v, dtype=np.int64).view(_U)
        elif isinstance(v, float):
            types[i], words[i] = FLOAT, np.array(v, dtype=np.float64).view(_U)
        else:
            types[i] = TEXT if isinstance(v, str) else BLOB
            blobs.append(v.encode("utf-8") if isinstance(v, str) else bytes(v))
            blob_at.append(i)
    if blobs:
        words[blob_at] = _bytes_words(blobs)
    return types, words


class Digest:
    """The v2 digest of the rows added (add_rows, add_table), in any order."""

    def __init__(self):
        self.a = 0
        self.b = 0

    def add_rows(self, table: str, rows: list[tuple], text_columns=(), as_stored: bool = False) -> bool:
        """Adds `rows` (tuples, every column of `table` in the schema's order) as they will be
        stored. False, adding nothing, where a value could be stored otherwise than given (the
        caller then adds the table as the file holds it: add_table)."""
        if not rows:
            return True
        kinds = set(map(type, itertools.chain.from_iterable(rows)))
        if kinds <= {int, bool, type(None)}:
            # Integers and NULLs (every table but strings): one 2-D array, no per-column work.
            shape = (len(rows), len(rows[0]))
            cells = itertools.chain.from_iterable
            if type(None) in kinds:
                values = np.array(rows, dtype=object)
                null = np.equal(values, None)
                values[null] = 0
                words = values.astype(np.int64).view(_U)
                types = np.where(null, _U(NULL), _U(INTEGER))
            else:
                words = np.fromiter(cells(rows), dtype=np.int64, count=shape[0] * shape[1]).view(_U)
                types = _U(INTEGER)
            words = words.reshape(shape)
        else:
            columns = [_column([r[c] for r in rows], c in text_columns, as_stored) for c in range(len(rows[0]))]
            if any(c is None for c in columns):
                return False
            types = np.stack([c[0] for c in columns], axis=1)
            words = np.stack([c[1] for c in columns], axis=1)
        t = TABLES.index(table)
        with np.errstate(over="ignore"):
            ka = words[:, 0] + _U(t + 1) * _TABLE_MUL
            ka = _fmix_(ka)
            if table in _TWO_KEYS:
                ka += words[:, 1]
            ka = _fmix_(ka)[:, None]
            kb = _fmix_(ka ^ _LANE_B)
            code = (np.arange(words.shape[1], dtype=_U) * _U(8))[None, :] + types
            lane = ka + code * _COLUMN_A  # (rows, columns)
            lane ^= words
            self.a = (self.a + int(np.sum(_fmix_(lane), dtype=_U))) & _MASK
            lane = kb ^ (code * _COLUMN_B)
            lane += words
            self.b = (self.b + int(np.sum(_fmix_(lane), dtype=_U))) & _MASK
        return True

    def add_table(self, db: sqlite3.Connection, table: str) -> None:
        """Adds every row of `table` as `db` holds it."""
        rows = db.execute(f"SELECT * FROM {table}").fetchall()
        self.add_rows(table, rows, as_stored=True)

    def hex(self) -> str:
        return f"v2:{self.a:016x}{self.b:016x}"


def of_file(path: str) -> str:
    """The v2 digest of a trace file's rows (what `mhc check` recomputes for a v2 digest)."""
    # The name quoted into the URI as the file system's bytes: a '#' or '?' in it (x#y.db opened x)
    # and a name that is no UTF-8 are the file's own.
    db = sqlite3.connect(f"file:{urllib.parse.quote(os.fsencode(os.path.abspath(path)))}?mode=ro", uri=True)
    try:
        return of_db(db)
    finally:
        db.close()


def of_db(db: sqlite3.Connection) -> str:
    """The v2 digest of the rows of the trace open on `db`."""
    d = Digest()
    present = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in TABLES:
        if table in present:
            d.add_table(db, table)
    return d.hex()
