#!/usr/bin/env python3
"""Says whether two trace files hold the same trace: every table of the first (allocations,
kernels, accesses, markers, strings, meta, the capture tables, ...) row for row equal to the same
table of the second, in the order of each table's key. Exit status 0 when they are the same, 1
with the first rows that differ (up to five per table) when not, 2 on a file that cannot be read.

    python3 bench/torch/same_trace.py A.db B.db [--ignore-meta KEY ...]

Only the standard library. Meta keys given with --ignore-meta (a path, a date) are left out.
"""
import argparse
import os
import sqlite3
import sys


def _open(path):
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    except sqlite3.DatabaseError as e:
        raise SystemExit(f"{path}: not a trace: {e}") from None
    return db, tables


def _rows(db, table, ignore_meta):
    cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
    order = ", ".join(f'"{c}"' for c in cols)
    rows = db.execute(f'SELECT * FROM "{table}" ORDER BY {order}').fetchall()
    if table == "meta":
        rows = [r for r in rows if r[0] not in ignore_meta]
    return cols, rows


def differences(a_path, b_path, ignore_meta=()):
    """Lines that describe how the traces differ (none when they are the same)."""
    a, a_tables = _open(a_path)
    b, b_tables = _open(b_path)
    out = []
    if a_tables != b_tables:
        out.append(f"tables differ: {sorted(set(a_tables) ^ set(b_tables))}")
    for table in a_tables:
        if table not in b_tables:
            continue
        a_cols, a_rows = _rows(a, table, ignore_meta)
        b_cols, b_rows = _rows(b, table, ignore_meta)
        if a_cols != b_cols:
            out.append(f"{table}: columns differ: {a_cols} vs {b_cols}")
            continue
        if a_rows == b_rows:
            continue
        pairs = [(i, a_rows[i] if i < len(a_rows) else None, b_rows[i] if i < len(b_rows) else None)
                 for i in range(max(len(a_rows), len(b_rows)))]
        differing = [(i, ra, rb) for i, ra, rb in pairs if ra != rb]
        if len(a_rows) != len(b_rows):
            out.append(f"{table}: {len(a_rows)} rows vs {len(b_rows)}")
        else:
            out.append(f"{table}: differ in {len(differing)} of their rows")
        out += [f"  row {i}: {ra} vs {rb}" for i, ra, rb in differing[:5]]
    a.close()
    b.close()
    return out


def main(argv):
    p = argparse.ArgumentParser(description="Whether two traces hold the same rows in every table.")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--ignore-meta", nargs="*", default=[], metavar="KEY")
    args = p.parse_args(argv)
    try:
        diff = differences(args.a, args.b, set(args.ignore_meta))
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    if diff:
        print("\n".join(diff))
        return 1
    print(f"same trace: {args.a} and {args.b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
