"""Every Python process started with this folder on PYTHONPATH appends one line when it exits to
$PYSTARTS_OUT: its CPU seconds (user + system, its own), wall seconds, whether it imported torch,
and its command line. What a test suite's subprocesses cost, and how many import torch:
  PYTHONPATH=bench/ci/pystarts PYSTARTS_OUT=/tmp/starts.tsv .venv/bin/python -m pytest ...
  bench/ci/pystarts.py /tmp/starts.tsv
A process that ends by os._exit or a signal writes no line."""
import atexit
import os
import sys
import time

_OUT = os.environ.get("PYSTARTS_OUT")
_T0 = time.time()


def _done():
    t = os.times()
    argv = " ".join(sys.argv)[:300].replace("\t", " ").replace("\n", " ")
    line = f"{t.user + t.system:.2f}\t{time.time() - _T0:.2f}\t{int('torch' in sys.modules)}\t{os.getpid()}\t{os.getppid()}\t{argv}\n"
    try:
        with open(_OUT, "a") as f:
            f.write(line)
    except OSError:
        pass


if _OUT:
    atexit.register(_done)
