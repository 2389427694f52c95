"""`mhc-torch runs`: a trace's simulated and replayed runs, as a table or field by field."""
from __future__ import annotations

import shutil

from .cli_io import _say
from .number_grammar import printable


def _runs(a) -> int:
    from .runs_text import runs_fields, runs_table
    from .store import TraceError, read_runs

    if a.trace == "":  # was "mhc-torch: : no such file"; said as mhc says an empty value
        _say("mhc-torch: runs: the TRACE argument is empty (mhc-torch runs --help)")
        return 2
    try:
        df = read_runs(a.trace)
    except TraceError as e:
        _say(f"mhc-torch: {e}")
        return 2
    if df.attrs.get("stale_note"):   # runs computed from other data: not shown
        _say(f"mhc-torch: warning: {df.attrs['stale_note']}")
    if not len(df):
        print(f"{printable(a.trace)}: no runs")
    elif a.all:
        # the fields down the page, the runs across, wrapped at the terminal's width (COLUMNS, else 100)
        print(runs_fields(df, shutil.get_terminal_size((100, 24)).columns))
    else:
        print(runs_table(df))
    return 0
