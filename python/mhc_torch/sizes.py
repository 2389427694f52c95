"""The size grammar of mhc-toolkit (docs/cli.md, "Sizes"; `mhc help sizes`), the same rule as the
C++ tools (common/src/units.cpp): a number (digits, an optional fraction; no sign, no exponent),
optional whitespace, then a unit in any case: B; K, KiB, M, MiB, G, GiB, T, TiB (powers of 1024);
kB, MB, GB, TB (powers of 1000); rounded to the nearest byte. A number without a unit is refused.
Shares are a number and '%' ("70 %"). tests/data/size-grammar.tsv holds the cases both parsers
are tested on; the messages are the C++ tools' word for word.
"""
from __future__ import annotations

import math
import re

from .formatting import format_bytes

__all__ = ["SizeError", "parse_size", "parse_share", "parse_bandwidth"]

UNITS = "B, KiB, MiB, GiB, TiB, kB, MB, GB, TB"
_BYTES = {"b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30,
          "t": 2**40, "tib": 2**40, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_SPACE = " \t\n\r\f\v"
INT64_MAX = 2**63 - 1


class SizeError(ValueError):
    """A size, share or bandwidth that does not follow the grammar; the message quotes the text."""


def _split(text: str, quoted: str, what: str, example: str) -> tuple[str, float, str]:
    t = text.strip(_SPACE)
    if t.startswith("-"):
        raise SizeError(f"{quoted}: a {what} cannot be negative")
    m = _NUMBER.match(t)
    if not m:
        raise SizeError(f"{quoted}: not a {what} ({example})")
    return m.group(0), float(m.group(0)), t[m.end():].strip(_SPACE)


def _unit_bytes(unit: str) -> float:
    return _BYTES.get(unit.lower(), 0)


def _round(x: float) -> float:
    return math.floor(x + 0.5)  # half away from zero for these non-negative values, as C++ does


def _exact_bytes(number: str, per: float):
    """number x per to the nearest whole, halves up, exactly where the number has at most 19 digits
    (a float holds whole bytes only up to 2^53: '72057594037927935B' read as 2^56 before 2026-12-05),
    None otherwise (read through a float), as mhc's parse_size (common/src/units.cpp)."""
    digits = number.replace(".", "")
    if len(digits) > 19 or per != math.floor(per) or per > 2.0**50:
        return None
    scale = 10 ** (len(number) - 1 - number.index(".")) if "." in number else 1
    return (2 * int(digits) * int(per) + scale) // (2 * scale)


def parse_size(text: str, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """Bytes of a size such as "40GiB", "1.5 GB" or "64k", within [minimum, maximum]."""
    quoted = f"'{text}'"
    number, value, unit = _split(text, quoted, "size", "a number and a unit: 40GiB, 512 MB")
    if not unit:
        hints = [number + u for u in ("GiB", "GB", "MiB", "MB", "KiB", "kB", "B")
                 if minimum <= _round(value * _unit_bytes(u)) <= maximum][:2]
        hint = ": " + " or ".join(hints) if hints else ""
        raise SizeError(f"{quoted}: a size needs a unit{hint} (mhc help sizes)")
    per = _unit_bytes(unit)
    if per == 0:
        raise SizeError(f"{quoted}: unknown unit '{unit}' ({UNITS}; mhc help sizes)")
    b = _exact_bytes(number, per)
    if b is None:
        b = _round(value * per)
    if b >= 2**63:
        raise SizeError(f"{quoted}: too large")
    b = int(b)
    if b < minimum:
        raise SizeError(f"{quoted}: at least {format_bytes(minimum)}")
    if b > maximum:
        raise SizeError(f"{quoted}: at most {format_bytes(maximum)}")
    return b


def parse_share(text: str, max_percent: float = 100) -> float:
    """A share such as "70%" or "70 %" as a fraction (0.7), within [0, max_percent]%."""
    quoted = f"'{text}'"
    number, value, unit = _split(text, quoted, "share", "a percentage: 70%")
    limit = f"{max_percent:g}%"
    if not unit:
        if value <= max_percent:
            raise SizeError(f"{quoted}: a share needs a '%': {number}%")
        raise SizeError(f"{quoted}: a share needs a '%' and is at most {limit}")
    if unit != "%":
        raise SizeError(f"{quoted}: not a percentage (a number and '%': 70%)")
    if value > max_percent:
        raise SizeError(f"{quoted}: at most {limit}")
    return value / 100.0


def parse_bandwidth(text: str) -> float:
    """Bytes per second of a bandwidth such as "25GB/s" or "12.5 GiB/s" ("/s" may be left out)."""
    quoted = f"'{text}'"
    t = text.strip(_SPACE)
    slash = t.rfind("/")
    if slash >= 0:
        if "".join(t[slash + 1:].split()).lower() != "s":
            raise SizeError(f"{quoted}: a bandwidth is a size per second (25GB/s; mhc help sizes)")
        t = t[:slash].strip(_SPACE)
    number, value, unit = _split(t, quoted, "bandwidth", "a size per second: 25GB/s")
    if not unit:
        raise SizeError(f"{quoted}: a bandwidth needs a unit: {number}GB/s or {number}GiB/s (mhc help sizes)")
    per = _unit_bytes(unit)
    if per == 0:
        raise SizeError(f"{quoted}: unknown unit '{unit}' ({UNITS}, per second; mhc help sizes)")
    if value <= 0:
        raise SizeError(f"{quoted}: must be positive")
    return value * per
