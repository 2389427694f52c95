"""`mhc-torch runs`: a trace's runs as text a user reads in 100 columns, in the words and units of
`mhc sweep` and `mhc info` (peak, peak reduction, throughput loss, stall time, swap-in, swap-out; bytes and durations as
mhc prints them (formatting.py), a reduction with 1 decimal, a loss with 2; "OOM" for a run out of
memory), and every stored field of each run with --all (a field per line, a column per run)."""

from __future__ import annotations

import math

from .formatting import format_bytes, format_ns
from .number_grammar import printable

WIDTH = 100
# Two lines: the figures under the names mhc simulate, sweep and --json give them (peak reduction,
# throughput loss, stall time; "stall" alone was a second name for the stall time).
HEADER = f"{'':>5} {'':<9} {'':<10} {'':>10} {'peak':>9} {'throughput':>10} " \
         f"{'stall':>10} {'swap-in':>10} {'swap-out':>10}\n" \
         f"{'id':>5} {'kind':<9} {'status':<10} {'peak':>10} {'reduction':>9} {'loss':>10} " \
         f"{'time':>10} {'(H2D)':>10} {'(D2H)':>10}  name"


def _number(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _row(run_id, run) -> str:
    """One run: a replayed run's measured peak and loss, a simulated run's simulated ones ("-" for
    what it lacks, as mhc info's runs table); a name too long for the line goes under the row."""
    get = lambda key: _number(run.get(key))  # noqa: E731
    replayed = run.get("kind") == "replayed"
    oom = run.get("status") == "oom"
    peak = None if oom else get("measured_peak_bytes" if replayed else "simulated_peak_bytes")
    reduction = None if oom or replayed else get("peak_reduction")
    loss = get("measured_throughput_loss" if replayed else "throughput_loss")
    size = lambda v: "-" if v is None else format_bytes(v)  # noqa: E731
    stall = get("stall_ns")
    cells = (f"{int(run_id):>5} {printable(str(run.get('kind', '-'))):<9} "
             f"{printable(str(run.get('status', '-'))):<10} {size(peak):>10} "
             f"{'-' if reduction is None else f'{reduction * 100:.1f}%':>9} "
             f"{'OOM' if oom else '-' if loss is None else f'{loss * 100:.2f}%':>10} "
             f"{'-' if stall is None else format_ns(stall):>10} {size(get('swap_in_bytes')):>10} "
             f"{size(get('swap_out_bytes')):>10}")
    name = printable(str(run.get("name", "")))
    if len(cells) + 2 + len(name) <= WIDTH:
        return f"{cells}  {name}"
    if len(name) > WIDTH - 6:
        name = name[:WIDTH - 9] + "..."
    return f"{cells}\n      {name}"


def runs_table(df) -> str:
    """The summary: a row per run, then what its figures are."""
    lines = [HEADER]
    kinds = set()
    for run_id, run in df.iterrows():
        lines.append(_row(run_id, run))
        kinds.add(run.get("kind"))
    if "simulated" in kinds:
        lines.append("simulated: peak under the allocator model (caching: reserved bytes); "
                     "loss, stall time: estimates")
    if "replayed" in kinds:
        lines.append("replayed: peak, loss, stall and swaps measured on the replay's backend")
    lines.append("every stored field of each run: mhc-torch runs --all TRACE (in Python: mhc_torch.read_runs)")
    return "\n".join(lines)


def runs_fields(df, width: int) -> str:
    """Every stored field, a line each (the runs table's columns, then run_config keys as config.*,
    then run_metrics keys), a column per run, as many runs side by side as `width` holds: some 80
    fields read down a page, not across 1,000 columns. Values as stored (bytes, ns), "-" absent."""
    def cell(v) -> str:
        if isinstance(v, str):
            return printable(v)
        x = _number(v)
        if x is None:
            return "-"
        return str(int(x)) if x == int(x) and abs(x) < 1e18 else f"{x:.6g}"

    keys = [str(k) for k in df.columns]
    key_width = max(len(k) for k in keys)
    columns = []
    for run_id, run in df.iterrows():
        values = [cell(run[k]) for k in df.columns]
        values = [v if len(v) <= 60 else v[:57] + "..." for v in values]
        columns.append((f"run {int(run_id)}", values, max(len(v) for v in values + [f"run {int(run_id)}"])))
    blocks, block, used = [], [], key_width
    for column in columns:
        if block and used + 2 + column[2] > width:
            blocks.append(block)
            block, used = [], key_width
        block.append(column)
        used += 2 + column[2]
    blocks.append(block)
    out = []
    for block in blocks:
        rows = [[""] + [title for title, _, _ in block]] + \
               [[key] + [values[i] for _, values, _ in block] for i, key in enumerate(keys)]
        widths = [key_width] + [w for _, _, w in block]
        out.append("\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows))
    return "\n\n".join(out)
