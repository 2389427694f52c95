"""mhc_torch.sizes against the size grammar's table that the C++ tests read too
(tests/data/size-grammar.tsv): the same values, the same refusals, the same words."""
import os

import pytest

from mhc_torch.sizes import SizeError, parse_bandwidth, parse_share, parse_size

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "size-grammar.tsv")


def _rows():
    with open(TABLE) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, text, expected = line.split("\t")
            yield pytest.param(kind, text, expected, id=f"line{n}")


def _parse(kind: str, text: str) -> float:
    if kind == "size":
        return parse_size(text)
    if kind.startswith("size>="):
        return parse_size(text, minimum=int(kind[6:]))
    if kind == "share":
        return parse_share(text)
    if kind.startswith("share<="):
        return parse_share(text, max_percent=float(kind[7:]))
    if kind == "bandwidth":
        return parse_bandwidth(text)
    raise AssertionError(f"unknown kind {kind}")


def test_the_table_is_there():
    assert len(list(_rows())) > 50


@pytest.mark.parametrize("kind,text,expected", list(_rows()))
def test_size_grammar_table(kind, text, expected):
    if expected.startswith("error: "):
        with pytest.raises(SizeError) as e:
            _parse(kind, text)
        assert expected[7:] in str(e.value)
        assert str(e.value).startswith(f"'{text}': ")
    else:
        assert _parse(kind, text) == float(expected)


def test_a_size_past_2_53_bytes_is_read_to_the_byte():
    """As mhc's parse_size (tests/trace/test_units.cpp): a float holds whole bytes only to 2^53."""
    assert parse_size("72057594037927935B") == (1 << 56) - 1
    assert parse_size("9007199254740993 B") == (1 << 53) + 1
    assert parse_size("9223372036854775807B") == (1 << 63) - 1
    with pytest.raises(SizeError, match="too large"):
        parse_size("9223372036854775808B")
    assert parse_size("8388607.9999999999KiB") == 1 << 33
    assert parse_size("0.3KiB") == 307
    assert parse_size("2.5B") == 3
    assert parse_size("1.5kB") == 1500
