"""mhc_torch.formatting against the table the C++ tests read too (tests/data/figure-formats.tsv):
every mhc-torch command prints a size or a duration as mhc does, and its commands print them
through that one module."""
import ast
import os
import pathlib

import pytest

from mhc_torch.formatting import format_bytes, format_ns

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "figure-formats.tsv")
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "mhc_torch"


def _rows():
    with open(TABLE) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, value, text = line.split("\t")
            yield pytest.param(kind, int(value), text, id=f"line{n}")


def test_the_table_is_there():
    assert len(list(_rows())) > 40


@pytest.mark.parametrize("kind,value,text", list(_rows()))
def test_figure_formats_table(kind, value, text):
    assert (format_bytes if kind == "bytes" else format_ns)(value) == text


def test_a_float_is_cut_as_the_cpp_tools_cut_a_stored_metric():
    """pandas reads metrics as floats; mhc casts them to int64 (toward zero) before printing."""
    assert format_ns(999.9) == "999 ns"
    assert format_bytes(1023.9) == "1023 B"
    assert format_ns(-1500.7) == "-1.50 us"


def test_no_other_module_formats_bytes_or_durations_by_hand():
    """A byte count divided by 2**30 (or 2**20) next to 'GiB' ('MiB'), or nanoseconds by 1e6 next
    to 'ms', in a printed f-string is a second copy of the rules: each goes through formatting.py."""
    by_hand = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "formatting.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.JoinedStr):
                continue
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            units = [u for u in (" GiB", " MiB", " KiB", " ms", " us") if u in text]
            divided = [v for v in node.values if isinstance(v, ast.FormattedValue)
                       and isinstance(v.value, ast.BinOp) and isinstance(v.value.op, ast.Div)]
            if units and divided:
                by_hand.append(f"{path.name}:{node.lineno}")
    assert not by_hand, by_hand
