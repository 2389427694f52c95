"""How mhc prints a figure, for every mhc-torch command (docs/cli.md, "What the commands print"):
the rules of the C++ tools' mhc::format_bytes and mhc::format_ns (common/src/units.cpp), written
once for Python. tests/data/figure-formats.tsv holds the values both are tested on
(tests/trace/test_units.cpp, python/tests/test_formatting.py), so a change to either shows.

- bytes: binary units, two decimals (`77.96 GiB`), up to EiB; under 1 KiB the whole count (`512 B`);
- durations: `ns` whole, `us` and `ms` with two decimals, `s` with three (`320.50 ms`, `5.338 s`).

A figure given as a float (a pandas column) is cut to a whole number first, as the C++ tools'
static_cast<int64_t> of a stored metric does.
"""
from __future__ import annotations

__all__ = ["format_bytes", "format_ns"]

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(b: float) -> str:
    """A byte count as mhc prints one: `512 B`, `1.50 KiB`, `77.96 GiB`."""
    b = int(b)
    v, u = float(b), 0
    while abs(v) >= 1024 and u < len(_BYTE_UNITS) - 1:
        v /= 1024
        u += 1
    return f"{b} B" if u == 0 else f"{v:.2f} {_BYTE_UNITS[u]}"


def format_ns(ns: float) -> str:
    """A duration in nanoseconds as mhc prints one: `999 ns`, `1.50 us`, `320.50 ms`, `5.338 s`."""
    ns = int(ns)
    a = abs(float(ns))
    if a < 1e3:
        return f"{ns} ns"
    if a < 1e6:
        return f"{ns / 1e3:.2f} us"
    if a < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"
