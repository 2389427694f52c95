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
    """`text` with each character a terminal would act on or not show shown as '?', as mhc shows a
    name (common/include/mhc/common/error.hpp): a control character (C0, DEL and C1: U+009B is
    the escape of 8-bit terminals), a line or paragraph separator, an invisible format character
    (zero-width ones, the bidirectional overrides and isolates that show a name reversed) and a
    lone surrogate (a file name's byte that is no UTF-8, as os.fsdecode reads it): the message
    stays one line and says what the file is named."""
    return "".join("?" if _hidden(ord(c)) else c for c in text)


def shortened(text: str) -> str:
    """A value of more than 80 bytes as its first 60 and its length, "xxxx...(122880 bytes)", as mhc
    shortens one (common/include/mhc/common/error.hpp): a refusal quoted a 120 KB value whole."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= 80:
        return text
    return raw[:60].decode("utf-8", "ignore") + f"...({len(raw)} bytes)"


def capped_words(message: str) -> str:
    """`message` with each run of more than 1,024 bytes without a space shortened, as every line
    mhc prints is (common/src/error.cpp, capped_words): a value formed into it whole, the quotes
    and colon around it kept; a file name, which the user must recognise, is said whole. Then each
    path (a part holding a '/') between two ": " still past 1,024 bytes (a name with spaces in it,
    5 KB through folders named "my runs": no word of it was long) is shortened the same way."""
    if len(message.encode("utf-8", "surrogateescape")) <= _LONGEST_WORD:
        return message
    return _capped_parts(_capped_parts(message, " "), ": ", within="/")


def _capped_parts(message: str, separator: str, within: str = "") -> str:
    """`message` with each part between two `separator`s past 1,024 bytes (and holding `within`,
    where given) shortened, the quote opening it and the quotes, colons and brackets closing it kept."""

    def cap(part: str) -> str:
        if within and within not in part:
            return part
        head = part[:1] if part[:1] and part[:1] in "'\"(" else ""
        body = part[len(head):].rstrip(_CLOSING)
        if len(body.encode("utf-8", "surrogateescape")) <= _LONGEST_WORD:
            return part
        return head + shortened(body) + part[len(head) + len(body):]

    return separator.join(cap(p) for p in message.split(separator))


def message_line(text: str) -> str:
    """A line for stderr as mhc says one (mhc::message_line): printable(), then capped_words().
    Every line mhc-torch writes on stderr passes through it."""
    return capped_words(printable(text))


_CLOSING = "'\":;,)]"
_LONGEST_WORD = 1024   # longer than a file name a user writes: its parts are 255 bytes at most


def _hidden(code: int) -> bool:
    """Unicode's Cc, Cf, Zl, Zp and Cs characters (python/tests/test_printable.py holds the list
    against unicodedata); the same list as mhc::printable."""
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    if code < 0xAD:
        return False
    return any(lo <= code <= hi for lo, hi in _FORMAT)


# Unicode 15.1's format characters (Cf) above U+00A0, its line and paragraph separators (Zl, Zp)
# and the surrogates (Cs): each range as mhc::printable lists it.
_FORMAT = ((0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891),
           (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064),
           (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
           (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
           (0xE0020, 0xE007F))


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
    if start and digits == "0":
        return f"'{shown}': zero has no sign; write 0"
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
