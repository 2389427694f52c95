"""The number grammar every option of `mhc` follows (docs/cli.md, "Numbers"; the C++ rule is
common/src/numbers.cpp), for mhc-torch's options: a whole number is ASCII digits, with a '-' first
only where the option takes a number below 0; no '+', space, newline, '_', 0x, exponent, other
scripts' digits (Python's int() reads ' 5', '+5', '5_0' and '٣') and no leading 0."""
from __future__ import annotations

import argparse

_DIGITS = frozenset("0123456789")
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def printable(text: str) -> str:
    """`text` with its control characters (a newline, an escape) shown as '?', as mhc shows a
    value it refuses (cli/command.hpp): the refusal stays one line."""
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def whole_number_refusal(text: str, negative_ok: bool = False) -> str:
    """Why `text` is no whole number of an option, as common/src/numbers.cpp says it, or ''."""
    shown = printable(text)
    start = 1 if text[:1] == "-" else 0
    if start and not negative_ok:
        return f"'{shown}': must be 0 or more"
    digits = text[start:]
    if not digits or any(c not in _DIGITS for c in digits):
        return f"'{shown}': not a whole number (decimal digits only: no sign '+', space, 0x or exponent)"
    if len(digits) > 1 and digits[0] == "0":
        return f"'{shown}': a whole number starts with no 0 (it is decimal, not octal)"
    value = int(text)
    if (negative_ok and not -INT64_MAX - 1 <= value <= INT64_MAX) or (not negative_ok and value > UINT64_MAX):
        return f"'{shown}': too large a number"
    return ""


def parse_whole(text: str, negative_ok: bool = False) -> int:
    """`text` as a whole number; ValueError with the refusal otherwise."""
    why = whole_number_refusal(text, negative_ok)
    if why:
        raise ValueError(why)
    return int(text)


def whole(text: str) -> int:
    """argparse's type= for an option that takes a whole number of 0 or more (its usage shows N):
    the refusal names the value; the parser names the option."""
    try:
        return parse_whole(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def size(text: str) -> int:
    """An argparse type for a size in bytes as mhc reads one (256MiB, 1GiB, 4096), at least 1 B."""
    from .sizes import SizeError, parse_size
    try:
        return parse_size(text, minimum=1)
    except SizeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
