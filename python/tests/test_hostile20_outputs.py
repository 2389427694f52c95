"""Hostile pass 20's findings in mhc-torch (tests/cli/hostile_pass20_test.sh has the command-line
side): an output that is a link to nothing or a loop of links, "-0" as a whole number, and a
table without one of its columns named with its table."""
import os
import shutil
import sqlite3

import pytest

from mhc_torch import number_grammar, store
from mhc_torch.output_file import OutputExists, check_output

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "advise")


@pytest.mark.parametrize("links", [{"out.db": "nowhere.db"}, {"out.db": "other.db", "other.db": "out.db"}],
                         ids=["dangling", "loop"])
def test_an_output_that_is_a_link_to_nothing_is_refused_before_the_capture(tmp_path, links):
    """os.path.exists said no for both: the capture ran to its end, which said "appeared while it
    was being written (another process?)" (mhc refuses it first, as an existing file)."""
    for name, target in links.items():
        os.symlink(target, tmp_path / name)
    out = str(tmp_path / "out.db")
    with pytest.raises(OutputExists) as refused:
        check_output(out, replace=False)
    target = links["out.db"]
    assert str(refused.value) == (f"{out}: already exists (a symbolic link to {target}); pass --force to replace it "
                                  "(and everything in it)")
    check_output(out, replace=True)   # --force: the link is replaced by the new file


def test_zero_has_no_sign():
    """'-0' passed where a number below 0 is taken; elsewhere it is below 0 as before."""
    assert number_grammar.whole_number_refusal("-0", negative_ok=True) == "'-0': zero has no sign; write 0"
    assert number_grammar.whole_number_refusal("-0") == "'-0': must be 0 or more"
    assert number_grammar.whole_number_refusal("-5", negative_ok=True) == ""
    assert number_grammar.whole_number_refusal("0", negative_ok=True) == ""


@pytest.mark.parametrize("table, column", [("run_metrics", "value"), ("run_config", "key"), ("runs", "name")])
def test_a_missing_column_is_said_with_its_table(tmp_path, table, column):
    """SQLite's "no such column: value" named none of meta, run_config and run_metrics."""
    path = tmp_path / "t.db"
    shutil.copy(os.path.join(DATA, "tiny_mhc.db"), path)
    with sqlite3.connect(path) as db:
        db.execute(f"ALTER TABLE {table} RENAME COLUMN {column} TO renamed")
    db.close()
    with pytest.raises(store.TraceError) as refused:
        store.read_runs(str(path))
    assert f"table {table} has no column {column} (a damaged or foreign file)" in str(refused.value)


def test_a_variable_of_200_bytes_is_quoted_short(monkeypatch):
    """MHC_BUSY_TIMEOUT_MS's refusal quoted its value whole, where mhc quotes 60 bytes and a length."""
    monkeypatch.setenv("MHC_BUSY_TIMEOUT_MS", "x" * 200)
    with pytest.raises(store.TraceError) as refused:
        store._busy_timeout_s()
    assert str(refused.value) == ("MHC_BUSY_TIMEOUT_MS='" + "x" * 60 + "...(200 bytes)': a whole number of "
                                  "milliseconds, 0 to 3600000")
