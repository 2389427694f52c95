"""A pytest plugin: each test's CPU seconds (this process and the processes it waited for, from
os.times()) and wall seconds, appended to $CPUTIME_OUT (default pytest-cputime.tsv) as each ends.
  PYTHONPATH=python:bench/ci CPUTIME_OUT=/tmp/t.tsv .venv/bin/python -m pytest python/tests -p pytest_cputime
  sort -rn /tmp/t.tsv | head"""
import os
import time

_OUT = os.environ.get("CPUTIME_OUT", "pytest-cputime.tsv")
_start = {}


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pytest_runtest_logstart(nodeid, location):
    _start[nodeid] = (_cpu(), time.time())


def pytest_runtest_logfinish(nodeid, location):
    c, w = _start.pop(nodeid, (_cpu(), time.time()))
    with open(_OUT, "a") as f:
        f.write(f"{_cpu() - c:.2f}\t{time.time() - w:.2f}\t{nodeid}\n")
