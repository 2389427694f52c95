"""A pytest plugin: each test's CPU seconds (this process and the processes it waited for, from
os.times()) and wall seconds, appended to $CPUTIME_OUT (default pytest-cputime.tsv) as each ends.
  PYTHONPATH=python:bench/ci CPUTIME_OUT=/tmp/t.tsv .venv/bin/python -m pytest python/tests -p pytest_cputime
  sort -rn /tmp/t.tsv | head
A line is `CPU<TAB>wall<TAB>node id`. A test's line holds its setup and teardown too, so the
module- and session-scoped fixtures it is the first (or last) to use count in it. Importing a
test file (its module-level imports: torch, transformers, a model file) happens while the session
collects, before any test: that gets a line of its own whose node id is the file's, so that a
file's lines add up to what the file costs a session. What no file causes (pytest's own start,
the plugins) is left out. Timed where the test runs (pytest_runtest_protocol), so a plugin that
runs tests in other processes (xdist) is timed in the process that ran them."""
import os
import time

import pytest

_OUT = os.environ.get("CPUTIME_OUT", "pytest-cputime.tsv")


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _write(cpu, wall, nodeid):
    with open(_OUT, "a") as f:
        f.write(f"{cpu:.2f}\t{wall:.2f}\t{nodeid}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c, w = _cpu(), time.time()
    yield
    _write(_cpu() - c, time.time() - w, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # A Module's report is where its file is imported; a package's or the session's holds the
    # modules' own (they are collected inside it), so only modules are timed.
    if not isinstance(collector, pytest.Module):
        yield
        return
    c, w = _cpu(), time.time()
    yield
    _write(_cpu() - c, time.time() - w, collector.nodeid)
